"""Which model to serve, and live reload: watch the models folder, validate, load beside, hand over.

A watchdog Observer watches `--models` (one non-recursive inotify watch). A file is "ready" when it
is closed after writing or moved into place (writers should write `.name.part` and rename); a
created or modified file without a close (copies over a network share) counts once it has been
quiet for a while and its size and mtime did not change meanwhile. Hidden files, `*.part` and
anything not `*.safetensors` are ignored. Where inotify cannot be used (out of watches or
instances: fs.inotify.max_user_watches / max_user_instances) the folder is polled every
POLL_S seconds instead; if even that fails the daemon serves on without live reload (one log line).

Which ready files are swapped in: with no model configured (`pinned` None) every one, so the
newest artifact serves. With a model pinned (`--model NAME`, or the one chosen by `/kick/model`
since), only a new version of that model's own file; any other is validated (refused with one log
line if bad) and listed by /kick/models, but what the user hears does not change until they select
it. A file to swap in is validated and loaded by `kickmodel.loading.load_generator` in the loader
thread, warmed up, then handed to the worker, which swaps it in between batches. An invalid
artifact is refused with one log line and the current model keeps serving.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kickmodel.artifact import ArtifactError
from kickmodel.generator import Cancelled
from kickmodel.loading import check_artifact

from .jobs import warm_up

log = logging.getLogger("kickserver.reload")

SUFFIX = ".safetensors"
BUNDLED = Path(__file__).resolve().parent / "models" / "default.safetensors"
DEFAULT_NAME = "default"
POLL_S = 2.0  # polling interval when inotify is not available
MAX_TO_CHECK = 4096  # artifacts waiting for their check (for /kick/models) at most

# the answer target of a load (kickserver.jobs.Answer: told Serving or Refused), None for a load nobody asked for
Loaded = Callable[[Any, str, Path, Callable[[Any], None] | None], None]
Failed = Callable[[str, Callable[[Any], None] | None], None]


class ModelNotFound(Exception):
    pass


def artifact_name(path: Path) -> str:
    return Path(path).name.removesuffix(SUFFIX)


def is_candidate(path: str | Path) -> bool:
    name = os.path.basename(str(path))
    if not name.isprintable():  # control characters would reach logs and replies
        return False
    try:  # a name that is not valid UTF-8 (surrogate-escaped) cannot be said in an OSC reply: not a model
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.endswith(SUFFIX) and not name.startswith(".") and not name.endswith(".part")


# The folder scan is bounded: at most MAX_SCAN entries of the folder are read, and of the artifacts
# among them the first MAX_MODEL_FILES by name are models (the others are left out, with one log line). The verdict
# cache below holds more than that, so a full folder never evicts a verdict it still needs (with 5,000 artifacts
# and a cache of 4,096, every listing re-loaded the evicted ones, over and over).
MAX_MODEL_FILES = 4096
MAX_SCAN = 65536
_over: list[int] = [0]  # the last count of artifacts left out, so the log line is written once per change


def _files(models_dir: Path) -> list[Path]:
    """The folder's artifacts (regular files, see is_candidate), by name, at most MAX_MODEL_FILES of them."""
    names: list[str] = []
    try:
        with os.scandir(models_dir) as it:
            for n, entry in enumerate(it):
                if n >= MAX_SCAN:
                    break
                if is_candidate(entry.name):
                    names.append(entry.name)
    except OSError:
        return []
    names.sort()
    left_out = max(0, len(names) - MAX_MODEL_FILES) + (n + 1 >= MAX_SCAN if names else 0)
    if left_out != _over[0]:
        _over[0] = left_out
        if left_out:
            log.warning("the models folder %s holds more than %d artifacts (or %d entries); only the first %d by "
                        "name are models, %d left out: move the others elsewhere", models_dir, MAX_MODEL_FILES,
                        MAX_SCAN, MAX_MODEL_FILES, left_out)
    out = []
    for name in names[:MAX_MODEL_FILES]:
        p = Path(models_dir) / name
        try:
            if p.is_file():
                out.append(p)
        except OSError:
            continue
    return out


