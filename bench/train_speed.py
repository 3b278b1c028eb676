"""Training throughput and peak memory per preset, optimised loop vs a naive one, side by side.

    python bench/train_speed.py [--presets tiny,small,base] [--steps 6] [--device auto] [--out bench/results]

"optimised" is the preset as configured: mixed precision (GPU), gradient accumulation
(micro-batch < batch), gradient checkpointing where the preset turns it on. "naive" is the same
network and effective batch in one fp32 micro-batch, no checkpointing. Each (preset, mode) runs in
its own process so peak memory is its own: RSS high-water mark on the CPU (VmHWM), and
torch.cuda.max_memory_allocated on a GPU. The first step is a warm-up and is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _vm_hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(preset_name: str, mode: str, steps: int, device_spec: str, family: str = "waveform_diffusion") -> dict:
    import torch

    from trainer.config import preset
    from trainer.families import get_family
    from trainer.families.base import FitContext, parameter_count
    from trainer.generator import resolve_device
    from trainer.train import precision, set_grad_checkpointing

    cfg = preset(preset_name, family)
    if mode == "naive":
        cfg = cfg.replace("train", micro_batch=cfg.train.batch_size, mixed_precision="off", grad_checkpointing=False)
    tc = cfg.train
    device = resolve_device(device_spec)
    torch.manual_seed(0)
    objective = get_family(cfg.family).objective(cfg, FitContext(device=device, log=lambda m: None))
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
            ctx = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext()
            with ctx:
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
    out = {"family": family, "preset": preset_name, "mode": mode, "device": str(device),
           "params": parameter_count({"m": net}),
           "batch": tc.batch_size, "micro_batch": tc.micro_batch, "precision": str(amp_dtype or "fp32"),
           "checkpointing": tc.grad_checkpointing, "median_step_s": step_s,
           "samples_per_s": tc.batch_size / step_s, "threads": torch.get_num_threads()}
    if device.type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        out["peak_rss_mb"] = _vm_hwm_mb()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="tiny,small,base")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--one", nargs=2, metavar=("PRESET", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.steps, args.device)))
        return 0
    rows = []
    for p in args.presets.split(","):
        for mode in ("optimised", "naive"):
            proc = subprocess.run([sys.executable, __file__, "--one", p, mode, "--steps", str(args.steps),
                                   "--device", args.device], capture_output=True, text=True)
            if proc.returncode != 0:
                rows.append({"preset": p, "mode": mode, "error": proc.stderr.strip().splitlines()[-1:]})
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            mem = r.get("peak_gpu_mb", r.get("peak_rss_mb"))
            print(f"{p:6s} {mode:9s} {r['params'] / 1e6:5.2f} M params  batch {r['batch']:3d} = "
                  f"{r['batch'] // r['micro_batch']} x {r['micro_batch']:3d}  {r['precision']:14s} "
                  f"ckpt {'on ' if r['checkpointing'] else 'off'}  {r['samples_per_s']:7.1f} samples/s  "
                  f"peak {'GPU' if 'peak_gpu_mb' in r else 'RSS'} {mem:8.0f} MB", flush=True)
    by = {(r["preset"], r["mode"]): r for r in rows if "error" not in r}
    for p in args.presets.split(","):
        o, n = by.get((p, "optimised")), by.get((p, "naive"))
        if o and n:
            key = "peak_gpu_mb" if "peak_gpu_mb" in o else "peak_rss_mb"
            print(f"{p:6s} optimised/naive: speed x{o['samples_per_s'] / n['samples_per_s']:.2f}, "
                  f"memory x{o[key] / n[key]:.2f}")
    host = platform.node() or "host"
    result = {"machine": {"host": host, "cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count(), "python": platform.python_version()},
              "date": time.strftime("%Y-%m-%d"), "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kind = "gpu" if any("peak_gpu_mb" in r for r in rows) else "cpu"
    path = out / f"train_speed-{kind}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
