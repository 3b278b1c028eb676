"""Distances between sets of clip embeddings [n, dim]: FAD, KID, novelty, diversity, and the standardiser
that puts every set in one space first.

What each figure means and why it is computed so (the normalisation, small-set bias, the unbiased KID):
the "Distances" part of trainer/evaluate.py's docstring. Pure numpy, no audio.
"""

from __future__ import annotations

import math

import numpy as np

STD_FLOOR_REL = 0.1


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
