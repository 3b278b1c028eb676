"""Drop finished kicks into the DAW's folder: complete files only, by rename, never overwriting.

Each kick is written as 24-bit PCM WAV (RIFF INFO tags name the software, model, seed, steps,
sampler and controls) to a hidden `.NAME.wav.<pid>.part` in the same folder, flushed, fsynced and
renamed to a name that says the sound (kickmodel.naming, by the writer's `name_pattern`, default
`kick_{note}_{word}_{label}`: `kick_A1_short_5513.wav`, the note of the pitch asked, else of the pitch measured, the
character word of what the kick measures, then its label: the seed, `v<seed>` for a variation, `m<seed>` for a kick
from the kit map, `t<t in thousandths>` for an interpolated kick that no seed regenerates; `kick_{time}_{label}` is
the old `kick_<YYYYmmdd-HHMMSS>_<seed>.wav`; `-2`, `-3`... on collision) with a rename that
refuses to replace an existing name (renameat2 RENAME_NOREPLACE), so a second writer on the same
folder (another daemon, `kickserver render`) can never be overwritten: the loser of a race takes
the next name. A folder watcher sees one move to the final name and never a partial `.wav`. A
failed write removes its temp file. A kit (kickserver.kitfiles) is written as one folder the same way
(`write_kit`: `kit_A1_punchy_5513`, `-2`... on collision).

With retention on (`max_files` and/or `max_mb`), the server keeps a hidden ledger
(`.kickserver-ledger.json`, written atomically after each batch) of the files and kit folders it wrote, and
removes the oldest of those only, never anything else: an entry is removed only while its name is one the writer's
patterns make (its name_pattern's, the default's, the time-based one's; KIT_PATTERN's for a kit folder). A kit folder
counts as one entry of its whole size and goes as a whole: renamed to a hidden `.NAME.<random>.kitpart` in one step
(a watcher sees the folder leave at once, never half a kit), then removed; what a killed run left of it is swept with
the other temp folders at start (`clean_stray_temps`).

The folder is opened once and every file operation is relative to that descriptor (a folder swapped for a link
while the daemon ran redirected its writes into the link's target). Before each kick the folder at
the path is compared with the one opened: the same folder, written; none (removed), made again and opened anew; a
folder removed and made again at the same real place, opened anew; anything else (a link to another folder, another
folder moved in) is refused with a reason (WriteError), never written through, until SIGHUP or a restart opens it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import queue as queue_mod
import re
import secrets
import shutil
import stat as stat_mod
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from kickmodel import safejson
from kickmodel.dsp import trim_tail
from kickmodel.naming import DEFAULT_PATTERN, KIT_PATTERN, TIME_PATTERN, check_pattern, kick_name, name_regex
from kickmodel.wavfile import KickInfo, encode_wav, naming_figures, with_measures

from . import kitfiles, sources
from .jobs import Done, Kick, Outcome, Refused
from .publish import lexists as _lexists
from .publish import publish

__all__ = ["KickInfo", "KickWriter", "Output", "WriteError", "WriterThread", "encode_wav", "publish"]

log = logging.getLogger("kickserver.writer")

LEDGER = ".kickserver-ledger.json"
MAX_LEDGER_BYTES = 64 << 20  # about 600,000 kicks (an entry is about 100 bytes)
MAX_NAME_TRIES = 100
MAX_PRUNE = 1000  # old kicks one prune removes at most (after each batch): the rest go with the next batches
# a kick's temp file: `.` + its final name + `.<pid>.part` (the name one the writer's patterns make); the ledger's
KICK_TEMP_RE = re.compile(r"\A\.(?P<name>[^/]+\.wav)\.[A-Za-z0-9]+\.part\Z")
LEDGER_TEMP_RE = re.compile(r"\A\.kickserver-ledger\.json\.[A-Za-z0-9_]+\.part\Z")
KIT_NAME_RE = name_regex(KIT_PATTERN, suffix="")


class WriteError(OSError):
    """A kick that could not be written; the message is the reason sent to the client."""


def _reason(e: BaseException, folder: Path) -> str:
    """What went wrong, in words a musician can act on (the folder named where space or rights ran out)."""
    code = getattr(e, "errno", None)
    if code == errno.ENOSPC:
        return f"no space left in {folder}"
    if code == errno.EDQUOT:
        return f"disk quota exceeded in {folder}"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{getattr(e, 'strerror', None) or e} in {folder}"
    return str(getattr(e, "strerror", None) or e)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]




def _save_ledger(dir_fd: int, entries: list[dict]) -> None:
    """The ledger written atomically into the folder dir_fd is open on (kickmodel.fsutil's way, relative to the
    descriptor: a temp file LEDGER_TEMP_RE knows, so a killed run's is cleaned, fsynced, renamed, the folder fsynced);
    OSError when it cannot be, its temp file removed."""
    data = json.dumps({"version": 1, "files": entries}, indent=0).encode()
    tmp = f"{LEDGER}.{os.getpid()}_{threading.get_ident()}.part"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, LEDGER, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    _fsync_fd(dir_fd)


def _read_ledger(path: Path) -> list[dict]:
    """The ledger's entries as saved (dicts), or [] when there is none or it cannot be read (said in a line)."""
    try:
        data = safejson.read(path, max_bytes=MAX_LEDGER_BYTES)  # no FIFO, no link, bounded: never blocks
        return [f for f in data.get("files", []) if isinstance(f, dict)]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, AttributeError, TypeError) as e:
        log.warning("ignoring unreadable ledger %s (%s); no old kicks will be pruned", path, e)
        return []


