"""`kicktrain eval`: how close models' kicks are to real ones, whether they copy, at which steps.

    kicktrain eval model.safetensors --real heldout/ --train train/ --out eval/ [--steps 10,25,50]
    kicktrain eval model.safetensors --real kicks/ --train kicks/   # the folder it was trained on: the
                                                                    # split it recorded (or `fit`'s split)
    kicktrain eval wave.safetensors vae.safetensors ld.safetensors --real kicks/ --train kicks/
                                                                    # families side by side, one table

One run scores these sets against the same real reference and prints one table (also report.json):
"NAME @ N" for each model and step count ("NAME" alone for a one-pass family; n kicks from seeds
seed..seed+n-1, no controls set, rendered and finished as the daemon renders them), "synth" (n
procedural kicks from `trainer.synth`, finished the same way: the baseline a model must beat by
far), and "real vs real" (real held-out kicks against other real held-out kicks: the floor a perfect
model would reach). Real and training clips are
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
- Cost: s/kick is one kick rendered alone (median of LATENCY_REPS, the daemon's case) on the eval's
  device; the training columns (hours in training steps, samples/s, peak memory) come from the
  artifact's training summary, measured by `kicktrain fit` on its own machine.
- Recommended steps (per diffusion model): see STEP_RULE.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPORT_VERSION = 2
EVAL_BATCH = 16  # kicks per sampler call
LATENCY_REPS = 3  # one-kick renders timed per row (median)
STD_FLOOR_REL = 0.1
DEFAULT_SPLITS = 50
NCC_MAX_LAG_MS = 5.0
COPY_NCC = 0.95
ONSET_DB = -30.0
TAIL_MS = (400.0, 900.0)
TAIL_HZ = 4000.0
END_MS = (80.0, 30.0)  # the window from 80 ms to 30 ms before the end
FLOOR_DB = -120.0
HAZE_MS = (30.0, 200.0)
HAZE_HZ = (1000.0, 8000.0)
STEP_REL_TOL = 0.10
STEP_RULE = ("the smallest step count whose mean KID is within 10 % of the best step count's, or whose "
             "per-split KID excess over the best is below its standard error (std / sqrt(splits))")
NORMALISATION = ("features standardised by the mean and std of the real held-out clips plus the training clips "
                 f"when given (std floored at {STD_FLOOR_REL:g} x the median std over features); the same map "
                 "for every row")

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# distances between sets of embeddings


def _two_d(a: np.ndarray, name: str = "features") -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be [n, dim], got shape {a.shape}")
    return a


def standardiser(real: np.ndarray, floor_rel: float = STD_FLOOR_REL) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) of the reference real set; scale is the std floored at floor_rel x its median."""
    r = _two_d(real, "real features")
    mu = r.mean(axis=0)
    sd = r.std(axis=0)
    floor = floor_rel * float(np.median(sd))
    if not floor > 0:
        floor = 1e-12
    return mu, np.maximum(sd, floor)


