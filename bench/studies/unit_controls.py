"""Controls in units, measured: how many kicks asked at pitch_hz / decay_s / click_db measure as asked.

    python bench/studies/unit_controls.py                        # the shipped kick-synth model, 512 kicks a target
    python bench/studies/unit_controls.py --artifact mine.safetensors --n 64

Each target is asked of --n kicks (seeds 0..n-1, nothing else given), rendered as the daemon renders them
(gen.render, finished, at the model's rate) and measured by kickmodel.descriptors.measure, the yardstick the
training controls come from. Reported per target: the share within tolerance (pitch: 25 cents, decay: 10 %,
click: 2 dB) with its 95 % bootstrap interval, and the median and worst error. The target: a kick asked at
pitch_hz 43.65 measures within 25 cents in at least 95 % of kicks. Writes --out (default
~/.cache/kickserver/bench/unit_controls.json).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.sound_check import bootstrap_interval  # noqa: E402

TARGETS = (("pitch_hz", 43.65), ("pitch_hz", 61.74), ("pitch_hz", 98.0), ("decay_s", 0.15), ("decay_s", 0.4),
           ("click_db", -40.0), ("click_db", -20.0))
COLUMN = {"decay_s": 0, "pitch_hz": 1, "click_db": 2}


def error(name: str, got: np.ndarray, want: float) -> tuple[np.ndarray, float]:
    """(per-kick error in the target's own terms, tolerance)."""
    if name == "pitch_hz":
        return 1200 * np.log2(np.maximum(got, 1e-3) / want), 25.0
    if name == "decay_s":
        return 100 * (got / want - 1), 10.0
    return got - want, 2.0


def main(argv: list[str] | None = None) -> int:
    from bench.common import machine, user_results, write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", type=Path, default=REPO / "kickserver" / "models" / "kick-synth.safetensors")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--only", choices=sorted(COLUMN), help="only this control's targets")
    ap.add_argument("--out", type=Path, default=user_results() / "unit_controls.json")
    args = ap.parse_args(argv)

    from kickmodel.descriptors import measure
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator

    gen = load_generator(args.artifact, "cpu")
    rows = []
    for name, want in TARGETS:
        if args.only and name != args.only:
            continue
        t0 = time.perf_counter()
        got = []
        for a in range(0, args.n, args.batch):
            items = [Item(seed=s, controls={name: want}) for s in range(a, min(a + args.batch, args.n))]
            kicks = gen.generate(items, gen.settings())
            got.append(measure(torch.from_numpy(kicks), gen.sample_rate)[:, COLUMN[name]].numpy())
        err, tol = error(name, np.concatenate(got), want)
        inside = (np.abs(err) <= tol).astype(float)
        lo, hi = bootstrap_interval(inside, np.mean)
        rows.append({"control": name, "value": want, "n": len(err), "tolerance": tol,
                     "share_within": float(inside.mean()), "ci_lo": lo, "ci_hi": hi,
                     "median_abs_error": float(np.median(np.abs(err))),
                     "worst_abs_error": float(np.abs(err).max()), "seconds": time.perf_counter() - t0})
        r = rows[-1]
        print(f"{name} {want:g}: {r['share_within']:.1%} within {tol:g} [{lo:.1%}..{hi:.1%}], median |error| "
              f"{r['median_abs_error']:.3g}, worst {r['worst_abs_error']:.3g} ({r['seconds']:.0f} s)", flush=True)
    out = {"date": datetime.date.today().isoformat(), "machine": machine("cpu"), "artifact": args.artifact.name,
           "rows": rows}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
