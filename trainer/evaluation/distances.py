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


def one_nn_accuracy(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """The 1-NN two-sample test (Lopez-Paz and Oquab 2017; Xu et al. 2018, "1-NN accuracy") on two sets of equal size
    [n, d]: pool them, label each clip by its set, classify each by its nearest other clip in the pool (leave one
    out) and return (accuracy over both sets, accuracy on a's clips, on b's). 0.5: the sets cannot be told apart;
    1: every clip's nearest neighbour is of its own set (b's clips cluster away from a's); below 0.5: each clip
    sits nearer the other set (b copies a). Ties break towards the other set (the test's conservative side)."""
    a, b = _two_d(a, "a"), _two_d(b, "b")
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"the 1-NN test needs two sets of the same size, at least 2 each; got {len(a)} and {len(b)}")
    pool = np.concatenate([a, b])
    dist = _pairwise(pool, pool)
    np.fill_diagonal(dist, np.inf)
    n = len(a)
    own = np.concatenate([np.zeros(n, bool), np.ones(n, bool)])  # True: b
    nearest_own = np.where(own[:, None] == own[None, :], dist, np.inf).min(axis=1)
    nearest_other = np.where(own[:, None] != own[None, :], dist, np.inf).min(axis=1)
    right = nearest_own < nearest_other
    return float(right.mean()), float(right[:n].mean()), float(right[n:].mean())


def two_sample_1nn(gen: np.ndarray, real: np.ndarray, *, draws: int = 50, seed: int = 0) -> dict[str, float]:
    """one_nn_accuracy of balanced draws: each draw takes as many clips of the larger set as the smaller has
    (without replacement); mean accuracy, its 2.5..97.5 % interval over the draws, and the share of gen's clips whose
    nearest neighbour is another gen clip (the clustering a generator's kicks show). Real halves: call it with two
    halves of the real set (real_halves_1nn)."""
    gen, real = _two_d(gen, "generated"), _two_d(real, "real")
    n = min(len(gen), len(real))
    if n < 2:
        raise ValueError(f"the 1-NN test needs at least 2 clips in each set; got {len(gen)} and {len(real)}")
    rng = np.random.default_rng(seed)
    accs, gen_side = [], []
    one_draw = len(gen) == len(real)
    for _ in range(1 if one_draw else draws):
        g = gen if len(gen) == n else gen[rng.choice(len(gen), n, replace=False)]
        r = real if len(real) == n else real[rng.choice(len(real), n, replace=False)]
        acc, _, on_gen = one_nn_accuracy(r, g)
        accs.append(acc)
        gen_side.append(on_gen)
    v = np.asarray(accs)
    return {"accuracy": float(v.mean()), "lo": float(np.percentile(v, 2.5)), "hi": float(np.percentile(v, 97.5)),
            "gen_nn_gen": float(np.mean(gen_side)), "n_per_set": n, "draws": len(accs)}


def real_halves_1nn(real: np.ndarray, *, draws: int = 50, seed: int = 0) -> dict[str, float]:
    """The 1-NN test's baseline: random halves of the real set against each other (about 0.5 when the real kicks
    are one population; its spread is what a perfect generator's figure varies by at this set size)."""
    real = _two_d(real, "real")
    h = len(real) // 2
    if h < 2:
        raise ValueError(f"the real halves' 1-NN baseline needs at least 4 real clips; got {len(real)}")
    rng = np.random.default_rng(seed)
    accs = []
    for _ in range(draws):
        p = rng.permutation(len(real))
        accs.append(one_nn_accuracy(real[p[:h]], real[p[h:2 * h]])[0])
    v = np.asarray(accs)
    return {"accuracy": float(v.mean()), "lo": float(np.percentile(v, 2.5)), "hi": float(np.percentile(v, 97.5)),
            "gen_nn_gen": None, "n_per_set": h, "draws": draws}


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95 % at the default z) of a share k / n: unlike the bootstrap's, it is not [0, 0]
    when none of n kicks has the trait (0 of 512: 0..0.74 %), and it stays within 0..1. (0, 1) for n = 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"a share of {k} in {n}")
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)
