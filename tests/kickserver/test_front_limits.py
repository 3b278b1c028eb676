"""Issue 32 items 1-5 and 8, through a running daemon: what one request may cost the receive loop, what a forged
source may draw, who gets a fair share, what a message without type tags may do, how much the output folder may
hold, and how much memory forged sources may take.

The receive loop's work is counted by tests/kickserver/probe_daemon.py, injected from outside the daemon (the same
counters on the code before each fix, which these tests failed): encodes, kit-map encodings, stats and listings of
files per datagram. Bounds are on those counts, never on the wall clock; loops are bounded and stop by themselves;
loopback only.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

from daemon_util import build_message, models_folder, parse_replies, start_daemon, wait_until


def probe(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _sock() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def ask(d, sock: socket.socket, address: str, *args, n: int = 1, timeout: float = 10.0) -> list:
    """Send one message from sock; the replies to it (up to n, or until timeout)."""
    sock.sendto(build_message(address, args), (d.host, d.port))
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n and (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data, _ = sock.recvfrom(65536)
        except (TimeoutError, socket.timeout):
            break
        got += parse_replies(data)
    return got


# ---------------------------------------------------------------- item 1: /kick/models with a full folder


def test_models_listing_costs_the_receive_loop_the_same_whatever_the_folder_holds(tmp_path, tiny_artifact):
    """Issue 32 item 1: 40 artifacts that load, with 120-character names (more than one datagram holds), beside 4,200
    junk artifacts (more than the 4,096 verdicts the loader kept): 20 /kick/models each cost the receive loop at most
    one encode and two stats (it rebuilt the reply once per name dropped, 9 encodes here, and stat'ed every file of
    the folder: 8,000+), and listing again never checks an artifact again (the evicted verdicts were re-checked by
    every listing, over and over)."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    loadable = [f"a{i:03d}" + "x" * 116 for i in range(40)]
    for name in loadable:
        shutil.copy(tiny_artifact, models / f"{name}.safetensors")
    for i in range(4200):
        (models / f"junk{i:05d}.safetensors").write_bytes(b"not an artifact")
    out = tmp_path / "probe.json"
    with start_daemon(tmp_path, models, model="tiny", probe=out, ready_timeout=120,
                      extra_args=["--reply-burst-kb", "4096"]) as d:
        s = _sock()
        try:
            def listed() -> bool:
                got = ask(d, s, "/kick/models", timeout=5)
                return bool(got) and got[0][0] == "/kick/models" and loadable[0] in got[0][1]
            assert d.wait_for_log("model(s) for /kick/models:", timeout=240), d.stderr_text()[-3000:]
            assert wait_until(listed, timeout=60), d.stderr_text()[-3000:]
            time.sleep(1.0)  # let the loader finish what the listings asked of it
            before = probe(out)
            for _ in range(20):
                (address, names), = ask(d, s, "/kick/models")
                assert address == "/kick/models" and names[:2] == loadable[:2], names[:3]
            assert wait_until(lambda: probe(out).get("datagrams", 0) >= before["datagrams"] + 20)
            time.sleep(1.0)
            after = probe(out)
        finally:
            s.close()
    per_request = {k: (after[k] - before[k]) / 20 for k in ("builds", "fs")}
    assert per_request["builds"] <= 1 and per_request["fs"] <= 2, (per_request, after)
    assert after["validations"] == before["validations"], (before, after)
    assert after["validations"] <= 4096 + 41, after
