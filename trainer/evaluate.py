"""`kicktrain eval`: how close models' kicks are to real ones, whether they copy, at which steps.

    kicktrain eval model.safetensors --real heldout/ --train train/ --out eval/ [--steps 10,25,50]
    kicktrain eval model.safetensors --real kicks/ --train kicks/   # the folder it was trained on: the
                                                                    # split it recorded (or `fit`'s split)
    kicktrain eval wave.safetensors vae.safetensors ld.safetensors --real kicks/ --train kicks/
                                                                    # families side by side, one table

One run scores these sets against the same real reference and prints one table (also report.json):
"NAME @ N" for each model and step count ("NAME" alone for a one-pass family; n kicks from seeds
seed..seed+n-1, no controls set, rendered and finished as the daemon renders them), "procedural baseline"
(n procedural kicks from `trainer.synth`, finished the same way: the baseline a model must beat by
far; never named "synth", which a model may be called), and "real vs real" (real held-out kicks
against other real held-out kicks: the floor a perfect model would reach). Real and training clips are
decoded with `kickmodel.clips.load_clip` and the artifact's DataConfig, so every set has the same rate,
length, onset alignment and peak level.

Distances (on a clip-level embedding, `trainer.embeddings`, default "mfcc-stats"):
- Normalisation: every feature is standardised by the mean and standard deviation of all real
  clips at hand (the real held-out set, plus the training set when --train is given: a held-out
  split of a small library has too few clips for stable per-feature statistics), the std floored
  at STD_FLOOR_REL x the median std over features so a feature the real clips never move cannot
  blow up. It is one fixed linear map for every row, so rows are comparable. Novelty and
  diversity use the same standardised space, in RMS z-units (Euclidean / sqrt(dim)).
- Splits: the real held-out set R is split K times (all splits when there are few, else K random
  ones) into a reference half A (ceil |R|/2) and a compared half B (m = floor |R|/2). For each
  split, "real vs real" is D(B, A); every other row is D(G, A) for a block of m of its clips
  (rotating through the set; block k is the same seeds in every model row), so all rows use the
  same references and the same set sizes (FAD is biased by set size). A row's figure is the mean
  over splits; +- is the standard deviation over splits.
- FAD: the Frechet distance between Gaussians fitted to the two sets,
  |mu_a - mu_b|^2 + tr(S_a) + tr(S_b) - 2 tr((S_a S_b)^1/2), without scipy (see
  frechet_distance). With fewer clips than features it is strongly biased: compare rows, not
  runs with other set sizes.
- KID: the unbiased MMD^2 with the polynomial kernel k(x, y) = (x.y / dim + 1)^3 (Binkowski et
  al. 2018, "Demystifying MMD GANs"); unbiased, so usable with a few dozen clips; can be < 0.
- KID(train), FAD(train) (with --train; secondary): the same distances against the training set,
  which is usually ten times the held-out split: "real vs real" is then R against the training
  set, every other row blocks of |R| clips against it. Steadier than the held-out figures, but a
  copier scores well on them: read them beside novelty.
- Novelty (needs --train): per clip, the distance to its nearest training clip; median per set,
  and its ratio to the real held-out kicks' own median distance to the training set (a copier
  scores ~0). Also the waveform view: per clip, the largest |normalised cross-correlation| with
  any training clip over lags within +-NCC_MAX_LAG_MS; clips at or above COPY_NCC count as copies.
- Diversity: mean pairwise distance within a set, and its ratio to the real held-out set's.
- Tail hiss: energy above TAIL_HZ in the window 400..900 ms after the onset (scaled to 40..90 %
  of the clip for clips shorter than 1 s), dB re. the clip's peak, median per set. Real kicks
  decay to near silence; the first naive model's hiss sat ~30 dB under the peak.
- End level: RMS of the 50 ms before the last 30 ms (before the fades), dB re. peak: a kick still
  ringing when the clip is cut.
- Haze: `body_haze_db`, the body's energy between 1 and 8 kHz (30..200 ms after the onset) re. the
  window's energy; the table shows each set's median minus the real held-out kicks' (0: as real).
- 2nd hit: the kicks of the set that hit again after their first hit (kickmodel.descriptors.second_hit_ms: a
  flam, a loop's next beat), with the share's 95 % Wilson interval (not [0, 0] when none does). A one-shot has
  none; every finished kick goes through the guard that fades a second hit out (kickmodel.dsp.finish_kick), so a
  model's row shows what a user gets (bench/studies/second_hits.py measures a model before the guard); the real
  row counts the held-out files as they are.
- Cost: s/kick is one kick rendered alone after a warm-up kick at the same settings, on LATENCY_THREADS CPU
  thread (median of LATENCY_REPS, the daemon's case: `kickserver serve --threads 1`) on the eval's device; the
  training columns (hours in training steps, samples/s, peak memory) come from the artifact's training summary,
  measured by `kicktrain fit` on its own machine.
- Recommended steps (per diffusion model): see STEP_RULE.

The command and the report it writes are here; the sets, distances, measures, scoring and the table are in
trainer/evaluation/ (its __init__ lists them), the copy detection in trainer/xcorr.py.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .evaluation.measures import HAZE_HZ, HAZE_MS, TAIL_HZ, tail_window_ms
from .evaluation.report import format_legend, format_table, json_safe, write_pictures
from .evaluation.scoring import COPY_NCC, DEFAULT_SPLITS, NCC_MAX_LAG_MS, NORMALISATION, STEP_RULE, score
from .evaluation.sets import BASELINE, EVAL_BATCH, LATENCY_REPS, LATENCY_THREADS, EvalSets, Log, collect, log_stderr

REPORT_VERSION = 2


def evaluate(artifacts: str | Path | Sequence[str | Path], real: str | Path | Sequence[str | Path],
             train: str | Path | Sequence[str | Path] | None = None, *,
             n: int = 64, steps: Sequence[int] = (10, 25, 50), sampler: str | None = None, seed: int = 0,
             embedding: str = "mfcc-stats", device: str = "auto", splits: int = DEFAULT_SPLITS,
             log: Log = log_stderr) -> tuple[dict[str, Any], EvalSets]:
    """The whole evaluation of one or several models (of any families) on the same real sets: (report
    dict, the sets it looked at). Writes nothing. real and train are folders or files (one or a list);
    train may be the same as real (then the models' recorded split, or `fit`'s held-out split)."""
    from .embeddings import get_embedding

    emb = get_embedding(embedding)  # fail on a bad spec before generating anything
    real = [real] if isinstance(real, (str, Path)) else list(real)
    train = [train] if isinstance(train, (str, Path)) else (list(train) if train else None)
    artifacts = [artifacts] if isinstance(artifacts, (str, Path)) else list(artifacts)
    steps = sorted({int(s) for s in steps})
    t0 = time.perf_counter()
    gens, sets = collect(artifacts, real, train, n=n, steps=steps, sampler=sampler, seed=seed, device=device,
                         log=log)
    t_collect = time.perf_counter() - t0
    scored = score(sets, emb, splits=splits, seed=seed, log=log)
    scored["timings"]["collect_s"] = t_collect
    names = emb.feature_names() if hasattr(emb, "feature_names") else None
    report = {
        "version": REPORT_VERSION,
        "artifacts": [str(a) for a in artifacts],
        "models": [g.describe() for g in gens],
        "embedding": {"name": emb.name, "dim": int(emb.dim), "version": getattr(emb, "version", None),
                      "features": names},
        "normalisation": NORMALISATION,
        "sample_rate": sets.sample_rate,
        "length": int(sets.real.shape[1]),
        "n_generated": n,
        "n_real": int(len(sets.real)),
        "n_train": int(len(sets.train)) if sets.train is not None else 0,
        "steps": steps,
        "sampler": sampler,
        "seed": seed,
        "seeds": (f"model kicks: seeds {seed}..{seed + n - 1}; {BASELINE}: synth_batch(n, seed={seed}); splits: "
                  f"seed {seed}"),
        "device": str(gens[0].device),
        "batch": EVAL_BATCH,
        "latency": (f"one kick alone after a warm-up at the same settings, on {LATENCY_THREADS} CPU thread(s), "
                    f"median of {LATENCY_REPS} (s/kick)"),
        "step_rule": STEP_RULE,
        "copy_ncc": COPY_NCC,
        "ncc_max_lag_ms": NCC_MAX_LAG_MS,
        "tail_window_ms": list(tail_window_ms(int(sets.real.shape[1]), sets.sample_rate)),
        "tail_hz": TAIL_HZ,
        "haze": {"window_ms": list(HAZE_MS), "band_hz": list(HAZE_HZ)},
        "notes": sets.notes,
        "skipped": [list(s) for s in sets.skipped],
        "real_sources": sets.real_sources,
        **scored,
    }
    return json_safe(report), sets


def parse_steps(text: str) -> list[int]:
    try:
        steps = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--steps {text!r}: expected comma-separated integers, e.g. 10,25,50") from None
    if not steps or any(s < 1 for s in steps):
        raise ValueError(f"--steps {text!r}: expected positive integers, e.g. 10,25,50")
    return steps


def main(args: argparse.Namespace) -> int:
    """`kicktrain eval`: print the table, write OUT/report.json and the pictures."""
    from kickmodel.fsutil import atomic_write_bytes

    steps = parse_steps(args.steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report, sets = evaluate(args.artifacts, [args.real], [args.train] if args.train else None, n=args.n,
                            steps=steps, sampler=args.sampler, seed=args.seed, embedding=args.embedding,
                            device=args.device, splits=getattr(args, "splits", DEFAULT_SPLITS))
    title = ", ".join(f"{m.get('name', '')} (step {m.get('step', '?')})" for m in report["models"])
    pictures = write_pictures(sets, out, Path(args.run) if args.run else None, title=title)
    if args.run and not any(p.name == "loss.png" for p in pictures):
        log_stderr(f"note: no loss curve: {Path(args.run) / 'metrics.jsonl'} is missing or has no losses")
    report["pictures"] = [p.name for p in pictures]
    buf = io.StringIO()
    json.dump(report, buf, indent=1, allow_nan=False)
    atomic_write_bytes(out / "report.json", buf.getvalue().encode())
    print(format_table(report))
    print()
    print(format_legend())
    print()
    for name, rec in report["recommended_steps"].items():
        print(f"recommended steps for {name}: {rec} ({STEP_RULE})")
    print(f"embedding {report['embedding']['name']} ({report['embedding']['dim']} features); "
          f"{report['n_real']} real held-out clips, {report['n_train']} training clips; "
          f"FAD/KID over {report['splits']} splits of {report['reference_size']} reference vs "
          f"{report['compared_size']} compared clips")
    print(f"wrote {out / 'report.json'}" + "".join(f", {out / p}" for p in report["pictures"]))
    return 0
