"""End-to-end latency of the daemon: send /kick/generate, wait for /kick/done of the renamed file.

    python bench/latency.py                                  # bundled default model, device auto
    python bench/latency.py --models ~/.local/share/kickserver/models --model mykick --device cpu
    python bench/latency.py --reps 5 --baseline-reps 1       # quicker
    python -m bench osc [--models A.safetensors] [--quick]   # in the suite: >= 50 warm requests, p95, a burst

Starts `python -m kickserver serve` on free loopback ports, warms it, then for count 1 and count 8
measures the median time from sending the request to the last /kick/done (the file is present by
then: it is renamed into place before the reply), over --reps warm repetitions, with the model's
default steps and sampler. The same figures for a naive baseline (DDPM ancestral sampling, 1000
steps; the daemon runs with --max-steps 1000 for this) follow with --baseline-reps repetitions.
Real-time factor: seconds of audio the model renders per wall-clock second (higher is faster): its render length
a kick (the artifact's), not the file's, which ends where the kick has decayed.
Prints a table and writes OUT/latency-<cpu|cuda>.json (the machine is described inside; --out, default
~/.cache/kickserver/bench).

In the suite (`run`, result osc-<cpu|cuda>.json): median and p95 over REPS warm requests at count 1 and 8,
then a burst: BURST_CLIENTS clients (each its own socket, so its own queue in the daemon) send
BURST_REQUESTS one-kick requests each at once, while a status client polls /kick/status every
STATUS_EVERY_S: kicks/s from the first request to the last /kick/done, the largest queue the status
replies showed, and the refusals (`busy`) with their reasons. The daemon runs with a large reply budget
(--reply-rate-kb) so that no status reply or refusal is dropped by the budget meant for strangers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from kickserver.client import Client, Conversation, Reply

REPO = Path(__file__).resolve().parents[1]
if not __package__:  # `python bench/latency.py`: the suite's own package is not on the path
    sys.path.insert(0, str(REPO))

from bench import common  # noqa: E402

NAME = "osc"
TARGETS = {"cpu": {1: 0.5, 8: 2.0}, "cuda": {1: 0.015, 8: 0.025}}  # median s end to end per count
REPS = 50
BURST_CLIENTS = 4
BURST_REQUESTS = 20
STATUS_EVERY_S = 0.02



def stop_daemon(proc: subprocess.Popen) -> None:
    """SIGTERM a daemon this benchmark started, SIGKILL it if it has not exited within 20 s, and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port: int) -> Conversation:
    """One socket on loopback talking to the daemon at `port` (kickserver.client); the caller closes it."""
    return Client("127.0.0.1", port, bind=("127.0.0.1", 0)).open()


def timed(conv: Conversation, address: str, *args, expect: int = 1, timeout: float = 10.0) -> tuple[list[Reply], float]:
    """Send one message, wait for `expect` replies: (them, seconds from the send to the last one). Fewer
    within `timeout` seconds raise TimeoutError."""
    t0 = time.perf_counter()
    conv.send_message(address, *args)
    out = conv.receive(expect, timeout)
    seconds = time.perf_counter() - t0
    if len(out) < expect:
        raise TimeoutError(f"{len(out)} of {expect} replies to {address} within {timeout:g} s")
    return out, seconds


def start(args: argparse.Namespace, work: Path) -> tuple[subprocess.Popen, int, Path]:
    port, reply_port = free_port(), free_port()
    cfg = work / "empty.toml"
    cfg.write_text("")
    log = work / "daemon.log"
    cmd = [sys.executable, "-m", "kickserver", "serve", "--config", str(cfg), "--device", args.device,
           "--port", str(port), "--reply-port", str(reply_port), "--out", str(work / "out"),
           "--max-steps", "1000", "--max-batch", "8", "--queue-limit", "64"]
    if args.models:
        cmd += ["--models", args.models]
    else:
        empty = work / "models"
        empty.mkdir(exist_ok=True)
        cmd += ["--models", str(empty)]
    if args.model:
        cmd += ["--model", args.model]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    cmd += list(getattr(args, "extra", []))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    with connect(port) as conv:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the daemon exited with {proc.returncode}:\n{log.read_text()}")
            try:
                replies, _ = timed(conv, "/kick/ping", timeout=0.5)
                if replies[0][0] == "/kick/pong":
                    return proc, port, log
            except TimeoutError:
                pass
    proc.kill()
    raise SystemExit(f"the daemon did not answer within 180 s:\n{log.read_text()}")


def render_seconds(models: str | None, name: str) -> float | None:
    """How long a kick the model renders, in seconds (its artifact's header): the model in `models`, else the bundled
    one; None where neither holds a model of that name."""
    from kickmodel.artifact import read_metadata

    for folder in ([Path(models)] if models else []) + [common.BUNDLED.parent]:
        f = folder / f"{name}.safetensors"
        if f.is_file():
            meta = read_metadata(f)
            return int(meta["length"]) / int(meta["sample_rate"])
    return None


