"""Scoring: every set against the same real reference, the rows of `kicktrain eval`'s table, and the
recommended step count per diffusion model.

The real held-out set is split many times into a reference half and a compared half, and every row is
measured against the same reference halves with sets of the same size (FAD is biased by set size); the
embedding is standardised once, by the real clips, for every row. The protocol in full: the "Splits" part
of trainer/evaluate.py's docstring; the step rule: STEP_RULE.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import torch

from ..xcorr import max_xcorr
from .distances import (
    STD_FLOOR_REL,
    diversity,
    frechet_distance,
    mmd2_unbiased,
    novelty,
    real_halves_1nn,
    standardiser,
    two_sample_1nn,
    wilson_interval,
)
from .measures import body_haze_db, end_level_db, tail_hiss_db
from .sets import BASELINE, EvalSets, Log, log_stderr

DEFAULT_SPLITS = 50
NCC_MAX_LAG_MS = 5.0
COPY_NCC = 0.95
STEP_REL_TOL = 0.10
STEP_RULE = ("the smallest step count whose mean KID is within 10 % of the best step count's, or whose "
             "per-split KID excess over the best is below its standard error (std / sqrt(splits))")
NORMALISATION = ("features standardised by the mean and std of the real held-out clips plus the training clips "
                 f"when given (std floored at {STD_FLOOR_REL:g} x the median std over features); the same map "
                 "for every row")


def split_plan(n_real: int, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(reference A, compared B) index pairs: A has ceil(n/2) clips, B the rest. All splits when
    there are at most n_splits of them, else n_splits random ones (seeded)."""
    k = (n_real + 1) // 2
    everyone = np.arange(n_real)
    if math.comb(n_real, k) <= n_splits:
        combos = [np.array(c) for c in itertools.combinations(range(n_real), k)]
    else:
        rng = np.random.default_rng(seed)
        combos = [np.sort(rng.permutation(n_real)[:k]) for _ in range(n_splits)]
    return [(a, np.setdiff1d(everyone, a)) for a in combos]


def _block(z: np.ndarray, k: int, size: int) -> np.ndarray:
    """The k-th block of `size` rows of z, rotating through it (the whole of z when it is smaller)."""
    size = min(size, len(z))
    return z[(k * size + np.arange(size)) % len(z)]


def _row_stats(vals: list[float]) -> tuple[float, float]:
    v = np.asarray(vals, dtype=np.float64)
    return float(v.mean()), float(v.std())


def _median(v: np.ndarray) -> float:
    return float(np.median(v))


