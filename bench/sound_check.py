"""A measured stand-in for a listening check: attack, pitch drop, hiss, end clicks, body noise.

    python bench/sound_check.py                         # bundled model, held-out split of the starter kit
    python bench/sound_check.py --artifact mine.safetensors --real ~/Kicks --train ~/Kicks --steps 10 50

Nobody can listen on a machine without audio output, so this measures what a listener checks
first, on the same sets `kicktrain eval` builds (real held-out kicks, n generated kicks per step
count, the procedural synth; generated and synth kicks finished like the daemon's files, real kicks as
`kicktrain prepare` makes them, so their ends are zero padding and their end_jump_db is not comparable):

- attack_ms: time from the onset (first sample at 10 % of the peak) to the peak. A kick has its
  peak within a few milliseconds.
- pitch_start_hz / pitch_end_hz: the strongest frequency below 250 Hz in 10..50 ms and in
  80..160 ms after the onset (Hann window, zero-padded to 1 Hz bins). pitch_drop is the share of
  clips whose start is at least 5 % above their end: the sweep that makes a kick sound like one.
- tail_hiss_db: `trainer.evaluate.tail_hiss_db` (energy above 4 kHz, 400..900 ms, re the peak).
- end_jump_db: the largest sample-to-sample step in the last 50 ms, dB re the peak (a click at
  the end of the file shows as a step far above the signal's own slope).
- body_hf_db: energy 1..8 kHz over 30..200 ms after the onset, dB re the clip's total energy in
  that window: the noisy haze over a body that should be a clean low tone.

Prints a table of medians (with the 25..75 % range) and writes bench/results/sound_check.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.evaluate import collect, tail_hiss_db  # noqa: E402

FLOOR_DB = -160.0


def _db(v: np.ndarray) -> np.ndarray:
    return np.maximum(10 * np.log10(np.maximum(v, 1e-300)), FLOOR_DB)


def onsets(x: np.ndarray) -> np.ndarray:
    peak = np.abs(x).max(axis=1, keepdims=True)
    return np.argmax(np.abs(x) >= 0.1 * np.maximum(peak, 1e-12), axis=1)


def window(x: np.ndarray, start: np.ndarray, sr: int, a_ms: float, b_ms: float) -> np.ndarray:
    a, n = int(a_ms * sr / 1000), int((b_ms - a_ms) * sr / 1000)
    idx = start[:, None] + a + np.arange(n)[None, :]
    length = x.shape[1]
    return np.where(idx < length, np.take_along_axis(x, np.minimum(idx, length - 1), axis=1), 0.0)


def strongest_low(seg: np.ndarray, sr: int, top_hz: float = 250.0) -> np.ndarray:
    w = np.hanning(seg.shape[1])
    nfft = sr  # 1 Hz bins
    p = np.abs(np.fft.rfft(seg * w, nfft, axis=1))
    f = np.fft.rfftfreq(nfft, 1.0 / sr)
    band = (f >= 20) & (f <= top_hz)
    return f[band][np.argmax(p[:, band], axis=1)]


def measure(clips: np.ndarray, sr: int) -> dict[str, np.ndarray]:
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    on = onsets(x)
    peak_at = np.argmax(np.abs(x), axis=1)
    peak = np.abs(x).max(axis=1)
    f_start = strongest_low(window(x, on, sr, 10, 50), sr)
    f_end = strongest_low(window(x, on, sr, 80, 160), sr)
    tail = x[:, -int(0.05 * sr):]
    jump = np.abs(np.diff(tail, axis=1)).max(axis=1)
    body = window(x, on, sr, 30, 200)
    spec = np.abs(np.fft.rfft(body * np.hanning(body.shape[1]), axis=1)) ** 2
    f = np.fft.rfftfreq(body.shape[1], 1.0 / sr)
    hf = spec[:, (f >= 1000) & (f <= 8000)].sum(axis=1)
    return {
        "attack_ms": 1000.0 * (peak_at - on) / sr,
        "pitch_start_hz": f_start,
        "pitch_end_hz": f_end,
        "pitch_drop": (f_start >= 1.05 * f_end).astype(float),
        "tail_hiss_db": tail_hiss_db(x, sr),
        "end_jump_db": _db((jump / np.maximum(peak, 1e-12)) ** 2),
        "body_hf_db": _db(hf / np.maximum(spec.sum(axis=1), 1e-300)),
    }


def summarise(m: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    out = {}
    for k, v in m.items():
        if k == "pitch_drop":
            out[k] = {"share": float(v.mean())}
        else:
            q = np.percentile(v, [25, 50, 75])
            out[k] = {"median": float(q[1]), "q25": float(q[0]), "q75": float(q[2])}
    return out


def _shown(path: Path) -> str:
    p = path.resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", default=str(REPO / "kickserver" / "models" / "default.safetensors"))
    ap.add_argument("--real", nargs="+", default=[str(REPO / "kickserver" / "data" / "kicks")])
    ap.add_argument("--train", nargs="+", default=[str(REPO / "kickserver" / "data" / "kicks")])
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)

    gen, sets = collect(args.artifact, args.real, args.train, n=args.n, steps=args.steps, seed=args.seed,
                        device=args.device)
    sr = sets.sample_rate
    groups = {"real held-out": sets.real, **{f"model @ {s}": sets.model[s] for s in args.steps}, "synth": sets.synth}
    rows = {name: summarise(measure(clips, sr)) for name, clips in groups.items()}

    cols = ["attack_ms", "pitch_start_hz", "pitch_end_hz", "pitch_drop", "tail_hiss_db", "end_jump_db", "body_hf_db"]
    print(f"{'set':<14} {'n':>3}  " + "  ".join(f"{c:>18}" for c in cols))
    for name, r in rows.items():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{v['share']:>18.2f}" if "share" in v else
                         f"{v['median']:>7.1f} [{v['q25']:.0f}..{v['q75']:.0f}]".rjust(18))
        print(f"{name:<14} {len(groups[name]):>3}  " + "  ".join(cells))

    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine()},
        "artifact": _shown(Path(args.artifact)),
        "model_step": getattr(getattr(gen, "artifact", None), "step", None),
        "n": args.n, "seed": args.seed, "notes": sets.notes,
        "sets": {name: {"n": len(groups[name]), **r} for name, r in rows.items()},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from trainer.fsutil import atomic_write_bytes

    atomic_write_bytes(out / "sound_check.json", (json.dumps(report, indent=1) + "\n").encode())
    print(f"wrote {out / 'sound_check.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
