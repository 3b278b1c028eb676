"""sd_notify over a real AF_UNIX datagram socket: the Notifier alone, then the daemon under a pretend systemd."""

from __future__ import annotations

import logging
import os
import signal
import socket
import statistics
import struct
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kickserver.notify import Notifier


@dataclass
class Message:
    t: float  # time.monotonic() at arrival
    fields: dict[str, str]
    pid: int  # the sender's pid, from SCM_CREDENTIALS (what systemd checks for NotifyAccess=main)
    raw: bytes


@dataclass
class NotifyListener:
    """What systemd's end of $NOTIFY_SOCKET sees."""

    sock: socket.socket
    address: str  # the value for $NOTIFY_SOCKET
    messages: list[Message] = field(default_factory=list)

    def receive(self, timeout: float) -> Message | None:
        self.sock.settimeout(timeout)
        try:
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except TimeoutError:
            return None
        pid = -1
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        m = Message(time.monotonic(), fields, pid, data)
        self.messages.append(m)
        return m

    def collect(self, seconds: float) -> list[Message]:
        out, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            m = self.receive(left)
            if m is not None:
                out.append(m)
        return out


def _listener(sock: socket.socket, address: str) -> NotifyListener:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    return NotifyListener(sock, address)


@pytest.fixture
def notify_socket(tmp_path):
    path = tmp_path / "notify.sock"
    if len(os.fsencode(str(path))) > 100:  # sun_path holds 108 bytes
        path = Path(tempfile.mkdtemp(prefix="ks-notify-")) / "n.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    yield _listener(sock, str(path))
    sock.close()


# ------------------------------------------------------------ the Notifier


def test_disabled_outside_systemd():
    n = Notifier({})
    assert not n.enabled
    assert n.ready("x") is False and n.status("x") is False and n.stopping() is False
    assert n.start_watchdog() is False
    n.stop_watchdog()
    n.close()


def test_ready_status_stopping_extend(notify_socket):
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address})
    assert n.enabled
    assert n.extend_timeout(90_000_000)
    assert n.ready("serving tiny on cpu")
    assert n.status("line one\nline two")
    assert n.stopping()
    got = [notify_socket.receive(2) for _ in range(4)]
    assert [m.raw for m in got] == [b"EXTEND_TIMEOUT_USEC=90000000", b"READY=1\nSTATUS=serving tiny on cpu",
                                    b"STATUS=line one line two", b"STOPPING=1"]
    assert all(m.pid == os.getpid() for m in got)
    n.close()


def test_reloading_carries_a_monotonic_timestamp(notify_socket):
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address})
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert n.reloading("re-reading config")
    m = notify_socket.receive(2)
    assert m.fields["RELOADING"] == "1" and m.fields["STATUS"] == "re-reading config"
    assert before <= int(m.fields["MONOTONIC_USEC"]) <= before + 5_000_000
    n.close()


def test_abstract_namespace():
    name = f"kickserver-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    try:
        listener = _listener(sock, "@" + name)
        n = Notifier({"NOTIFY_SOCKET": listener.address})
        assert n.ready()
        assert listener.receive(2).raw == b"READY=1"
        n.close()
    finally:
        sock.close()


def test_watchdog_pings_at_half_the_timeout(notify_socket):
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "200000"})
    assert n.watchdog_interval == pytest.approx(0.1)
    t0 = time.monotonic()
    assert n.start_watchdog()
    got = notify_socket.collect(0.75)
    n.stop_watchdog()
    assert all(m.raw == b"WATCHDOG=1" for m in got)
    assert got and got[0].t - t0 < 0.3, "the first ping goes out at once"
    gaps = [b.t - a.t for a, b in zip(got, got[1:])]
    assert 4 <= len(got) <= 10, gaps
    assert 0.06 <= statistics.median(gaps) <= 0.2, gaps
    assert notify_socket.collect(0.3) == [], "pings after stop_watchdog()"
    n.close()


@pytest.mark.parametrize("env, expect", [
    ({}, False),
    ({"WATCHDOG_USEC": "0"}, False),
    ({"WATCHDOG_USEC": "junk"}, False),
    ({"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"}, False),  # meant for another process
    ({"WATCHDOG_USEC": "200000", "WATCHDOG_PID": str(os.getpid())}, True),
])
def test_watchdog_only_when_meant_for_this_process(notify_socket, env, expect):
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address, **env})
    assert n.start_watchdog() is expect
    n.close()


