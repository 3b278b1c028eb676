"""Turn a training run's newest checkpoint into the served artifact (EMA weights only)."""

from __future__ import annotations

from pathlib import Path

from .artifact import save_artifact
from .checkpoint import load_latest
from .config import ConfigError, from_dict, override


def export_run(run_dir: Path, out: Path, sampling: dict | None = None) -> Path:
    """Export the EMA weights of run_dir's newest loadable checkpoint to out (.safetensors), atomically.

    `sampling` overrides the artifact's default sampler settings (steps, sampler, time_power, guidance):
    they need no retraining, so the evaluation's choice can be written into the served artifact."""
    run_dir, out = Path(run_dir), Path(out)
    found = load_latest(run_dir)
    if found is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to export")
    state, path = found
    unknown = set(sampling or {}) - {"steps", "sampler", "time_power", "guidance", "image_reject_db"}
    if unknown:
        raise ConfigError(f"export can only change sampling settings, not {', '.join(sorted(unknown))}")
    if out.suffix != ".safetensors":
        raise ValueError(f"{out}: the artifact's name must end in .safetensors")
    cfg = from_dict(state["config"])
    if sampling:
        cfg = override(cfg, "sampling", **sampling)
    out.parent.mkdir(parents=True, exist_ok=True)
    training = dict(state.get("training_summary") or {}, run=str(run_dir), checkpoint=path.name,
                    best_val_loss=state.get("best_val"))
    return save_artifact(out, state["ema"]["model"], cfg, step=int(state["step"]),
                         control_quantiles=state.get("control_quantiles") or None, training=training)