# str(path) -> ((mtime_ns, size) when checked, whether it loads): written by whoever loads or checks a file (the
# loader thread, start-up), read by listings. Never smaller than what a folder scan may hold (MAX_MODEL_FILES), with
# room for files renamed or removed since.
_verdicts: dict[str, tuple[tuple[int, int], bool]] = {}
MAX_VERDICTS = 2 * MAX_MODEL_FILES
# bumped whenever a verdict is recorded or the watcher reports a file: a /kick/models listing built at another
# generation is stale (kickserver.frontend builds it once per change, in the loader thread)
generation = [0]
PRECHECK_BYTES = 64 << 20  # validate: a file larger than this has its header checked before it is read whole


def verdict(path: Path) -> bool | None:
    """Whether the artifact loads, as found for its current mtime and size; None if not checked since it changed."""
    sig = signature(path)
    hit = _verdicts.get(str(path))
    return hit[1] if sig is not None and hit is not None and hit[0] == sig else None


def record_verdict(path: Path, ok: bool, sig: tuple[int, int] | None = None) -> None:
    """Record whether path loads (sig: its (mtime_ns, size) when it was read; default: now)."""
    sig = sig or signature(path)
    if sig is None:
        return
    _verdicts[str(path)] = (sig, ok)
    generation[0] += 1
    while len(_verdicts) > MAX_VERDICTS:
        _verdicts.pop(next(iter(_verdicts)))


def validate(path: Path) -> bool:
    """Whether the artifact loads -- checked fully, as the loader loads it: kickmodel.loading.load_generator on
    the CPU (every weight read, NaN and inf, the parts' content hashes, the networks built; for a file over
    PRECHECK_BYTES its header alone first, so a big file whose header is wrong is not read whole) -- once per mtime
    and size (cached). A refusal is logged once per version of the file. Seconds for a big artifact: the daemon
    runs it in the loader thread only."""
    from kickmodel.loading import load_generator

    path = Path(path)
    sig = signature(path)
    if sig is None:
        return False
    known = verdict(path)
    if known is not None:
        return known
    try:
        if sig[1] > PRECHECK_BYTES:
            check_artifact(path)
        gen = load_generator(path, "cpu")
        del gen
        ok = True
    except ArtifactError as e:
        log.warning("refused model %s: %s", path.name, str(e).replace(str(path) + ": ", ""))
        ok = False
    except Exception as e:  # noqa: BLE001 - a file that breaks the checker is not listed; listing never fails
        log.warning("refused model %s: the check failed (%s: %s)", path.name, type(e).__name__, str(e)[:200])
        ok = False
    record_verdict(path, ok, sig)
    return ok


def list_models(models_dir: Path, check_later: Callable[[Path], None] | None = None, *,
                unchecked: bool = False) -> list[str]:
    """Names of the folder's artifacts that load (`validate`), plus `default` when the bundled model exists.

    An artifact not checked since it last changed is checked here (which may take seconds) when check_later is
    None; otherwise it is handed to check_later and left out until that check is done, so the caller never waits
    (the daemon's receive loop: the loader thread checks it). unchecked=True lists such an artifact meanwhile."""
    names = []
    for p in _files(models_dir):
        ok = verdict(p)
        if ok is None:
            if check_later is not None:
                check_later(p)
                if unchecked:
                    names.append(artifact_name(p))
                continue
            ok = validate(p)
        if ok:
            names.append(artifact_name(p))
    if BUNDLED.is_file() and DEFAULT_NAME not in names:
        names.append(DEFAULT_NAME)
    return sorted(names)


