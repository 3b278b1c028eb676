"""Which artifacts there are and which one serves, and why: the start-up choice, the state memory (the model that
served last, kickserver.state), the hand-over of a loaded model to the worker, and the words the log and
/kick/status use for why the served model serves (WHY_*).

With no model configured the daemon serves the model that served last if its file is still there, else
resolve_model's choice (`<models>/default.safetensors`, the bundled model, the newest valid artifact). The served
model's path, its file's signature when loaded and why it serves are kept here; a swap records them in the worker
thread once the new model serves, and remembers its name.

A model chosen by `/kick/model` holds until the next choice: the loader is pinned to it, pinned
or not before, so a new artifact in the folder (a running fit's next export) is listed, not swapped in; it is
remembered as chosen, so a restart without a configured model serves it as chosen, pinned again. A configured model
(`--model`, `model` in the config) wins at start and on SIGHUP, as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kickmodel.config import SAMPLE_RATES

from . import state
from .config import ServerConfig
from .jobs import Answer, Refused
from .reload import BUNDLED, DEFAULT_NAME, ModelNotFound, resolve_model, signature

log = logging.getLogger("kickserver")

# Why the served model serves: logged at each start and swap, and the last argument of /kick/status
WHY_PINNED_FLAG = "pinned by --model"
WHY_PINNED_CONFIG = "pinned by model in the config"
WHY_CHOSEN = "chosen by /kick/model"
WHY_REMEMBERED = "remembered from the last run"
WHY_NEWEST = "newest in the models folder"
WHY_FOLDER_DEFAULT = "default.safetensors in the models folder"
WHY_BUNDLED = "bundled default"


class Settled:
    """The answer target of a SIGHUP's model load: answers nobody, records that the load is over (swapped in,
    failed, or superseded), so READY=1 can follow; `why` the reloaded model serves."""

    def __init__(self, why: str) -> None:
        self.event = threading.Event()
        self.why = why

    def __call__(self, _outcome: Any) -> None:
        self.event.set()


class Catalog:
    """The served model's path, file signature and why it serves; the models folder's state memory."""

    def __init__(self, cfg: ServerConfig, overrides: dict[str, Any]) -> None:
        self.cfg = cfg  # the daemon replaces it on SIGHUP (set_config)
        self.overrides = overrides
        self.path: Path | None = None
        self.sig: tuple[int, int] | None = None  # (mtime_ns, size) of the served model's file when loaded
        self.why = ""  # why it serves (WHY_*): the log and /kick/status say it
        self.name = ""  # its name
        ensure_folder(cfg.models_dir)
        self.state = state.StateFile(cfg.models_dir)

    def set_config(self, cfg: ServerConfig) -> None:
        """A re-read config (SIGHUP): a new models folder is created if missing and its memory used from now on."""
        old, self.cfg = self.cfg, cfg
        if cfg.models_dir != old.models_dir:
            ensure_folder(cfg.models_dir)
            self.state = state.StateFile(cfg.models_dir)

    def startup(self) -> tuple[Path, str, str]:
        """What to serve at start, and why (WHY_*): the configured model; with none configured, the one that
        served last (if its file is still there; WHY_CHOSEN if /kick/model chose it), else resolve_model's choice.
        Raises ModelNotFound."""
        cfg = self.cfg
        if cfg.model is None:
            got = state.read_state(cfg.models_dir)
            if got is not None:
                last, chosen = got
                try:
                    path, name = resolve_model(cfg.models_dir, last, fall_back=False)
                except ModelNotFound:
                    log.info("the model that served last (%s) is gone; choosing another", last)
                else:
                    log.info("serving %s, the model that served last%s", name,
                             " (chosen by /kick/model: it holds until another is chosen)" if chosen else "")
                    return path, name, WHY_CHOSEN if chosen else WHY_REMEMBERED
        path, name = resolve_model(cfg.models_dir, cfg.model)
        return path, name, self.configured_why(cfg, path, name)

    def configured_why(self, cfg: ServerConfig, path: Path, name: str) -> str:
        """Why resolve_model's choice for the configured model (cfg.model, None when unpinned) serves."""
        if cfg.model is not None and name == cfg.model:
            return WHY_PINNED_FLAG if "model" in self.overrides else WHY_PINNED_CONFIG
        if path == BUNDLED:
            return WHY_BUNDLED
        return WHY_FOLDER_DEFAULT if name == DEFAULT_NAME else WHY_NEWEST

    def serves(self, path: Path, name: str, why: str, sig: tuple[int, int] | None) -> None:
        """Record what serves now and remember its name (and whether it was chosen) for the next start."""
        self.path, self.sig, self.why, self.name = path, sig, why, name
        self.state.write_last_model(name, chosen=why == WHY_CHOSEN)

    def held(self) -> str | None:
        """The name the loader stays pinned to with no model configured: the model serving as chosen, if it is."""
        return self.name if self.why == WHY_CHOSEN else None

    def choose(self, loader: Any, name: str) -> None:
        """/kick/model NAME for the model already serving: it is chosen now, and holds (pinned, remembered)."""
        loader.pinned = name
        if self.why != WHY_CHOSEN and self.path is not None:
            log.info("serving %s: %s%s", name, WHY_CHOSEN, pin_hint(self.cfg, WHY_CHOSEN))
            self.serves(self.path, name, WHY_CHOSEN, self.sig)

    def changed(self, path: Path, name: str, serving: str) -> bool:
        """Whether resolving the config names another model than `serving`, or its file changed since loaded."""
        return name != serving or path != self.path or signature(path) != self.sig

    def hand_over(self, worker: Any, loader: Any, gen: Any, name: str, path: Path, answer: Answer | None) -> None:
        """The loader's new model, to the worker (swapped in between batches); why it serves decided here."""
        if gen.sample_rate not in SAMPLE_RATES:  # pragma: no cover - config validation already
            failed(f"model {name} has an unusable sample rate", answer)
            return
        chosen = answer is not None and not isinstance(answer, Settled)  # by /kick/model, not by SIGHUP
        if chosen:
            loader.pinned = name  # the user chose this one: it holds, following its own file, until another choice
        elif answer is None and loader.pinned is not None and name != loader.pinned:
            # a folder event loaded before a choice pinned the loader (the load takes seconds): listed, not served
            log.info("model %s is ready in %s; still serving %s (select it with /kick/model %s)", name, path.parent,
                     loader.pinned, name)
            return
        sig = loader.last_seen.get(path) or signature(path)
        if isinstance(answer, Settled):
            why = answer.why
        elif chosen:
            why = WHY_CHOSEN
        elif loader.pinned is None:
            why = WHY_NEWEST  # a new artifact in the folder of an unpinned daemon
        else:
            why = self.why  # a new version of the pinned model's own file: pinned as before

        def swapped() -> None:  # in the worker thread, once gen serves
            log.info("serving %s: %s%s", name, why, pin_hint(self.cfg, why))
            self.serves(path, name, why, sig)

        worker.offer_model(gen, name, answer, on_swap=swapped)


def failed(reason: str, answer: Callable[[Any], None] | None) -> None:
    """A model load that failed: its requester (if any) is told why."""
    if answer is not None:
        answer(Refused(None, reason))


def pin_hint(cfg: ServerConfig, why: str) -> str:
    """For a model an unpinned daemon chose itself: how to keep one (a newer export would replace it)."""
    if why in (WHY_NEWEST, WHY_REMEMBERED, WHY_FOLDER_DEFAULT, WHY_BUNDLED) and cfg.model is None:
        return (f" (no --model: a newer artifact in {cfg.models_dir} replaces it; keep one with --model NAME, "
                f"e.g. --model default, or model = \"NAME\" in the config)")
    if why == WHY_CHOSEN:
        return f" (it holds until another /kick/model: a new artifact in {cfg.models_dir} is listed, not served)"
    return ""


def ensure_folder(models_dir: Path) -> None:
    """Create the models folder (parents too) so a fresh install watches it from the start."""
    if models_dir.is_dir():
        return
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        log.warning("cannot create the models folder %s (%s); new models there are not seen until SIGHUP",
                    models_dir, e.strerror or e)
    else:
        log.info("created the models folder %s", models_dir)