def score(sets: EvalSets, embedding, *, splits: int = DEFAULT_SPLITS, seed: int = 0,
          log: Log = log_stderr) -> dict[str, Any]:
    """Rows of the table (a dict per set) plus the recommended steps; see the module docstring."""
    from kickmodel.descriptors import CONTROL_NAMES, measure, second_hit_ms

    sr = sets.sample_rate
    t0 = time.perf_counter()
    named: list[tuple[str, str, int | None, np.ndarray]] = [("real vs real", "real", None, sets.real)]
    named += [(m.label, "model", m.steps, m.clips) for m in sets.models]
    named.append((BASELINE, "synth", None, sets.synth))
    by_label = {m.label: m for m in sets.models}
    emb = {name: np.asarray(embedding(clips, sr), dtype=np.float64) for name, _, _, clips in named}
    train_emb = np.asarray(embedding(sets.train, sr), dtype=np.float64) if sets.train is not None else None
    t_emb = time.perf_counter() - t0

    norm_ref = emb["real vs real"] if train_emb is None else np.concatenate([emb["real vs real"], train_emb])
    mu, scale = standardiser(norm_ref)
    z = {k: (v - mu) / scale for k, v in emb.items()}
    z_train = (train_emb - mu) / scale if train_emb is not None else None
    z_real = z["real vs real"]
    plan = split_plan(len(z_real), splits, seed)
    m = len(plan[0][1])
    max_lag = int(round(NCC_MAX_LAG_MS * sr / 1000))
    real_div = diversity(z_real)
    real_nov = _median(novelty(z_real, z_train)) if z_train is not None else None
    real_haze = _median(body_haze_db(sets.real, sr))

    rows: list[dict[str, Any]] = []
    per_split_kid: dict[str, np.ndarray] = {}
    h = len(z_real)
    for name, kind, steps, clips in named:
        zs = z[name]
        fads, kids = [], []
        for k, (ia, ib) in enumerate(plan):
            comp = z_real[ib] if kind == "real" else _block(zs, k, m)
            fads.append(frechet_distance(comp, z_real[ia]))
            kids.append(mmd2_unbiased(comp, z_real[ia]))
        per_split_kid[name] = np.asarray(kids)
        fad, fad_sd = _row_stats(fads)
        kd, kd_sd = _row_stats(kids)
        row: dict[str, Any] = {"name": name, "kind": kind, "steps": steps, "n": len(clips) if kind != "real" else m,
                               "fad": fad, "fad_std": fad_sd, "kid": kd, "kid_std": kd_sd}
        if z_train is not None:  # secondary: against the (larger) training set, blocks the size of R
            blocks = [zs] if kind == "real" else [_block(zs, k, h) for k in range(max(1, len(zs) // h))]
            row["fad_train"], row["fad_train_std"] = _row_stats([frechet_distance(b, z_train) for b in blocks])
            row["kid_train"], row["kid_train_std"] = _row_stats([mmd2_unbiased(b, z_train) for b in blocks])
            nov = novelty(zs, z_train)
            ncc = max_xcorr(clips, sets.train, max_lag)
            row.update({"novelty": _median(nov), "novelty_ratio": _median(nov) / real_nov if real_nov else None,
                        "ncc_median": _median(ncc), "ncc_max": float(ncc.max()),
                        "copies": int((ncc >= COPY_NCC).sum())})
        else:
            row.update({k: None for k in ("fad_train", "fad_train_std", "kid_train", "kid_train_std", "novelty",
                                          "novelty_ratio", "ncc_median", "ncc_max", "copies")})
        # the 1-NN two-sample test against the held-out kicks (the real row: random halves of them, its baseline)
        # and against the training kicks (the real row: held-out against training)
        row["nn1"] = real_halves_1nn(z_real, seed=seed) if kind == "real" else two_sample_1nn(zs, z_real, seed=seed)
        row["nn1_train"] = two_sample_1nn(zs, z_train, seed=seed) if z_train is not None else None
        div = diversity(zs)
        haze = _median(body_haze_db(clips, sr))
        row.update({"diversity": div, "diversity_ratio": div / real_div if real_div > 0 else None,
                    "haze_db": haze, "haze_vs_real_db": haze - real_haze,
                    "tail_hiss_db": _median(tail_hiss_db(clips, sr)), "end_db": _median(end_level_db(clips, sr))})
        mr = by_label.get(name)
        tr = mr.training if mr is not None else {}
        row.update({"artifact": mr.name if mr else None, "family": mr.family if mr else None,
                    "seconds_per_kick": mr.seconds_per_kick if mr else None,
                    "latency_s": mr.latency_s if mr else None,
                    "train_seconds": tr.get("train_seconds"), "train_samples_per_s": tr.get("samples_per_s"),
                    "train_peak_memory_mb": tr.get("peak_memory_mb"), "train_device": tr.get("device"),
                    "train_steps": tr.get("steps")})
        hits = int((~np.isnan(second_hit_ms(clips, sr))).sum())
        lo, hi = wilson_interval(hits, len(clips))
        row["second_hit"] = {"kicks": hits, "n": len(clips), "share": hits / len(clips) if len(clips) else 0.0,
                             "lo": lo, "hi": hi}
        desc = measure(torch.from_numpy(np.ascontiguousarray(clips)), sr).numpy()
        row["descriptors"] = {c: float(np.median(desc[:, i])) for i, c in enumerate(CONTROL_NAMES)}
        rows.append(row)

    by = {r["name"]: r for r in rows}
    rr, sy = by["real vs real"], by[BASELINE]
    model_rows = [r for r in rows if r["kind"] == "model"]
    for r in model_rows:
        span = sy["fad"] - rr["fad"]
        r["targets"] = {
            "kid_at_most_tenth_of_synth": bool(r["kid"] <= 0.1 * sy["kid"]),
            "kid_train_at_most_tenth_of_synth": (bool(r["kid_train"] <= 0.1 * sy["kid_train"])
                                                 if r["kid_train"] is not None else None),
            "fad_position": (r["fad"] - rr["fad"]) / span if span > 0 else None,
            "novelty_at_least_half_of_real": (bool(r["novelty_ratio"] >= 0.5)
                                              if r["novelty_ratio"] is not None else None),
        }
    recommended = {}
    for artifact in dict.fromkeys(r["artifact"] for r in model_rows):
        mine = [r for r in model_rows if r["artifact"] == artifact and r["steps"] is not None]
        if mine:
            recommended[artifact] = recommend_steps({r["steps"]: per_split_kid[r["name"]] for r in mine})
    log(f"scored {len(rows)} sets in {time.perf_counter() - t0:.1f} s (embedding {t_emb:.1f} s)")
    return {"rows": rows, "recommended_steps": recommended, "splits": len(plan), "reference_size": len(plan[0][0]),
            "compared_size": m, "real_diversity": real_div, "real_novelty": real_nov,
            "timings": {"embedding_s": t_emb, "scoring_s": time.perf_counter() - t0}}


def recommend_steps(per_split_kid: dict[int, np.ndarray]) -> int | None:
    """STEP_RULE over {steps: KID per split} (the same splits for every step count)."""
    if not per_split_kid:
        return None
    means = {s: float(np.mean(v)) for s, v in per_split_kid.items()}
    best = min(means, key=lambda s: (means[s], s))
    for s in sorted(per_split_kid):
        diff = per_split_kid[s] - per_split_kid[best]
        se = float(diff.std() / math.sqrt(len(diff))) if len(diff) > 1 else 0.0
        if means[s] - means[best] <= max(STEP_REL_TOL * abs(means[best]), se):
            return s
    return best
