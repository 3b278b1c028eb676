"""A round trip with liblo's command-line tools (Debian `liblo-tools`): an OSC implementation this project
did not write. `oscsend` sends the requests; `oscdump -L <reply-port>` shows the replies as the daemon sends
them to the reply port, one line each: timetag, address, type tags, values (strings in double quotes).
"""

from __future__ import annotations

import queue
import shlex
import shutil
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import soundfile as sf

from kickserver import __version__, osc_api

pytestmark = pytest.mark.skipif(
    shutil.which("oscsend") is None or shutil.which("oscdump") is None,
    reason="liblo's oscsend/oscdump are not installed (Debian: apt-get install liblo-tools)")

HOST = "127.0.0.1"  # not "localhost": liblo may pick ::1 and the daemon listens on IPv4 loopback


def oscsend(port: int, address: str, types: str = "", *values: object) -> None:
    cmd = ["oscsend", HOST, str(port), address]
    if types:
        cmd += [types, *map(str, values)]
    subprocess.run(cmd, check=True, timeout=10, stdin=subprocess.DEVNULL, capture_output=True)


class Dump:
    """A running `oscdump -L port`, its lines parsed to (address, types, values)."""

    def __init__(self, port: int) -> None:
        self.proc = subprocess.Popen(["oscdump", "-L", str(port)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.raw: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)

    def next(self, match, timeout: float = 30.0) -> tuple[str, str, list]:
        """The first message (address, types, values) for which match(...) is true, within timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching reply within {timeout} s; oscdump printed:\n{''.join(self.raw)}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            msg = parse_dump_line(line)
            if msg and match(*msg):
                return msg

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def parse_dump_line(line: str) -> tuple[str, str, list] | None:
    """`<timetag> <address> <types> <values...>` -> (address, types, values typed by their tags)."""
    words = shlex.split(line)
    if len(words) < 2 or not words[1].startswith("/"):
        return None
    address = words[1]
    types = words[2] if len(words) > 2 else ""
    raw = words[3:]
    assert len(raw) == len(types), line
    values = [int(v) if t == "i" else float(v) if t == "f" else v for t, v in zip(types, raw)]
    return address, types, values


@contextmanager
def dump(port: int):
    d = Dump(port)
    try:
        yield d
    finally:
        d.close()


def wait_for_pong(d: Dump, port: int) -> tuple[str, str, list]:
    """Ping until the pong shows up in oscdump (which also proves oscdump is listening)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        oscsend(port, osc_api.PING)
        try:
            return d.next(lambda a, t, v: a == osc_api.PONG, timeout=0.5)
        except AssertionError:
            continue
    raise AssertionError(f"no /kick/pong from the daemon; oscdump printed:\n{''.join(d.raw)}")


@pytest.mark.parametrize("types, values", [
    ("isisisi", (1, "seed", 7, "steps", 2, "id", 4201)),
    # the same request with every number a float, as Pd and some controllers send them
    ("fsfsfsf", (1.0, "seed", 7.0, "steps", 2.0, "id", 4202.0)),
], ids=["ints", "floats"])
def test_liblo_generate_and_receive_done(kick_daemon, types, values):
    request_id = int(values[-1])
    with dump(kick_daemon.reply_port) as d:
        assert wait_for_pong(d, kick_daemon.port) == (osc_api.PONG, "s", [__version__])
        oscsend(kick_daemon.port, osc_api.GENERATE, types, *values)
        address, tags, (rid, path, seed) = d.next(lambda a, t, v: a == osc_api.DONE and v[0] == request_id)
    assert tags == "isi"
    assert rid == request_id and seed == 7
    path = Path(path)
    assert path.is_absolute() and path.is_file() and path.parent == kick_daemon.out_dir.resolve()
    with sf.SoundFile(str(path)) as f:
        assert f.format == "WAV" and f.frames > 0
        assert "seed=7" in (f.comment or "").split()


def test_liblo_errors_and_queries(kick_daemon):
    with dump(kick_daemon.reply_port) as d:
        wait_for_pong(d, kick_daemon.port)
        # a request the daemon refuses: a bare string where count or a key/value pair belongs
        oscsend(kick_daemon.port, osc_api.GENERATE, "s", "bogus")
        address, tags, (rid, reason) = d.next(lambda a, t, v: a == osc_api.ERROR)
        assert tags == "is" and rid == -1 and reason
        # a refusal names the request's id when it has one
        oscsend(kick_daemon.port, osc_api.GENERATE, "sisi", "id", 77, "steps", 100000)
        address, tags, (rid, reason) = d.next(lambda a, t, v: a == osc_api.ERROR and v[0] == 77)
        assert tags == "is" and "steps" in reason
        # an address the daemon does not know
        oscsend(kick_daemon.port, "/kick/nope")
        address, tags, (rid, reason) = d.next(lambda a, t, v: a == osc_api.ERROR and "unknown address" in v[1])
        assert tags == "is"
        oscsend(kick_daemon.port, osc_api.STATUS)
        address, tags, values = d.next(lambda a, t, v: a == osc_api.STATUS)
        # why the model serves, then the memory it holds, come after the first four: a client that reads those is
        # unchanged
        assert tags == "ssiiss" and values[:2] == ["tiny", "cpu"] and values[4] == "pinned by --model", values
        assert values[5].startswith("cpu RSS ") and values[5].endswith(" MB"), values
        oscsend(kick_daemon.port, osc_api.MODELS)
        address, tags, values = d.next(lambda a, t, v: a == osc_api.MODELS)
        assert set(tags) == {"s"} and "tiny" in values
