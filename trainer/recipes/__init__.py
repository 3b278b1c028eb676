"""Training recipes: the training half of each model family, one module here and one line in RECIPES.

A family's serving half (config sections, presets, networks, what builds its generator) is its folder under
kickmodel/families/, registered there; its training half (objective, command-line options, resume checks,
the config keys an export may change, the artifact a run's weights make) is its recipe here, registered by the
same name (trainer/recipes/base.py says exactly what a recipe gives). kickmodel imports nothing from here:
what the daemon serves knows nothing of how it was trained.

Recipes are imported lazily (only the one a command trains). Names as the families': `waveform_diffusion`, or
`waveform-diffusion` on the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kickmodel.config import ConfigError

if TYPE_CHECKING:
    from .base import FamilyOption, Recipe

RECIPES: dict[str, str] = {
    "waveform_diffusion": "trainer.recipes.waveform_diffusion",
    "mel_vae": "trainer.recipes.mel_vae",
    "latent_diffusion": "trainer.recipes.latent_diffusion",
    "kick_synth": "trainer.recipes.kick_synth",
}


def recipe_names() -> tuple[str, ...]:
    return tuple(RECIPES)


def get_recipe(name: str) -> Recipe:
    """The registered recipe of family `name` (underscores or dashes). Raises ConfigError naming those known."""
    key = str(name).replace("-", "_")
    if key not in RECIPES:
        known = ", ".join(n.replace("_", "-") for n in RECIPES)
        raise ConfigError(f"model family {name!r} has no training recipe (kicktrain trains: {known})")
    return importlib.import_module(RECIPES[key]).RECIPE


def options_for(command: str) -> dict[str, list[tuple[Recipe, FamilyOption]]]:
    """{option name: [(recipe, its declaration), ...]} over every registered recipe's options on `command`
    (trainer.recipes.base.FamilyOption), in registry order: what kicktrain makes its family flags from.
    Imports every recipe."""
    out: dict[str, list[tuple[Recipe, FamilyOption]]] = {}
    for name in RECIPES:
        recipe = get_recipe(name)
        for opt in recipe.options_for(command):
            out.setdefault(opt.name, []).append((recipe, opt))
    return out