def measure(conv: Conversation, count: int, reps: int, warm: int, extra: tuple, timeout: float,
            render_s: float | None = None) -> dict:
    """Median, p95 (s) of `count` kicks from request to the last /kick/done, over reps after warm; the real-time
    factor counts render_s seconds of audio a kick (what the model renders; files are cut where the kick has
    decayed, file_s: the first file's length), the first file's length where render_s is None."""
    import soundfile as sf

    times = []
    audio_s = None
    for i in range(warm + reps):
        replies, dt = timed(conv, "/kick/generate", count, "seed", 1000 + i, *extra, expect=count, timeout=timeout)
        bad = [r for r in replies if r[0] != "/kick/done"]
        if bad:
            raise SystemExit(f"the daemon refused a benchmark request: {bad[0]}")
        for _, p in replies:
            if not os.path.exists(p[1]):
                raise SystemExit(f"/kick/done named {p[1]}, which does not exist")
        if audio_s is None:
            info = sf.info(replies[0][1][1])
            audio_s = info.frames / info.samplerate
        if i >= warm:
            times.append(dt)
    med = statistics.median(times)
    clip_s = render_s or audio_s
    return {"count": count, "reps": reps, "median_s": med, "min_s": min(times), "max_s": max(times),
            "p95_s": float(np.percentile(times, 95)), "clip_s": clip_s, "file_s": audio_s,
            "realtime_factor": count * clip_s / med}


def burst(port: int, clients: int, requests: int, timeout: float, seed: int = 5000) -> dict:
    """`clients` sockets each send `requests` one-kick /kick/generate at once; a status client polls the
    queue meanwhile. Returns kicks/s, the largest queue seen, refusals and their reasons."""
    convs = [connect(port) for _ in range(clients)]
    results: list[dict] = [{} for _ in range(clients)]
    queued: list[int] = []
    stop = threading.Event()

    def poll() -> None:
        with connect(port) as conv:
            while not stop.is_set():
                conv.send_message("/kick/status")
                t_next = time.perf_counter() + STATUS_EVERY_S
                while (left := t_next - time.perf_counter()) > 0:
                    replies = conv.receive(1, left)
                    if not replies:
                        break
                    queued.extend(int(a[2]) for m, a in replies if m == "/kick/status" and len(a) >= 3)

    def client(k: int, t_start: float) -> None:
        conv = convs[k]
        for j in range(requests):
            conv.send_message("/kick/generate", 1, "id", k * 10000 + j, "seed", seed + k * requests + j)
        done, refused, last = 0, [], None
        deadline = t_start + timeout
        while done + len(refused) < requests and (left := deadline - time.perf_counter()) > 0:
            replies = conv.receive(1, left)
            if not replies:
                break
            for m, a in replies:
                if m == "/kick/done":
                    done, last = done + 1, time.perf_counter()
                elif m == "/kick/error":
                    refused.append(str(a[1]) if len(a) > 1 else "?")
        results[k] = {"done": done, "refused": refused, "last": last}

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(3 * STATUS_EVERY_S)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k, t0)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    poller.join(timeout=5)
    for conv in convs:
        conv.close()
    done = sum(r["done"] for r in results)
    refused = [why for r in results for why in r["refused"]]
    lasts = [r["last"] for r in results if r["last"] is not None]
    wall = (max(lasts) - t0) if lasts else float("nan")
    reasons: dict[str, int] = {}
    for why in refused:
        key = why.split(":", 1)[0]
        reasons[key] = reasons.get(key, 0) + 1
    return {"clients": clients, "requests_per_client": requests, "kicks_asked": clients * requests,
            "kicks_done": done, "refused": len(refused), "refusal_reasons": reasons,
            "lost": clients * requests - done - len(refused), "wall_s": wall,
            "kicks_per_s": done / wall if lasts else None, "max_queue": max(queued) if queued else None,
            "status_replies": len(queued)}


