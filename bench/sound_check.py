"""A measured stand-in for a listening check: start, attack, pitch drop, hiss, end clicks, body noise, variety, notches.

    python bench/sound_check.py                         # bundled model, held-out split of the starter kit
    python bench/sound_check.py --artifact mine.safetensors --real ~/Kicks --train ~/Kicks --steps 10 50
    python bench/sound_check.py --real /tmp/outside --train kickserver/data/kicks --tag outside --real-name outside

Nobody can listen on a machine without audio output, so this measures what a listener checks
first, on the same sets `kicktrain eval` builds (real held-out kicks, n generated kicks per step
count, the procedural synth; generated and synth kicks finished like the daemon's files, real kicks as
`kicktrain prepare` makes them, so their ends are zero padding and their end_jump_db is not comparable):

- start_pct: |x[0]| / max|x| * 100, the level of the clip's first sample in % of its peak. A file that
  starts above about 1 % starts with a step (a click, and an attack no model shaped); real kicks as
  `kicktrain prepare` makes them start from silence (the starter kit's 101: median 0.0 %; the 18 % above
  1 % are files cut at their own attack).
- attack_ms: (index of max|x| - index of the first sample with |x| >= 10 % of max|x|) * 1000 / sample_rate:
  the time from the onset to the peak of the absolute waveform. A kick has its peak within a few
  milliseconds (the starter kit's real kicks: median 9 ms). A clip that starts above 10 % of its peak has
  its onset at sample 0, so this then counts from the file's first sample.
- pitch_start_hz / pitch_end_hz: the strongest frequency below 250 Hz in 10..50 ms and in
  80..160 ms after the onset (Hann window, zero-padded to 1 Hz bins). pitch_drop is the share of
  clips whose start is at least 5 % above their end: the sweep that makes a kick sound like one.
- second_hit: the clips with a second hit (`kickmodel.descriptors.second_hit_ms`: a new attack 40 ms or more after
  the first, with the body's level climbing again: a flam or a loop's next beat), shown as kicks/n; its interval is
  Wilson's, not the bootstrap's (which is [0, 0] when no clip hits twice: 0 of 512 leaves up to 0.74 %). A one-shot
  has none; the target is 0 in 512 generated kicks. Generated kicks are finished as the daemon finishes them, with
  the guard that fades a second hit out (kickmodel.dsp.finish_kick): bench/studies/second_hits.py measures a model
  before it.
- tail_hiss_db: `trainer.evaluation.measures.tail_hiss_db` (energy above 4 kHz, 400..900 ms, re the peak).
- end_jump_db: the largest sample-to-sample step in the last 50 ms, dB re the peak (a click at
  the end of the file shows as a step far above the signal's own slope).
- body_hf_db: `trainer.evaluation.measures.body_haze_db`, energy 1..8 kHz over 30..200 ms after the onset, dB re
  the clip's total energy in that window (kicktrain eval shows it against the real kicks' as "haze
  dB"): the noisy haze over a body that should be a clean low tone. Its median is "the haze
  figure" of the model card (the bundled model of 2026-12-03: -43 dB against the real
  held-out kicks' -54 dB, 11 dB too much haze; the target is within 2 dB of the real kicks' median).

Three columns describe a set as a whole:
- step_share: the share of the set's clips whose start_pct is above STEP_PCT (1 %): kicks that start with a step.
- div/real: diversity against real, exactly as `kicktrain eval` measures it (trainer.evaluation.scoring.score):
  the mean pairwise distance of the set's clips in the "mfcc-stats" embedding standardised by the real
  held-out plus training clips, over the real held-out set's own mean pairwise distance.
- 1-NN held-out / 1-NN train: the 1-NN two-sample test (Xu et al. 2018) in the same space, as `kicktrain eval`
  gives it: a nearest-neighbour classifier's leave-one-out accuracy on balanced draws of the set and the real
  held-out (training) kicks, mean [2.5..97.5 % over 50 draws]. 0.5: it cannot tell them apart; near 1: the set's
  kicks cluster apart from real ones; under 0.5: they copy. The real rows show random halves of themselves
  (the baseline a perfect model scores at that set size). The JSON adds gen_nn_gen: the share of the set's kicks
  whose nearest neighbour is another of its kicks.
- grid dB: the worst notch or peak at multiples of sample_rate / GRID_PERIOD (2756, 5512, 8269, 11025,
  13781 Hz at 44.1 kHz: where a stride-16 output upsampler leaves images, and where image rejection
  cuts them), up to GRID_MAX_HZ, against the neighbouring bands, in the set's long-term average
  spectrum (Welch: Hann windows of WELCH_N samples, half overlap, power averaged over every window of
  every clip). For each multiple f: the mean level within +-GRID_CENTRE_HZ of f, minus the level the
  neighbours predict there (the mean levels of the bands GRID_SIDE_HZ away below and above f,
  interpolated linearly in log frequency, so a power-law slope reads 0). Negative: a notch; positive: a
  peak. Multiples whose neighbours lie more than GRID_FLOOR_DB under the spectrum's maximum are not
  measured (nothing there to notch). The column shows the signed depth of the largest |depth| and its
  frequency; the target is |depth| <= 3 dB.

Prints a table of medians (with the 25..75 % range), then the 95 % intervals (bootstrap; second_hit: Wilson) of
the pitch_drop, second_hit and step_share shares and of the haze and attack medians (what another draw of as many
clips could give: with 20 real and 64 generated kicks they are several points and dB wide; --n 512 narrows the
model's), and writes
OUT/sound_check.json (or sound_check-TAG.json with --tag); OUT is ~/.cache/kickserver/bench unless --out names
another folder (--out bench/results: the figures the docs quote). --real-name labels the real row (e.g. "new kicks").
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import numpy as np

from kickmodel.descriptors import second_hit_ms
from trainer.evaluation.distances import diversity, real_halves_1nn, standardiser, two_sample_1nn, wilson_interval
from trainer.evaluation.measures import body_haze_db, tail_hiss_db
from trainer.evaluation.sets import collect

REPO = Path(__file__).resolve().parents[1]
if not __package__:  # `python bench/sound_check.py`: the suite's own package is not on the path
    sys.path.insert(0, str(REPO))

FLOOR_DB = -160.0
GRID_PERIOD = 16  # the waveform U-Net's output stride (ModelConfig.patch)
GRID_MAX_HZ = 16000.0
GRID_CENTRE_HZ = 100.0
GRID_SIDE_HZ = (300.0, 700.0)
GRID_FLOOR_DB = 100.0
WELCH_N = 2048
STEP_PCT = 1.0  # a clip whose first sample is above this % of its peak starts with a step


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


SHARES = ("pitch_drop", "second_hit")  # measures that are a yes or no per clip: a set shows their share


def measure(clips: np.ndarray, sr: int) -> dict[str, np.ndarray]:
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    on = onsets(x)
    peak_at = np.argmax(np.abs(x), axis=1)
    peak = np.abs(x).max(axis=1)
    f_start = strongest_low(window(x, on, sr, 10, 50), sr)
    f_end = strongest_low(window(x, on, sr, 80, 160), sr)
    tail = x[:, -int(0.05 * sr):]
    jump = np.abs(np.diff(tail, axis=1)).max(axis=1)
    return {
        "start_pct": 100.0 * np.abs(x[:, 0]) / np.maximum(peak, 1e-12),
        "attack_ms": 1000.0 * (peak_at - on) / sr,
        "pitch_start_hz": f_start,
        "pitch_end_hz": f_end,
        "pitch_drop": (f_start >= 1.05 * f_end).astype(float),
        "second_hit": (~np.isnan(second_hit_ms(x, sr))).astype(float),
        "tail_hiss_db": tail_hiss_db(x, sr),
        "end_jump_db": _db((jump / np.maximum(peak, 1e-12)) ** 2),
        "body_hf_db": body_haze_db(x, sr),
    }


def welch_ltas(clips: np.ndarray, sr: int, nperseg: int = WELCH_N) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies, long-term average power spectrum) of a set of clips [n, L]: Hann windows of
    nperseg samples with half overlap, |FFT|^2 averaged over every window of every clip."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    n, length = x.shape
    if length < nperseg:
        x = np.pad(x, ((0, 0), (0, nperseg - length)))
        length = nperseg
    hop = nperseg // 2
    starts = np.arange(0, length - nperseg + 1, hop)
    w = np.hanning(nperseg)
    total = np.zeros(nperseg // 2 + 1)
    for clip in x:
        frames = np.lib.stride_tricks.sliding_window_view(clip, nperseg)[starts] * w
        total += (np.abs(np.fft.rfft(frames, axis=1)) ** 2).sum(axis=0)
    return np.fft.rfftfreq(nperseg, 1.0 / sr), total / (n * len(starts) * (w * w).sum())


def grid_depths(clips: np.ndarray, sr: int, period: int = GRID_PERIOD, max_hz: float = GRID_MAX_HZ,
                centre_hz: float = GRID_CENTRE_HZ, side_hz: tuple[float, float] = GRID_SIDE_HZ,
                floor_db: float = GRID_FLOOR_DB) -> list[dict[str, float | None]]:
    """Per multiple f of sr / period up to max_hz: {"hz": f, "depth_db": level at f minus the level its
    neighbours predict (None where they are more than floor_db under the spectrum's maximum)}; see the
    module docstring."""
    f, p = welch_ltas(clips, sr)
    top = 10 * np.log10(max(float(p.max()), 1e-300))
    out: list[dict[str, float | None]] = []
    step = sr / period
    for k in range(1, int(min(max_hz, sr / 2 - side_hz[1]) // step) + 1):
        fc = k * step

        def level(lo: float, hi: float) -> tuple[float, float]:
            band = (f >= lo) & (f <= hi)
            return 10 * np.log10(max(float(p[band].mean()), 1e-300)), float(np.exp(np.log(f[band]).mean()))

        centre, _ = level(fc - centre_hz, fc + centre_hz)
        below, f_lo = level(fc - side_hz[1], fc - side_hz[0])
        above, f_hi = level(fc + side_hz[0], fc + side_hz[1])
        if min(below, above) < top - floor_db:
            out.append({"hz": fc, "depth_db": None})
            continue
        t = (np.log(fc) - np.log(f_lo)) / (np.log(f_hi) - np.log(f_lo))
        out.append({"hz": fc, "depth_db": float(centre - (below + t * (above - below)))})
    return out


def worst_grid_depth(clips: np.ndarray, sr: int, **kw) -> dict[str, float | None]:
    """{"depth_db": the signed depth of the largest |depth| among grid_depths (0.0 when none could be
    measured), "hz": its frequency (None when none), "per_multiple": grid_depths}."""
    d = grid_depths(clips, sr, **kw)
    measured = [r for r in d if r["depth_db"] is not None]
    if not measured:
        return {"depth_db": 0.0, "hz": None, "per_multiple": d}
    w = max(measured, key=lambda r: abs(r["depth_db"]))
    return {"depth_db": w["depth_db"], "hz": w["hz"], "per_multiple": d}


def diversity_ratios(groups: dict[str, np.ndarray], real: np.ndarray, train: np.ndarray | None, sr: int,
                     embedding: str = "mfcc-stats") -> dict[str, float]:
    """{name: diversity / real diversity} in trainer.evaluate's standardised embedding space (the
    standardiser fitted on real plus train, as `kicktrain eval` does)."""
    return {name: s["diversity_ratio"] for name, s in spread(groups, real, train, sr, embedding).items()}


def spread(groups: dict[str, np.ndarray], real: np.ndarray, train: np.ndarray | None, sr: int,
           embedding: str = "mfcc-stats") -> dict[str, dict]:
    """{name: {diversity_ratio, nn1, nn1_train}} in trainer.evaluate's standardised embedding space: diversity over
    the real held-out set's, and the 1-NN two-sample test (trainer.evaluation.distances.two_sample_1nn) against the
    held-out and the training kicks, as `kicktrain eval` measures them; the real held-out row's nn1 is its random
    halves' baseline, the training row's nn1_train its own halves'."""
    from trainer.embeddings import get_embedding

    emb = get_embedding(embedding)
    e_real = np.asarray(emb(real, sr), dtype=np.float64)
    e_train = None if train is None else np.asarray(emb(train, sr), dtype=np.float64)
    ref = e_real if e_train is None else np.concatenate([e_real, e_train])
    mu, scale = standardiser(ref)
    z_real = (e_real - mu) / scale
    z_train = None if e_train is None else (e_train - mu) / scale
    real_div = diversity(z_real)
    out = {}
    for name, clips in groups.items():
        if clips is real:
            z = z_real
        elif train is not None and clips is train:
            z = z_train
        else:
            z = (np.asarray(emb(clips, sr), dtype=np.float64) - mu) / scale
        out[name] = {"diversity_ratio": diversity(z) / real_div,
                     "nn1": real_halves_1nn(z_real) if z is z_real else two_sample_1nn(z, z_real),
                     "nn1_train": None if z_train is None else
                     (real_halves_1nn(z_train) if z is z_train else two_sample_1nn(z, z_train))}
    return out


BOOT_N = 2000
BOOT_SEED = 0


def bootstrap_interval(v: np.ndarray, stat, n_boot: int = BOOT_N, seed: int = BOOT_SEED) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of stat(v) over the clips: what another draw of as many clips could give.
    The shares and medians here come from 20 real held-out and 64 generated kicks; their intervals are several
    points (dB) wide, wider than some targets' margins, so a figure without one can mislead."""
    v = np.asarray(v, dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = stat(v[rng.integers(0, len(v), size=(n_boot, len(v)))], axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def summarise(m: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per measure: the share (pitch_drop) or the median and quartiles, each with its 95 % bootstrap interval
    (ci_lo, ci_hi); second_hit: its share and count (kicks of n) with the 95 % Wilson interval; with start_pct, also
    step_share: the share of clips whose start_pct is above STEP_PCT."""
    out = {}
    for k, v in m.items():
        if k == "second_hit":  # a share that is often 0: Wilson's interval, which is not [0, 0] then
            kicks = int(np.asarray(v).sum())
            lo, hi = wilson_interval(kicks, len(v))
            out[k] = {"share": float(np.mean(v)) if len(v) else 0.0, "kicks": kicks, "n": len(v), "ci_lo": lo,
                      "ci_hi": hi, "interval": "wilson"}
        elif k in SHARES:
            lo, hi = bootstrap_interval(v, np.mean)
            out[k] = {"share": float(v.mean()), "ci_lo": lo, "ci_hi": hi}
        else:
            q = np.percentile(v, [25, 50, 75])
            lo, hi = bootstrap_interval(v, np.median)
            out[k] = {"median": float(q[1]), "q25": float(q[0]), "q75": float(q[2]), "ci_lo": lo, "ci_hi": hi}
    if "start_pct" in m:
        stepped = (np.asarray(m["start_pct"]) > STEP_PCT).astype(float)
        lo, hi = bootstrap_interval(stepped, np.mean)
        out["step_share"] = {"share": float(stepped.mean()), "ci_lo": lo, "ci_hi": hi}
    return out


def _shown(path: Path) -> str:
    p = path.resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)


def _tag(text: str) -> str:
    if not text or not all(c.isalnum() or c in "-_." for c in text) or text.startswith("."):
        raise argparse.ArgumentTypeError(f"--tag {text!r}: use letters, digits, '-', '_' and '.'")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", nargs="+", default=[str(REPO / "kickserver" / "models" / "default.safetensors")],
                    help="one or several models (of any families)")
    ap.add_argument("--real", nargs="+", default=[str(REPO / "kickserver" / "data" / "kicks")])
    ap.add_argument("--train", nargs="+", default=[str(REPO / "kickserver" / "data" / "kicks")])
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", help="folder for the JSON (default ~/.cache/kickserver/bench)")
    ap.add_argument("--tag", type=_tag, default=None, help="write sound_check-TAG.json instead of sound_check.json")
    ap.add_argument("--real-name", default="real held-out", help="the real set's row name")
    args = ap.parse_args(argv)

    gens, sets = collect(args.artifact, args.real, args.train, n=args.n, steps=args.steps, seed=args.seed,
                         device=args.device)
    sr = sets.sample_rate
    real_name = args.real_name
    # the kicks the models learned from, beside the held-out ones: a model can only be asked to match what
    # it saw (on the starter kit's split, 75 % of the training kicks fall in pitch, 95 % of the held-out)
    train_row = {"real training": sets.train} if sets.train is not None and len(sets.train) else {}
    groups = {real_name: sets.real, **train_row, **{m.label: m.clips for m in sets.models}, "synth": sets.synth}
    rows = {name: summarise(measure(clips, sr)) for name, clips in groups.items()}
    spreads = spread(groups, sets.real, sets.train, sr)
    div = {name: s["diversity_ratio"] for name, s in spreads.items()}
    grid = {name: worst_grid_depth(clips, sr) for name, clips in groups.items()}

    cols = ["start_pct", "step_share", "attack_ms", "pitch_start_hz", "pitch_end_hz", "pitch_drop", "second_hit",
            "tail_hiss_db", "end_jump_db", "body_hf_db"]
    width = max(14, *(len(k) for k in groups))
    print(f"{'set':<{width}} {'n':>3}  " + "  ".join(f"{c:>18}" for c in cols)
          + f"  {'div/real':>8}  {'1-NN held-out':>18}  {'1-NN train':>18}  {'grid dB @ Hz':>16}")
    for name, r in rows.items():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{v['kicks']}/{v['n']}".rjust(18) if "kicks" in v else
                         f"{v['share']:>18.2f}" if "share" in v else
                         f"{v['median']:>7.1f} [{v['q25']:.0f}..{v['q75']:.0f}]".rjust(18))
        g = grid[name]
        cells.append(f"{div[name]:>8.2f}")
        for key in ("nn1", "nn1_train"):
            t = spreads[name][key]
            cells.append((f"{t['accuracy']:.2f} [{t['lo']:.2f}..{t['hi']:.2f}]" if t else "-").rjust(18))
        cells.append((f"{g['depth_db']:+.1f} @ {g['hz']:.0f}" if g["hz"] is not None else "-").rjust(16))
        print(f"{name:<{width}} {len(groups[name]):>3}  " + "  ".join(cells))
    print("95 % intervals: bootstrap (resampling each set's clips) of the pitch_drop and step_share shares and the "
          "body_hf_db and attack_ms medians; Wilson of the second_hit share")
    for name, r in rows.items():
        print(f"{name:<{width}} {len(groups[name]):>3}  "
              + "  ".join(f"{c} {r[c]['ci_lo']:.{d}f}..{r[c]['ci_hi']:.{d}f}"
                          for c, d in (("pitch_drop", 2), ("second_hit", 3), ("step_share", 2), ("body_hf_db", 1),
                                       ("attack_ms", 1))))

    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine()},
        "artifacts": [_shown(Path(a)) for a in args.artifact],
        "model_steps": {g.name: g.artifact.step for g in gens},
        "n": args.n, "seed": args.seed, "notes": sets.notes,
        "real": [_shown(Path(p)) for p in args.real], "train": [_shown(Path(p)) for p in args.train],
        "real_files": [Path(p).name for p in sets.real_sources],
        "grid": {"period": GRID_PERIOD, "max_hz": GRID_MAX_HZ, "centre_hz": GRID_CENTRE_HZ,
                 "side_hz": list(GRID_SIDE_HZ), "floor_db": GRID_FLOOR_DB, "welch_n": WELCH_N},
        "sets": {name: {"n": len(groups[name]), **r, **spreads[name], "grid": grid[name]}
                 for name, r in rows.items()},
    }
    from bench.common import portable, user_results
    from kickmodel.fsutil import atomic_write_bytes

    out = Path(args.out) if args.out else user_results()
    out.mkdir(parents=True, exist_ok=True)

    path = out / (f"sound_check-{args.tag}.json" if args.tag else "sound_check.json")
    atomic_write_bytes(path, (json.dumps(portable(report), indent=1) + "\n").encode())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
