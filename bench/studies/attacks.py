"""Attacks on a running daemon over loopback, measured before and after their fixes (the README's items 14-16, and
work priced in kicks).

    python -m bench.studies.attacks                       # every measurement against this tree's daemon
    python -m bench.studies.attacks --only flood,amplify  # some of them
    python -m bench.studies.attacks --tree /tmp/before    # the same against another checkout (e.g. `git archive` of a
                                                  # commit), for a before/after comparison

- flood: four sockets on 127.0.0.1 (four source ports, one host) each send `/kick/generate 16 steps 200`
  twice; then a client on 127.0.0.2 (another host) asks for one kick, retrying after each `busy` every 0.5 s.
  Reports how long that other host waited for its kick and how many `busy` it got. The bundled model.
- budget: a victim address (127.0.0.1) spends its reply budget with /kick/models, 4,100 datagrams from other
  loopback addresses follow, then the victim asks again. Reports the bytes the victim got (both copies: its
  source port and the reply port) against the cap, burst + rate x elapsed time.
- amplify: malformed datagrams (`/\\0\\0\\0`, `,Z`, no type tags, a truncated argument, an empty bundle...),
  each from a fresh socket: the bytes of every reply (both copies) per byte sent.

- locates (work priced in kicks): the shipped kick-synth model; one bundle of 32 `/kick/locate` (the starter kit's
  first 32 kicks, one datagram) from 127.0.0.1, then one kick from 127.0.0.2. Reports how many were located and
  refused, how long the worker was held (the bundle to its last reply), after how many locates the other host's
  kick came and how long it waited; then `/kick/model` of the same model with its served fit at 2000 iterations
  (estimated 950 GFLOP a fit, under the 1,000 GFLOP a kick may cost): refused, or swapped in and one locate timed.

Item 17 (a models folder of seven artifacts that do not load and ten with 7.6 MB headers: /kick/models lists
exactly what loads while /kick/ping stays answered) was measured here too; tests/kickserver/test_reliability.py's
test_models_lists_what_loads_and_checking_never_stalls_the_daemon builds the same folder and bounds the same
figures, so this study no longer repeats it (its 2026-12-04 figures stay in bench/results/attacks-cpu.json).

Results go to ~/.cache/kickserver/bench/attacks-cpu.json (or --out) with the date, the machine and the tree.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import cpu_model, random_artifact, user_results, write_json
from bench.latency import free_port
from kickserver.client import build_message, parse_replies

REPO = Path(__file__).resolve().parents[2]


class Daemon:
    """`python -m kickserver serve` from `tree`, on free loopback ports, until stop()."""

    def __init__(self, tree: Path, work: Path, models: Path, model: str, extra: list[str] = (),
                 threads: int | None = None, wait_ready: bool = True) -> None:
        self.port, self.reply_port = free_port(), free_port()
        while self.reply_port == self.port:
            self.reply_port = free_port()
        cfg = work / "empty.toml"
        cfg.write_text("")
        self.log = work / f"daemon-{self.port}.log"
        cmd = [sys.executable, "-m", "kickserver", "serve", "--config", str(cfg), "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(self.port), "--reply-port", str(self.reply_port),
               "--out", str(work / "out"), "--models", str(models), "--model", model, *extra]
        if threads is not None:
            cmd += ["--threads", str(threads)]
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(tree))
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(cmd, cwd=str(tree), env=env, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.started = time.monotonic()
        if wait_ready:
            self.wait_ready()

    def wait_ready(self, timeout: float = 120.0) -> float:
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            s.settimeout(0.2)
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise SystemExit(f"the daemon exited with {self.proc.returncode}:\n{self.log.read_text()}")
                s.sendto(build_message("/kick/ping", []), ("127.0.0.1", self.port))
                try:
                    if parse_replies(s.recvfrom(65536)[0])[0][0] == "/kick/pong":
                        return time.monotonic() - self.started
                except TimeoutError:
                    pass
        raise SystemExit(f"the daemon did not answer within {timeout:.0f} s:\n{self.log.read_text()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def _sock(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
    s.bind((host, port))
    return s


def _drain(socks: list[socket.socket], for_s: float) -> list[tuple[float, int, list]]:
    """(time, bytes, messages) of every datagram that arrives on socks within for_s seconds."""
    import select

    got = []
    deadline = time.monotonic() + for_s
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(socks, [], [], left)
        for s in ready:
            try:
                data = s.recv(65536)
            except OSError:
                continue
            got.append((time.monotonic(), len(data), parse_replies(data)))
    return got


def _drain_until_one(socks: list[socket.socket], timeout: float) -> list[tuple[float, int, list]]:
    """The first datagram to arrive on socks within timeout seconds (as _drain gives it), or none."""
    import select

    ready, _, _ = select.select(socks, [], [], timeout)
    if not ready:
        return []
    data = ready[0].recv(65536)
    return [(time.monotonic(), len(data), parse_replies(data))]


# ------------------------------------------------------------------ flood (item 14)


def flood(tree: Path, work: Path, threads: int | None) -> dict:
    models = work / "models-flood"
    models.mkdir(exist_ok=True)
    d = Daemon(tree, work, models, "default", threads=threads)
    try:
        flooders = [_sock() for _ in range(4)]
        for rep in range(2):
            for i, s in enumerate(flooders):
                s.sendto(build_message("/kick/generate", [16, "steps", 200, "id", 100 + 10 * i + rep]),
                         ("127.0.0.1", d.port))
        time.sleep(0.3)  # the flood is queued
        other = _sock("127.0.0.2")
        t0 = time.monotonic()
        busy, done_at = 0, None
        while done_at is None and time.monotonic() - t0 < 120:
            other.sendto(build_message("/kick/generate", ["id", 1]), ("127.0.0.1", d.port))
            got = [m for _, _, ms in _drain_until_one([other], 120.0) for m in ms]
            if got and got[0][0] == "/kick/done":
                done_at = time.monotonic()
            elif got and got[0][0] == "/kick/error" and str(got[0][1][1]).startswith("busy"):
                busy += 1
                time.sleep(0.5)
            else:
                raise SystemExit(f"unexpected reply to the other host: {got}")
        return {"other_host_wait_s": round(done_at - t0, 2) if done_at else None, "other_host_busy_replies": busy,
                "flood": "4 ports of 127.0.0.1 x 2 x /kick/generate 16 steps 200", "other": "127.0.0.2, 1 kick"}
    finally:
        d.stop()


# ------------------------------------------------------------------ the reply budget (item 15)


def _long_named_models(models: Path, tiny: Path, n: int = 30) -> None:
    for i in range(n):
        dst = models / f"{'m' * 100}-{i:02d}.safetensors"
        if not dst.exists():
            os.link(tiny, dst)


def budget(tree: Path, work: Path, tiny: Path) -> dict:
    models = work / "models-budget"
    models.mkdir(exist_ok=True)
    if not (models / "tiny.safetensors").exists():
        os.link(tiny, models / "tiny.safetensors")
    _long_named_models(models, tiny)  # /kick/models replies near 4 KB: the budget is spent in a few requests
    d = Daemon(tree, work, models, "tiny", threads=1)
    try:
        victim, listener = _sock(), _sock("127.0.0.1", d.reply_port)
        for _ in range(3):  # the listing is validated (after the fix: off the receive thread) before the flood
            victim.sendto(build_message("/kick/models", []), ("127.0.0.1", d.port))
            _drain([victim, listener], 1.0)
        time.sleep(5.0)  # the budget is full again
        t0 = time.monotonic()
        got = []
        for _ in range(200):
            victim.sendto(build_message("/kick/models", []), ("127.0.0.1", d.port))
        got += _drain([victim, listener], 0.3)
        spent = sum(n for _, n, _ in got)
        ping = build_message("/kick/ping", [])
        for i in range(4100):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((f"127.1.{i // 250}.{i % 250 + 1}", 0))
                s.sendto(ping, ("127.0.0.1", d.port))
        got += _drain([victim, listener], 0.05)
        for _ in range(200):
            victim.sendto(build_message("/kick/models", []), ("127.0.0.1", d.port))
        got += _drain([victim, listener], 0.5)
        elapsed = max(t for t, _, _ in got) - t0 if got else 0.0
        drawn = sum(n for _, n, _ in got)
        cap = 128 * 1024 + 32 * 1024 * elapsed
        return {"victim_bytes": drawn, "spent_before_eviction": spent, "elapsed_s": round(elapsed, 2),
                "cap_bytes": round(cap), "over_cap": drawn > cap}
    finally:
        d.stop()


MALFORMED: list[tuple[str, bytes]] = [
    ("/\\0\\0\\0", b"/\0\0\0"),
    (",Z", b"/kick/generate\0\0,Z\0\0"),
    (",iZ 3", b"/kick/generate\0\0,iZ\0" + struct.pack(">i", 3)),
    ("unknown address, 20 B", b"/kick/generat\0\0\0,\0\0\0"),
    ("truncated int", b"/kick/generate\0\0,i\0\0"),
    ("bad UTF-8 address", b"/\xff\xfe\0"),
    ("unknown address, 8 B", b"/x\0\0,\0\0\0"),
    ("empty bundle", b"#bundle\0" + b"\0" * 7 + b"\1"),
    ("bundle of junk", b"#bundle\0" + b"\0" * 7 + b"\1" + struct.pack(">i", 4) + b"/\0\0\0"),
]
# well-formed requests to addresses the daemon serves, refused for their arguments: their reasons stay whole
REFUSED: list[tuple[str, bytes]] = [
    ("/kick/ping 1", build_message("/kick/ping", [1])),
    ("/kick/generate foo bar", build_message("/kick/generate", ["foo", "bar"])),
]


def amplify(tree: Path, work: Path, tiny: Path) -> dict:
    models = work / "models-amplify"
    models.mkdir(exist_ok=True)
    if not (models / "tiny.safetensors").exists():
        os.link(tiny, models / "tiny.safetensors")
    d = Daemon(tree, work, models, "tiny", threads=1)
    rows = []
    try:
        listener = _sock("127.0.0.1", d.reply_port)
        for name, data in MALFORMED + REFUSED:
            with _sock() as s:
                s.sendto(data, ("127.0.0.1", d.port))
                got = _drain([s, listener], 0.4)
            out = sum(n for _, n, _ in got)
            rows.append({"datagram": name, "malformed": (name, data) in MALFORMED, "bytes_in": len(data),
                         "bytes_out": out,
                         "out_per_in": round(out / len(data), 1),
                         "replies": [m for _, _, ms in got for m in ms][:2]})
    finally:
        d.stop()
    return {"rows": rows, "worst_malformed_out_per_in": max(r["out_per_in"] for r in rows if r["malformed"]),
            "worst_refused_out_per_in": max(r["out_per_in"] for r in rows if not r["malformed"])}


# ------------------------------------------------------------------ priced work: a bundle of fits


KICK_SYNTH = REPO / "kickserver" / "models" / "kick-synth.safetensors"
KIT = REPO / "kickserver" / "data" / "kicks"


def _bundle(*messages: bytes) -> bytes:
    return b"#bundle\0" + b"\0" * 7 + b"\1" + b"".join(struct.pack(">i", len(m)) + m for m in messages)


def costly_fit(dst: Path) -> Path:
    """The shipped kick-synth model with its served fit at 2000 iterations (fit.serve_iters and restart_iters, the
    most its config may ask): estimated 950 GFLOP a fit."""
    raw = KICK_SYNTH.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    head = raw[8:8 + n].decode().replace('\\"restart_iters\\": 40, \\"serve_iters\\": 120',
                                         '\\"restart_iters\\": 2000, \\"serve_iters\\": 2000').encode()
    head += b" " * (-len(head) % 8)
    dst.write_bytes(struct.pack("<Q", len(head)) + head + raw[8 + n:])
    return dst


def locates(tree: Path, work: Path, threads: int | None) -> dict:
    models = work / "models-locates"
    models.mkdir(exist_ok=True)
    if not (models / "kick-synth.safetensors").exists():
        os.link(KICK_SYNTH, models / "kick-synth.safetensors")
        costly_fit(models / "costly-fit.safetensors")
    d = Daemon(tree, work, models, "kick-synth", extra=["--read-root", str(KIT)], threads=threads)
    try:
        deadline = time.monotonic() + 120
        while "serving kick-synth on udp" not in d.log.read_text():  # warm (and, after the fix, timed)
            if time.monotonic() > deadline:
                raise SystemExit(f"the daemon never said it serves:\n{d.log.read_text()}")
            time.sleep(0.1)
        files = sorted(KIT.glob("*.flac"))[:32]
        datagram = _bundle(*[build_message("/kick/locate", [str(f)]) for f in files])
        a, b, status = _sock(), _sock("127.0.0.2"), _sock()
        t0 = time.monotonic()
        a.sendto(datagram, ("127.0.0.1", d.port))
        b.sendto(build_message("/kick/generate", ["seed", 1, "id", 7]), ("127.0.0.1", d.port))
        events: list[tuple[float, str, str, list]] = []
        idle_since = None
        while time.monotonic() - t0 < 1800:
            for t, _, ms in _drain([a, b], 0.5):
                for address, args in ms:
                    events.append((t - t0, "A" if address == "/kick/locate" or not args or args[0] != 7 else "B",
                                   address, args))
            status.sendto(build_message("/kick/status", []), ("127.0.0.1", d.port))
            got = [m for _, _, ms in _drain_until_one([status], 5.0) for m in ms]
            queued = got[0][1][2] if got and got[0][0] == "/kick/status" else None
            if queued == 0 and any(w == "B" for _, w, _, _ in events):
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 1.0:
                    break
            else:
                idle_since = None
        located = [e for e in events if e[2] == "/kick/locate"]
        busy = [e[3][1] for e in events if e[1] == "A" and e[2] == "/kick/error"]
        other = [e for e in events if e[1] == "B"]
        result = {"bundle_bytes": len(datagram), "located": len(located),
                  "busy_replies": busy[:1], "worker_held_s": round(located[-1][0], 1) if located else None,
                  "other_host_wait_s": round(other[0][0], 2) if other else None,
                  "other_host_reply": other[0][2] if other else None,
                  "located_before_other_host": sum(e[0] < other[0][0] for e in located) if other else None,
                  "prices_line": next((ln.split("kickserver.worker: ")[-1] for ln in d.log.read_text().splitlines()
                                       if "an encoding as" in ln), None)}
        c = _sock()
        t1 = time.monotonic()
        c.sendto(build_message("/kick/model", ["costly-fit"]), ("127.0.0.1", d.port))
        got = [m for _, _, ms in _drain_until_one([c], 120.0) for m in ms]
        result["costly_fit_model"] = {"reply": got[0] if got else None, "after_s": round(time.monotonic() - t1, 2)}
        if got and got[0][0] == "/kick/model":  # swapped in: one locate timed
            t1 = time.monotonic()
            c.sendto(build_message("/kick/locate", [str(files[0])]), ("127.0.0.1", d.port))
            got = [m for _, _, ms in _drain_until_one([c], 900.0) for m in ms]
            result["costly_fit_locate"] = {"reply": got[0] if got else None, "s": round(time.monotonic() - t1, 1)}
        return result
    finally:
        d.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=REPO, help="the source tree whose daemon runs (default this one)")
    ap.add_argument("--only", default="flood,budget,amplify,locates")
    ap.add_argument("--threads", type=int, default=None, help="the flood's daemon --threads (default: its own)")
    ap.add_argument("--out", type=Path, default=user_results() / "attacks-cpu.json")
    ns = ap.parse_args()
    result: dict = {"date": datetime.date.today().isoformat(), "machine": f"{cpu_model()}, {os.cpu_count()} cores",
                    "python": platform.python_version(), "tree": str(ns.tree)}
    with tempfile.TemporaryDirectory(prefix="ks-attacks-") as tmp:
        work = Path(tmp)
        tiny = random_artifact(work / "tiny.safetensors", "waveform_diffusion")
        for name in ns.only.split(","):
            t0 = time.monotonic()
            if name == "flood":
                result[name] = flood(ns.tree, work, ns.threads)
            elif name == "budget":
                result[name] = budget(ns.tree, work, tiny)
            elif name == "amplify":
                result[name] = amplify(ns.tree, work, tiny)
            elif name == "locates":
                result[name] = locates(ns.tree, work, ns.threads)
            else:
                raise SystemExit(f"unknown measurement {name!r}")
            print(name, f"({time.monotonic() - t0:.0f} s):", json.dumps(result[name], indent=1), flush=True)
    write_json(ns.out, result)
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
