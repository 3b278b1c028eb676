"""Model families: each is a sub-package here and one line in REGISTRY.

A family gives its typed config sections, its presets, how to build what it trains, its training
objective and its generator (the `KickGenerator` the daemon serves); `trainer.families.base.Family`
says exactly what. Nothing outside a family's folder knows its internals: the trainer, the artifact
loader, the evaluation and the daemon go through the registry and those interfaces.

Families are imported lazily (the daemon loads only the one it serves). Names: artifacts and configs
say `waveform_diffusion`; the command line says `waveform-diffusion` (both are accepted).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Family

REGISTRY: dict[str, str] = {
    "waveform_diffusion": "trainer.families.waveform_diffusion",
    "mel_vae": "trainer.families.mel_vae",
    "latent_diffusion": "trainer.families.latent_diffusion",
}


def family_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def cli_name(name: str) -> str:
    return name.replace("_", "-")


def get_family(name: str) -> Family:
    """The registered family `name` (underscores or dashes). Raises ConfigError naming the known ones."""
    from ..config import ConfigError

    key = str(name).replace("-", "_")
    if key not in REGISTRY:
        known = ", ".join(cli_name(n) for n in REGISTRY)
        raise ConfigError(f"model family {name!r} is not known (known: {known})")
    return importlib.import_module(REGISTRY[key]).FAMILY