def test_watchdog_skips_pings_while_unhealthy(notify_socket):
    healthy = threading.Event()
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "100000"})
    n.start_watchdog(alive=healthy.is_set)
    assert notify_socket.collect(0.3) == [], "pinged while the health check said no"
    healthy.set()
    assert notify_socket.collect(0.3), "no pings once healthy"
    n.close()


def test_send_failure_never_raises_and_logs_once(tmp_path, caplog):
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens.sock"), "WATCHDOG_USEC": "50000"})
    with caplog.at_level(logging.WARNING, logger="kickserver.notify"):
        assert n.ready("x") is False
        assert n.status("y") is False
        n.start_watchdog()
        time.sleep(0.2)
        n.stop_watchdog()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "nobody-listens.sock" in warnings[0].getMessage()
    n.close()


def test_unusable_address_disables(caplog):
    with caplog.at_level(logging.WARNING, logger="kickserver.notify"):
        n = Notifier({"NOTIFY_SOCKET": "relative/path", "WATCHDOG_USEC": "100000"})
    assert not n.enabled and n.start_watchdog() is False
    assert "relative/path" in caplog.text


# ------------------------------------------------------------ the daemon under a pretend systemd


def _port_of(pid: int) -> int:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    i = len(argv) - 1 - argv[::-1].index(b"--port")
    return int(argv[i + 1])


@pytest.mark.slow
def test_daemon_ready_watchdog_stopping(tmp_path, tiny_artifact, notify_socket):
    """READY=1 only once the daemon answers; WATCHDOG=1 about every WATCHDOG_USEC/2; STOPPING=1 on SIGTERM, exit 0.

    The moment READY=1 arrives a /kick/ping goes out from the listener thread: it must be answered, so READY
    cannot have been sent before the socket was bound and served.
    """
    from daemon_util import build_message, receive, start_daemon

    ready: dict[str, object] = {}
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            m = notify_socket.receive(0.2)
            if m is None or "READY" not in m.fields or "ready" in ready:
                continue
            ready["message"] = m
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind(("127.0.0.1", 0))
                s.sendto(build_message("/kick/ping", []), ("127.0.0.1", _port_of(m.pid)))
                ready["ping"] = receive(s, 1, 5.0)
            ready["ready"] = True

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    env = {"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "500000"}
    d = start_daemon(tmp_path, tiny_artifact.parent, env=env)
    try:
        deadline = time.monotonic() + 30
        while "ready" not in ready and time.monotonic() < deadline and d.alive():
            time.sleep(0.05)
        assert "ready" in ready, f"no READY=1 from the daemon:\n{d.stderr_text()}"
        assert [a for a, _ in ready["ping"]] == ["/kick/pong"], "READY=1 came before the daemon answered"
        first = ready["message"]
        assert first.pid == d.proc.pid, "READY=1 must come from the main process (NotifyAccess=main)"
        assert "cpu" in first.fields.get("STATUS", ""), "STATUS= should say which device serves"

        time.sleep(2.5)  # the listener thread keeps collecting
        pings = [m for m in notify_socket.messages if m.fields.get("WATCHDOG") == "1" and m.t >= first.t]
        gaps = [b.t - a.t for a, b in zip(pings, pings[1:])]
        assert len(pings) >= 5, f"{len(pings)} WATCHDOG=1 in 2.5 s after READY=1 (expected about 10)"
        assert 0.15 <= statistics.median(gaps) <= 0.4, gaps
        assert max(gaps) < 1.0, f"a gap of {max(gaps):.2f} s would risk the 0.5 s watchdog: {gaps}"
        assert all(m.pid == d.proc.pid for m in pings)

        t_term = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(timeout=30)
        time.sleep(0.3)  # let the listener drain the socket
        stopping = [m for m in notify_socket.messages if m.fields.get("STOPPING") == "1"]
        assert rc == 0, d.stderr_text()
        assert stopping and stopping[0].t >= t_term, f"no STOPPING=1 after SIGTERM:\n{d.stderr_text()}"
    finally:
        stop.set()
        d.terminate(timeout=10)
        thread.join(timeout=2)
