"""The daemon's memory across restarts: the name of the model that served last, and whether a musician chose it.

Kept in the user's state folder (`$XDG_STATE_HOME/kickserver`, else `~/.local/state/kickserver`), one file per models
folder (`state-<key>.json`, the key a hash of the folder's real path, so two daemons on two folders never mix them
up), written atomically after each swap. The models folder itself is never written (serving the package's
`kickserver/models` wrote a file into the package). A state file an older version left in the models folder
(`<models>/.kickserver-state.json`) is still read while the state folder has none for that folder.

At start, with no `model` configured, the daemon serves the remembered model if its file is still there, so a reboot
does not silently change the sound; a model chosen by `/kick/model` (`"chosen": true`) is served as chosen, so it
holds (a new artifact in the folder does not replace it) until another choice. The file is opened as variation
sources are (kickmodel.safejson.read: no links, no FIFOs or devices, never blocking) and read bounded (MAX_BYTES,
nesting included); a bad one is ignored with one log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from kickmodel import safejson
from kickmodel.fsutil import atomic_write_bytes

from .config import valid_model_name

log = logging.getLogger("kickserver.state")

FILE = ".kickserver-state.json"  # the file older versions kept in the models folder (read, never written)
MAX_BYTES = 4096
VERSION = 1


def state_dir() -> Path:
    """The user's state folder for kickserver: $XDG_STATE_HOME/kickserver, else ~/.local/state/kickserver."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "kickserver"


def path_for(models_dir: Path) -> Path:
    """Where the memory of the models folder models_dir is written: one file per folder in the state folder."""
    real = os.path.realpath(os.fsencode(Path(models_dir)))
    return state_dir() / f"state-{hashlib.sha256(real).hexdigest()[:16]}.json"


def legacy_path_for(models_dir: Path) -> Path:
    """Where older versions kept it: in the models folder (read while path_for holds none)."""
    return Path(models_dir) / FILE


def read_state(models_dir: Path) -> tuple[str, bool] | None:
    """(the remembered model's name, whether /kick/model chose it), or None (no file, or a bad one: logged)."""
    for p in (path_for(models_dir), legacy_path_for(models_dir)):
        try:
            doc = safejson.read(p, max_bytes=MAX_BYTES, max_depth=2)
        except FileNotFoundError:
            continue
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
        return name, doc.get("chosen") is True
    return None


def read_last_model(models_dir: Path) -> str | None:
    """The remembered model's name, or None (no file, or a bad one: logged)."""
    got = read_state(models_dir)
    return got[0] if got is not None else None


class StateFile:
    """Writes the last served model's name (and whether it was chosen); a failure is logged once per run, never
    raised."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = Path(models_dir)
        self._written: tuple[str, bool] | None = None
        self._failed = False

    def write_last_model(self, name: str, *, chosen: bool = False) -> None:
        """Write `name` as the model that served last, chosen by /kick/model or not (read_state reads it at the next
        start)."""
        if (name, chosen) == self._written or not valid_model_name(name):
            return
        doc: dict = {"version": VERSION, "model": name}
        if chosen:
            doc["chosen"] = True
        data = json.dumps(doc).encode() + b"\n"
        p = path_for(self.models_dir)
        try:
            p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write_bytes(p, data)
        except OSError as e:
            if not self._failed:
                log.warning("cannot remember the served model in %s (%s); a restart serves the configured one",
                            p.parent, e.strerror or e)
            self._failed = True
            return
        self._written, self._failed = (name, chosen), False
