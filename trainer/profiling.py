"""`kicktrain profile`: N training steps of a family under torch.profiler, as a trace and a summary.

    kicktrain profile DATA --family mel-vae --preset small --steps 8 --out prof/

A real run's set-up (data, augmentation, the family's objective and optimiser) on a scratch run
folder, then steps under `torch.profiler.profile` with a wait / warm-up / active schedule (CPU
activity, CUDA too when present, shapes and memory recorded). Writes
- DIR/<host>_<pid>.<time>.pt.trace.json: opens in chrome://tracing, ui.perfetto.dev and TensorBoard's
  profiler plugin (`tensorboard --logdir DIR`);
- DIR/summary.json and a printed table: top operators by self time, the share of convolution and of
  matrix multiplication in all operator time, where a step's time goes (data, augmentation, controls,
  the objective's preparation, forward, backward, optimiser, EMA: the loop's record_function ranges),
  peak memory. The profile runs with train.prefetch off, so all of a step's work is on the one thread
  the profiler records; `python -m bench train` measures what prefetching then saves.
Nothing is checkpointed, validated or exported: only training steps are profiled.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kickmodel.fsutil import atomic_write_bytes

PHASES = ("data", "augment", "conditioning", "prepare", "wait for data", "forward", "backward", "optimizer", "ema")
CONV_KEYS = ("conv", "cudnn_convolution", "mkldnn_convolution", "slow_conv")
MATMUL_KEYS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm",
               "aten::_scaled_dot_product", "aten::addbmm", "aten::_addmm_activation")


def _is_conv(name: str) -> bool:
    return name.startswith("aten::") and any(k in name for k in CONV_KEYS)


def _is_matmul(name: str) -> bool:
    return any(name.startswith(k) for k in MATMUL_KEYS)


def summarise(prof: Any, active_steps: int, device: torch.device, top: int = 15) -> dict[str, Any]:
    """The numbers the table shows, from a finished profiler (times in ms per active step)."""
    events = prof.key_averages()
    cuda = device.type == "cuda"
    ops = [e for e in events if e.key.startswith("aten::") or e.key.startswith("cudnn") or "::" in e.key]
    ops = [e for e in ops if e.key not in PHASES and not e.key.startswith("ProfilerStep")]

    def self_ms(e: Any) -> float:
        return (e.self_device_time_total if cuda else e.self_cpu_time_total) / 1000.0 / active_steps

    total = sum(self_ms(e) for e in ops) or 1e-9
    conv = sum(self_ms(e) for e in ops if _is_conv(e.key))
    mm = sum(self_ms(e) for e in ops if _is_matmul(e.key))
    ranked = sorted(ops, key=self_ms, reverse=True)[:top]
    phases = {}
    for e in events:
        if e.key in PHASES:
            phases[e.key] = e.cpu_time_total / 1000.0 / active_steps
    data_ms = sum(phases.get(p, 0.0) for p in ("data", "augment", "conditioning", "prepare"))
    compute_ms = phases.get("forward", 0.0) + phases.get("backward", 0.0)
    return {
        "device": str(device),
        "active_steps": active_steps,
        "op_time_ms_per_step": total,
        "conv_share": conv / total,
        "matmul_share": mm / total,
        "top_ops": [{"name": e.key, "self_ms_per_step": self_ms(e), "share": self_ms(e) / total,
                     "calls_per_step": e.count / active_steps} for e in ranked],
        "phases_ms_per_step": phases,
        "data_and_augmentation_ms": data_ms,
        "compute_ms": compute_ms,
        "optimizer_ms": phases.get("optimizer", 0.0),
        "data_over_compute": data_ms / compute_ms if compute_ms > 0 else None,
        "waited_for_data_ms": phases.get("wait for data", 0.0),
    }


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"per training step on {s['device']} (mean of {s['active_steps']} profiled steps)",
             f"  operators: {s['op_time_ms_per_step']:.1f} ms; convolution {100 * s['conv_share']:.1f} %, "
             f"matrix multiplication {100 * s['matmul_share']:.1f} %",
             f"  data + augmentation + controls + prepare {s['data_and_augmentation_ms']:.1f} ms (the training "
             f"thread waited {s['waited_for_data_ms']:.1f} ms for it), forward + backward {s['compute_ms']:.1f} ms, "
             f"optimiser {s['optimizer_ms']:.1f} ms; peak memory "
             f"{s.get('peak_memory_mb', 0):.0f} MB",
             "  phases: " + ", ".join(f"{k} {v:.1f} ms" for k, v in s["phases_ms_per_step"].items()),
             "",
             f"  {'operator':<44} {'self ms':>9} {'share':>7} {'calls':>7}"]
    for op in s["top_ops"]:
        lines.append(f"  {op['name'][:44]:<44} {op['self_ms_per_step']:>9.2f} {100 * op['share']:>6.1f}% "
                     f"{op['calls_per_step']:>7.1f}")
    return "\n".join(lines)


def profile_training(opts: Any, steps: int, out: Path, log: Callable[[str], None] = print,
                     wait: int = 1, warmup: int = 1) -> dict[str, Any]:
    """Profile `steps` training steps (the first wait + warmup of them are not recorded)."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    from .train import Trainer, peak_memory_mb

    active = steps - wait - warmup
    if active < 1:
        raise ValueError(f"--steps {steps}: needs at least {wait + warmup + 1} (wait {wait}, warm-up {warmup}, "
                         "then at least one recorded step)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = out / ".run"
    shutil.rmtree(scratch, ignore_errors=True)
    # one thread: the profile shows where a step's time goes (the profiler records the training thread; with
    # train.prefetch the data work would run on another one, unseen)
    opts = dataclasses.replace(opts, run_dir=scratch, tensorboard=False, progress=False, export_dir=None,
                               max_steps=10**9, cfg=opts.cfg.replace("train", prefetch=False))
    try:
        tr = Trainer(opts, log)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if tr.device.type == "cuda" else [])
        t0 = time.perf_counter()
        with profile(activities=activities, schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                     record_shapes=True, profile_memory=True,
                     on_trace_ready=tensorboard_trace_handler(str(out))) as prof:
            for _ in range(steps):
                tr.train_step()
                prof.step()
        wall = time.perf_counter() - t0
        tr.close_prefetch()
        summary = summarise(prof, active, tr.device)
        summary.update({"family": tr.cfg.family, "preset": tr.cfg.preset, "steps": steps, "wait": wait,
                        "warmup": warmup, "batch_size": tr.cfg.train.batch_size, "wall_s": wall,
                        "threads": torch.get_num_threads(), "torch": torch.__version__,
                        "peak_memory_mb": peak_memory_mb(tr.device),
                        "parameters": sum(p.numel() for p in tr.module.parameters()),
                        "traces": sorted(p.name for p in out.glob("*.pt.trace.json"))})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    atomic_write_bytes(out / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary
