"""Second hits, measured: the share of a model's kicks that hit twice (a loop's next beat, a flam) before and after
the finishing guard (kickmodel.dsp.finish_kick's one_hit), and how many kicks the guard changed.

    python bench/studies/second_hits.py                                # the bundled model, seeds 0..511
    python bench/studies/second_hits.py --artifact mine.safetensors --n 64 --steps 25

Each kick (seeds 0..n-1, no controls, the model's default steps and sampler unless given) is sampled once; its raw
output is finished twice, with the guard (what the daemon writes) and without it (what the model makes), and both
are measured by kickmodel.descriptors.second_hit_ms. The first CHECK kicks are also rendered through gen.generate,
which must give the guarded kicks bit for bit (it is what is measured). --raw keeps the raw kicks (512: 92 MB) so a
changed detector or guard is measured again without rendering. Prints the shares with 95 % Wilson intervals, the
kicks the guard changed and where their second hits were, and writes --out (default
~/.cache/kickserver/bench/second_hits.json; temp file, fsync, rename).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

BATCH = 32
CHECK = 4  # kicks of the first batch rendered again through gen.generate (a kick is the same in any batch)


def _npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    from bench.common import portable
    from kickmodel.descriptors import second_hit_ms
    from kickmodel.dsp import finish_kick
    from kickmodel.fsutil import atomic_write_bytes
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator
    from trainer.evaluation.distances import wilson_interval

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", default=str(REPO / "kickserver" / "models" / "default.safetensors"))
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=None, help="default: the model's")
    ap.add_argument("--out", default=None, help="the JSON (default ~/.cache/kickserver/bench/second_hits.json)")
    ap.add_argument("--raw", default=None, help="an .npy of the model's raw kicks: read when it exists (no render; "
                    "a changed detector or guard measured again in seconds), else written after the render")
    args = ap.parse_args(argv)

    gen = load_generator(Path(args.artifact), "cpu")
    settings = gen.settings(args.steps)
    sr = gen.sample_rate
    raw_path = Path(args.raw) if args.raw else None
    raws = None
    if raw_path is not None and raw_path.exists():
        raws = np.load(raw_path)
        if raws.shape != (args.n, gen.length):
            raise SystemExit(f"{raw_path} holds {raws.shape}, not {args.n} kicks of {gen.length} samples")
    before, after, kept = [], [], []
    for start in range(0, args.n, BATCH):
        items = [Item(seed=s) for s in range(start, min(args.n, start + BATCH))]
        raw = (raws[start:start + len(items)] if raws is not None
               else np.asarray(gen._sample(items, settings, lambda info: None), dtype=np.float32))  # the modes' raw
        kept.append(raw)
        after.append(finish_kick(raw, sr))
        before.append(finish_kick(raw, sr, one_hit=False))
        if start == 0 and not np.array_equal(gen.generate(items[:CHECK], settings), after[0][:CHECK]):
            raise SystemExit("gen.generate does not give what is measured here: the study is out of date")
        print(f"{start + len(items)}/{args.n}", file=sys.stderr, flush=True)
    if raw_path is not None and raws is None:
        raw_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(raw_path, _npy(np.concatenate(kept)))
    before_k, after_k = np.concatenate(before), np.concatenate(after)
    hit_before, hit_after = second_hit_ms(before_k, sr), second_hit_ms(after_k, sr)
    changed = [i for i in range(args.n) if not np.array_equal(before_k[i], after_k[i])]

    def share(at: np.ndarray) -> dict:
        k = int((~np.isnan(at)).sum())
        lo, hi = wilson_interval(k, args.n)
        return {"kicks": k, "n": args.n, "share": k / args.n, "wilson_lo": lo, "wilson_hi": hi}

    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine()},
        "artifact": Path(args.artifact).name, "seeds": [0, args.n - 1],
        "settings": {"steps": settings.steps, "sampler": settings.sampler},
        "before_guard": share(hit_before), "after_guard": share(hit_after),
        "changed_by_guard": changed,
        "second_hit_ms": {str(i): float(hit_before[i]) for i in np.flatnonzero(~np.isnan(hit_before))},
    }
    for name in ("before_guard", "after_guard"):
        r = report[name]
        print(f"{name:>13}: {r['kicks']} of {r['n']} kicks hit twice, {100 * r['share']:.2f} % "
              f"[{100 * r['wilson_lo']:.2f}..{100 * r['wilson_hi']:.2f}] (95 % Wilson)")
    print(f"changed by the guard: {len(changed)} kicks {changed}; second hits at (ms from the first sample) "
          + ", ".join(f"seed {k}: {v:.0f}" for k, v in report["second_hit_ms"].items()))
    out = Path(args.out) if args.out else Path.home() / ".cache" / "kickserver" / "bench" / "second_hits.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, (json.dumps(portable(report), indent=1) + "\n").encode())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
