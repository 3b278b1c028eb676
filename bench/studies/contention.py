"""One kick's latency on a shared desktop: idle, and while other processes keep every core busy.

    python -m bench.studies.contention                       # bundled model, CPU, the thread settings below
    python -m bench.studies.contention --reps 5 --variants default,1

For each variant the daemon is started (bench/latency.py's start), warmed, and one /kick/generate (the
model's default steps) is timed --reps times idle, then --reps times while `--load` processes (default:
one per core) spin in a busy loop at the same priority as the daemon. Variants: `default` (the daemon's
defaults), `N` (--threads N), `N-passive` / `N-active` (with OMP_WAIT_POLICY=PASSIVE / ACTIVE set for the
daemon), `N-spinK` (with GOMP_SPINCOUNT=K), `N-libgomp` (OMP_WAIT_POLICY set empty, which the daemon
keeps and libgomp ignores: its own default, spinning a while before sleeping). Prints medians and writes
OUT/contention-cpu.json (--out; default ~/.cache/kickserver/bench).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common, latency
from kickserver.client import Conversation

BUSY = "while True: pass"


def one_kick(conv: Conversation, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        replies, t = latency.timed(conv, "/kick/generate", timeout=120.0)
        if replies[0][0] != "/kick/done":
            raise SystemExit(f"unexpected reply {replies[0]}")
        times.append(t)
    return times


def _variant_env(name: str) -> tuple[int | None, dict[str, str]]:
    """`default` | `N` | `N-passive` (OMP_WAIT_POLICY=PASSIVE) | `N-active` | `N-spinK` (GOMP_SPINCOUNT=K) |
    `N-libgomp` (OMP_WAIT_POLICY empty: libgomp's own default, spin then sleep, what the daemon had before)."""
    if name == "default":
        return None, {}
    n, _, how = name.partition("-")
    env = {}
    if how == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    elif how == "active":
        env["OMP_WAIT_POLICY"] = "ACTIVE"
    elif how == "libgomp":
        env["OMP_WAIT_POLICY"] = ""
    elif how.startswith("spin"):
        env["GOMP_SPINCOUNT"] = how[4:]
    elif how:
        raise SystemExit(f"unknown variant {name!r}")
    return int(n), env


def run_variant(name: str, reps: int, load: int) -> dict:
    threads, env = _variant_env(name)
    saved = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    os.environ.update(env)
    ns = argparse.Namespace(device="cpu", models=None, model=None, threads=threads)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, log = latency.start(ns, Path(tmp))
        try:
            conv = latency.connect(port)
            one_kick(conv, 2)  # warm
            idle = one_kick(conv, reps)
            hogs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(load)]
            try:
                time.sleep(1.0)
                busy = one_kick(conv, reps)
            finally:
                for h in hogs:
                    h.send_signal(signal.SIGKILL)
                    h.wait()
            threads_line = next((ln for ln in log.read_text().splitlines() if "threads" in ln), "")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    row = {"variant": name, "idle_s": idle, "loaded_s": busy, "idle_median_s": statistics.median(idle),
           "loaded_median_s": statistics.median(busy), "daemon_log": threads_line}
    print(f"{name:>10}: idle median {row['idle_median_s']:.2f} s  loaded median {row['loaded_median_s']:.2f} s  "
          f"(loaded: {', '.join(f'{t:.2f}' for t in busy)})", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes (default: one per core)")
    ap.add_argument("--variants", default="default,1,2,2-passive")
    common.add_out_option(ap)
    ns = ap.parse_args()
    rows = [run_variant(v, ns.reps, ns.load) for v in ns.variants.split(",")]
    out = {"machine": {"cpus": os.cpu_count(), "processor": platform.processor(), "python": platform.python_version()},
           "when": time.strftime("%Y-%m-%d"), "reps": ns.reps, "load_processes": ns.load, "rows": rows}
    path = ns.out / "contention-cpu.json"
    common.write_json(path, out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
