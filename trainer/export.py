"""Turn a training run's newest checkpoint into the served artifact (EMA weights only).

`artifact_of` is the one way a run's weights become an artifact: the checkpoints' export and the preview
samples in train.py (through the run's objective: `artifact_from_state`), `kicktrain export` here (through the
family's recipe, building nothing), and the benchmarks' random models. An artifact is pure data: weights,
configs and a training record, and no path of the machine that made it (a file travels; its folders do not).
What an export may change without retraining, and which options it takes, the family's recipe says
(trainer/recipes: export_keys, options, export_config); nothing here names a family.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from kickmodel.artifact import Artifact
from kickmodel.config import Config
from kickmodel.families import from_dict, get_family
from kickmodel.loading import family_record

from . import selection
from .checkpoint import load_latest
from .recipes import get_recipe
from .recipes.base import FitContext, Objective

# how a path of the machine that wrote it starts: /..., ~..., C:\ or C:/
_MACHINE_PATH = re.compile(r"^(/|~|[A-Za-z]:[\\/])")


def without_paths(record: Any) -> Any:
    """A training record as an artifact may carry it: every string that is an absolute or home-dir path is cut
    to its last name (a checkpoint written before records held names may still hold a folder in `sources`)."""
    if isinstance(record, dict):
        return {k: without_paths(v) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [without_paths(v) for v in record]
    if isinstance(record, str) and _MACHINE_PATH.match(record):
        return Path(record.replace("\\", "/")).name
    return record


def artifact_of(cfg: Config, tensors: Mapping[str, torch.Tensor], configs: Mapping[str, dict], *, name: str,
                step: int, control_quantiles: list[list[float]] | None = None,
                training: dict[str, Any] | None = None) -> Artifact:
    """The artifact (in memory; `.save(path)` writes it) of a run's tensors (namespaced by part) and part configs
    ({part: config dict}): the tensors of the parts this config has (a mel-VAE exported with Griffin-Lim drops its
    trained inverter), each part's config, the control quantiles and the training record without paths."""
    parts = get_family(cfg.family).part_names(cfg, {p: from_dict(c) for p, c in configs.items()})
    tensors = {k: v for k, v in tensors.items() if k.split(".", 1)[0] in parts}
    return Artifact.in_memory(name, tensors, cfg, step=step, control_quantiles=control_quantiles or None,
                              part_configs={p: from_dict(configs[p]) for p in parts if p in configs},
                              training=without_paths(training or {}),
                              **family_record(cfg, {p: configs[p] for p in parts if p in configs}))


def artifact_from_state(objective: Objective, cfg: Config, weights: Mapping[str, torch.Tensor], *, name: str,
                        step: int, control_quantiles: list[list[float]] | None = None,
                        training: dict[str, Any] | None = None) -> Artifact:
    """artifact_of the weights of a run's module, as its objective names and configures the parts."""
    return artifact_of(cfg, objective.artifact_tensors(weights), objective.part_configs(cfg), name=name, step=step,
                       control_quantiles=control_quantiles, training=training)


def export_run(run_dir: Path, out: Path, settings: dict | None = None, log=print,
               family_options: dict | None = None, map_data: list[str | Path] | None = None) -> Path:
    """Export the EMA weights of run_dir's newest loadable checkpoint to out (.safetensors), atomically.

    `settings` ({"sampling.steps": 10, ...}) overrides what needs no retraining, as the family's recipe says
    (Recipe.export_keys: the default sampling settings, so the evaluation's choice can be written into the served
    artifact; a mel-VAE's inverter kind, Griffin-Lim instead of the learned one). `family_options`: what the
    recipe's export_config takes (latent diffusion: {"vae": a decoder-only fine-tune of the run's VAE}). The weights
    become the artifact as the recipe says (Recipe.artifact_contents), nothing rebuilt. `map_data`: the folders
    the run trained on; the artifact then stores the map of its training kicks among them (trainer.latent_map,
    kickmodel.kitmap), the run's recorded split choosing them (a family without an encoder: said in a line)."""
    run_dir, out = Path(run_dir), Path(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"{out}: the artifact's name must end in .safetensors")
    found = load_latest(run_dir, log=log)
    if found is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to export")
    state, path = found
    cfg = from_dict(state["config"])
    recipe = get_recipe(cfg.family)
    cfg = recipe.export_settings(cfg, settings or {})  # one it does not list in export_keys: refused, naming those
    options = recipe.take_options(family_options or {}, "export")  # one it does not take: refused, naming its own
    cfg = recipe.export_config(cfg, options, log, run_dir=run_dir)
    tensors, configs = recipe.artifact_contents(cfg, state["ema"]["model"],
                                                FitContext(device=torch.device("cpu"), log=log, options=options,
                                                           run_dir=run_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    # the run by its folder's name, not its path: the artifact travels, the folder does not
    training = dict(state.get("training_summary") or {}, run=run_dir.resolve().name, checkpoint=path.name)
    best = state.get("best_val")
    key = selection.summary_key(cfg.train)  # the validation figure the run chose its best step by
    training[key] = best if isinstance(best, float) and best == best and abs(best) != float("inf") else None
    step = int(state["step"])
    if state.get("best_ema") is not None and state.get("best_step") not in (None, step):
        # the weights of the best validation figure, as `fit --export-dir` exports them
        step = int(state["best_step"])
        tensors, configs = recipe.artifact_contents(cfg, state["best_ema"], FitContext(
            device=torch.device("cpu"), log=log, options=options, run_dir=run_dir))
        log(f"exporting step {step}'s weights: the best {selection.words(cfg.train)} ({training[key]}); the run is "
            f"at step {state['step']}")
    training["exported_step"] = step
    training["exported_because"] = selection.exported_because(cfg.train, state.get("best_ema") is not None)
    art = artifact_of(cfg, tensors, configs, name=out.name.removesuffix(".safetensors"), step=step,
                      control_quantiles=state.get("control_quantiles"), training=training)
    if map_data:
        from .data import NoUsableAudio
        from .latent_map import MapError, attach_map

        try:
            attach_map(art, map_data, log=log)
        except (MapError, NoUsableAudio) as e:  # the model is exported all the same
            log(f"no kit map stored: {e}")
    elif recipe.serving.map_latent_dim({p: art.config_of(p) for p in art.part_configs}) is not None:
        log("no kit map stored (give --map-data with the folders it trained on for /kick/map and /kick/near, or run "
            "`kicktrain map ARTIFACT KIT --split train --into ARTIFACT` later)")
    return art.save(out)
