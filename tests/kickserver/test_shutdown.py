"""SIGTERM: no partial file, queued requests answered 'shutting down', exit 0 within 10 s; sd_notify."""

from __future__ import annotations

import signal
import socket
import time

import pytest
import soundfile as sf
from daemon_util import build_message, models_folder, parse_replies, start_daemon


@pytest.fixture
def notify_socket(tmp_path):
    path = tmp_path / "notify.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(0.1)
    yield s, path
    s.close()


def drain(sock: socket.socket, for_s: float = 0.3) -> list[str]:
    """sd_notify datagrams that arrived so far or within for_s seconds."""
    out = []
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        try:
            out.append(sock.recv(4096).decode())
        except (TimeoutError, BlockingIOError):
            pass
    return out


def test_sigterm_during_a_batch(tmp_path, tiny_artifact, notify_socket):
    nsock, npath = notify_socket
    models = models_folder(tmp_path / "models", tiny_artifact)
    d = start_daemon(tmp_path, models, extra_args=["--max-steps", "1000", "--max-batch", "8"],
                     env={"NOTIFY_SOCKET": str(npath), "WATCHDOG_USEC": "400000"})
    with d:
        msgs = drain(nsock)
        assert any("READY=1" in m for m in msgs), msgs
        assert any("WATCHDOG=1" in m for m in msgs + drain(nsock, 0.5)), msgs
        client = d.socket()
        try:
            # a long batch (8 kicks x 1000 steps) and more kicks queued behind it
            client.sendto(build_message("/kick/generate", (8, "steps", 1000, "id", 1)), (d.host, d.port))
            client.sendto(build_message("/kick/generate", (4, "steps", 1000, "sampler", "ddim", "id", 2)),
                          (d.host, d.port))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # wait until the batch is on the device
                (a, p), = d.send("/kick/status")
                if p[2] >= 12:
                    break
                time.sleep(0.02)
            assert p[2] >= 12, p
            time.sleep(0.2)
            t0 = time.monotonic()
            d.signal(signal.SIGTERM)
            d.proc.wait(timeout=15)
            took = time.monotonic() - t0
            replies = []
            client.settimeout(1.0)
            while len(replies) < 12:
                try:
                    data, _ = client.recvfrom(65536)
                except TimeoutError:
                    break
                replies.extend(parse_replies(data))
        finally:
            client.close()
    assert d.proc.returncode == 0, d.stderr_text()
    assert took < 10, took
    print(f"stopped {took:.2f} s after SIGTERM")
    assert len(replies) == 12, replies
    by_id = {1: 0, 2: 0}
    for a, p in replies:
        assert a == "/kick/done" or (a == "/kick/error" and p[1] == "shutting down"), (a, p)
        by_id[p[0]] += 1
    assert by_id == {1: 8, 2: 4}
    assert sum(1 for _, p in replies if p[0] == 2 and p[1] == "shutting down") == 4  # queued ones
    assert any(p[0] == 1 and p[1] == "shutting down" for _, p in replies)  # the batch on the device was cut short
    leftovers = [f.name for f in d.out_dir.iterdir() if f.name.startswith(".") or not f.name.endswith(".wav")]
    assert leftovers == []
    for f in d.out_dir.glob("*.wav"):  # whatever landed is complete
        assert sf.info(f).frames == 4096
    msgs = drain(nsock)
    assert any("STOPPING=1" in m for m in msgs), msgs
    assert "Traceback" not in d.stderr_text()


def test_sigterm_when_idle_exits_zero_fast(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models) as d:
        (a, _), = d.send("/kick/generate", "steps", 2)
        assert a == "/kick/done"
        t0 = time.monotonic()
        rc = d.terminate(timeout=15)
        assert rc == 0 and time.monotonic() - t0 < 10
