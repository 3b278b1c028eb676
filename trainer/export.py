"""Turn a training run's newest checkpoint into the served artifact (EMA weights only)."""

from __future__ import annotations

from pathlib import Path

import torch

from .artifact import save_artifact
from .checkpoint import load_latest
from .config import ConfigError, from_dict
from .families import get_family
from .families.base import FitContext

SAMPLING_KEYS = ("steps", "sampler", "time_power", "guidance", "image_reject_db", "temperature")


def export_run(run_dir: Path, out: Path, sampling: dict | None = None, log=print) -> Path:
    """Export the EMA weights of run_dir's newest loadable checkpoint to out (.safetensors), atomically.

    `sampling` overrides the artifact's default sampling settings (e.g. steps, sampler, time_power,
    guidance for a diffusion family): they need no retraining, so the evaluation's choice can be
    written into the served artifact."""
    run_dir, out = Path(run_dir), Path(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"{out}: the artifact's name must end in .safetensors")
    found = load_latest(run_dir, log=log)
    if found is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to export")
    state, path = found
    cfg = from_dict(state["config"])
    if sampling:
        if "sampling" not in cfg.parts:
            raise ConfigError(f"family {cfg.family} has no sampling settings to change")
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            raise ConfigError(f"export can only change sampling settings, not {', '.join(unknown)}")
        cfg = cfg.replace("sampling", **sampling)
    objective = get_family(cfg.family).objective(cfg, FitContext(device=torch.device("cpu"), log=log, run_dir=run_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    training = dict(state.get("training_summary") or {}, run=str(run_dir), checkpoint=path.name)
    best = state.get("best_val")
    training["best_val_loss"] = best if isinstance(best, float) and best == best and abs(best) != float("inf") else None
    return save_artifact(out, objective.artifact_tensors(state["ema"]["model"]), cfg, step=int(state["step"]),
                         control_quantiles=state.get("control_quantiles") or None, training=training,
                         part_configs=objective.part_configs(cfg))