def run(opts) -> dict:
    """The suite's osc benchmark on the first of opts.models (see the module docstring)."""
    path = Path(opts.models[0])
    if len(opts.models) > 1:  # one daemon, one model: said, not silently dropped
        print(f"osc: measuring {path.name} only (the first of --models); run it once for each of the others",
              flush=True)
    reps, warm, counts = (5, 1, (1, 2)) if opts.quick else (REPS, 3, (1, 8))
    clients, requests = (2, 3) if opts.quick else (BURST_CLIENTS, BURST_REQUESTS)
    with tempfile.TemporaryDirectory(prefix="kickbench-osc-") as tmp:
        work = Path(tmp)
        models = work / "models"
        models.mkdir()
        model = None
        if path.resolve() != common.BUNDLED.resolve():
            shutil.copy2(path, models / path.name)  # the daemon refuses links in its models folder
            model = path.stem
        ns = argparse.Namespace(device=opts.device, models=str(models), model=model, threads=opts.threads,
                                extra=["--reply-rate-kb", "4096", "--reply-burst-kb", "4096"])
        proc, port, log = start(ns, work)
        conv = connect(port)
        try:
            [(_, st)], _ = timed(conv, "/kick/status")
            render_s = render_seconds(str(models), st[0])
            rows = []
            for c in counts:
                r = measure(conv, c, reps, warm, (), 600, render_s)
                r.update(model=st[0], device=st[1])
                rows.append(r)
            b = burst(port, clients, requests, timeout=600)
        finally:
            stop_daemon(proc)
            conv.close()
    kind = common.device_kind(st[1])
    for r in rows:
        target = TARGETS[kind].get(r["count"])
        r["target_s"] = target
        r["met_target"] = None if target is None else bool(r["median_s"] <= target)
    return {"model": st[0], "artifact": str(path), "device": st[1], "rows": rows, "burst": b,
            "reply_budget": "--reply-rate-kb 4096 --reply-burst-kb 4096 (no status reply or refusal dropped)"}


def table(payload: dict) -> str:
    t = common.table(payload["rows"], [("count", "kicks", "d"), ("reps", "n", "d"), ("median_s", "median s", ".3f"),
                                       ("p95_s", "p95 s", ".3f"), ("realtime_factor", "x realtime", ".1f"),
                                       ("target_s", "target s", ".3g"), ("met_target", "met", "")])
    b = payload["burst"]
    return (f"{t}\nburst: {b['clients']} clients x {b['requests_per_client']} requests: {b['kicks_done']} done, "
            f"{b['refused']} refused {b['refusal_reasons'] or ''}, {b['lost']} lost, "
            f"{common.fmt(b['kicks_per_s'], '.2f')} kicks/s, largest queue {common.fmt(b['max_queue'], 'd')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="models folder (default: none, so the bundled default model)")
    ap.add_argument("--model", help="model name (default: the daemon's choice, i.e. the bundled default)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads in the daemon (0: torch's default)")
    ap.add_argument("--reps", type=int, default=20, help="warm repetitions per count (default 20)")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured requests per count first (default 2)")
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--steps", type=int, help="override the model's default steps (default: the model's)")
    ap.add_argument("--baseline-reps", type=int, default=2, help="repetitions of the naive baseline (0: skip)")
    ap.add_argument("--baseline-steps", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=900, help="seconds one request may take")
    common.add_out_option(ap)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kickbench-") as tmp:
        work = Path(tmp)
        proc, port, log = start(args, work)
        conv = connect(port)
        try:
            [(_, st)], _ = timed(conv, "/kick/status")
            model, device = st[0], st[1]
            kind = "cuda" if device.startswith("cuda") else "cpu"
            extra = ("steps", args.steps) if args.steps else ()
            rows = []
            render_s = render_seconds(args.models, model)
            for c in args.counts:
                r = measure(conv, c, args.reps, args.warmup, extra, args.timeout, render_s)
                r.update(kind="default", sampler="model default", steps=args.steps or "model default")
                rows.append(r)
                target = TARGETS[kind].get(c)
                verdict = "" if target is None else f"  target <= {target * 1000:g} ms: " + (
                    "ok" if r["median_s"] <= target else "MISSED")
                print(f"{'default':9s} count {c:2d}: median {r['median_s'] * 1000:8.1f} ms  "
                      f"(min {r['min_s'] * 1000:.1f}, max {r['max_s'] * 1000:.1f}, n={r['reps']})  "
                      f"realtime x{r['realtime_factor']:.1f}{verdict}", flush=True)
            if args.baseline_reps > 0:
                for c in args.counts:
                    r = measure(conv, c, args.baseline_reps, 0 if c != args.counts[0] else 1,
                                ("steps", args.baseline_steps, "sampler", "ddpm"), args.timeout, render_s)
                    r.update(kind="baseline", sampler="ddpm", steps=args.baseline_steps)
                    rows.append(r)
                    print(f"{'baseline':9s} count {c:2d}: median {r['median_s'] * 1000:8.1f} ms  "
                          f"(n={r['reps']}, ddpm {args.baseline_steps} steps)  realtime x{r['realtime_factor']:.2f}",
                          flush=True)
        finally:
            stop_daemon(proc)
            conv.close()
        import torch

        result = {
            "host": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": model, "device": device,
            "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "threads": args.threads or "torch default", "torch": torch.__version__,
            "python": platform.python_version(), "targets_s": TARGETS[kind], "results": rows,
            "met_targets": all(r["median_s"] <= TARGETS[kind].get(r["count"], float("inf"))
                               for r in rows if r["kind"] == "default"),
        }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"latency-{kind}.json"  # the machine is described inside
    path.write_text(json.dumps(common.portable(result), indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
