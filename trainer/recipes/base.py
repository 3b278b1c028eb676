"""What a family's training recipe gives the trainer (audiocraft's solvers/ beside its models/).

    recipe.family                    the kickmodel family it trains (its registry name: kickmodel.families)
    recipe.options                   its command-line options (FamilyOption: --vae FILE ...); kicktrain makes the
                                     flags from the registry, the values reach fit_config / export_config
    recipe.fit_config(cfg, ctx)      the config a new run actually trains with (fine-tuning takes the artifact's)
    recipe.check_resume(cfg, opts)   a resumed run's options against what it recorded (raise ConfigError)
    recipe.objective(cfg, ctx)       the module to train and its loss (an Objective)
    recipe.export_keys               {section: keys} an export may change without retraining (sampling, inversion)
    recipe.export_config(cfg, ...)   the config an export writes, given the export's family options
    recipe.artifact_contents(...)    the served artifact's tensors and part configs from a run's weights: pure data,
                                     nothing built (what `kicktrain export` writes)

The serving half (config sections, presets, networks, the generator) is kickmodel.families.<name>, which knows
nothing of this one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kickmodel.config import Config, ConfigError
from kickmodel.families import get_family

if TYPE_CHECKING:
    from kickmodel.artifact import Artifact
    from kickmodel.families.base import Family

OPTION_COMMANDS = ("fit", "export", "profile", "bench")

Contents = tuple[dict[str, torch.Tensor], dict[str, dict]]  # (tensors namespaced by part, {part: config dict})


@dataclass(frozen=True)
class FamilyOption:
    """A command-line option of a family's recipe (`Recipe.options`): trainer/cli.py makes `--NAME VALUE` on each
    of `commands` from the registered recipes, so nothing outside the recipe names it.

    commands: `kicktrain fit`, `export`, `profile`, and "bench" (benchmarks that build or train the family).
    The same name may be declared twice for different commands, with different help (a fit's --vae and an
    export's --vae mean different things). The value reaches the recipe through `FitContext.options` (fit,
    profile, bench) or `export_config(options)` (export) under `name`, after `type` (given the string).
    artifact_of: the value is an artifact file of that family; benchmarks and tests, which do not listen
    to the kicks, make a random one of the same preset when none is given."""

    name: str
    help: str
    commands: tuple[str, ...] = OPTION_COMMANDS
    metavar: str = "VALUE"
    type: Callable[[str], Any] = str
    artifact_of: str | None = None

    def __post_init__(self) -> None:
        if not (self.name.isidentifier() and self.name == self.name.lower() and not self.name.startswith("_")):
            raise ValueError(f"family option {self.name!r}: a lower-case name of letters, digits and underscores")
        unknown = sorted(set(self.commands) - set(OPTION_COMMANDS))
        if unknown:
            raise ValueError(f"family option {self.name!r}: unknown command(s) {', '.join(unknown)} "
                             f"(known: {', '.join(OPTION_COMMANDS)})")

    @property
    def flag(self) -> str:
        return option_flag(self.name)


def option_flag(name: str) -> str:
    """An option's flag on the command line: --name, dashes for underscores."""
    return "--" + name.replace("_", "-")


@dataclass
class FitContext:
    """What `kicktrain fit` knows that a recipe's training set-up may need."""

    device: torch.device
    log: Any = print
    init: Any = None  # a loaded Artifact to fine-tune from, or None
    options: Mapping[str, Any] = field(default_factory=dict)  # family options from the command line (e.g. vae)
    run_dir: Path | None = None


class Objective:
    """One run's trainable module and its loss; the training loop sees a family only through this.

    `module` is what the optimiser, the EMA, checkpoints and DistributedDataParallel see. `loss`
    is called once per micro-batch with the module to call (it may be wrapped by DDP, so call it,
    not its submodules, for the forward pass that needs gradients)."""

    module: torch.nn.Module

    def prepare_batch(self, x: torch.Tensor) -> Any:
        """What the loss needs from clean audio x [B, L] (on the device) that takes no gradient: a mel
        spectrogram, a frozen encoder's latents. The trainer may run it ahead, on another thread, while
        the previous step computes (train.prefetch); so it must not touch the trained module."""
        return x

    def loss(self, module: torch.nn.Module, x: Any, cond: torch.Tensor | None, mask: torch.Tensor | None,
             g: torch.Generator, step: int) -> tuple[torch.Tensor, dict[str, float | torch.Tensor]]:
        """(scalar loss to backpropagate, extra figures to log) for a prepared batch (`prepare_batch`);
        all randomness from g (seeded by the step), so a resumed run repeats the same step exactly. Figures may
        be 0-d tensors on the device: the loop reads them back once a step, so a figure read with .item() or
        float() here would wait for the GPU once per micro-batch."""
        raise NotImplementedError

    @torch.no_grad()
    def val_loss(self, module: torch.nn.Module, x: Any, cond: torch.Tensor | None,
                 mask: torch.Tensor | None, g: torch.Generator) -> dict[str, float]:
        """Validation figures ({"loss": ..., ...}) of the (EMA) module on a prepared batch of held-out clips,
        deterministic given g."""
        raise NotImplementedError

    def artifact_tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The served artifact's tensors (namespaced by part) from the module's state dict."""
        raise NotImplementedError

    def part_configs(self, cfg: Config) -> dict[str, dict]:
        """{part: config dict} for the artifact's metadata; by default every part was trained by this run."""
        return {p: cfg.to_dict() for p in self.parts}

    parts: tuple[str, ...] = ()

    def load_init(self, art: Artifact) -> None:
        """Fine-tuning: take the weights of an artifact of the same family (strict)."""
        raise NotImplementedError

    def map_encoder(self) -> Callable[[Any, Any], Any] | None:
        """How the kit map of an export places the run's training clips: (generator, clips [n, L]) -> latents, or
        None for the generator's own encode. A family whose encoding does not change as the run trains (kick-synth:
        a fit of each clip) returns one that remembers it, so every export can carry a map at the cost of one."""
        return None

    def fit_data(self, clips: torch.Tensor) -> None:
        """Called once on a new run with the training clips [N, L] (clean, on the training device: a GPU's when the
        run trains on one, so call .cpu() before .numpy()), before the first step: e.g. a latent family measures its
        latents' statistics. Resumed runs restore state instead."""

    def clip_groups(self) -> list[list[torch.nn.Parameter]]:
        """Parameter groups whose gradients are clipped (to train.grad_clip) each on its own: parts trained
        by unrelated losses (a VAE and its inverter) must not shrink each other's steps."""
        return [list(self.module.parameters())]

    def state_for_checkpoint(self) -> dict[str, Any]:
        """Anything besides the module's weights that a resume needs (plain types and tensors)."""
        return {}


