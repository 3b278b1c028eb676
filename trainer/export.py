"""Turn a training run's newest checkpoint into the served artifact (EMA weights only)."""

from __future__ import annotations

from pathlib import Path

import torch

from kickmodel.artifact import save_artifact
from kickmodel.config import ConfigError
from kickmodel.families import from_dict, get_family
from kickmodel.families.base import FitContext

from .checkpoint import load_latest

SAMPLING_KEYS = ("steps", "sampler", "time_power", "guidance", "image_reject_db", "temperature")
# settings an export may change without retraining: sampling, and a mel-VAE's inversion (Griffin-Lim needs no
# weights, so a run that trained a learned inverter can ship either)
EXPORT_KEYS = {"sampling": SAMPLING_KEYS, "inverter": ("kind", "griffin_lim_iters")}


def export_run(run_dir: Path, out: Path, settings: dict | None = None, log=print,
               family_options: dict | None = None) -> Path:
    """Export the EMA weights of run_dir's newest loadable checkpoint to out (.safetensors), atomically.

    `settings` ({"sampling.steps": 10, ...}) overrides what needs no retraining: the default sampling
    settings (steps, sampler, time_power, guidance for a diffusion family; temperature for a mel-VAE),
    so the evaluation's choice can be written into the served artifact, and a mel-VAE's inverter kind
    (Griffin-Lim, training-free, instead of the learned one). `family_options`: what the family's
    export_config takes (latent diffusion: {"vae": a decoder-only fine-tune of the run's VAE})."""
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
    cfg = family.export_config(cfg, family_options or {}, log)
    objective = family.objective(cfg, FitContext(device=torch.device("cpu"), log=log, run_dir=run_dir))
    parts = family.part_names(cfg, {p: from_dict(c) for p, c in objective.part_configs(cfg).items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    training = dict(state.get("training_summary") or {}, run=str(run_dir), checkpoint=path.name)
    best = state.get("best_val")
    training["best_val_loss"] = best if isinstance(best, float) and best == best and abs(best) != float("inf") else None
    tensors = {k: v for k, v in objective.artifact_tensors(state["ema"]["model"]).items() if k.split(".")[0] in parts}
    return save_artifact(out, tensors, cfg, step=int(state["step"]),
                         control_quantiles=state.get("control_quantiles") or None, training=training,
                         part_configs=objective.part_configs(cfg))
