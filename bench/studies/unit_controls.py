"""Controls in units, measured: how many kicks asked at pitch_hz / decay_s / click_db measure as asked.

    python bench/studies/unit_controls.py                        # the shipped kick-synth model, 512 kicks a target
    python bench/studies/unit_controls.py --artifact mine.safetensors --n 64

Each target is asked of --n kicks (seeds 0..n-1, nothing else given), rendered as the daemon renders them
(gen.render, finished, at the model's rate) and measured by kickmodel.descriptors.measure, the yardstick the
training controls come from. Reported per target: the share within tolerance (pitch: 25 cents, decay: 10 %,
click: 1.5 dB) with its 95 % bootstrap interval, and the median and worst error. The target: a kick asked at
pitch_hz 43.65 measures within 25 cents in at least 95 % of kicks. A pitch is read twice: by the descriptor the
model's adjust aims at (the strongest peak of 40..250 ms) and as a tuner reads the settled body
(kickmodel.descriptors.tuner_hz: zero crossings below 300 Hz, 80..200 ms after the onset), the row's `tuner_*`
figures: what a sampler's root note has to match. Writes --out (default
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
    return got - want, 1.5


def shares(name: str, got: np.ndarray, want: float) -> dict:
    """The share of kicks within tolerance, its 95 % bootstrap interval, the median and worst error."""
    err, tol = error(name, got, want)
    inside = (np.abs(err) <= tol).astype(float)
    lo, hi = bootstrap_interval(inside, np.mean)
    return {"n": len(err), "tolerance": tol, "share_within": float(inside.mean()), "ci_lo": lo, "ci_hi": hi,
            "median_abs_error": float(np.median(np.abs(err))), "worst_abs_error": float(np.abs(err).max())}


def main(argv: list[str] | None = None) -> int:
    from bench.common import machine, user_results, write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", type=Path, default=REPO / "kickserver" / "models" / "kick-synth.safetensors")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--only", choices=sorted(COLUMN), help="only this control's targets")
    ap.add_argument("--out", type=Path, default=user_results() / "unit_controls.json")
    args = ap.parse_args(argv)

    from kickmodel.descriptors import measure, tuner_hz
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator

    gen = load_generator(args.artifact, "cpu")
    rows = []
    for name, want in TARGETS:
        if args.only and name != args.only:
            continue
        t0 = time.perf_counter()
        got, tuned = [], []
        for a in range(0, args.n, args.batch):
            items = [Item(seed=s, controls={name: want}) for s in range(a, min(a + args.batch, args.n))]
            kicks = torch.from_numpy(np.asarray(gen.generate(items, gen.settings())))
            got.append(measure(kicks, gen.sample_rate)[:, COLUMN[name]].numpy())
            if name == "pitch_hz":
                tuned.append(tuner_hz(kicks, gen.sample_rate).numpy())
        row = {"control": name, "value": want, "seconds": 0.0}
        row.update(shares(name, np.concatenate(got), want))
        if tuned:
            # a kick whose body is gone by 80 ms has no steady tone there (NaN): counted a miss, and said how many
            tuned = np.concatenate(tuned)
            row.update({f"tuner_{k}": v for k, v in shares(name, np.nan_to_num(tuned), want).items()})
            row["tuner_unreadable"] = int(np.isnan(tuned).sum())
            if np.isfinite(tuned).any():
                row.update({f"tuner_read_{k}": v for k, v in shares(name, tuned[np.isfinite(tuned)], want).items()})
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        r = rows[-1]
        print(f"{name} {want:g}: {r['share_within']:.1%} within {r['tolerance']:g} [{r['ci_lo']:.1%}..{r['ci_hi']:.1%}]"
              f", median |error| {r['median_abs_error']:.3g}, worst {r['worst_abs_error']:.3g} ({r['seconds']:.0f} s)",
              flush=True)
        if "tuner_share_within" in r:
            print(f"  as a tuner reads it: {r['tuner_share_within']:.1%} within 25 cents [{r['tuner_ci_lo']:.1%}.."
                  f"{r['tuner_ci_hi']:.1%}] ({r['tuner_unreadable']} with no steady tone at 80..200 ms, counted as "
                  f"misses; of the rest {r.get('tuner_read_share_within', float('nan')):.1%}), median |error| "
                  f"{r['tuner_median_abs_error']:.3g}", flush=True)
    out = {"date": datetime.date.today().isoformat(), "machine": machine("cpu"), "artifact": args.artifact.name,
           "rows": rows}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
