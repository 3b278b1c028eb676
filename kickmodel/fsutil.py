"""Durable, atomic file writes: the one implementation the trainer and the daemon share.

A reader (a DAW watching a folder, the daemon watching its models, a resumed run) sees either the
old file or the whole new one: write a hidden temp file in the same folder, flush, fsync, rename
over the target, fsync the folder. A failure removes the temp file. Temp names are
`.<name>.<random>.part`, so a start-up sweep of `.*.part` finds what a killed writer left.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def fsync_dir(folder: Path) -> None:
    """Make a rename in folder durable (best effort where the filesystem cannot)."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def atomic_write(path: Path, write: Callable[[BinaryIO], object], mode: int = 0o644) -> None:
    """Atomically replace path with what write(file) writes; the file gets `mode` (mkstemp's 0600 is
    too private for files others read: a DAW over a share, systemd reading a unit)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    atomic_write(path, lambda f: f.write(data), mode)


def clean_stale_temp_files(folder: Path, prefix: str = ".") -> list[Path]:
    """Remove the temp files a killed writer left in folder (`.*.part`, starting with prefix); the
    ones removed. A file that cannot be removed is left for the next sweep."""
    removed = []
    if Path(folder).is_dir():
        for p in Path(folder).iterdir():
            if p.name.startswith(prefix) and p.name.endswith(".part"):
                try:
                    p.unlink(missing_ok=True)
                except OSError:
                    continue
                removed.append(p)
    return removed
