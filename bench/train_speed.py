"""Training throughput and peak memory per family and preset, optimised loop vs a naive one, side by side.

    python -m bench train [--quick] [--device auto]                       # in the suite: every family
    python -m bench.train_speed [--families waveform_diffusion] [--presets tiny,small,base] [--steps 6]
                                [--device auto] [--out bench/results]

"optimised" is the preset as configured: mixed precision (GPU), gradient accumulation
(micro-batch < batch), gradient checkpointing where the preset turns it on. "naive" is the same
network and effective batch in one fp32 micro-batch, no checkpointing. Each (family, preset, mode)
runs in its own process so peak memory is its own: RSS high-water mark on the CPU (VmHWM, torch's
own ~0.3-0.6 GB included), torch.cuda.max_memory_allocated on a GPU. (--quick runs every job in one
process: its memory figures are then that process's high-water mark so far, marked shared.) The first
step is a warm-up and is not timed. A latent-diffusion model trains over a frozen mel-VAE: a random one
of the same preset is made on the fly (speed and memory do not depend on the weights).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from bench import common

NAME = "train"
PRESETS = ("tiny", "small", "base")


def _vm_hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(preset_name: str, mode: str, steps: int, device_spec: str, family: str = "waveform_diffusion",
            precision_mode: str | None = None, train_overrides: dict | None = None) -> dict:
    """One (family, preset, mode) measured in this process. precision_mode (auto, bf16, fp16, off) overrides
    the optimised loop's mixed precision (bench/gpu.py compares them); the naive loop is always fp32.
    train_overrides: train settings of the optimised loop (micro_batch, mixed_precision, grad_checkpointing) as a
    real run chose them, so bench/gpu.py sets the network alone beside that run's loop."""
    import torch

    from kickmodel.families import get_family, preset
    from kickmodel.families.base import parameter_count
    from kickmodel.loading import resolve_device
    from trainer.recipes import get_recipe
    from trainer.recipes.base import FitContext
    from trainer.train import precision, set_grad_checkpointing

    fam = get_family(family)
    cfg = preset(preset_name, fam.name)
    if mode == "naive":
        cfg = cfg.replace("train", micro_batch=cfg.train.batch_size, mixed_precision="off", grad_checkpointing=False)
    elif precision_mode is not None:
        cfg = cfg.replace("train", mixed_precision=precision_mode)
    if mode != "naive" and train_overrides:
        cfg = cfg.replace("train", **train_overrides)
    device = resolve_device(device_spec)
    with tempfile.TemporaryDirectory(prefix="kickbench-train-") as tmp:
        options = common.family_options(fam.name, {}, Path(tmp), preset_name)  # e.g. a random VAE to train over
        ctx = FitContext(device=device, log=lambda m: None, options=options)
        cfg = get_recipe(fam.name).fit_config(cfg, ctx)
        tc = cfg.train
        torch.manual_seed(0)
        objective = get_recipe(fam.name).objective(cfg, ctx)
    net = objective.module
    set_grad_checkpointing(net, tc.grad_checkpointing)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    amp_dtype, use_scaler = precision(tc.mixed_precision, device)
    scaler = torch.amp.GradScaler("cuda", enabled=use_scaler)
    n_micro = tc.batch_size // tc.micro_batch
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(tc.micro_batch, cfg.data.length, generator=g) * 0.3).to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for i in range(steps + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n_micro):
            ctx_amp = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext()
            with ctx_amp:
                loss, _ = objective.loss(net, objective.prepare_batch(x), None, None, g, 0)
            scaler.scale(loss / n_micro).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i > 0:
            times.append(time.perf_counter() - t0)
    step_s = sorted(times)[len(times) // 2]
    out = {"family": fam.name, "preset": preset_name, "mode": mode, "device": str(device),
           "params": parameter_count({"m": net}),
           "batch": tc.batch_size, "micro_batch": tc.micro_batch, "precision": str(amp_dtype or "fp32"),
           "checkpointing": tc.grad_checkpointing, "median_step_s": step_s,
           "samples_per_s": tc.batch_size / step_s, "threads": torch.get_num_threads()}
    if device.type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        out["peak_rss_mb"] = _vm_hwm_mb()
    return out


def _child(jobs: list[list[str]], steps: int, device: str, threads: int) -> None:
    """Run jobs ([family, preset, mode] each) in this process, one JSON line per job on stdout."""
    common.set_threads(threads)
    for family, preset_name, mode in jobs:
        try:
            row = measure(preset_name, mode, steps, device, family)
        except Exception as e:  # one job's failure is its row's, not the run's
            row = {"family": family, "preset": preset_name, "mode": mode, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(row), flush=True)


def measure_all(jobs: list[tuple[str, str, str]], steps: int, device: str, *, isolate: bool = True,
                threads: int = 0, timeout: float = 1800) -> list[dict]:
    """Rows for jobs (family, preset, mode): each in its own process (isolate) or all in one."""
    batches = [[j] for j in jobs] if isolate else [list(jobs)]
    rows = []
    for batch in batches:
        cmd = [sys.executable, "-m", "bench.train_speed", "--child", json.dumps([list(j) for j in batch]),
               "--steps", str(steps), "--device", device, "--threads", str(threads)]
        try:
            proc = subprocess.run(cmd, cwd=common.REPO, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            rows += [{"family": f, "preset": p, "mode": m, "error": f"timed out after {timeout:.0f} s"}
                     for f, p, m in batch]
            continue
        got = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or len(got) != len(batch):
            why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            done = {(r["family"], r["preset"], r["mode"]) for r in got}
            got += [{"family": f, "preset": p, "mode": m, "error": why} for f, p, m in batch if (f, p, m) not in done]
        for r in got:
            r["shared_process"] = not isolate
        rows += got
    return rows


def speedups(rows: list[dict]) -> list[dict]:
    """Per (family, preset): optimised over naive, speed and peak memory."""
    by = {(r["family"], r["preset"], r["mode"]): r for r in rows if "error" not in r}
    out = []
    for (f, p, m), o in by.items():
        n = by.get((f, p, "naive"))
        if m != "optimised" or n is None:
            continue
        key = "peak_gpu_mb" if "peak_gpu_mb" in o else "peak_rss_mb"
        out.append({"family": f, "preset": p, "speed_x": o["samples_per_s"] / n["samples_per_s"],
                    "memory_x": o[key] / n[key]})
    return out


def run(opts: common.Options) -> dict:
    from kickmodel.families import family_names

    presets = ("tiny",) if opts.quick else PRESETS
    steps = 1 if opts.quick else 3
    jobs = [(f, p, m) for f in family_names() for p in presets for m in ("optimised", "naive")]
    rows = measure_all(jobs, steps, opts.device, isolate=not opts.quick, threads=opts.threads)
    return {"steps_timed": steps, "rows": rows, "optimised_vs_naive": speedups(rows),
            "memory": "peak GPU memory allocated by torch" if any("peak_gpu_mb" in r for r in rows)
            else "peak RSS of the process (VmHWM), torch itself included"}


COLUMNS = [("family", "family", ""), ("preset", "preset", ""), ("mode", "mode", ""), ("params", "params", ",d"),
           ("batch", "batch", "d"), ("micro_batch", "micro", "d"), ("precision", "precision", ""),
           ("checkpointing", "ckpt", ""), ("samples_per_s", "samples/s", ".1f"), ("peak_rss_mb", "peak RSS MB", ".0f"),
           ("peak_gpu_mb", "peak GPU MB", ".0f"), ("error", "error", "")]


def table(payload: dict) -> str:
    rows = payload["rows"]
    cols = [c for c in COLUMNS if any(c[0] in r for r in rows)]
    text = common.table(rows, cols)
    ratio = common.table(payload["optimised_vs_naive"], [("family", "family", ""), ("preset", "preset", ""),
                                                          ("speed_x", "speed x", ".2f"),
                                                          ("memory_x", "memory x", ".2f")])
    return f"{text}\n\noptimised / naive:\n{ratio}"


def main(argv: list[str] | None = None) -> int:
    from kickmodel.families import family_names

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(family_names()))
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0)
    common.add_out_option(ap)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(json.loads(args.child), args.steps, args.device, args.threads)
        return 0
    jobs = [(f.replace("-", "_"), p, m) for f in args.families.split(",") for p in args.presets.split(",")
            for m in ("optimised", "naive")]
    rows = measure_all(jobs, args.steps, args.device, threads=args.threads)
    payload = {"steps_timed": args.steps, "rows": rows, "optimised_vs_naive": speedups(rows)}
    print(table(payload))
    kind = "cuda" if any("peak_gpu_mb" in r for r in rows) else "cpu"
    payload.update(suite=common.SCHEMA, benchmark=NAME, date=common.now(), machine=common.machine(kind))
    path = common.write_result(Path(args.out), "train_speed", kind, payload)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
