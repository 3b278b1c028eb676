"""Sampling latency and real-time factor per model, sampler, step count and batch, in-process.

    python -m bench sampling [--models A.safetensors ...] [--device auto] [--quick]

For each model (default: the bundled one), each of its samplers (a one-pass family has none and one
row per batch), each step count of STEPS within its range, and batch 1 and 8: the median wall time of
REPS calls of `gen.render` (the daemon's whole path: the network calls, decoding, resampling to the
model's rate and finishing), after one untimed warm-up per model. Real-time factor: seconds of audio
made per second of wall time (higher is faster).
"""

from __future__ import annotations

import statistics
import time

from bench import common

NAME = "sampling"
STEPS = (1, 2, 4, 10, 25, 50)
BATCHES = (1, 8)
REPS = 3


def time_render(gen, batch: int, steps: int | None, sampler: str | None, reps: int, seed: int = 0) -> list[float]:
    """Wall seconds of `reps` renders of `batch` kicks (seeds seed.., no controls)."""
    import torch

    from kickmodel.generator import Item

    items = [Item(seed=seed + i) for i in range(batch)]
    out = []
    for _ in range(reps):
        if gen.device.type == "cuda":
            torch.cuda.synchronize(gen.device)
        t0 = time.perf_counter()
        gen.generate(items, gen.settings(steps, sampler))
        if gen.device.type == "cuda":
            torch.cuda.synchronize(gen.device)
        out.append(time.perf_counter() - t0)
    return out


def measure_model(gen, label: str, steps_list, batches, reps: int) -> list[dict]:
    from kickmodel.generator import Item

    gen.generate([Item(seed=0)], gen.settings(1 if gen.samplers else None))  # warm-up: allocations, lazy imports
    clip_s = gen.length / gen.sample_rate
    rows = []
    for sampler in gen.samplers or (None,):
        for steps in ([s for s in steps_list if s <= gen.max_steps] if gen.samplers else [None]):
            for batch in batches:
                times = time_render(gen, batch, steps, sampler, reps)
                med = statistics.median(times)
                rows.append({"model": label, "family": gen.family, "sampler": sampler or "one pass",
                             "default_sampler": sampler == gen.default_sampler, "steps": steps,
                             "default_steps": gen.default_steps, "batch": batch, "reps": reps, "median_s": med,
                             "min_s": min(times), "per_kick_s": med / batch, "realtime_factor": batch * clip_s / med,
                             "clip_s": clip_s})
    return rows


def run(opts: common.Options) -> dict:
    from kickmodel.loading import load_generator

    steps_list, batches, reps = ((1, 2), (1, 2), 1) if opts.quick else (STEPS, BATCHES, REPS)
    rows, models = [], []
    for path in opts.models:
        gen = load_generator(path, opts.device)
        label = common.model_label(gen)
        models.append({"label": label, "path": str(path), **gen.describe()})
        rows += measure_model(gen, label, steps_list, batches, reps)
    return {"models": models, "steps": list(steps_list), "batches": list(batches), "reps": reps, "rows": rows}


def table(payload: dict) -> str:
    return common.table(payload["rows"], [("model", "model", ""), ("sampler", "sampler", ""), ("steps", "steps", "d"),
                                          ("batch", "batch", "d"), ("median_s", "median s", ".3f"),
                                          ("per_kick_s", "s/kick", ".3f"), ("realtime_factor", "x realtime", ".1f")])
