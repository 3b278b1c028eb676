"""The daemon's memory across restarts: the name of the model that served last.

Kept in the models folder as `.kickserver-state.json` (hidden, so the model watcher ignores it; beside
the names it refers to, so two daemons on two folders never mix them up), written atomically after
each swap. At start, with no `model` configured, the daemon serves the remembered model if its file is
still there, so a reboot does not silently change the sound. The file is opened as variation sources are
(kickmodel.safejson.read: no links, no FIFOs or devices, never blocking) and read bounded (MAX_BYTES, nesting
included); a bad one is ignored with one log line.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kickmodel import safejson
from kickmodel.fsutil import atomic_write_bytes

from .config import valid_model_name

log = logging.getLogger("kickserver.state")

FILE = ".kickserver-state.json"
MAX_BYTES = 4096
VERSION = 1


def path_for(models_dir: Path) -> Path:
    return Path(models_dir) / FILE


def read_last_model(models_dir: Path) -> str | None:
    """The remembered model's name, or None (no file, or a bad one: logged)."""
    p = path_for(models_dir)
    try:
        doc = safejson.read(p, max_bytes=MAX_BYTES, max_depth=2)
    except FileNotFoundError:
        return None
    except safejson.BadJSON as e:
        log.warning("ignoring %s: it is %s", p, e)
        return None
    except OSError as e:  # ELOOP: a link
        log.warning("ignoring %s: cannot read it (%s)", p, e.strerror or e)
        return None
    name = doc.get("model") if isinstance(doc, dict) and doc.get("version") == VERSION else None
    if not isinstance(name, str) or not valid_model_name(name):
        log.warning("ignoring %s: not a kickserver state file", p)
        return None
    return name


class StateFile:
    """Writes the last served model's name; a failure is logged once per run, never raised."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = Path(models_dir)
        self._written: str | None = None
        self._failed = False

    def write_last_model(self, name: str) -> None:
        """Write `name` as the model that served last (read_last_model reads it at the next start)."""
        if name == self._written or not valid_model_name(name):
            return
        data = json.dumps({"version": VERSION, "model": name}).encode() + b"\n"
        try:
            atomic_write_bytes(path_for(self.models_dir), data)
        except OSError as e:
            if not self._failed:
                log.warning("cannot remember the served model in %s (%s); a restart serves the configured one",
                            self.models_dir, e.strerror or e)
            self._failed = True
            return
        self._written, self._failed = name, False
