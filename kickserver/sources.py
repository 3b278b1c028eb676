"""Variation sources: which file a /kick/variation may read, opened once, checked on the descriptor, decoded.

A client names a source as a bare file name in the output folder, or as an absolute path under the
output folder or a read root. `open_source` turns that name into an open descriptor, or refuses it
with a one-line reason (SourceError):

1. The name itself: no NUL; a bare name has no separator and does not start with "."; an absolute
   path has no ".." and lies under a root, component by component (`out-evil` is not under `out`).
2. Links resolved (realpath); the real path must lie under a root's real path.
3. `open(O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)` on that real path, once: a link swapped in
   as its last component fails to open, and a FIFO without a writer opens at once instead of
   blocking (then step 4 refuses it).
4. `fstat` on the descriptor: a regular file only (FIFOs, devices, sockets and directories are
   refused), at most MAX_SOURCE_BYTES.
5. The descriptor's own path (/proc/self/fd/N) must still lie under a root: a folder swapped for a
   link between steps 2 and 3 is caught here.
6. The header, read from the descriptor: at most MAX_SOURCE_S long and MAX_SOURCE_SAMPLES samples, at a
   sample rate within kickmodel.clips.MIN_RATE..MAX_RATE (the bounds training files have too).

The receive loop calls `open_source`, so a refusal is answered at once; the worker later calls
`Source.decode`, which reads the same descriptor (never the path again), checks the bounds again
(the file may have grown in place meanwhile) and closes it. Nothing here can block on a source.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from kickmodel import clips
from kickmodel.wavfile import MAX_COMMENT_CHARS

# a source is decoded whole: refuse long files before reading them (the bounds training files have too)
MAX_SOURCE_S = clips.MAX_SECONDS
MAX_SOURCE_BYTES = 64 << 20
MAX_SOURCE_SAMPLES = clips.MAX_SAMPLES  # frames x channels decoded at most (32 MB of float32)
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


# (the link's target is not named: the reply may go to a forged source address)
LINKS_OUT = ("source links out of the output folder and read roots; name the file it links to by its absolute path "
             "instead, in a folder kickserver reads (start it with --read-root FOLDER; read_roots in its config)")


class SourceError(ValueError):
    """A source that may not or cannot be read; the message is the reply's reason."""


class SourceRefused(SourceError):
    """The name is not allowed, or what it names is not a regular file under the roots."""


class SourceTooBig(SourceError):
    """A source too long or too large to decode whole."""


def shown(name: str) -> str:
    """A client-given name as it appears in a reason: at most 80 characters."""
    name = str(name)
    return name if len(name) <= 80 else name[:77] + "..."


def within(path: Path, root: Path) -> bool:
    """path lies under root (or is root), compared by path components, never by string prefix."""
    try:
        Path(path).relative_to(root)
        return True
    except ValueError:
        return False


def resolve_source(source: str, out_dir: Path, read_roots: list[Path]) -> Path:
    """The real path a /kick/variation names (steps 1 and 2 of the module doc), or SourceRefused.

    Only a name check: what is opened is decided by `open_source`, on the descriptor."""
    if not source or "\0" in source:
        raise SourceRefused("source is empty" if not source else "source contains a NUL character")
    roots = [Path(out_dir)] + [Path(r) for r in read_roots]
    if os.path.isabs(source):
        p = Path(source)
        if ".." in p.parts:
            raise SourceRefused("source may not contain '..'")
        if not any(within(p, r) for r in roots):
            raise SourceRefused(f"source must be a file name in the output folder or a path under a read root; to "
                                f"read files in {shown(str(p.parent))}, start kickserver with --read-root "
                                f"{shown(str(p.parent))} (read_roots in its config)")
        candidates = roots
    else:
        if "/" in source or "\\" in source or source in (".", "..") or source.startswith("."):
            raise SourceRefused("source must be a bare file name in the output folder or an absolute path "
                                "under a read root (kickserver --read-root FOLDER)")
        p = Path(out_dir) / source
        candidates = [Path(out_dir)]
    try:
        real = p.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise SourceRefused(f"source {shown(source)} does not exist") from None
    except (OSError, RuntimeError) as e:
        raise SourceRefused(f"source {shown(source)} cannot be opened ({_why(e)})") from None
    if not any(within(real, output_root(r) if r == Path(out_dir) else _real(r)) for r in candidates):
        raise SourceRefused(LINKS_OUT)
    return real


def _real(p: Path) -> Path:
    try:
        return Path(p).resolve()
    except (OSError, RuntimeError):
        return Path(p)


# The output folder as a read root is the folder the writer opened (kickserver.writer.KickWriter pins its real path
# then), not whatever its path points to now: a folder swapped for a link widened the read root to the link's target
# before. By configured path; at most MAX_PINNED (one per SIGHUP that changed the folder).
_pinned: dict[str, Path] = {}
MAX_PINNED = 64


def pin_output(out_dir: Path, real: Path) -> None:
    """The real path of the output folder out_dir as it was opened for writing."""
    _pinned.pop(str(Path(out_dir)), None)
    _pinned[str(Path(out_dir))] = Path(real)
    while len(_pinned) > MAX_PINNED:
        _pinned.pop(next(iter(_pinned)))


def output_root(out_dir: Path) -> Path:
    """The output folder's real path as a read root: as pinned when it was opened, else as it resolves now."""
    return _pinned.get(str(Path(out_dir))) or _real(Path(out_dir))


