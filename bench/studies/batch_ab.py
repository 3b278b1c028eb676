"""One kick against eight through the daemon, this tree beside a commit's, in one run: what does a batch buy?

    python -m bench.studies.batch_ab --before 0f4bf35 [--after REV] [--models default,kick-synth] [--rounds 3]
                                     [--reps 5] [--threads 0] [--out DIR]

`--before` is a commit: its tree is exported (`git archive`) into a temporary folder; the other tree is this
working tree, or `--after`'s commit exported likewise.
Each round starts, per shipped model and per tree (the tree that goes first alternating round by round, so a
machine that gets busier slows both alike), a fresh daemon on loopback from that tree (`python -m kickserver serve`
with the tree first on PYTHONPATH, the model's own default steps, --max-batch 8), warms it up with two requests of
each size, then times `/kick/generate 1` and `/kick/generate 8` alternately, `--reps` of each: from the request
sent to the last `/kick/done` received (every file renamed into place), as a musician waits for it. The client is
this tree's (the OSC contract is the same in both). Medians and p95 per model, tree and size, and eight / one, go
to <out>/batch-ab-cpu.json with the machine (--out: the user's bench folder unless given).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import common
from bench.studies.loop_ab import export_tree
from kickserver.client import Client

SHIPPED = common.REPO / "kickserver" / "models"


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(tree: Path, model: str, work: Path, threads: int) -> tuple[subprocess.Popen, Client]:
    """The daemon of `tree` serving the shipped `model` (copied into a models folder of its own), ready."""
    models = work / "models"
    models.mkdir(parents=True, exist_ok=True)
    src = tree / "kickserver" / "models" / f"{model}.safetensors"
    (models / src.name).write_bytes(src.read_bytes())
    cfg = work / "empty.toml"
    cfg.write_text("")
    port, reply_port = _free_port(), _free_port()
    cmd = [sys.executable, "-m", "kickserver", "serve", "--config", str(cfg), "--device", "cpu", "--port", str(port),
           "--reply-port", str(reply_port), "--out", str(work / "out"), "--models", str(models), "--model", model,
           "--max-batch", "8", "--queue-limit", "64", "--reply-rate-kb", "4096", "--reply-burst-kb", "4096"]
    if threads:
        cmd += ["--threads", str(threads)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(tree), OMP_WAIT_POLICY="PASSIVE",
               HOME=str(work), XDG_STATE_HOME=str(work / "state"))
    log = open(work / "daemon.log", "wb")
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    client = Client("127.0.0.1", port)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon of {tree} exited with {proc.returncode}:\n"
                             f"{(work / 'daemon.log').read_text()}")
        try:
            pong = client.send("/kick/ping", expect=1, timeout=0.5)
        except OSError:
            pong = []
        if pong and pong[0][0] == "/kick/pong":
            return proc, client
    proc.kill()
    raise SystemExit(f"the daemon of {tree} did not answer within 180 s")


def stop_daemon(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def timed(client: Client, count: int, seed: int) -> float:
    t0 = time.perf_counter()
    replies = client.send("/kick/generate", count, "seed", seed, expect=count, timeout=600)
    dt = time.perf_counter() - t0
    bad = [r for r in replies if r[0] != "/kick/done"]
    if len(replies) != count or bad:
        raise SystemExit(f"the daemon did not make {count} kicks: {bad or replies}")
    return dt


def one_daemon(tree: Path, model: str, reps: int, threads: int) -> dict[int, list[float]]:
    with tempfile.TemporaryDirectory(prefix="kickbench-batch-") as tmp:
        proc, client = start_daemon(tree, model, Path(tmp), threads)
        try:
            for i in range(2):
                timed(client, 1, 90 + i)
                timed(client, 8, 100 + 8 * i)
            times: dict[int, list[float]] = {1: [], 8: []}
            for i in range(reps):
                for n in (1, 8) if i % 2 == 0 else (8, 1):
                    times[n].append(timed(client, n, 1000 + 16 * i))
            return times
        finally:
            stop_daemon(proc)


def summary(times: list[float]) -> dict:
    return {"n": len(times), "median_s": statistics.median(times), "p95_s": float(np.percentile(times, 95)),
            "min_s": min(times), "max_s": max(times)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare with (its tree is exported)")
    ap.add_argument("--after", default=None, help="a commit to measure instead of this working tree")
    ap.add_argument("--models", default="default,kick-synth", help="shipped models, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5, help="requests of each size per daemon")
    ap.add_argument("--threads", type=int, default=0)
    common.add_out_option(ap)
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="kickbench-before-") as tmp:
        trees = {"before": export_tree(args.before, Path(tmp) / "before"),
                 "after": export_tree(args.after, Path(tmp) / "after") if args.after else common.REPO}
        times = {m: {t: {1: [], 8: []} for t in trees} for m in models}
        for r in range(args.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for m in models:
                for t in order:
                    got = one_daemon(trees[t], m, args.reps, args.threads)
                    for n in (1, 8):
                        times[m][t][n] += got[n]
                    print(f"round {r + 1}/{args.rounds} {m} {t}: one {statistics.median(got[1]) * 1e3:.0f} ms, "
                          f"eight {statistics.median(got[8]) * 1e3:.0f} ms", flush=True)
    rows = []
    for m in models:
        for t in ("before", "after"):
            one, eight = summary(times[m][t][1]), summary(times[m][t][8])
            rows.append({"model": m, "tree": t, "one_ms": 1e3 * one["median_s"], "eight_ms": 1e3 * eight["median_s"],
                         "eight_p95_ms": 1e3 * eight["p95_s"], "eight_over_one": eight["median_s"] / one["median_s"],
                         "one": one, "eight": eight})
    print(common.table(rows, [("model", "model", ""), ("tree", "tree", ""), ("one_ms", "one ms", ".0f"),
                              ("eight_ms", "eight ms", ".0f"), ("eight_p95_ms", "eight p95 ms", ".0f"),
                              ("eight_over_one", "eight/one", ".2f")]))
    payload = {"before": args.before, "after": args.after or "working tree", "rounds": args.rounds, "reps": args.reps,
               "threads": args.threads,
               "rows": rows, "machine": common.machine()}
    out = common.write_result(args.out, "batch-ab", "cpu", payload)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
