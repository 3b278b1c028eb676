"""`kicktrain profile`: N training steps of a family under torch.profiler, as a trace and a summary.

    kicktrain profile DATA --family mel-vae --preset small --steps 8 --out prof/

A real run's set-up (data, augmentation, the family's objective and optimiser) on a scratch run
folder, then steps under `torch.profiler.profile`: 1 step not recorded, 1 warm-up, the rest recorded
(CPU activity, CUDA too when the device is a GPU). Writes
- DIR/summary.json and a printed table: top operators by self time, the share of convolution and of
  matrix multiplication in all operator time, where a step's time goes (data, augmentation, controls,
  the objective's preparation, forward, backward, optimiser, EMA: the loop's record_function ranges),
  peak memory; all recorded steps are averaged. On a GPU the loop waits for the device at each phase's start
  and end while it is profiled (Trainer._phase; never in a normal run), so a phase's range holds its kernels,
  not only their launches, and the phases add up to the step; the GPU's own span of each phase's kernels is
  kept beside them (phases_device_ms_per_step);
- DIR/phases.png: that split of a step as one stacked bar (ms per step);
- DIR/<host>_<pid>.<time>.pt.trace.json: the trace of the last --trace-steps recorded steps only (default
  1: a few MB a step on a CPU; shapes and memory events only with --detail, which makes it ~2.5x larger).
  Open it at https://ui.perfetto.dev (drag the file in) or chrome://tracing; `tensorboard --logdir DIR`
  shows it only with the plugin installed (pip install torch-tb-profiler).
The profile runs with train.prefetch off, so all of a step's work is on the one thread the profiler
records; `python -m bench train` measures what prefetching then saves. Nothing is checkpointed, validated
or exported: only training steps are profiled.

On a machine without a usable NVIDIA driver, kineto (the profiler's C++ half, in a CUDA build of torch)
logs "gpuGetDeviceCount failed" straight to stderr when it writes a trace, even one of CPU activity only;
a CPU profile sets KINETO_LOG_LEVEL past its errors for this process (unless the user set it), and keeps
all cycles' events (acc_events), which also silences torch's warning that events are cleared per cycle.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType

from kickmodel.fsutil import atomic_write_bytes, fsync_dir

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
    # a phase that launched GPU work is there twice: the CPU's range, and the GPU's span of its kernels (no CPU time)
    phases: dict[str, float] = {}
    device_phases: dict[str, float] = {}
    for e in events:
        if e.key not in PHASES:
            continue
        if e.device_type == DeviceType.CPU:
            phases[e.key] = phases.get(e.key, 0.0) + e.cpu_time_total / 1000.0 / active_steps
        else:
            device_phases[e.key] = device_phases.get(e.key, 0.0) + e.device_time_total / 1000.0 / active_steps
    data_ms = sum(phases.get(p, 0.0) for p in ("data", "augment", "conditioning", "prepare"))
    compute_ms = phases.get("forward", 0.0) + phases.get("backward", 0.0)
    step_ms = sum(e.cpu_time_total for e in events
                  if e.key.startswith("ProfilerStep") and e.device_type == DeviceType.CPU) / 1000.0 / active_steps
    return {
        "device": str(device),
        "active_steps": active_steps,
        "step_ms": step_ms,
        "op_time_ms_per_step": total,
        "conv_share": conv / total,
        "matmul_share": mm / total,
        "top_ops": [{"name": e.key, "self_ms_per_step": self_ms(e), "share": self_ms(e) / total,
                     "calls_per_step": e.count / active_steps} for e in ranked],
        "phases_ms_per_step": phases,
        **({"phases_device_ms_per_step": device_phases} if cuda else {}),
        "data_and_augmentation_ms": data_ms,
        "compute_ms": compute_ms,
        "optimizer_ms": phases.get("optimizer", 0.0),
        "data_over_compute": data_ms / compute_ms if compute_ms > 0 else None,
        "waited_for_data_ms": phases.get("wait for data", 0.0),
    }


def step_text(s: dict[str, Any]) -> str:
    """A step's time as the console and the picture both say it ("6312.2 ms"): the profiler's step, one figure (the
    picture's title said the sum of its phases, 6286 ms, beside the console's 6312.2)."""
    return f"{s['step_ms']:.1f} ms"


def format_summary(s: dict[str, Any]) -> str:
    step = f": {step_text(s)}" if s.get("step_ms") else ""
    lines = [f"per training step on {s['device']} (mean of {s['active_steps']} profiled steps){step}",
             f"  operators: {s['op_time_ms_per_step']:.1f} ms; convolution {100 * s['conv_share']:.1f} %, "
             f"matrix multiplication {100 * s['matmul_share']:.1f} %",
             f"  data + augmentation + controls + prepare {s['data_and_augmentation_ms']:.1f} ms (the training "
             f"thread waited {s['waited_for_data_ms']:.1f} ms for it), forward + backward {s['compute_ms']:.1f} ms, "
             f"optimiser {s['optimizer_ms']:.1f} ms; peak memory "
             f"{s.get('peak_memory_mb', 0):.0f} MB",
             "  phases: " + ", ".join(f"{k} {v:.1f} ms" for k, v in s["phases_ms_per_step"].items()),
             *(["  the GPU's span of each phase's kernels: " + ", ".join(
                 f"{k} {v:.1f} ms" for k, v in s["phases_device_ms_per_step"].items())]
               if s.get("phases_device_ms_per_step") else []),
             "",
             f"  {'operator':<44} {'self ms':>9} {'share':>7} {'calls':>7}"]
    for op in s["top_ops"]:
        lines.append(f"  {op['name'][:44]:<44} {op['self_ms_per_step']:>9.2f} {100 * op['share']:>6.1f}% "
                     f"{op['calls_per_step']:>7.1f}")
    return "\n".join(lines)


PHASE_COLOURS = {"data": "#4c72b0", "augment": "#64b5cd", "conditioning": "#8172b2", "prepare": "#937860",
                 "wait for data": "#da8bc3", "forward": "#dd8452", "backward": "#c44e52", "optimizer": "#55a868",
                 "ema": "#8c8c8c", "other": "#e5e5e5"}


def phase_figure(s: dict[str, Any]):
    """One horizontal bar: a step's ms split into the loop's phases (in their order), the rest as "other"."""
    from .plots import pyplot

    plt = pyplot()
    phases = [(k, s["phases_ms_per_step"].get(k, 0.0)) for k in PHASES]
    phases = [(k, v) for k, v in phases if v > 0]
    rest = s.get("step_ms", 0.0) - sum(v for _, v in phases)
    if rest > 0.005 * max(s.get("step_ms", 0.0), 1e-9):  # what no range covers: the profiler's step, Python
        phases.append(("other", rest))
    total = sum(v for _, v in phases) or 1.0
    fig, ax = plt.subplots(figsize=(9, 2.3), layout="constrained")
    left = 0.0
    for name, ms in phases:
        ax.barh([0], [ms], left=left, height=0.6, color=PHASE_COLOURS[name], edgecolor="white", linewidth=0.8,
                label=f"{name} {_ms(ms)} ms")
        if ms / total > 0.06:  # a number inside the segments wide enough to hold one
            ax.text(left + ms / 2, 0, _ms(ms), ha="center", va="center", fontsize=8)
        left += ms
    ax.set_xlim(0, max(total, s.get("step_ms", 0.0)))
    ax.set_ylim(-0.5, 0.5)
    ax.set_yticks([])
    ax.set_xlabel("ms per training step")
    family = str(s.get("family", "?")).replace("_", "-")
    step = step_text(s) if s.get("step_ms") else f"{_ms(total)} ms"
    ax.set_title(f"{family} ({s.get('preset', '?')}) on {s['device']}: {step} a step, mean of "
                 f"{s['active_steps']} profiled steps", fontsize=10)
    fig.legend(loc="outside lower center", ncol=min(len(phases), 5), fontsize=8, frameon=False)
    return fig


def _ms(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def write_phase_png(s: dict[str, Any], path: Path) -> Path:
    """phase_figure as a PNG, written atomically."""
    from .plots import save_figure

    return save_figure(phase_figure(s), path)


def _schedule(wait: int, warmup: int, active: int, trace_steps: int) -> Callable[[int], Any]:
    """wait, warm-up, then `active` recorded steps in (up to) two cycles: the last `trace_steps` of them form the
    second, whose trace alone is written; the events of both are kept (acc_events) for the summary."""
    from torch.profiler import ProfilerAction

    def action(step: int) -> ProfilerAction:
        if step < wait:
            return ProfilerAction.NONE
        if step < wait + warmup:
            return ProfilerAction.WARMUP
        k = step - wait - warmup
        if k >= active:
            return ProfilerAction.NONE
        if k == active - 1 or k == active - trace_steps - 1:
            return ProfilerAction.RECORD_AND_SAVE
        return ProfilerAction.RECORD

    return action


def device_sync(device: torch.device) -> Callable[[], None]:
    """What waits for `device` to finish its queued work (nothing to wait for on the CPU: its ops return done)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":
        return torch.mps.synchronize
    return lambda: None