def resolve_model(models_dir: Path, name: str | None, *, fall_back: bool = True,
                  check_later: Callable[[Path], None] | None = None,
                  available: Callable[[], list[str] | None] | None = None) -> tuple[Path, str]:
    """The artifact to serve for `name` (None: not configured). Raises ModelNotFound with a reason.

    NAME -> <models>/NAME.safetensors; `default` (or NAME with an empty models folder, unless
    fall_back is False) -> the bundled model; None -> <models>/default.safetensors, the bundled
    model, else the newest artifact in the folder that loads. check_later: as list_models's, for the
    models a refusal names; available: those names when already known (the front end's listing), so a refusal in the
    receive loop does not scan the folder. The folder is scanned only where the answer depends on it.
    """
    models_dir = Path(models_dir)
    if name is not None:
        path = models_dir / f"{name}{SUFFIX}"
        try:
            if path.is_file():
                return path, name
        except OSError as e:  # e.g. a name too long for the filesystem
            raise ModelNotFound(f"model {name[:60]!r} cannot be looked up in {models_dir} "
                                f"({e.strerror or e})") from None
        if (name == DEFAULT_NAME or (fall_back and not _files(models_dir))) and BUNDLED.is_file():
            if name != DEFAULT_NAME:
                log.warning("model %s not found and %s has no artifacts; serving the bundled model", name, models_dir)
            return BUNDLED, DEFAULT_NAME
        # for the message, the folder's names not known to fail: checking each here would load every artifact on
        # the caller's thread (the main thread at start-up and on SIGHUP) only to word an error
        known = available() if available is not None else None
        if known is None:
            known = list_models(models_dir, check_later or (lambda p: None), unchecked=True)
        have = ", ".join(known) or "none"
        raise ModelNotFound(f"model {name!r} not found in {models_dir} (available: {have})")
    path = models_dir / f"{DEFAULT_NAME}{SUFFIX}"
    if path.is_file():
        return path, DEFAULT_NAME
    if BUNDLED.is_file():
        return BUNDLED, DEFAULT_NAME
    for newest in sorted(_files(models_dir), key=lambda p: signature(p) or (0, 0), reverse=True):
        if validate(newest):
            return newest, artifact_name(newest)
    raise ModelNotFound(f"no model to serve: {models_dir} has no artifacts and the bundled model "
                        f"({BUNDLED}) is not installed; train one (kicktrain) or pass --models/--model")


def signature(path: Path) -> tuple[int, int] | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@dataclass
class _Pending:
    due: float
    reply: Callable[[Any], None] | None = None
    name: str | None = None
    sig: tuple[int, int] | None = None  # weak (no close seen): load only once this stays the same


