"""Model families: each is a sub-package here and one line in REGISTRY.

A family here is its serving half: its typed config sections, its presets, how to build an artifact's
parts, and its generator (the `KickGenerator` the daemon serves); `kickmodel.families.base.Family` says
exactly what. Its training half (objective, options, resume checks, export keys) is its recipe in the
trainer (trainer/recipes/, a registry of its own by the same name); nothing here imports it. Nothing
outside a family's folder knows its internals: the artifact loader, the evaluation and the daemon go
through the registry and those interfaces.

Families are imported lazily (the daemon loads only the one it serves). Names: artifacts and configs
say `waveform_diffusion`; the command line says `waveform-diffusion` (both are accepted).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .. import config as _config
from .. import safejson
from ..config import SHARED_SECTIONS, UNNAMED_FAMILY, Config, ConfigError

if TYPE_CHECKING:
    from .base import Family

REGISTRY: dict[str, str] = {
    "waveform_diffusion": "kickmodel.families.waveform_diffusion",
    "mel_vae": "kickmodel.families.mel_vae",
    "latent_diffusion": "kickmodel.families.latent_diffusion",
    "kick_synth": "kickmodel.families.kick_synth",
}


def family_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def cli_name(name: str) -> str:
    return name.replace("_", "-")


def get_family(name: str) -> Family:
    """The registered family `name` (underscores or dashes). Raises ConfigError naming the known ones."""
    key = str(name).replace("-", "_")
    if key not in REGISTRY:
        known = ", ".join(cli_name(n) for n in REGISTRY)
        raise ConfigError(f"model family {name!r} is not known (known: {known})")
    return importlib.import_module(REGISTRY[key]).FAMILY


# ----------------------------------------------------------------------------------------------
# configs of a registered family (config.py knows no family: these look the family up, then parse)


def from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a Config from plain types; missing keys take defaults, unknown keys are an error."""
    data = _config.upgrade(data)
    family = get_family(data.get("family", UNNAMED_FAMILY))  # raises ConfigError naming the known families
    return _config.parse_sections(family.upgrade(data), family.name, family.sections)


MAX_CONFIG_BYTES = 1 << 20  # a config's JSON (a few KB), as an artifact's metadata value may be at most


def from_json(text: str) -> Config:
    """A Config from JSON a file supplied (an artifact's metadata, a run's config.json): bounded in size and
    nesting (kickmodel.safejson) before it is parsed; ConfigError with the reason."""
    try:
        return from_dict(safejson.parse(text, max_bytes=MAX_CONFIG_BYTES))
    except safejson.BadJSON as e:
        raise ConfigError(f"config is {e}") from None


def make_config(family: str = UNNAMED_FAMILY, preset: str = "custom", **sections: Any) -> Config:
    """A validated config of `family`: sections not given take their defaults."""
    fam = get_family(family)
    unknown = sorted(set(sections) - set(SHARED_SECTIONS) - set(fam.sections))
    if unknown:
        raise ConfigError(f"unknown section(s) {', '.join(unknown)} for family {fam.name}")
    shared = {k: v for k, v in sections.items() if k in SHARED_SECTIONS}
    parts = {name: sections.get(name, cls()) for name, cls in fam.sections.items()}
    cfg = Config(family=fam.name, preset=preset, parts=parts, **shared)
    _config.validate(cfg)
    return cfg


def preset(name: str, family: str = UNNAMED_FAMILY) -> Config:
    """The family's named preset (tiny, small, base)."""
    fam = get_family(family)
    presets = fam.presets()
    try:
        return presets[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r} for family {fam.cli_name}; "
                          f"choose one of {', '.join(presets)}") from None


_config.install_family_lookup(get_family)
