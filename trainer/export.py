"""Turn a training run's newest checkpoint into the served artifact (EMA weights only)."""

from __future__ import annotations

from pathlib import Path

from .artifact import save_artifact
from .checkpoint import load_latest
from .config import from_dict


def export_run(run_dir: Path, out: Path) -> Path:
    """Export the EMA weights of run_dir's newest loadable checkpoint to out (.safetensors), atomically."""
    run_dir, out = Path(run_dir), Path(out)
    found = load_latest(run_dir)
    if found is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to export")
    state, path = found
    if out.suffix != ".safetensors":
        raise ValueError(f"{out}: the artifact's name must end in .safetensors")
    cfg = from_dict(state["config"])
    out.parent.mkdir(parents=True, exist_ok=True)
    training = {"run": str(run_dir), "checkpoint": path.name, "best_val_loss": state.get("best_val")}
    return save_artifact(out, state["ema"]["model"], cfg, step=int(state["step"]),
                         control_quantiles=state.get("control_quantiles") or None, training=training)
