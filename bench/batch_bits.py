"""Is a kick the same, bit for bit, alone and at every position of a batch, on this device? And what does a batch
cost beside one kick?

    python -m bench.batch_bits [--device cuda] [--models default,kick-synth] [--out DIR]

For each shipped model, in this process on --device: a seed's kick alone against the same seed at every position
of batches of 2, 4 and 8, for a fresh kick, a variation, a morph's kick (t 0.5 among other t's) and a kick from the
kit map; each comparison says identical or its largest difference in 24-bit steps. Then the model's own timing of
one kick and of eight (its default steps, the generator alone: no OSC, no file), medians of --reps after a warm-up
(on CUDA synchronised). bench/gpu.py runs this as its `batch` section; the CPU's side is
tests/kickmodel/test_batch_independence.py and tests/kickserver/test_batch_shape.py. Writes
<out>/batch-bits-<cpu|cuda>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import common

LSB = 2.0 ** -23  # one step of a 24-bit file
SIZES = (2, 4, 8)
SEED = 5


def _modes(gen: Any) -> dict[str, Any]:
    """mode -> render(seeds, at) giving the kick rows of a request whose kick `at` has the tested seed or t."""
    from kickmodel.generator import ENCODE, INTERPOLATION, VARIATION, Endpoint, Item

    s = gen.settings(2 if gen.samplers else None)
    modes: dict[str, Any] = {"generate": lambda seeds: gen.generate([Item(seed=x) for x in seeds], s)}
    if VARIATION in gen.capabilities:
        src = gen.prepare_source(gen.generate([Item(seed=2)], s)[0], gen.sample_rate)
        modes["variation"] = lambda seeds: gen.vary(src, 0.4, [Item(seed=x) for x in seeds], s)
    if INTERPOLATION in gen.capabilities:
        ms = gen.settings(2 if gen.samplers else None, gen.interpolation_samplers[0] if gen.samplers else None)

        def morph(seeds: list[int]) -> np.ndarray:  # the tested seed stands for t 0.5, the others for other t's
            ts = [0.5 if x == SEED else 0.05 + 0.9 * (i / len(seeds)) for i, x in enumerate(seeds)]
            return gen.morph(Endpoint(seed=5), Endpoint(seed=9), ts, [Item(seed=0)] * len(ts), ms)

        modes["morph"] = morph
    if ENCODE in gen.capabilities and gen.kit_map is not None:
        modes["map"] = lambda seeds: gen.from_map(0.3, 0.7, 0.2, [Item(seed=x) for x in seeds])
    return modes


def bits(gen: Any) -> list[dict]:
    rows = []
    for mode, render in _modes(gen).items():
        alone = render([SEED])[0]
        worst, checked = 0.0, 0
        for n in SIZES:
            for at in range(n):
                seeds = [1000 + 37 * n + i for i in range(n - 1)]
                seeds.insert(at, SEED)
                worst = max(worst, float(np.abs(render(seeds)[at] - alone).max()) / LSB)
                checked += 1
        rows.append({"mode": mode, "positions": checked, "identical": worst == 0.0, "max_lsb": worst})
    return rows


def timing(gen: Any, reps: int) -> dict:
    import torch

    from kickmodel.generator import Item

    s = gen.settings()

    def once(n: int) -> float:
        if gen.device.type == "cuda":
            torch.cuda.synchronize(gen.device)
        t0 = time.perf_counter()
        gen.generate([Item(seed=100 + i) for i in range(n)], s)
        if gen.device.type == "cuda":
            torch.cuda.synchronize(gen.device)
        return time.perf_counter() - t0

    for n in (1, 8):
        once(n)
    t = {1: [], 8: []}
    for i in range(reps):
        for n in (1, 8) if i % 2 == 0 else (8, 1):
            t[n].append(once(n))
    one, eight = statistics.median(t[1]), statistics.median(t[8])
    return {"one_ms": 1e3 * one, "eight_ms": 1e3 * eight, "eight_over_one": eight / one, "reps": reps}


def run(device: str, models: list[str], reps: int = 5) -> dict:
    from kickmodel.loading import load_generator

    out = []
    for m in models:
        gen = load_generator(common.REPO / "kickserver" / "models" / f"{m}.safetensors", device)
        out.append({"model": m, "device": str(gen.device), "bits": bits(gen), "timing": timing(gen, reps)})
    return {"models": out}


def table(payload: dict) -> str:
    rows = [{"model": m["model"], **b} for m in payload["models"] for b in m["bits"]]
    t = common.table(rows, [("model", "model", ""), ("mode", "mode", ""), ("positions", "positions", "d"),
                            ("identical", "identical", ""), ("max_lsb", "max diff (24-bit steps)", ".0f")])
    times = [{"model": m["model"], **m["timing"]} for m in payload["models"]]
    return t + "\n" + common.table(times, [("model", "model", ""), ("one_ms", "one ms", ".1f"),
                                           ("eight_ms", "eight ms", ".1f"), ("eight_over_one", "eight/one", ".2f")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--models", default="default,kick-synth", help="shipped models, comma-separated")
    ap.add_argument("--reps", type=int, default=5)
    common.add_out_option(ap)
    args = ap.parse_args(argv)
    payload = run(args.device, [m for m in args.models.split(",") if m], args.reps)
    print(table(payload))
    kind = common.device_kind(payload["models"][0]["device"]) if payload["models"] else "cpu"
    payload["machine"] = common.machine(kind)
    print(f"wrote {common.write_result(Path(args.out), 'batch-bits', kind, payload)}")
    return 0 if all(b["identical"] for m in payload["models"] for b in m["bits"]) else 1


if __name__ == "__main__":
    sys.exit(main())