def _sqrt_psd(c: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((c + c.T) / 2)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def frechet_distance(a: np.ndarray, b: np.ndarray, eps: float = 0.0) -> float:
    """Frechet distance between Gaussians fitted to a [n, d] and b [m, d] (FID/FAD, Heusel et al. 2017):
    |mu_a - mu_b|^2 + tr(S_a) + tr(S_b) - 2 tr((S_a S_b)^1/2), covariances with n - 1.

    tr((S_a S_b)^1/2) is the sum of the square roots of the eigenvalues of the symmetric
    S_a^1/2 S_b S_a^1/2 (same spectrum; S_a^1/2 by eigh), or, when a set has fewer clips than
    features, the nuclear norm of A B^T / sqrt((n - 1)(m - 1)) for the centred sets A, B (the
    nonzero eigenvalues of S_a S_b are the squared singular values of that n x m matrix): exact,
    stable with singular covariances, and cheap. eps adds eps * I to both covariances (d x d path).
    """
    a, b = _two_d(a), _two_d(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"feature sizes differ: {a.shape[1]} and {b.shape[1]}")
    n, m, d = len(a), len(b), a.shape[1]
    if n < 2 or m < 2:
        raise ValueError("the Frechet distance needs at least 2 clips per set")
    ac, bc = a - a.mean(axis=0), b - b.mean(axis=0)
    diff = a.mean(axis=0) - b.mean(axis=0)
    tr_a = float((ac * ac).sum()) / (n - 1) + eps * d
    tr_b = float((bc * bc).sum()) / (m - 1) + eps * d
    if eps == 0.0 and min(n, m) <= d:
        tr_sqrt = float(np.linalg.svd(ac @ bc.T, compute_uv=False).sum()) / math.sqrt((n - 1) * (m - 1))
    else:
        ca = ac.T @ ac / (n - 1) + eps * np.eye(d)
        cb = bc.T @ bc / (m - 1) + eps * np.eye(d)
        sa = _sqrt_psd(ca)
        prod = sa @ cb @ sa
        tr_sqrt = float(np.sqrt(np.clip(np.linalg.eigvalsh((prod + prod.T) / 2), 0.0, None)).sum())
    return max(0.0, float(diff @ diff) + tr_a + tr_b - 2.0 * tr_sqrt)


def mmd2_unbiased(a: np.ndarray, b: np.ndarray, degree: int = 3, gamma: float | None = None,
                  coef0: float = 1.0) -> float:
    """Unbiased MMD^2 between a [n, d] and b [m, d] with k(x, y) = (gamma x.y + coef0)^degree, gamma = 1/d."""
    a, b = _two_d(a), _two_d(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"feature sizes differ: {a.shape[1]} and {b.shape[1]}")
    n, m = len(a), len(b)
    if n < 2 or m < 2:
        raise ValueError("the unbiased MMD needs at least 2 clips per set")
    g = 1.0 / a.shape[1] if gamma is None else gamma
    kxx = (g * a @ a.T + coef0) ** degree
    kyy = (g * b @ b.T + coef0) ** degree
    kxy = (g * a @ b.T + coef0) ** degree
    xx = (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
    yy = (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
    return float(xx + yy - 2.0 * kxy.mean())


def kid(a: np.ndarray, b: np.ndarray, degree: int = 3, gamma: float | None = None, coef0: float = 1.0,
        subset_size: int | None = None, n_subsets: int = 100, seed: int = 0) -> float:
    """Kernel Inception/Audio Distance (Binkowski et al. 2018): the unbiased MMD^2 with the cubic
    polynomial kernel. With subset_size, the mean over n_subsets random subsets of that size of
    each set (as the original); without, one estimate on the whole sets."""
    a, b = _two_d(a), _two_d(b)
    if subset_size is None or subset_size >= min(len(a), len(b)):
        return mmd2_unbiased(a, b, degree, gamma, coef0)
    rng = np.random.default_rng(seed)
    vals = [mmd2_unbiased(a[rng.choice(len(a), subset_size, replace=False)],
                          b[rng.choice(len(b), subset_size, replace=False)], degree, gamma, coef0)
            for _ in range(n_subsets)]
    return float(np.mean(vals))


def _pairwise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.sqrt(np.clip(sq, 0.0, None)) / math.sqrt(a.shape[1])


def novelty(gen: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Per clip of gen [n, d], the distance (Euclidean / sqrt(d)) to its nearest clip in train [t, d]."""
    gen, train = _two_d(gen), _two_d(train)
    if len(train) == 0:
        raise ValueError("novelty needs at least one training clip")
    return _pairwise(gen, train).min(axis=1)


def diversity(emb: np.ndarray) -> float:
    """Mean pairwise distance (Euclidean / sqrt(d)) within a set [n, d]."""
    e = _two_d(emb)
    if len(e) < 2:
        raise ValueError("diversity needs at least 2 clips")
    dist = _pairwise(e, e)
    return float(dist[np.triu_indices(len(e), 1)].mean())


def _fast_len(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (a quick FFT size)."""
    best = 1 << math.ceil(math.log2(max(n, 1)))
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            p = p35
            while p < n:
                p *= 2
            best = min(best, p)
            p35 *= 3
        p5 *= 5
    return best


@torch.no_grad()
def max_xcorr(clips: np.ndarray, ref: np.ndarray, max_lag: int, chunk: int = 4) -> np.ndarray:
    """Per clip [n, L], the largest |normalised cross-correlation| with any clip of ref [t, L'] over
    lags -max_lag..max_lag (sum x[i + lag] r[i] / (|x| |r|); 1.0 for a copy, a shifted copy or an
    inverted one)."""
    x = torch.as_tensor(np.atleast_2d(np.asarray(clips, dtype=np.float32)))
    r = torch.as_tensor(np.atleast_2d(np.asarray(ref, dtype=np.float32)))
    length = max(x.shape[1], r.shape[1])
    nfft = _fast_len(length + max_lag + 1)
    xn = x.double().norm(dim=1).clamp(min=1e-12)
    rn = r.double().norm(dim=1).clamp(min=1e-12)
    R = torch.fft.rfft(r, n=nfft).conj()
    X = torch.fft.rfft(x, n=nfft)
    lags = torch.cat([torch.arange(0, max_lag + 1), torch.arange(nfft - max_lag, nfft)])
    out = np.empty(x.shape[0])
    for s in range(0, x.shape[0], chunk):
        c = torch.fft.irfft(X[s:s + chunk, None, :] * R[None, :, :], n=nfft)[:, :, lags]  # [c, t, lags]
        best = (c.abs().amax(dim=2).double() / (xn[s:s + chunk, None] * rn[None, :])).amax(dim=1)
        out[s:s + chunk] = best.numpy()
    return out


# ----------------------------------------------------------------------------------------------
# product measures on the audio itself


def _onsets(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    peak = a.max(axis=1, keepdims=True)
    return np.argmax(a >= peak * 10 ** (ONSET_DB / 20), axis=1)


def _db(v: np.ndarray) -> np.ndarray:
    return np.maximum(10 * np.log10(np.maximum(v, 1e-300)), FLOOR_DB)


def tail_window_ms(length: int, sample_rate: int) -> tuple[float, float]:
    """The tail window after the onset: TAIL_MS, scaled to 40..90 % of the clip when it is shorter."""
    dur_ms = 1000.0 * length / sample_rate
    return min(TAIL_MS[0], 0.4 * dur_ms), min(TAIL_MS[1], 0.9 * dur_ms)


def tail_hiss_db(clips: np.ndarray, sample_rate: int, cutoff_hz: float = TAIL_HZ) -> np.ndarray:
    """Per clip: mean-square energy above cutoff_hz in the tail window (see tail_window_ms) after the
    onset, dB re. the clip's peak squared (Hann-windowed periodogram; zeros beyond the clip's end)."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    n, length = x.shape
    a_ms, b_ms = tail_window_ms(length, sample_rate)
    a = int(round(a_ms * sample_rate / 1000))
    w_len = max(8, int(round((b_ms - a_ms) * sample_rate / 1000)))
    idx = _onsets(x)[:, None] + a + np.arange(w_len)[None, :]
    seg = np.where(idx < length, np.take_along_axis(x, np.minimum(idx, length - 1), axis=1), 0.0)
    w = np.hanning(w_len)
    p = np.abs(np.fft.rfft(seg * w, axis=1)) ** 2
    f = np.fft.rfftfreq(w_len, 1.0 / sample_rate)
    ms = 2.0 * p[:, f >= cutoff_hz].sum(axis=1) / (w_len * (w * w).sum())
    peak2 = np.abs(x).max(axis=1) ** 2
    return _db(ms / np.maximum(peak2, 1e-300))


def body_haze_db(clips: np.ndarray, sample_rate: int) -> np.ndarray:
    """The haze over the body: energy between HAZE_HZ over HAZE_MS after the onset (the first sample at 10 %
    of the peak), dB re. all the energy in that window (Hann window). Real kick bodies are nearly pure
    low tones; the first bundled model put about 11 dB more here than real kicks."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    peak = np.abs(x).max(axis=1, keepdims=True)
    on = np.argmax(np.abs(x) >= 0.1 * np.maximum(peak, 1e-12), axis=1)
    a, n = int(HAZE_MS[0] * sample_rate / 1000), int((HAZE_MS[1] - HAZE_MS[0]) * sample_rate / 1000)
    idx = on[:, None] + a + np.arange(n)[None, :]
    body = np.where(idx < x.shape[1], np.take_along_axis(x, np.minimum(idx, x.shape[1] - 1), axis=1), 0.0)
    spec = np.abs(np.fft.rfft(body * np.hanning(n), axis=1)) ** 2
    f = np.fft.rfftfreq(n, 1.0 / sample_rate)
    hf = spec[:, (f >= HAZE_HZ[0]) & (f <= HAZE_HZ[1])].sum(axis=1)
    return _db(hf / np.maximum(spec.sum(axis=1), 1e-300))


def end_level_db(clips: np.ndarray, sample_rate: int) -> np.ndarray:
    """Per clip: RMS from END_MS[0] to END_MS[1] ms before the end, dB re. the clip's peak."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    length = x.shape[1]
    a = max(0, length - int(round(END_MS[0] * sample_rate / 1000)))
    b = max(a + 1, length - int(round(END_MS[1] * sample_rate / 1000)))
    ms = (x[:, a:b] ** 2).mean(axis=1)
    return _db(ms / np.maximum(np.abs(x).max(axis=1) ** 2, 1e-300))


# ----------------------------------------------------------------------------------------------
# the sets


@dataclass
class ModelRow:
    """One generated set: an artifact at one step count (one-pass families: steps None)."""

    label: str
    artifact: str
    name: str
    family: str
    steps: int | None
    clips: np.ndarray
    seconds_per_kick: float  # batch of EVAL_BATCH, per kick
    latency_s: float  # one kick alone (median of LATENCY_REPS), the daemon's case
    training: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalSets:
    """Every clip an evaluation looked at, [n, L] float32 at sample_rate."""

    sample_rate: int
    real: np.ndarray
    train: np.ndarray | None
    models: list[ModelRow]
    synth: np.ndarray
    real_sources: list[str] = field(default_factory=list)
    train_sources: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_folder(paths: Sequence[str | Path], cfg, log: Log = _stderr) -> tuple[np.ndarray, list[str], list[str],
                                                                               list[tuple[str, str]]]:
    """(clips [n, cfg.length], sources, sha256s, skipped) of every usable file under paths, decoded
    with kickmodel.clips.load_clip exactly as training decodes them."""
    from .data import BadAudio, NoUsableAudio, load_clip, scan_audio, sha256_file

    files = scan_audio(paths)
    clips, sources, shas, skipped = [], [], [], []
    for f in files:
        try:
            clip, _ = load_clip(f, cfg)
        except BadAudio as e:
            reason = str(e)
        except (OSError, RuntimeError, ValueError) as e:
            reason = f"unreadable: {e}"
        else:
            clips.append(clip)
            sources.append(str(f))
            shas.append(sha256_file(f))
            continue
        log(f"skipped {f}: {reason}")
        skipped.append((str(f), reason))
    if not clips:
        where = ", ".join(str(p) for p in paths)
        raise NoUsableAudio(f"no usable audio in {where}: {len(files)} audio file(s) found, {len(skipped)} skipped")
    return np.stack(clips).astype(np.float32), sources, shas, skipped


def _heldout_split(clips: np.ndarray, sources: list[str], shas: list[str], cfg) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices exactly as `kicktrain fit` splits the same files."""
    from .data import PreparedSet

    manifest = [{"source": s, "sha256": h} for s, h in zip(sources, shas)]
    return PreparedSet(audio=clips, manifest=manifest, skipped=[], config=cfg, cache_dir=Path(".")).split(
        cfg.val_fraction)


def generate(gen, n: int, steps: int | None, sampler: str | None, seed: int,
             batch: int = EVAL_BATCH) -> tuple[np.ndarray, float, float]:
    """(n finished kicks from seeds seed..seed+n-1 with no controls set, seconds per kick in batches,
    seconds for one kick alone)."""
    from kickmodel.generator import Item

    gen.render([Item(seed=seed)], steps=1 if gen.samplers else None, sampler=sampler)  # warm-up, not timed
    out = []
    t0 = time.perf_counter()
    for s in range(0, n, batch):
        items = [Item(seed=seed + i) for i in range(s, min(n, s + batch))]
        out.append(gen.render(items, steps=steps, sampler=sampler))
    elapsed = time.perf_counter() - t0
    alone = []
    for r in range(LATENCY_REPS):
        t1 = time.perf_counter()
        gen.render([Item(seed=seed + r)], steps=steps, sampler=sampler)
        alone.append(time.perf_counter() - t1)
    return np.concatenate(out), elapsed / n, float(np.median(alone))


def _recorded_split(gens: Sequence[Any]) -> dict[str, str] | None:
    """{sha256: "train" | "heldout"} recorded in the artifacts (all the same), or None when none records one."""
    splits = []
    for gen in gens:
        rec = getattr(getattr(gen, "artifact", None), "training", {}).get("split")
        if isinstance(rec, dict) and isinstance(rec.get("train"), list) and isinstance(rec.get("heldout"), list):
            table = {e["sha256"]: side for side in ("train", "heldout") for e in rec[side]
                     if isinstance(e, dict) and isinstance(e.get("sha256"), str)}
            splits.append(table)
    if not splits:
        return None
    if any(t != splits[0] for t in splits[1:]):
        raise ValueError("the models were trained on different splits of the data; compare models trained on "
                         "the same split, or give --real and --train as separate folders")
    return splits[0]


def _labels(gens: Sequence[Any]) -> list[str]:
    names = [g.name for g in gens]
    return [n if names.count(n) == 1 else f"{n}#{i + 1}" for i, n in enumerate(names)]


def collect(artifacts: str | Path | Sequence[str | Path], real: Sequence[str | Path],
            train: Sequence[str | Path] | None = None, *, n: int = 64, steps: Sequence[int] = (10, 25, 50),
            sampler: str | None = None, seed: int = 0, device: str = "auto", log: Log = _stderr
            ) -> tuple[list[Any], EvalSets]:
    """Load the models and the real/training clips, generate every model's sets and the synth set.
    Diffusion models get a row per step count; one-pass models one row."""
    from kickmodel.config import DataConfig
    from kickmodel.generator import finish_kick, load_generator

    from .synth import synth_batch

    artifacts = [artifacts] if isinstance(artifacts, (str, Path)) else list(artifacts)
    if not artifacts:
        raise ValueError("no model to evaluate")
    gens = [load_generator(Path(a), device) for a in artifacts]
    first = gens[0]
    cfg_all = getattr(first, "config", None)
    cfg = cfg_all.data if cfg_all is not None else DataConfig(sample_rate=first.sample_rate, length=first.length)
    for a, g in zip(artifacts, gens):
        if (g.sample_rate, g.length) != (cfg.sample_rate, cfg.length):
            raise ValueError(f"{Path(a).name} makes {g.length} samples at {g.sample_rate} Hz and "
                             f"{Path(artifacts[0]).name} {cfg.length} at {cfg.sample_rate} Hz; compare models "
                             "of the same clip length and rate")
    notes: list[str] = []

    from .data import scan_audio

    real_clips, real_src, real_sha, skipped = load_folder(real, cfg, log)
    train_clips, train_src = None, []
    if train:
        same = scan_audio(real) == scan_audio(train)
        if not same:
            train_clips, train_src, train_sha, skipped_t = load_folder(train, cfg, log)
            skipped += [s for s in skipped_t if s not in skipped]
            shared = set(real_sha) & set(train_sha)
            if shared:
                notes.append(f"{sum(h in shared for h in real_sha)} real clip(s) are identical to training files: "
                             "they are not held out")
        else:
            recorded = _recorded_split(gens)
            if recorded is not None:
                va = np.array([i for i, h in enumerate(real_sha) if recorded.get(h) == "heldout"], dtype=np.int64)
                tr = np.array([i for i, h in enumerate(real_sha) if recorded.get(h) == "train"], dtype=np.int64)
                unknown = len(real_sha) - len(va) - len(tr)
                notes.append(f"--real and --train are the same files: using the split the model(s) recorded: "
                             f"{len(va)} real held-out, {len(tr)} training clips"
                             + (f" ({unknown} file(s) the model never saw left out)" if unknown else ""))
            else:
                tr, va = _heldout_split(real_clips, real_src, real_sha, cfg)
                notes.append(f"--real and --train are the same files: using the held-out split as `fit` makes it "
                             f"(val_fraction {cfg.val_fraction:g}): {len(va)} real held-out, {len(tr)} training "
                             "clips")
            train_clips, train_src = real_clips[tr], [real_src[i] for i in tr]
            real_clips, real_src = real_clips[va], [real_src[i] for i in va]
    else:
        for g in gens:
            sources = getattr(getattr(g, "artifact", None), "training", {}).get("sources", [])
            folders = {str(Path(s).resolve()) for s in sources}
            if folders & {str(Path(s).parent) for s in real_src}:
                notes.append(f"the real set lies in a folder {g.name} was trained on; pass --train with the same "
                             "folder to evaluate on its held-out split")
    for note in notes:
        log(f"note: {note}")
    if len(real_clips) < 4:
        raise ValueError(f"need at least 4 real held-out clips for the real-vs-real split, found {len(real_clips)}")
    if n < 2:
        raise ValueError("--n must be at least 2")

    rows: list[ModelRow] = []
    for label, path, gen in zip(_labels(gens), artifacts, gens):
        training = dict(getattr(getattr(gen, "artifact", None), "training", {}) or {})
        for s in (sorted(steps) if gen.samplers else [None]):
            t0 = time.perf_counter()
            clips, spk, alone = generate(gen, n, s, sampler, seed)
            name = f"{label} @ {s}" if s is not None else label
            log(f"{name}: {n} kicks in {time.perf_counter() - t0:.1f} s ({spk:.3f} s per kick in batches, "
                f"{alone:.3f} s alone)")
            rows.append(ModelRow(label=name, artifact=str(path), name=gen.name, family=gen.family, steps=s,
                                 clips=clips, seconds_per_kick=spk, latency_s=alone, training=training))
    synth = finish_kick(synth_batch(n, seed=seed, sample_rate=cfg.sample_rate, length=cfg.length), cfg.sample_rate)
    sets = EvalSets(sample_rate=cfg.sample_rate, real=real_clips, train=train_clips, models=rows, synth=synth,
                    real_sources=real_src, train_sources=train_src, skipped=skipped, notes=notes)
    return gens, sets


# ----------------------------------------------------------------------------------------------
# scoring


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
          log: Log = _stderr) -> dict[str, Any]:
    """Rows of the table (a dict per set) plus the recommended steps; see the module docstring."""
    from kickmodel.descriptors import CONTROL_NAMES, measure

    sr = sets.sample_rate
    t0 = time.perf_counter()
    named: list[tuple[str, str, int | None, np.ndarray]] = [("real vs real", "real", None, sets.real)]
    named += [(m.label, "model", m.steps, m.clips) for m in sets.models]
    named.append(("synth", "synth", None, sets.synth))
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
        desc = measure(torch.from_numpy(np.ascontiguousarray(clips)), sr).numpy()
        row["descriptors"] = {c: float(np.median(desc[:, i])) for i, c in enumerate(CONTROL_NAMES)}
        rows.append(row)

    by = {r["name"]: r for r in rows}
    rr, sy = by["real vs real"], by["synth"]
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


# ----------------------------------------------------------------------------------------------
# output


def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def _pm(v: float | None, sd: float | None) -> str:
    return "-" if v is None else f"{v:.3g} ±{sd or 0.0:.2g}"


TABLE_COLUMNS = ("set", "family", "n", "FAD", "KID", "KID(train)", "nov/real", "ncc max", "copies", "div/real",
                 "haze dB", "hiss dB", "s/kick", "train h", "train kicks/s", "train MB")


def _family_short(name: str | None) -> str:
    return {"waveform_diffusion": "waveform", "mel_vae": "mel-vae", "latent_diffusion": "latent"}.get(name or "", "-")


def format_table(report: dict[str, Any]) -> str:
    """The rows as an aligned text table. haze dB: the body's 1..8 kHz energy minus the real kicks' (0 = as
    real); s/kick: one kick alone, the daemon's case; train: the run's time in training steps, its speed
    and peak memory, from the artifact."""
    lines = []
    for r in report["rows"]:
        hours = r.get("train_seconds")
        lines.append([r["name"], _family_short(r.get("family")) if r["kind"] == "model" else "-", str(r["n"]),
                      f"{r['fad']:.3g} ±{r['fad_std']:.2g}", f"{r['kid']:.3g} ±{r['kid_std']:.2g}",
                      _pm(r["kid_train"], r["kid_train_std"]), _fmt(r["novelty_ratio"], ".2f"),
                      _fmt(r["ncc_max"], ".3f"), _fmt(r["copies"], "d"), _fmt(r["diversity_ratio"], ".2f"),
                      _fmt(r.get("haze_vs_real_db"), "+.1f"), _fmt(r["tail_hiss_db"], ".1f"),
                      _fmt(r.get("latency_s"), ".3f"), _fmt(hours / 3600 if hours else None, ".2f"),
                      _fmt(r.get("train_samples_per_s"), ".1f"), _fmt(r.get("train_peak_memory_mb"), ".0f")])
    widths = [max(len(c), *(len(row[i]) for row in lines)) for i, c in enumerate(TABLE_COLUMNS)]
    fmt_row = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                      for i, (c, w) in enumerate(zip(cells, widths)))
    out = [fmt_row(TABLE_COLUMNS), fmt_row(["-" * w for w in widths])] + [fmt_row(row) for row in lines]
    return "\n".join(out)


def _clean(o: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, (np.floating, float)):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def _save_png(draw: Callable[[Path], Path | None], path: Path) -> Path | None:
    """Draw into a temp file beside path, then rename: a picture appears complete or not at all."""
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}.png")
    try:
        if draw(tmp) is None:
            return None
        os.replace(tmp, path)
        return path
    finally:
        if tmp.exists():
            tmp.unlink()


def write_pictures(sets: EvalSets, out: Path, run: Path | None = None, title: str = "") -> list[Path]:
    """spectrograms.png (real, model @ each step count, synth; 4 clips each), envelopes.png, and
    loss.png from RUN/metrics.jsonl when run is given and has one."""
    from . import plots

    sr = sets.sample_rate
    groups = [("real", sets.real)] + [(m.label, m.clips) for m in sets.models] + [("synth", sets.synth)]
    written = []
    p = _save_png(lambda t: plots.spectrogram_grid([(k, v[:4]) for k, v in groups], sr, t, title=title),
                  out / "spectrograms.png")
    written += [p] if p else []
    p = _save_png(lambda t: plots.envelope_plot(groups, sr, t), out / "envelopes.png")
    written += [p] if p else []
    if run is not None:
        p = _save_png(lambda t: plots.loss_curve(Path(run) / "metrics.jsonl", t), out / "loss.png")
        written += [p] if p else []
    return written


def evaluate(artifacts: str | Path | Sequence[str | Path], real: str | Path | Sequence[str | Path],
             train: str | Path | Sequence[str | Path] | None = None, *,
             n: int = 64, steps: Sequence[int] = (10, 25, 50), sampler: str | None = None, seed: int = 0,
             embedding: str = "mfcc-stats", device: str = "auto", splits: int = DEFAULT_SPLITS,
             log: Log = _stderr) -> tuple[dict[str, Any], EvalSets]:
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
        "models": [g.describe() if hasattr(g, "describe") else {"name": g.name} for g in gens],
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
        "seeds": f"model kicks: seeds {seed}..{seed + n - 1}; synth: synth_batch(n, seed={seed}); splits: seed {seed}",
        "device": str(getattr(gens[0], "device", device)),
        "batch": EVAL_BATCH,
        "latency": f"one kick alone, median of {LATENCY_REPS} (s/kick)",
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
    return _clean(report), sets


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
        _stderr(f"note: no loss curve: {Path(args.run) / 'metrics.jsonl'} is missing or has no losses")
    report["pictures"] = [p.name for p in pictures]
    buf = io.StringIO()
    json.dump(report, buf, indent=1, allow_nan=False)
    atomic_write_bytes(out / "report.json", buf.getvalue().encode())
    print(format_table(report))
    for name, rec in report["recommended_steps"].items():
        print(f"recommended steps for {name}: {rec} ({STEP_RULE})")
    print(f"embedding {report['embedding']['name']} ({report['embedding']['dim']} features); "
          f"{report['n_real']} real held-out clips, {report['n_train']} training clips; "
          f"FAD/KID over {report['splits']} splits of {report['reference_size']} reference vs "
          f"{report['compared_size']} compared clips")
    print(f"wrote {out / 'report.json'}" + "".join(f", {out / p}" for p in report["pictures"]))
    return 0
