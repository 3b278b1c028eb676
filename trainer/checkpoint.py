"""Training checkpoints that lose no work.

Layout in a run folder:
    checkpoints/step-00001000.pt   full training state (torch.save of plain types and tensors)
    checkpoints/latest             the file name of the newest good checkpoint, written LAST

Each file is written to a temp file in the same folder, fsynced, renamed, and the folder fsynced;
a reader therefore sees either the old or the new complete file. The last K are kept. Loading
uses `torch.load(weights_only=True)`: nothing but tensors and plain containers is unpickled.
If the newest checkpoint fails to load it is named and the one before it is used.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kickmodel.fsutil import atomic_write_bytes

CHECKPOINT_VERSION = 1
_NAME = re.compile(r"^step-(\d{8,})\.pt$")


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint files, oldest first by step number (never by file time)."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def save_checkpoint(run_dir: Path, state: dict[str, Any], step: int, keep: int = 3) -> Path:
    folder = checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    state = dict(state, checkpoint_version=CHECKPOINT_VERSION, step=int(step))
    buf = io.BytesIO()
    torch.save(state, buf)
    path = folder / f"step-{step:08d}.pt"
    atomic_write_bytes(path, buf.getvalue())
    atomic_write_bytes(folder / "latest", (path.name + "\n").encode())
    if keep > 0:
        for old in list_checkpoints(run_dir)[:-keep]:
            if old != path:
                old.unlink(missing_ok=True)
    return path


def _load(path: Path) -> dict[str, Any]:
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("checkpoint_version") != CHECKPOINT_VERSION:
        raise ValueError(f"not a version-{CHECKPOINT_VERSION} kicktrain checkpoint")
    return state


def load_latest(run_dir: Path, log: Callable[[str], None] = print) -> tuple[dict[str, Any], Path] | None:
    """The newest checkpoint that loads, by step number.

    Every checkpoint file appears complete (by rename) before `latest` is rewritten to name it, so a
    kill between the two leaves the pointer one checkpoint behind a complete newer file: the newest
    file is taken, not the pointer's (the pointer is for people and tools)."""
    candidates = list(reversed(list_checkpoints(run_dir)))
    for path in candidates:
        try:
            return _load(path), path
        except Exception as e:  # noqa: BLE001 - any failure means: try the previous one
            bad = path.with_name(path.name + ".bad")
            log(f"checkpoint {path} failed to load ({type(e).__name__}: {e}); moved aside to {bad.name}, "
                "trying the previous one")
            # aside, so keep-last-K pruning (by step number) never deletes good ones in favour of it
            path.replace(bad)
    return None


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        try:
            torch.cuda.set_rng_state_all(state["cuda"])
        except RuntimeError:
            pass  # a different number of GPUs than when saved: keep the fresh state


def file_is_complete(path: Path) -> bool:
    try:
        _load(path)
        return True
    except Exception:  # noqa: BLE001
        return False


__all__ = [
    "save_checkpoint", "load_latest", "list_checkpoints", "rng_state", "set_rng_state",
    "checkpoint_dir", "file_is_complete",
]