def _why(e: BaseException) -> str:
    return str(getattr(e, "strerror", None) or e)


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _fd_path(fd: int) -> Path | None:
    """The path the kernel has for an open descriptor (Linux), or None where it cannot say."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return Path(target.removesuffix(" (deleted)")) if target.startswith("/") else None


class Source:
    """An open, checked variation source. Decode it once with `decode`; `close` is safe to call twice."""

    def __init__(self, fd: int, path: Path, name: str) -> None:
        self._fd: int | None = fd
        self.path = path  # the real path it was opened by (for tags and messages; never opened again)
        self.name = name  # the file name, for reasons
        self.comment: str | None = None  # its RIFF INFO comment once decoded (at most MAX_COMMENT_CHARS; else None)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:  # a backstop: every path that drops a Source closes it first
        self.close()

    # ------------------------------------------------------------ checks on the descriptor
    def check(self) -> None:
        """Steps 4 and 6 of the module doc, on the open descriptor. Raises SourceError."""
        fd = self._require()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceRefused(f"source {shown(self.name)} is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > MAX_SOURCE_BYTES:
            raise SourceTooBig(f"source {shown(self.name)} is {st.st_size / (1 << 20):.0f} MB on disk; "
                               f"at most {MAX_SOURCE_BYTES >> 20} MB")
        if st.st_size == 0:
            raise SourceRefused(f"cannot use source {shown(self.name)}: empty file")
        with self._soundfile() as snd:
            self._check_header(snd.frames, snd.samplerate, snd.channels)

    def _check_header(self, frames: int, rate: int, channels: int) -> None:
        if rate <= 0 or channels <= 0:
            raise SourceRefused(f"cannot use source {shown(self.name)}: its header is malformed")
        if not clips.MIN_RATE <= rate <= clips.MAX_RATE:  # any rate within is resampled at a bounded cost
            raise SourceRefused(f"cannot use source {shown(self.name)}: its sample rate {rate} Hz is outside "
                                f"{clips.MIN_RATE}..{clips.MAX_RATE} Hz; convert it to 44100 or 48000 Hz")
        seconds = frames / rate
        if seconds > MAX_SOURCE_S:
            raise SourceTooBig(f"source {shown(self.name)} is {seconds:.1f} s long; at most {MAX_SOURCE_S:g} s")
        if frames * channels > MAX_SOURCE_SAMPLES:
            raise SourceTooBig(f"source {shown(self.name)} has {channels} channels x {frames} frames; at most "
                               f"{MAX_SOURCE_SAMPLES} samples in all")

    def _require(self) -> int:
        if self._fd is None:
            raise SourceError(f"source {shown(self.name)} was already read")
        return self._fd

    def _soundfile(self):  # noqa: ANN202 - a soundfile.SoundFile
        """The descriptor as a SoundFile, read from its start; libsndfile reads the descriptor itself (no
        Python callbacks), and the descriptor stays open when the SoundFile closes."""
        import soundfile as sf

        fd = self._require()
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            return sf.SoundFile(fd, closefd=False)
        except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
            msg = str(getattr(e, "error_string", None) or e).strip()
            raise SourceRefused(f"cannot use source {shown(self.name)}: not a sound file it can read ({msg})") from None

    # ------------------------------------------------------------ decoding
    def decode(self) -> tuple[np.ndarray, int]:
        """(float32 mono samples, sample rate) from the descriptor, with the bounds checked again; closes it."""
        try:
            self.check()
            with self._soundfile() as snd:
                self._check_header(snd.frames, snd.samplerate, snd.channels)
                data = snd.read(dtype="float32", always_2d=True)
                rate = int(snd.samplerate)
                self.comment = _comment(snd)
        except OSError as e:
            raise SourceRefused(f"cannot read source {shown(self.name)}: {_why(e)}") from None
        except SourceError:
            raise
        except Exception as e:  # noqa: BLE001 - libsndfile's errors on a malformed file
            raise SourceRefused(f"cannot use source {shown(self.name)}: {_why(e)}") from None
        finally:
            self.close()
        if data.shape[0] == 0:
            raise SourceRefused(f"cannot use source {shown(self.name)}: no samples")
        return data.mean(axis=1, dtype=np.float64).astype(np.float32), rate


def _comment(snd) -> str | None:  # noqa: ANN001 - a soundfile.SoundFile
    """The file's comment string (libsndfile's; a WAV's RIFF INFO ICMT), None when it has none or one longer than a
    kick's tags ever are (wavfile.MAX_COMMENT_CHARS): what a locate reads the kick's making from."""
    try:
        text = snd.comment
    except Exception:  # noqa: BLE001 - a string libsndfile cannot give is no comment
        return None
    return text if isinstance(text, str) and 0 < len(text) <= MAX_COMMENT_CHARS else None


def open_source(source: str, out_dir: Path, read_roots: list[Path]) -> Source:
    """The checked, open source a /kick/variation names (the module doc's six steps). Raises SourceError."""
    real = resolve_source(source, out_dir, read_roots)
    roots = [output_root(Path(out_dir))] + [_real(Path(r)) for r in read_roots]
    if not os.path.isabs(source):
        roots = roots[:1]
    try:
        fd = os.open(real, OPEN_FLAGS)
    except FileNotFoundError:
        raise SourceRefused(f"source {shown(source)} does not exist") from None
    except OSError as e:  # ELOOP: a link swapped in since it was resolved; ENXIO: a socket
        raise SourceRefused(f"source {shown(source)} cannot be opened ({_why(e)})") from None
    src = Source(fd, real, real.name)
    try:
        where = _fd_path(fd)
        if where is not None and not any(within(where, r) for r in roots):
            raise SourceRefused(LINKS_OUT)
        src.check()
    except OSError as e:
        src.close()
        raise SourceRefused(f"source {shown(source)} cannot be read ({_why(e)})") from None
    except BaseException:
        src.close()
        raise
    return src
