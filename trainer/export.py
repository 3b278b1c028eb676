"""Turn a training run's newest checkpoint into the served artifact (EMA weights only).

`artifact_from_state` is the one way a run's weights become an artifact: the checkpoints' export and
the preview samples in train.py, `kicktrain export` here, and the benchmarks' random models. An
artifact is pure data: weights, configs and a training record, and no path of the machine that made it
(a file travels; its folders do not).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from kickmodel.artifact import Artifact
from kickmodel.config import Config, ConfigError
from kickmodel.families import from_dict, get_family
from kickmodel.families.base import FitContext, Objective

from .checkpoint import load_latest

SAMPLING_KEYS = ("steps", "sampler", "time_power", "guidance", "image_reject_db", "temperature")
# settings an export may change without retraining: sampling, and a mel-VAE's inversion (Griffin-Lim needs no
# weights, so a run that trained a learned inverter can ship either)
EXPORT_KEYS = {"sampling": SAMPLING_KEYS, "inverter": ("kind", "griffin_lim_iters")}
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


def artifact_from_state(objective: Objective, cfg: Config, weights: Mapping[str, torch.Tensor], *, name: str,
                        step: int, control_quantiles: list[list[float]] | None = None,
                        training: dict[str, Any] | None = None) -> Artifact:
    """The artifact (in memory; `.save(path)` writes it) that a run's module weights make: the tensors of the
    parts this config has (a mel-VAE exported with Griffin-Lim drops its trained inverter), each part's
    config, the control quantiles and the training record without paths."""
    configs = objective.part_configs(cfg)
    parts = get_family(cfg.family).part_names(cfg, {p: from_dict(c) for p, c in configs.items()})
    tensors = {k: v for k, v in objective.artifact_tensors(weights).items() if k.split(".", 1)[0] in parts}
    return Artifact.in_memory(name, tensors, cfg, step=step, control_quantiles=control_quantiles or None,
                              part_configs={p: from_dict(configs[p]) for p in parts if p in configs},
                              training=without_paths(training or {}))


def export_run(run_dir: Path, out: Path, settings: dict | None = None, log=print,
               family_options: dict | None = None, map_data: list[str | Path] | None = None) -> Path:
    """Export the EMA weights of run_dir's newest loadable checkpoint to out (.safetensors), atomically.

    `settings` ({"sampling.steps": 10, ...}) overrides what needs no retraining: the default sampling
    settings (steps, sampler, time_power, guidance for a diffusion family; temperature for a mel-VAE),
    so the evaluation's choice can be written into the served artifact, and a mel-VAE's inverter kind
    (Griffin-Lim, training-free, instead of the learned one). `family_options`: what the family's
    export_config takes (latent diffusion: {"vae": a decoder-only fine-tune of the run's VAE}). `map_data`: the folders
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
    by_section: dict[str, dict] = {}
    for key, value in (settings or {}).items():
        section, _, name = key.partition(".")
        if name not in EXPORT_KEYS.get(section, ()) or section not in cfg.parts:
            allowed = ", ".join(f"{s}.{k}" for s, keys in EXPORT_KEYS.items() if s in cfg.parts for k in keys)
            raise ConfigError(f"export cannot change {key} of a {cfg.family} model (it can change: {allowed})")
        by_section.setdefault(section, {})[name] = value
    for section, changes in by_section.items():
        cfg = cfg.replace(section, **changes)
    family = get_family(cfg.family)
    options = family.take_options(family_options or {}, "export")  # one it does not take: refused, naming its own
    cfg = family.export_config(cfg, options, log, run_dir=run_dir)
    objective = family.objective(cfg, FitContext(device=torch.device("cpu"), log=log, options=options,
                                                 run_dir=run_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    # the run by its folder's name, not its path: the artifact travels, the folder does not
    training = dict(state.get("training_summary") or {}, run=run_dir.resolve().name, checkpoint=path.name)
    best = state.get("best_val")
    training["best_val_loss"] = best if isinstance(best, float) and best == best and abs(best) != float("inf") else None
    art = artifact_from_state(objective, cfg, state["ema"]["model"], name=out.name.removesuffix(".safetensors"),
                              step=int(state["step"]), control_quantiles=state.get("control_quantiles"),
                              training=training)
    if map_data:
        from .data import NoUsableAudio
        from .latent_map import MapError, attach_map

        try:
            attach_map(art, map_data, log=log)
        except (MapError, NoUsableAudio) as e:  # the model is exported all the same
            log(f"no kit map stored: {e}")
    elif family.map_latent_dim({p: art.config_of(p) for p in family.part_names(cfg, art.part_configs)}) is not None:
        log("no kit map stored (give --map-data with the folders it trained on for /kick/map and /kick/near, or run "
            "`kicktrain map ARTIFACT KIT --split train --into ARTIFACT` later)")
    return art.save(out)
