"""JSON that a file supplies, parsed within bounds: the one way this project reads JSON it did not just write.

    doc = safejson.parse(text, max_bytes=1 << 20)              # BadJSON (a ValueError) with the reason
    doc = safejson.read(path, max_bytes=4096)                   # the file opened as variation sources are

Python's json parses nested arrays and objects by recursion: 10,000 brackets (20 KB) raise RecursionError,
which no caller expects (an artifact whose metadata was nested that deep made /kick/models answer
`internal error: RecursionError`, and a state file of 4 KB of them stopped the daemon from starting). So the
size is checked first, then the nesting depth, with strings (which may hold any bracket) blanked out,
before json.loads sees the text; any failure is a BadJSON naming the reason. Every file this project writes
nests a few levels (an artifact's config: 3; a safetensors header: 3), far below MAX_DEPTH.

`read` opens the file once with O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC (a link as the last
component fails to open; a FIFO opens at once instead of blocking), checks on the descriptor that it is a
regular file of at most max_bytes, and reads at most max_bytes + 1 bytes from it: a FIFO, a device or a
file that grows while being read is refused, never waited for.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

MAX_DEPTH = 32  # arrays and objects inside one another
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class BadJSON(ValueError):
    """JSON that is too large, too deeply nested or not JSON; the message says which, as a predicate ("not JSON
    (...)", "too deeply nested (...)"), so that "metadata config is " + message reads as a sentence."""


CHUNK = 1 << 20  # depth() scans this many bytes at a time: its memory is bounded by the chunk, not the text


def depth(data: bytes, chunk: int = CHUNK) -> int:
    """How deeply arrays and objects nest in JSON text (0 for a scalar), brackets inside strings aside.

    Linear in the size, in numpy (no regular expression: one over strings backtracks quadratically on a run of
    escaped quotes): a quote after an odd run of backslashes is escaped; every other quote opens or closes a
    string; a bracket counts where an even number of those came before it. Scanned `chunk` bytes at a time,
    carrying the level, whether a string is open and the run of backslashes across chunks, so an 8 MB header
    costs a few arrays of one chunk (~40 MB), not ~48 bytes per byte of text."""
    best = level = 0
    inside = 0  # 1 while a string is open at the chunk's start
    run = 0  # backslashes that ended the previous chunk
    for start in range(0, len(data), chunk):
        b = np.frombuffer(data, dtype=np.uint8, count=min(chunk, len(data) - start), offset=start)
        idx = np.arange(b.size, dtype=np.int64)
        last_plain = np.maximum.accumulate(np.where(b != ord("\\"), idx, -1))  # last non-backslash at or before i
        before = np.empty(b.size, dtype=np.int64)  # backslashes just before i
        before[0] = run
        before[1:] = idx[:-1] - last_plain[:-1] + np.where(last_plain[:-1] < 0, run, 0)
        quotes = (b == ord('"')) & (before % 2 == 0)
        q = np.cumsum(quotes, dtype=np.int64)
        outside = (q + inside) % 2 == 0
        opens = ((b == ord("[")) | (b == ord("{"))) & outside
        closes = ((b == ord("]")) | (b == ord("}"))) & outside
        levels = level + np.cumsum(opens.astype(np.int32) - closes.astype(np.int32), dtype=np.int64)
        best = max(best, int(levels.max()))
        level = int(levels[-1])
        inside = int((inside + q[-1]) % 2)
        run = run + b.size if last_plain[-1] < 0 else b.size - 1 - int(last_plain[-1])
    return best


def parse(data: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads of data (UTF-8), after checking its size and nesting depth. Raises BadJSON with the reason."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise BadJSON(f"too large ({len(raw)} bytes; at most {max_bytes})")
    d = depth(raw)
    if d > max_depth:
        raise BadJSON(f"too deeply nested ({d} levels of arrays and objects; at most {max_depth})")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadJSON(f"not JSON ({e})") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more digits than Python converts
        raise BadJSON(f"not usable JSON ({str(e)[:120]})") from None


def read_bytes(path: Path, *, max_bytes: int) -> bytes:
    """A small file's bytes, opened as the module doc says. FileNotFoundError when there is none; BadJSON when
    it is not a regular file or larger than max_bytes; other OSErrors (a link: ELOOP) as they come."""
    fd = os.open(Path(path), OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadJSON("not a regular file (a FIFO, a device, a socket or a folder)")
        if st.st_size > max_bytes:
            raise BadJSON(f"too large ({st.st_size} bytes; at most {max_bytes})")
        chunks, total = [], 0
        while total <= max_bytes:
            b = os.read(fd, max_bytes + 1 - total)
            if not b:
                break
            chunks.append(b)
            total += len(b)
        if total > max_bytes:
            raise BadJSON(f"too large (it grew past {max_bytes} bytes while being read)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read(path: Path, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON in a file (read_bytes, then parse). FileNotFoundError, BadJSON or another OSError."""
    return parse(read_bytes(path, max_bytes=max_bytes), max_bytes=max_bytes, max_depth=max_depth)