def _open_dir(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


@dataclass(frozen=True)
class Prepared:
    """A kick ready to be written (prepare): its samples as the file keeps them, at sample_rate, its tags
    with what it measures, and the pitch its `smpl` chunk carries (None: none)."""

    audio: np.ndarray
    sample_rate: int
    info: KickInfo
    pitch_hz: float | None


def prepare(audio: np.ndarray, info: KickInfo, sample_rate: int) -> Prepared:
    """KickWriter.write's first half, which touches no file and no state (so kicks may be prepared side by side): the
    kick ([L] float at sample_rate) checked, clipped, cut where it has decayed and measured (its tags and name say
    what it measures)."""
    from kickmodel.batching import one_thread_if  # torch's: imported where kicks are, not where the module is

    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if not np.isfinite(x).all():
        raise WriteError("the model's output for this kick is not finite (NaN or inf): nothing written")
    x = trim_tail(np.clip(x, -1.0, 1.0), sample_rate)
    with one_thread_if(True):  # measured alike alone, side by side (WriterThread) or from a kit's or the CLI's write
        info, pitch = with_measures(x, sample_rate, info)  # named by what it measures
    return Prepared(x, sample_rate, info, pitch)


class KickWriter:
    """Writes kicks into one folder and keeps its ledger; used by one thread only (the worker's writer thread), which
    also makes its successor (Worker.set_output).

    clean_temps: remove the temp files and kit temp folders a killed run left in the folder (clean_stray_temps);
    pass False for a folder this process may be writing into right now (a new writer on the same folder), whose
    .part files are not stray. name_pattern: how kicks are named (kickmodel.naming; ValueError for a bad one)."""

    def __init__(self, out_dir: Path, sample_rate: int, *, max_files: int | None = None,
                 max_mb: float | None = None, clean_temps: bool = True, name_pattern: str = DEFAULT_PATTERN) -> None:
        self.out_dir = Path(out_dir)
        self.sample_rate = int(sample_rate)
        self.max_files = max_files
        self.max_mb = max_mb
        self.name_pattern = check_pattern(name_pattern)
        # the kick names retention may remove: this pattern's, the default's and the time-based one's
        self._kick_names = tuple(name_regex(p) for p in dict.fromkeys((name_pattern, DEFAULT_PATTERN, TIME_PATTERN)))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._fd = -1
        self._open()
        self._ledger: list[dict] = self._read_ledger()
        self._ledger_dirty = False
        if clean_temps:
            self.clean_stray_temps()

    def adopt_ledger(self, other: KickWriter) -> None:
        """Take the ledger of the writer this one replaces on the same folder, as it is in memory (its entries not
        saved yet included); saved with this writer's next prune."""
        self._ledger = list(other._ledger)
        self._ledger_dirty = self._ledger_dirty or other._ledger_dirty

    # ------------------------------------------------------------ the folder, opened once
    def _open(self) -> None:
        """Open the folder (following a link the configured path is, as it is now) and make its real path the output
        folder's read root (kickserver.sources.pin_output)."""
        fd = _open_dir(self.out_dir)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self.real_dir = Path(os.path.realpath(self.out_dir))
        sources.pin_output(self.out_dir, self.real_dir)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit
            pass

    def _folder(self) -> int:
        """The opened folder's descriptor, once the folder at the path is checked to be it (see the module doc)."""
        try:
            st = os.stat(self.out_dir)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise WriteError(f"cannot use the output folder {self.out_dir}: {_reason(e, self.out_dir)}") from None
        opened = os.fstat(self._fd)
        if st is not None and (st.st_dev, st.st_ino) == (opened.st_dev, opened.st_ino):
            return self._fd
        # removed (and maybe made again in its place): a new folder at the same real place is the output folder
        if opened.st_nlink == 0 and (st is None or Path(os.path.realpath(self.out_dir)) == self.real_dir):
            try:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                self._open()
            except OSError as e:
                raise WriteError(f"cannot create {self.out_dir}: {_reason(e, self.out_dir.parent)}") from None
            return self._fd
        now = os.path.realpath(self.out_dir)
        raise WriteError(f"the output folder {self.out_dir} was replaced since it was opened (it is now {now}); not "
                         f"writing through it: SIGHUP or a restart opens it again")

    # ------------------------------------------------------------ start-up
    def ours(self, name: str, kit: bool = False) -> bool:
        """name is one this writer's patterns make: a kick's (kit False) or a kit folder's."""
        return bool(KIT_NAME_RE.match(name)) if kit else any(r.match(name) for r in self._kick_names)

    def _is_temp(self, name: str) -> bool:
        m = KICK_TEMP_RE.match(name)
        return bool(LEDGER_TEMP_RE.match(name) or (m and self.ours(m["name"])))

    def clean_stray_temps(self) -> int:
        """Remove hidden temp files a killed run left behind (only names this writer makes), and the temp folders of
        kits a killed run was writing or pruning (kickserver.kitfiles.clean_stale_kit_temps); each kind said in a
        line. The number of files and folders removed."""
        n = 0
        try:
            entries = list(os.scandir(self._fd))
        except OSError:
            return 0
        for e in entries:
            if self._is_temp(e.name) and e.is_file(follow_symlinks=False):
                try:
                    os.unlink(e.name, dir_fd=self._fd)
                    n += 1
                except OSError:
                    pass
        if n:
            log.info("removed %d stray temp file(s) in %s", n, self.out_dir)
        kits = kitfiles.clean_stale_kit_temps(self.real_dir)
        if kits:
            log.info("removed %d stale kit temp folder(s) in %s (%s): a kit writer or a retention prune was stopped "
                     "mid-way", len(kits), self.out_dir, ", ".join(p.name for p in kits[:3]) + (
                         ", ..." if len(kits) > 3 else ""))
        return n + len(kits)

    def _read_ledger(self) -> list[dict]:
        """The saved ledger's entries that name what this writer makes and are there (a file, a kit's folder)."""
        entries = _read_ledger(self.real_dir / LEDGER)  # the folder opened, as its real path was then
        return [f for f in entries if self.ours(str(f.get("name", "")), kit=f.get("kit") is True) and self._is_there(f)]

    def _is_there(self, entry: dict) -> bool:
        """The ledger entry's file is a regular file (a kit's folder a folder), not a link, in the opened folder."""
        try:
            mode = os.stat(entry["name"], dir_fd=self._fd, follow_symlinks=False).st_mode
        except OSError:
            return False
        return stat_mod.S_ISDIR(mode) if entry.get("kit") is True else stat_mod.S_ISREG(mode)

    # ------------------------------------------------------------ naming
    def final_name(self, info: KickInfo, pitch_hz: float | None, when: float | None = None) -> str:
        """A free name for the kick info describes (its label, and what it measures: KickInfo.measured, with_measures)
        by name_pattern (kickmodel.naming.kick_name), pitch_hz the pitch its note names (the pitch asked, else the one
        measured); `-2`, `-3`, ... when taken."""
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if when is None else when))
        decay, pitch_hz, click = naming_figures(info.measured, pitch_hz, info.controls.get("pitch_hz"))
        base = kick_name(info.label, decay, pitch_hz, click, pattern=self.name_pattern, time=stamp, suffix="")
        name = f"{base}.wav"
        n = 1
        while _lexists(Path(name), self._fd):
            n += 1
            name = f"{base}-{n}.wav"
        return name

    # ------------------------------------------------------------ writing
    def write(self, audio: np.ndarray, info: KickInfo, *, sample_rate: int | None = None) -> Path:
        """Write one finished kick ([L] float, at sample_rate: the rate it was rendered at; default self.sample_rate)
        and return its final absolute path. The file is as long as the kick: it ends where the kick has decayed
        (kickmodel.dsp.trim_tail: its tail under -60 dB re its peak, then a 10 ms fade-out), not where the model's
        render does; what it keeps is the kick's samples bit for bit."""
        return self.write_prepared(prepare(audio, info, int(sample_rate or self.sample_rate)))

    def write_prepared(self, kick: Prepared) -> Path:
        """write's second half (the first: prepare): a prepared kick into the folder (temp file, fsync, rename); its
        final absolute path."""
        x, rate, info, pitch = kick.audio, kick.sample_rate, kick.info, kick.pitch_hz
        dir_fd = self._folder()  # the folder opened (made again if it was removed); WriteError if it was replaced
        name = self.final_name(info, pitch)
        tmp = f".{name}.{os.getpid()}.part"
        data = encode_wav(x, rate, info.tags(name.removesuffix(".wav"), time.strftime("%Y-%m-%d")), pitch_hz=pitch)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666,
                         dir_fd=dir_fd)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            for _ in range(MAX_NAME_TRIES):
                if publish(Path(tmp), Path(name), dir_fd):
                    break
                name = self.final_name(info, pitch)  # another writer took it meanwhile: the next free name
            else:
                raise OSError(errno.EEXIST, f"no free name after {MAX_NAME_TRIES} tries")
        except BaseException as e:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            if isinstance(e, (OSError, RuntimeError, sf.LibsndfileError)):
                raise WriteError(f"cannot write {name}: {_reason(e, self.out_dir)}") from None
            raise
        _fsync_fd(dir_fd)
        final = self.out_dir / name
        try:
            size = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
        except OSError:
            size = 0
        if self.retention:
            self._ledger.append({"name": name, "size": size, "time": time.time()})
            self._ledger_dirty = True
        return final.absolute()

    def write_kit(self, kit: kitfiles.Kit) -> Path:
        """Write a kit (kickserver.kitfiles.write_kit: one folder, as a whole or not at all) into the folder under
        kit.name, or `-2`, `-3`, ... when taken (also when another writer takes the name meanwhile); with retention on,
        one ledger entry of the folder's whole size. Its absolute path; KitWriteError (an OSError) when it cannot be
        written, nothing left."""
        dir_fd = self._folder()
        base, n = kit.name, 1
        for _ in range(MAX_NAME_TRIES):
            name = base if n == 1 else f"{base}-{n}"
            n += 1
            if _lexists(Path(name), dir_fd):
                continue
            try:
                made = kitfiles.write_kit(replace(kit, name=name), self.out_dir)
                break
            except kitfiles.KitWriteError as e:
                if e.errno != errno.EEXIST:
                    raise
        else:
            raise kitfiles.KitWriteError(errno.EEXIST, f"kit {base!r}: no free name after {MAX_NAME_TRIES} tries")
        if self.retention:
            size = 0
            for f in made.files:
                try:
                    size += os.stat(os.path.join(name, f), dir_fd=dir_fd, follow_symlinks=False).st_size
                except OSError:
                    pass
            self._ledger.append({"name": name, "size": size, "time": time.time(), "kit": True})
            self._ledger_dirty = True
        return (self.out_dir / name).absolute()

    # ------------------------------------------------------------ retention
    @property
    def retention(self) -> bool:
        """The ledger is kept (and old kicks pruned) only while max_files or max_mb is set."""
        return self.max_files is not None or self.max_mb is not None

    def prune(self) -> list[str]:
        """Apply max_files / max_mb to the files this server wrote (oldest first); save the ledger.

        Linear in the ledger and bounded: the sizes are summed once, the oldest entries are taken from the front in
        one pass and cut off in one slice, and only those are stat-ed; at most MAX_PRUNE of them a call (a budget
        lowered on SIGHUP under 100,000 kicks: the rest go with the next batches). It was quadratic: each file
        removed summed every size again and shifted the whole list, and each call stat-ed every file in the ledger
        (40k entries: 55 s; a 2.1 MB ledger held a reply 24.9 s). A kick deleted by hand still counts until its turn
        comes (a new writer's ledger leaves out the files gone)."""
        removed: list[str] = []
        ledger = self._ledger
        n = len(ledger)
        total = sum(f.get("size", 0) for f in ledger) if self.max_mb is not None else 0
        k = 0
        while k < n and k < MAX_PRUNE:
            left = n - k
            over = self.max_files is not None and left > self.max_files
            # never remove the kick just written for max_mb
            over = over or (self.max_mb is not None and total > self.max_mb * 1e6 and left > 1)
            if not over:
                break
            old = ledger[k]
            k += 1
            total -= old.get("size", 0)
            kit = old.get("kit") is True
            if self.ours(old["name"], kit=kit) and self._is_there(old):
                if self._remove(old["name"], kit):
                    removed.append(old["name"] + ("/" if kit else ""))
        if k:
            del ledger[:k]
            self._ledger_dirty = True
        if removed:
            kits = sum(n.endswith("/") for n in removed)
            what = " and ".join(w for w in (f"{len(removed) - kits} old kick(s)" if len(removed) > kits else "",
                                            f"{kits} old kit folder(s)" if kits else "") if w)
            keep = ([f"at most {self.max_files} kicks (max_files; a kit folder counts as one)"]
                    if self.max_files is not None else [])
            keep += [f"under {self.max_mb:g} MB (max_mb; 0 keeps every kick)"] if self.max_mb is not None else []
            log.info("retention removed %s from %s, oldest first (%s): it keeps %s", what,
                     self.out_dir, ", ".join(removed[:3]) + (", ..." if len(removed) > 3 else ""), " and ".join(keep))
        self.save_ledger()
        return removed

    def _remove(self, name: str, kit: bool) -> bool:
        """Remove a kick's file, or a kit's folder as a whole: renamed to a hidden temp folder in one step (what
        clean_stray_temps sweeps, should this run be killed before it is gone), then removed."""
        try:
            if not kit:
                os.unlink(name, dir_fd=self._fd)
                return True
            hidden = f".{name}.{secrets.token_hex(4)}{kitfiles.TEMP_SUFFIX}"
            os.rename(name, hidden, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except OSError as e:
            log.warning("cannot remove old %s %s (%s)", "kit" if kit else "kick", self.out_dir / name,
                        e.strerror or e)
            return False
        shutil.rmtree(hidden, dir_fd=self._fd, ignore_errors=True)
        return True

    def save_ledger(self) -> None:
        if not self._ledger_dirty:
            return
        try:
            _save_ledger(self._fd, self._ledger)
            self._ledger_dirty = False
        except OSError as e:
            log.warning("cannot save the ledger in %s (%s)", self.out_dir, e.strerror or e)

    @property
    def written(self) -> list[str]:
        return [f["name"] for f in self._ledger]


# ------------------------------------------------------------------ the writer thread


WRITE_QUEUE = 1  # rendered batches waiting for the writer thread (the next one renders meanwhile)


@dataclass
class Output:
    """Where and at what rate kicks go: what the worker's set_output asked for and, once the writer thread has made
    it (in order with the batches), its KickWriter (the previous one where the new folder could not be used). A batch
    keeps the Output it was rendered for, so its files carry the rate it was rendered at."""

    sample_rate: int
    out_dir: Any
    max_files: int | None = None
    max_mb: float | None = None
    name_pattern: str = DEFAULT_PATTERN
    writer: KickWriter | None = None


class WriterThread:
    """The `kick-writer` thread, off the render's critical path: it writes a rendered batch's files (its kicks
    prepared side by side on `threads` threads, then KickWriter.write_prepared in order: temp file, fsync, rename),
    answers its kicks (kickserver.jobs outcomes) and applies retention, while the worker renders the next batch.
    Everything handed to it (`post`) runs in order, so one client's answers keep the order of its kicks, and only
    this thread touches the KickWriter's ledger.

    `running` (the kicks being rendered) and `writing` (kicks handed here, not answered yet) are guarded by the
    worker's condition `cond`: a batch moves from one to the other in one step, so the worker's `queued` never counts
    a kick twice."""

    def __init__(self, writer: KickWriter, cond: threading.Condition, *, software: str,
                 stopping: Callable[[], bool], threads: int = 1) -> None:
        self.writer = writer  # replaced by this thread (switch)
        self.threads = max(1, int(threads))
        self.software = software
        self.generated = 0
        self.running = 0
        self.writing = 0
        self._cond = cond
        self._stopping = stopping
        self._queue: queue_mod.Queue[Callable[[], None] | None] = queue_mod.Queue(maxsize=WRITE_QUEUE)
        self._thread = threading.Thread(target=self._loop, name="kick-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """After everything handed over: this thread runs it all, then ends; returns once it has."""
        self._queue.put(None)
        self._thread.join()

    def post(self, fn: Callable[[], None], kicks: int = 0) -> None:
        """Hand fn to this thread (after everything handed before it); waits while WRITE_QUEUE batches wait.
        kicks: how many of the running batch's kicks fn answers: they move from `running` to `writing` at once."""
        if kicks:
            with self._cond:
                self.writing += kicks
                self.running = max(0, self.running - kicks)
        self._queue.put(fn)

    def _loop(self) -> None:
        while True:
            fn = self._queue.get()
            if fn is None:
                return
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the writer thread must not die: later batches need it
                log.error("writing failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))

    def answer_all(self, batch: list[Kick], reason: str | None = None, *, only_unanswered: bool = False,
                   outcome: Outcome | None = None) -> None:
        """Answer the batch's kicks (those not answered yet, with only_unanswered) with Refused(reason), or with
        outcome, in this thread (so after the answers of earlier batches)."""
        def answer() -> None:
            try:
                for k in batch:
                    if not (only_unanswered and k.answered):
                        k.answer(outcome if outcome is not None else Refused(k.job.id, reason or ""))
            finally:
                with self._cond:
                    self.writing -= len(batch)

        self.post(answer, len(batch))

    def write_batch(self, batch: list[Kick], audio: np.ndarray, model_name: str, out: Output) -> None:
        """Hand a rendered batch over: its files written with `out`'s writer at its rate, its kicks answered."""
        def write() -> None:
            try:
                self._write(batch, audio, model_name, out)
            except Exception as e:  # noqa: BLE001 - answer the kicks not answered yet
                log.error("batch failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
                for k in batch:
                    if not k.answered:
                        k.answer(Refused(k.job.id, f"generation failed: {type(e).__name__}: {e}"))
            finally:
                with self._cond:
                    self.writing -= len(batch)

        self.post(write, len(batch))

    def _write(self, batch: list[Kick], audio: np.ndarray, model_name: str, out: Output) -> None:
        """Drop each rendered kick (unless stopping: the one being written lands, the rest are answered "shutting
        down"), answer it, then apply retention and save the ledger -- all with the writer of `out`, the output the
        batch was rendered for, and at its rate."""
        from kickmodel.batching import side_by_side  # torch's: imported where kicks are, not where the module is

        writer = out.writer or self.writer

        def ready_or_why(i: int) -> Prepared | Exception | None:
            k = batch[i]
            if self._stopping():
                return None  # answered "shutting down" below: not measured for nothing
            try:
                info = KickInfo(model=model_name, seed=k.seed, software=self.software, **k.job.tags(k))
                return prepare(audio[i], info, out.sample_rate)
            except Exception as e:  # noqa: BLE001 - that kick's reply, below
                return e

        # measured side by side (each on one torch thread: kickmodel.batching), then written and answered in order
        ready = dict(zip(plain := [i for i, k in enumerate(batch) if getattr(k.job, "deliver", None) is None],
                         side_by_side(ready_or_why, plain, self.threads)))
        for i, k in enumerate(batch):
            job = k.job
            if self._stopping() or (i in ready and ready[i] is None):
                k.answer(Refused(job.id, "shutting down"))
                continue
            deliver = getattr(job, "deliver", None)
            if deliver is not None:  # a kit's hit: its job holds it and writes one folder with the last (jobs.Kit)
                deliver(k, audio[i], writer, out.sample_rate, model_name)
                continue
            try:
                if isinstance(ready[i], Exception):
                    raise ready[i]
                path = writer.write_prepared(ready[i])
            except WriteError as e:
                log.error("request %d: %s", job.id, e)
                k.answer(Refused(job.id, str(e)))
                continue
            except Exception as e:  # noqa: BLE001 - one kick's failure is that kick's reply, not the batch's
                log.error("request %d: writing seed %d failed: %s: %s", job.id, k.seed, type(e).__name__, e,
                          exc_info=log.isEnabledFor(logging.DEBUG))
                k.answer(Refused(job.id, f"cannot write kick (seed {k.seed}): {type(e).__name__}: {e}"))
                continue
            self.generated += 1
            k.answer(Done(job.id, str(path), job.reply_seed(k.seed)))
        try:
            writer.prune()
        except Exception as e:  # noqa: BLE001 - every kick is answered by now; retention tries again next batch
            log.error("retention failed in %s: %s: %s", writer.out_dir, type(e).__name__, e,
                      exc_info=log.isEnabledFor(logging.DEBUG))

    def switch(self, old: Output, new: Output) -> None:
        """In order with the batches: the old writer saves its ledger, then new's KickWriter is made (stray temp
        files cleaned only in a folder that changed, never while a write is in flight)."""
        def switch() -> None:
            prev = old.writer or self.writer
            prev.save_ledger()  # what the old writer wrote stays in its folder's ledger
            same = os.path.realpath(prev.out_dir) == os.path.realpath(new.out_dir)
            try:
                w = KickWriter(new.out_dir, new.sample_rate, max_files=new.max_files, max_mb=new.max_mb,
                               clean_temps=not same, name_pattern=new.name_pattern)
            except OSError as e:
                log.error("cannot use the output folder %s (%s); kicks still go to %s", new.out_dir, e, prev.out_dir)
                new.writer = prev
                return
            if same and prev.retention and w.retention:
                w.adopt_ledger(prev)  # the same folder: the old writer's ledger, as it is in memory
            new.writer = self.writer = w

        self.post(switch)