def _quiet_kineto_on_cpu(device: torch.device) -> None:
    """See the module's docstring: kineto's "gpuGetDeviceCount failed" on a machine with no NVIDIA driver. Read
    when kineto starts (the first profile of the process); the user's own KINETO_LOG_LEVEL wins."""
    if device.type != "cuda":
        os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # past ERROR (4): kineto's own log lines only


def profile_training(opts: Any, steps: int, out: Path, log: Callable[[str], None] = print,
                     wait: int = 1, warmup: int = 1, trace_steps: int = 1, detail: bool = False) -> dict[str, Any]:
    """Profile `steps` training steps (the first wait + warmup of them are not recorded); the trace holds the last
    `trace_steps` recorded steps, with shapes and memory events when `detail`."""
    from torch.profiler import ProfilerActivity, profile

    from .train import Trainer, peak_memory_mb

    active = steps - wait - warmup
    if active < 1:
        raise ValueError(f"--steps {steps}: needs at least {wait + warmup + 1} (wait {wait}, warm-up {warmup}, "
                         "then at least one recorded step)")
    if trace_steps < 1:
        raise ValueError(f"--trace-steps {trace_steps}: must be at least 1")
    trace_steps = min(trace_steps, active)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, not a folder; name a folder for the trace and summary")
    out.mkdir(parents=True, exist_ok=True)
    scratch = out / ".run"
    shutil.rmtree(scratch, ignore_errors=True)
    # one thread: the profile shows where a step's time goes (the profiler records the training thread; with
    # train.prefetch the data work would run on another one, unseen)
    opts = dataclasses.replace(opts, run_dir=scratch, tensorboard=False, progress=False, export_dir=None,
                               max_steps=10**9, cfg=opts.cfg.replace("train", prefetch=False))
    try:
        tr = Trainer(opts, log)
        tr._phase_sync = device_sync(tr.device)  # phases bounded by waits for the device: their real times
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if tr.device.type == "cuda" else [])
        _quiet_kineto_on_cpu(tr.device)
        for old in out.glob("*.pt.trace.json"):  # a trace of an earlier profile here would read as this one's
            old.unlink()
        trace_path = out / f"{socket.gethostname()}_{os.getpid()}.{time.time_ns()}.pt.trace.json"

        def on_trace_ready(p: Any) -> None:
            if p.step_num < wait + warmup + active:  # not the last cycle (the trace steps): summary only
                return
            tmp = trace_path.with_name(f".{trace_path.name}.part")  # atomic, as kickmodel.fsutil's writes
            try:
                p.export_chrome_trace(str(tmp))
                with open(tmp, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, trace_path)
                fsync_dir(out)
            finally:
                tmp.unlink(missing_ok=True)

        t0 = time.perf_counter()
        with profile(activities=activities, schedule=_schedule(wait, warmup, active, trace_steps),
                     record_shapes=detail, profile_memory=detail, acc_events=True,
                     on_trace_ready=on_trace_ready) as prof:
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
                        "trace_steps": trace_steps, "detail": detail,
                        "traces": sorted(p.name for p in out.glob("*.pt.trace.json")),
                        "trace_mb": sum(p.stat().st_size for p in out.glob("*.pt.trace.json")) / 1e6})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary["picture"] = write_phase_png(summary, out / "phases.png").name
    atomic_write_bytes(out / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary
