"""What a model family gives the rest of the project: its serving half (audiocraft's models/).

    family.sections                 typed config sections of its own ({"model": UNetConfig, ...})
    family.presets()                {"tiny": Config, "small": Config, "base": Config}
    family.check_config(cfg)        its own config checks (raise ConfigError)
    family.part_modules(configs)    {part: nn.Module} for an artifact's parts (also on the meta device,
                                    to check sizes before anything real is built)
    family.generator_class()        the KickGenerator class that serves it (kickmodel/generator.py), whose
                                    `capabilities` say what it can do; load_generator(art, dev) builds one

How a family is trained (its objective, command-line options, resume checks, the keys an export may change)
is its recipe in the trainer (trainer/recipes/<name>.py), which imports this; nothing here imports that.

An artifact's tensors are namespaced by part (`denoiser.*`, `vae.*`, `inverter.*`); each part has
its own config in the artifact's metadata (kickmodel/artifact.py).
"""

from __future__ import annotations

from collections.abc import Mapping
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


class Family:
    """Base class of a family's description; each family module defines `FAMILY = Subclass()`."""

    name: str = ""
    summary: str = ""
    sections: dict[str, type] = {}
    parts: tuple[str, ...] = ()

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

    def part_modules(self, configs: Mapping[str, Config]) -> dict[str, torch.nn.Module]:
        """{part: module} whose state dicts are the artifact's tensors under `part.`; configs: {part: Config}."""
        raise NotImplementedError

    def generator_class(self) -> type[KickGenerator]:
        """The generator class that serves this family (imported when asked: the daemon loads only its own)."""
        raise NotImplementedError

    def load_generator(self, art: Artifact, device: torch.device) -> KickGenerator:
        return self.generator_class()(art, device)

    @property
    def capabilities(self) -> frozenset[str]:
        """What its generator can do (kickmodel.generator.CAPABILITIES), as its class declares it; a model trained
        without controls drops CONTROLS when loaded."""
        return frozenset(self.generator_class().capabilities)

    def map_latent_dim(self, part_configs: Mapping[str, Config]) -> int | None:
        """The size of the latents a kit map of this model holds (kickmodel.kitmap: what its generator's `encode`
        produces and `decode_latents` renders), or None: a family without an encoder has no map."""
        return None


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