def prefixed(part: str, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A module's state dict as an artifact part's tensors (`part.name`)."""
    return {f"{part}.{k}": v for k, v in state.items()}


def unprefixed(part: str, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An artifact part's tensors as its module's state dict."""
    head = part + "."
    return {k[len(head):]: v for k, v in tensors.items() if k.startswith(head)}


class Recipe:
    """Base class of a family's training recipe; each recipe module defines `RECIPE = Subclass()`."""

    family: str = ""  # the kickmodel family it trains
    options: tuple[FamilyOption, ...] = ()  # its command-line options (kicktrain fit/export/profile, benchmarks)
    export_keys: Mapping[str, tuple[str, ...]] = {}  # {section: keys} an export may change without retraining

    @property
    def serving(self) -> Family:
        """The family's serving half (kickmodel.families)."""
        return get_family(self.family)

    @property
    def cli_name(self) -> str:
        return self.family.replace("_", "-")

    def options_for(self, command: str) -> tuple[FamilyOption, ...]:
        """Its options on `command` (one of OPTION_COMMANDS)."""
        return tuple(o for o in self.options if command in o.commands)

    def take_options(self, given: Mapping[str, Any], command: str) -> dict[str, Any]:
        """The options given to `command` ({name: value}; None is not given), each through its type, as
        FitContext.options / export_config take them. One this recipe does not take on `command` is refused
        in one line naming the family and the options it does take."""
        mine = {o.name: o for o in self.options_for(command)}
        given = {k: v for k, v in given.items() if v is not None}
        refused = [k for k in given if k not in mine]
        if refused:
            takes = ", ".join(o.flag for o in mine.values()) or "no family options"
            raise ConfigError(f"{command} of a {self.cli_name} model takes no "
                              f"{', '.join(option_flag(k) for k in refused)} (it takes {takes})")
        taken = {}
        for name, value in given.items():
            try:
                taken[name] = mine[name].type(value)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"{mine[name].flag} {value!r}: {e}") from None
        return taken

    def check_resume(self, cfg: Config, options: Mapping[str, Any]) -> None:
        """A resumed run keeps the config it started with (cfg); raise ConfigError, saying why, when an option
        given to resume it (taken by take_options) disagrees with what the run recorded (e.g. another VAE).
        A recipe whose fit options can be checked so overrides this; here nothing can check them against the
        run, so any given is refused rather than silently ignored."""
        if options:
            raise ConfigError(f"{', '.join(option_flag(k) for k in options)}: a resumed {self.cli_name} run keeps "
                              "the options it started with, and this family cannot check these against it; "
                              "resume without them or use a new --run-dir")

    def fit_config(self, cfg: Config, ctx: FitContext) -> Config:
        """The config a new run actually trains with (e.g. fine-tuning takes the artifact's network)."""
        return cfg

    def objective(self, cfg: Config, ctx: FitContext) -> Objective:
        raise NotImplementedError

    def export_settings(self, cfg: Config, settings: Mapping[str, Any]) -> Config:
        """cfg with an export's `--set section.key=value` settings, each one of export_keys (of a section cfg has);
        any other is refused in one line naming what may change."""
        by_section: dict[str, dict] = {}
        for key, value in settings.items():
            section, _, name = key.partition(".")
            if name not in self.export_keys.get(section, ()) or section not in cfg.parts:
                allowed = ", ".join(f"{s}.{k}" for s, keys in self.export_keys.items() if s in cfg.parts
                                    for k in keys)
                raise ConfigError(f"export cannot change {key} of a {cfg.family} model (it can change: {allowed})")
            by_section.setdefault(section, {})[name] = value
        for section, changes in by_section.items():
            cfg = cfg.replace(section, **changes)
        return cfg

    def export_config(self, cfg: Config, options: Mapping[str, Any], log: Callable[[str], None],
                      run_dir: Path | None = None) -> Config:
        """The config an export of run_dir writes, given the export's family options (e.g. latent
        diffusion's --vae); a recipe that takes none refuses any."""
        if options:
            raise ConfigError(f"export of a {self.cli_name} model takes no {', '.join('--' + k for k in options)}")
        return cfg

    def artifact_contents(self, cfg: Config, weights: Mapping[str, torch.Tensor], ctx: FitContext) -> Contents:
        """(tensors namespaced by part, {part: config dict}) of the artifact a run's module weights make under cfg
        (the export's): the same as its Objective's artifact_tensors and part_configs, without building a module."""
        raise NotImplementedError
