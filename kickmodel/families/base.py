"""What a model family gives the rest of the project.

    family.sections                 typed config sections of its own ({"model": UNetConfig, ...})
    family.presets()                {"tiny": Config, "small": Config, "base": Config}
    family.check_config(cfg)        its own config checks (raise ConfigError)
    family.part_modules(configs)    {part: nn.Module} for an artifact's parts (also on the meta device,
                                    to check sizes before anything real is built)
    family.objective(cfg, ...)      training: the module to train and its loss (an Objective)
    family.load_generator(art, dev) serving: a KickGenerator (kickmodel/generator.py)
    family.options                  its command-line options (FamilyOption: --vae FILE ...); kicktrain makes
                                    the flags from the registry, the values reach fit_config / export_config

An artifact's tensors are namespaced by part (`denoiser.*`, `vae.*`, `inverter.*`); each part has
its own config in the artifact's metadata (kickmodel/artifact.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..config import Config, ConfigError
from .render_cost import RenderCost, RenderPass, check_render_cost, render_cost

if TYPE_CHECKING:
    from ..artifact import Artifact
    from ..generator import KickGenerator

# Bounds on what an artifact may ask the loader to build: a config is checked against them before any
# real tensor is allocated (a 4 KB file must not make the daemon allocate gigabytes).
MAX_PARAMETERS = 100_000_000
MAX_PART_BYTES = 1 << 30

OPTION_COMMANDS = ("fit", "export", "profile", "bench")


@dataclass(frozen=True)
class FamilyOption:
    """A command-line option of a family, declared in its own folder (`Family.options`): trainer/cli.py makes
    `--NAME VALUE` on each of `commands` from the registered families, so nothing outside the family names it.

    commands: `kicktrain fit`, `export`, `profile`, and "bench" (benchmarks that build or train the family).
    The same name may be declared twice for different commands, with different help (a fit's --vae and an
    export's --vae mean different things). The value reaches the family through `FitContext.options` (fit,
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
    """What `kicktrain fit` knows that a family's training set-up may need."""

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


class Family:
    """Base class of a family's description; each family module defines `FAMILY = Subclass()`."""

    name: str = ""
    summary: str = ""
    sections: dict[str, type] = {}
    parts: tuple[str, ...] = ()
    options: tuple[FamilyOption, ...] = ()  # its command-line options (kicktrain fit/export/profile, benchmarks)

    @property
    def cli_name(self) -> str:
        return self.name.replace("_", "-")

    def presets(self) -> dict[str, Config]:
        raise NotImplementedError

    def upgrade(self, data: dict[str, Any]) -> dict[str, Any]:
        """A config table of this family written by an older kicktrain, as today's: keys since dropped are
        removed here, before the strict parse, so old artifacts and runs still load (a copy; data is kept)."""
        return data

    def check_config(self, cfg: Config) -> None:
        """Raise ConfigError if cfg cannot work for this family (the shared sections are checked already)."""

    def part_names(self, cfg: Config, part_configs: Mapping[str, Config] | None = None) -> tuple[str, ...]:
        """The artifact parts a model of this config (and these part configs) has; `parts` lists every part
        the family can have (a training-free part, e.g. a Griffin-Lim inverter, writes no tensors)."""
        return self.parts

    def check_limits(self, cfg: Config) -> None:
        """Bounds checked on an artifact's config before anything is built (beyond MAX_PARAMETERS)."""

    def render_passes(self, modules: Mapping[str, torch.nn.Module], configs: Mapping[str, Config]) -> list[RenderPass]:
        """One kick's render at the model's default settings, as passes to run on the meta device (modules: its
        part_modules built there; configs: {part: Config}): what `render_cost` estimates an artifact's cost by,
        before loading it. Every family says it; what it leaves out is not bounded."""
        raise NotImplementedError

    def options_for(self, command: str) -> tuple[FamilyOption, ...]:
        """Its options on `command` (one of OPTION_COMMANDS)."""
        return tuple(o for o in self.options if command in o.commands)

    def take_options(self, given: Mapping[str, Any], command: str) -> dict[str, Any]:
        """The options given to `command` ({name: value}; None is not given), each through its type, as
        FitContext.options / export_config take them. One this family does not take on `command` is refused
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
        A family whose fit options can be checked so overrides this; here nothing can check them against the
        run, so any given is refused rather than silently ignored."""
        if options:
            raise ConfigError(f"{', '.join(option_flag(k) for k in options)}: a resumed {self.cli_name} run keeps "
                              "the options it started with, and this family cannot check these against it; "
                              "resume without them or use a new --run-dir")

    def part_modules(self, configs: Mapping[str, Config]) -> dict[str, torch.nn.Module]:
        """{part: module} whose state dicts are the artifact's tensors under `part.`; configs: {part: Config}."""
        raise NotImplementedError

    def objective(self, cfg: Config, ctx: FitContext) -> Objective:
        raise NotImplementedError

    def load_generator(self, art: Artifact, device: torch.device) -> KickGenerator:
        raise NotImplementedError

    def map_latent_dim(self, part_configs: Mapping[str, Config]) -> int | None:
        """The size of the latents a kit map of this model holds (kickmodel.kitmap: what its generator's `encode`
        produces and `decode_latents` renders), or None: a family without an encoder has no map."""
        return None

    def fit_config(self, cfg: Config, ctx: FitContext) -> Config:
        """The config a new run actually trains with (e.g. fine-tuning takes the artifact's network)."""
        return cfg

    def export_config(self, cfg: Config, options: Mapping[str, Any], log: Callable[[str], None],
                      run_dir: Path | None = None) -> Config:
        """The config an export of run_dir writes, given the export's family options (e.g. latent
        diffusion's --vae); a family that takes none refuses any."""
        if options:
            raise ConfigError(f"export of a {self.cli_name} model takes no {', '.join('--' + k for k in options)}")
        return cfg


def parameter_count(modules: Mapping[str, torch.nn.Module]) -> int:
    return sum(p.numel() for m in modules.values() for p in m.parameters())


_COSTS: dict[tuple, RenderCost] = {}  # by family and configs: the checkpoints of one run share one estimate


def _render_cost(family: Family, modules: Mapping[str, torch.nn.Module], configs: Mapping[str, Config]) -> RenderCost:
    """render_cost of one kick of these configs (tracing takes 0.1-1 s: remembered for the next artifact)."""
    key = (family.name, tuple(sorted((p, c.to_json()) for p, c in configs.items())))
    cost = _COSTS.get(key)  # one lookup: another thread may clear the cache between two
    if cost is None:
        try:
            cost = render_cost(family.render_passes(modules, configs))
        except ConfigError:
            raise
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:  # an op the meta device cannot run
            raise ConfigError(f"what one kick of it costs cannot be estimated ({type(e).__name__}: "
                              f"{str(e)[:200]})") from None
        if len(_COSTS) >= 256:
            _COSTS.clear()
        _COSTS[key] = cost
    return cost


def render_cost_of(family: Family, configs: Mapping[str, Config]) -> RenderCost:
    """What one kick of these part configs costs (remembered per config: an artifact's check computed it)."""
    with torch.device("meta"):
        modules = family.part_modules(configs)
    return _render_cost(family, modules, configs)


def expected_shapes(family: Family, configs: Mapping[str, Config]) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the tensors an artifact of these part configs must hold, computed on the meta
    device (no memory), after the size bounds: the family's limits, MAX_PARAMETERS, and what one kick would
    cost to render (render_cost.py: MAX_RENDER_FLOPS, MAX_RENDER_BYTES). Raises ConfigError when the config
    asks for too much."""
    for cfg in configs.values():
        family.check_limits(cfg)
    with torch.device("meta"):
        modules = family.part_modules(configs)
    n = parameter_count(modules)
    if n > MAX_PARAMETERS:
        raise ConfigError(f"its config asks for {n / 1e6:.0f} M parameters (at most {MAX_PARAMETERS / 1e6:.0f} M)")
    check_render_cost(_render_cost(family, modules, configs))
    return {f"{part}.{k}": tuple(v.shape) for part, m in modules.items() for k, v in m.state_dict().items()}
