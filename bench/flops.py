"""How far each model is from the hardware's limit: FLOPs per kick against the machine's measured peak.

    python -m bench flops [--models A.safetensors ...] [--device auto] [--quick]

FLOPs are counted by `torch.utils.flop_counter.FlopCounterMode` around one `gen.render` (matmuls,
convolutions, attention: what dominates a network; FFTs, elementwise ops and the finishing filters are
not counted, so these are lower bounds). For a diffusion model, one sampler step costs
F(2 steps) - F(1 step) (one network call with the default sampler, two when guidance doubles the
batch), and a kick at the model's default steps F(default); a one-pass model has one figure. The
achieved rate is those FLOPs over the median wall time of the same render (batch 1: the daemon's one
kick; batch 8: a full daemon batch); the peak is the best of PEAK_REPS fp32 PEAK_N x PEAK_N matmuls
on the same device (2 N^3 FLOPs each). "of peak" says how much faster the same FLOPs could run.
"""

from __future__ import annotations

import statistics
import time

from bench import common

NAME = "flops"
PEAK_N = 2048
PEAK_REPS = 5
REPS = 3


def count_flops(fn) -> int:
    """FLOPs torch's counter sees while fn() runs."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        fn()
    return int(fc.get_total_flops())


def peak_flops(device, n: int = PEAK_N, reps: int = PEAK_REPS) -> float:
    """Best fp32 matmul rate (FLOP/s) of an n x n by n x n product on device, after one warm-up."""
    import torch

    dev = torch.device(device)
    a = torch.randn(n, n, device=dev)
    b = torch.randn(n, n, device=dev)
    best = float("inf")
    for i in range(reps + 1):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        torch.mm(a, b)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        if i:
            best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


def _render(gen, batch: int, steps):
    from kickmodel.generator import Item

    items = [Item(seed=i) for i in range(batch)]
    return lambda: gen.generate(items, gen.settings(steps))


def _median_time(fn, reps: int, device) -> float:
    import torch

    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_model(gen, peak: float, reps: int) -> list[dict]:
    steps = gen.default_steps if gen.samplers else None
    per_step = fixed = None
    if gen.samplers:
        f1, f2 = count_flops(_render(gen, 1, 1)), count_flops(_render(gen, 1, 2))
        per_step, fixed = f2 - f1, f1 - (f2 - f1)
    _render(gen, 1, 1 if gen.samplers else None)()  # warm-up
    rows = []
    for batch in (1, 8):
        fn = _render(gen, batch, steps)
        flops = count_flops(fn)
        t = _median_time(fn, reps, gen.device)
        rows.append({"model": common.model_label(gen), "family": gen.family, "steps": steps, "batch": batch,
                     "flops_per_kick": flops / batch, "flops_per_step": per_step, "flops_outside_steps": fixed,
                     "seconds": t, "achieved_flops": flops / t, "of_peak": flops / t / peak})
    return rows


def run(opts: common.Options) -> dict:
    from kickmodel.loading import load_generator, resolve_device

    device = resolve_device(opts.device)
    n, peak_reps, reps = (512, 2, 1) if opts.quick else (PEAK_N, PEAK_REPS, REPS)
    peak = peak_flops(device, n, peak_reps)
    rows = []
    for path in opts.models:
        rows += measure_model(load_generator(path, device), peak, reps)
    return {"device": str(device), "peak_flops": peak, "peak": f"best of {peak_reps} fp32 {n}x{n} matmuls",
            "counted": "torch.utils.flop_counter (matmul, convolution, attention); FFTs and elementwise ops not "
                       "counted", "rows": rows}


def table(payload: dict) -> str:
    rows = [dict(r, gflop_kick=r["flops_per_kick"] / 1e9,
                 gflop_step=None if r["flops_per_step"] is None else r["flops_per_step"] / 1e9,
                 gflops=r["achieved_flops"] / 1e9) for r in payload["rows"]]
    t = common.table(rows, [("model", "model", ""), ("steps", "steps", "d"), ("batch", "batch", "d"),
                            ("gflop_step", "GFLOP/step", ".3g"), ("gflop_kick", "GFLOP/kick", ".3g"),
                            ("seconds", "s", ".3f"), ("gflops", "GFLOP/s", ".3g"), ("of_peak", "of peak", ".1%")])
    return f"{t}\npeak: {payload['peak_flops'] / 1e9:.3g} GFLOP/s ({payload['peak']})"