class ModelLoader:
    """Loads artifacts in its own thread (never the worker's), from folder events or explicit requests."""

    def __init__(self, device: Any, on_loaded: Loaded, on_failed: Failed, *, settle_s: float = 0.25,
                 quiet_s: float = 2.0, poll_s: float = POLL_S, pinned: str | None = None) -> None:
        self.device = device
        self.on_loaded = on_loaded
        self.on_failed = on_failed
        self.settle_s = settle_s
        self.quiet_s = quiet_s
        self.poll_s = poll_s
        # None: swap in every new artifact; a name: only that model's own file (see the module doc)
        self.pinned = pinned
        self.watching = "off"  # "inotify", "polling" or "off"
        self._pending: dict[Path, _Pending] = {}
        self._to_check: dict[Path, None] = {}  # artifacts to check for /kick/models (validate), after any load
        self._checked = [0, 0]  # of those checked since the queue was last empty: (load, do not)
        self._soon: Callable[[], None] | None = None  # one job to run in this thread after loads and checks (call_soon)
        self.on_checked: Callable[[], None] | None = None  # called in this thread whenever no check is left
        self._cond = threading.Condition()
        self._stop = False
        self._cancel = threading.Event()  # set by stop(): a load in progress ends at its next step
        self._thread = threading.Thread(target=self._run, name="kick-loader", daemon=True)
        self._observer: Any = None
        self.models_dir: Path | None = None
        self.last_seen: dict[Path, tuple[int, int]] = {}

    def start(self) -> None:
        self._thread.start()

    def watch(self, models_dir: Path) -> None:
        """(Re)start the folder watch on models_dir (one observer, one non-recursive watch).

        Never raises: without inotify it polls, without that it logs that live reload is off. Called
        again (SIGHUP) while polling or off, it tries inotify again."""
        models_dir = Path(models_dir)
        if self._observer is not None and self.models_dir == models_dir and self.watching == "inotify":
            return
        self.unwatch()
        self.models_dir = models_dir
        if not models_dir.is_dir():
            log.warning("models folder %s does not exist; not watching it", models_dir)
            return
        from watchdog.events import FileSystemEventHandler

        loader = self

        class Handler(FileSystemEventHandler):
            def on_closed(self, event: Any) -> None:
                if not event.is_directory:
                    loader.schedule(Path(os.fsdecode(event.src_path)), loader.settle_s)

            def on_moved(self, event: Any) -> None:
                if not event.is_directory:
                    loader.schedule(Path(os.fsdecode(event.dest_path)), loader.settle_s)

            def on_created(self, event: Any) -> None:
                if not event.is_directory:
                    loader.schedule(Path(os.fsdecode(event.src_path)), loader.quiet_s, weak=True)

            def on_modified(self, event: Any) -> None:
                if not event.is_directory:
                    loader.schedule(Path(os.fsdecode(event.src_path)), loader.quiet_s, weak=True)

        try:
            self._observer = self._start_observer(Handler(), models_dir, polling=False)
            self.watching = "inotify"
            log.info("watching %s for new models", models_dir)
            return
        except Exception as e:  # noqa: BLE001 - OSError ENOSPC/EMFILE (inotify limits) above all
            log.warning("cannot watch %s with inotify (%s); polling it every %g s instead (raise "
                        "fs.inotify.max_user_watches / max_user_instances, then SIGHUP, to get inotify back)",
                        models_dir, _why(e), self.poll_s)
        try:
            self._observer = self._start_observer(Handler(), models_dir, polling=True)
            self.watching = "polling"
        except Exception as e:  # noqa: BLE001 - serving goes on without live reload
            log.error("cannot poll %s either (%s): serving without live reload; /kick/model and SIGHUP "
                      "still load models", models_dir, _why(e))

    def _start_observer(self, handler: Any, models_dir: Path, *, polling: bool) -> Any:
        if polling:
            from watchdog.observers.polling import PollingObserver

            obs = PollingObserver(timeout=self.poll_s)
        else:
            from watchdog.observers import Observer

            obs = Observer()
        obs.daemon = True
        try:
            obs.schedule(handler, str(models_dir), recursive=False)
            obs.start()
        except BaseException:
            try:
                obs.stop()
            except Exception:  # noqa: BLE001 - it never started
                pass
            raise
        return obs

    def unwatch(self) -> None:
        if self._observer is not None:
            try:
                self._observer.stop()
                self._observer.join(timeout=2)
            except Exception:  # noqa: BLE001 - stopping must not fail shutdown
                pass
            self._observer = None
        self.watching = "off"

    def schedule(self, path: Path, delay: float, *, weak: bool = False) -> None:
        """Load path once no event has touched it for `delay` s (weak: do not shorten a pending wait)."""
        if not is_candidate(path):
            return
        if self.models_dir is not None and Path(path).parent != self.models_dir:
            return
        generation[0] += 1  # a listing of the folder built before this event is stale
        sig = signature(path) if weak else None
        with self._cond:
            due = time.monotonic() + delay
            p = self._pending.get(path)
            if p is not None and weak:
                p.due = max(p.due, due)
                if p.sig is not None:
                    p.sig = sig
            elif p is not None:
                p.due, p.sig = due, None  # closed or moved into place: complete now
            else:
                self._pending[path] = _Pending(due, sig=sig)
            self._cond.notify()

    def check_later(self, path: Path) -> None:
        """Check path fully for /kick/models (`validate`), in this thread, after any load waiting; list_models
        leaves it out until then. At most MAX_TO_CHECK wait; more are asked for again by the next listing."""
        with self._cond:
            if path not in self._to_check and len(self._to_check) < MAX_TO_CHECK:
                self._to_check[Path(path)] = None
                self._cond.notify()

    def call_soon(self, job: Callable[[], None]) -> None:
        """Run job in this thread once no load or check is waiting (the front end's /kick/models listing: built
        here, never in the receive loop). One job waits at most: a later one replaces it."""
        with self._cond:
            self._soon = job
            self._cond.notify()

    def check_folder(self, models_dir: Path) -> None:
        """Check every artifact of models_dir not checked since it last changed (at start, and after SIGHUP)."""
        for p in _files(models_dir):
            if verdict(p) is None:
                self.check_later(p)

    def request(self, path: Path, name: str, reply: Callable[[Any], None] | None = None) -> None:
        """Load path now (a /kick/model request or a SIGHUP rescan); reply is told the outcome."""
        with self._cond:
            self._pending[Path(path)] = _Pending(time.monotonic(), reply, name)
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop watching and loading, and wait up to timeout s for the thread: a load in progress stops at its next
        step (after reading and building, or within its warm-up); a check of one file runs to its end. True once
        the thread has ended (exiting the process while it runs torch aborts it)."""
        self.unwatch()
        with self._cond:
            self._stop = True
            self._cancel.set()
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ------------------------------------------------------------ the thread
    def _next(self) -> tuple[Path, _Pending | None] | None:
        """The next load due (path, its _Pending), else the next file to check (path, None); None once stopped."""
        with self._cond:
            while not self._stop:
                now = time.monotonic()
                due = [(p.due, path) for path, p in self._pending.items() if p.due <= now]
                if due:
                    _, path = min(due)
                    p = self._pending[path]
                    if p.sig is not None:
                        sig = signature(path)
                        if sig != p.sig:  # still being written (no event may have told us: polling)
                            p.sig, p.due = sig, now + self.quiet_s
                            continue
                    return path, self._pending.pop(path)
                if self._to_check:
                    path = next(iter(self._to_check))
                    del self._to_check[path]
                    return path, None
                if self._soon is not None:
                    job, self._soon = self._soon, None
                    return job, None  # type: ignore[return-value]
                wait = min((p.due for p in self._pending.values()), default=now + 1.0) - now
                self._cond.wait(timeout=max(0.01, min(wait, 1.0)))
            return None

    def _run(self) -> None:
        import torch

        while True:
            nxt = self._next()
            if nxt is None:
                return
            path, pending = nxt
            if callable(path):
                try:
                    path()
                except Exception as e:  # noqa: BLE001 - the loader must survive anything
                    log.error("%s failed: %s: %s", getattr(path, "__name__", "a job"), type(e).__name__, e)
                continue
            # load and warm up on one CPU thread: only the worker runs the network on several (Worker._run).
            # Reading the count first makes torch's lazy per-thread init happen now, before the worker's next
            # set_num_threads could change the process-wide value it reads.
            torch.get_num_threads()
            torch.set_num_threads(1)
            if pending is None:
                self._check(path)
                continue
            try:
                self._load(path, pending)
            except Cancelled:
                log.info("stopped loading %s: shutting down", path.name)
            except Exception as e:  # noqa: BLE001 - the loader must survive anything
                log.error("loading %s failed: %s: %s", path, type(e).__name__, e)
                self.on_failed(f"cannot load {path.name}: {e}", pending.reply)

    def _check(self, path: Path) -> None:
        """One file for /kick/models: validate it unless it is gone or was checked meanwhile; one summary line
        once the queue is empty."""
        if verdict(path) is None and path.is_file():
            t0 = time.perf_counter()
            ok = validate(path)
            self._checked[0 if ok else 1] += 1
            log.debug("checked %s in %.2f s: %s", path.name, time.perf_counter() - t0, "loads" if ok else "refused")
        with self._cond:
            done = not self._to_check
        if not done:
            return
        if sum(self._checked):
            log.info("checked %d model(s) for /kick/models: %d load, %d do not (not listed)", sum(self._checked),
                     *self._checked)
            self._checked = [0, 0]
        if self.on_checked is not None:
            try:
                self.on_checked()
            except Exception as e:  # noqa: BLE001 - the loader must survive anything
                log.error("after checking models: %s: %s", type(e).__name__, e)

    def _load(self, path: Path, pending: _Pending) -> None:
        from kickmodel.loading import load_generator

        if not path.is_file():
            if pending.reply is not None:
                self.on_failed(f"model file {path.name} is gone", pending.reply)
            return
        st = path.stat()
        name = pending.name or artifact_name(path)
        if pending.name is None and self.pinned is not None and name != self.pinned:
            self._validate_only(path, name)
            return
        t0 = time.perf_counter()
        try:
            gen = load_generator(path, self.device)
        except ArtifactError as e:
            record_verdict(path, False, (st.st_mtime_ns, st.st_size))
            log.warning("refused model %s: %s", path.name, str(e).replace(str(path) + ": ", ""))
            self.on_failed(f"refused model {name}: {str(e).replace(str(path) + ': ', '')}", pending.reply)
            return
        record_verdict(path, True, (st.st_mtime_ns, st.st_size))
        if self._cancel.is_set():
            raise Cancelled
        warm = warm_up(gen, cancel=self._cancel.is_set)
        self.last_seen[path] = (st.st_mtime_ns, st.st_size)
        log.info("loaded model %s from %s in %.2f s (warm-up %.2f s)", name, path, time.perf_counter() - t0, warm)
        self.on_loaded(gen, name, path, pending.reply)

    def _validate_only(self, path: Path, name: str) -> None:
        """A new artifact beside a pinned model: check it fully (on the CPU), list it, do not serve it."""
        if not validate(path):  # logs the refusal, once per version of the file
            return
        log.info("model %s is ready in %s; still serving the pinned model %s (select it with /kick/model %s)",
                 name, path.parent, self.pinned, name)


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if not isinstance(e, OSError) else str(e.strerror or e)
