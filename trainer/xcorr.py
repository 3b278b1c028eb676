"""Near-copy detection by waveform: the largest normalised cross-correlation of two clips over small lags.

    ncc = max_xcorr(generated, train, max_lag)       # per generated clip, its closest training clip (eval)
    ncc = pairwise_max_ncc(clips, max_lag)           # [n, n] within one set
    pairs = near_copy_pairs(clips, max_lag, 0.98, sr)  # the pairs at or above a threshold, screened (split)

sum x[t + lag] r[t] / (|x| |r|) is 1.0 for a copy, a scaled, shifted (within the lags) or inverted one, so it
catches what an embedding distance can miss: a kick that is a training kick. `kicktrain eval` counts
generated kicks that copy a training kick (trainer/evaluate.py), and the held-out split keeps near-copies on
one side (trainer/split.py); both use the one correlation here (`lag_max`: FFT products, the largest
magnitude over lags -max_lag..max_lag), on float32 clips as given.
"""

from __future__ import annotations

import math

import numpy as np
import torch

BOUND_FINE_HZ = 1000.0  # near_copy_pairs' screen: ~1 Hz bins below this, BOUND_BANDS pooled bands above
BOUND_BANDS = 256


def fast_len(n: int) -> int:
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


def lag_index(nfft: int, max_lag: int) -> torch.Tensor:
    """Where lags 0..max_lag and -max_lag..-1 lie in a circular correlation of length nfft."""
    return torch.cat([torch.arange(0, max_lag + 1), torch.arange(nfft - max_lag, nfft)])


def lag_max(spec: torch.Tensor, ref_conj: torch.Tensor, nfft: int, lags: torch.Tensor) -> torch.Tensor:
    """[a, b] largest |sum x_i[t + lag] r_j[t]| over lags (float32, not normalised), for the rfft spectra
    spec [a, bins] of the x_i and the conjugated spectra ref_conj [b, bins] of the r_j, both of length nfft
    (at least the clips' length + max_lag + 1, so the circular correlation is the linear one)."""
    return torch.fft.irfft(spec[:, None, :] * ref_conj[None, :, :], n=nfft)[:, :, lags].abs().amax(dim=2)


@torch.no_grad()
def max_xcorr(clips: np.ndarray, ref: np.ndarray, max_lag: int, chunk: int = 4) -> np.ndarray:
    """Per clip [n, L], the largest |normalised cross-correlation| with any clip of ref [t, L'] over
    lags -max_lag..max_lag (sum x[i + lag] r[i] / (|x| |r|); 1.0 for a copy, a shifted copy or an
    inverted one)."""
    x = torch.as_tensor(np.atleast_2d(np.asarray(clips, dtype=np.float32)))
    r = torch.as_tensor(np.atleast_2d(np.asarray(ref, dtype=np.float32)))
    length = max(x.shape[1], r.shape[1])
    nfft = fast_len(length + max_lag + 1)
    xn = x.double().norm(dim=1).clamp(min=1e-12)
    rn = r.double().norm(dim=1).clamp(min=1e-12)
    R = torch.fft.rfft(r, n=nfft).conj()
    X = torch.fft.rfft(x, n=nfft)
    lags = lag_index(nfft, max_lag)
    out = np.empty(x.shape[0])
    for s in range(0, x.shape[0], chunk):
        c = lag_max(X[s:s + chunk], R, nfft, lags)  # [c, t]
        best = (c.double() / (xn[s:s + chunk, None] * rn[None, :])).amax(dim=1)
        out[s:s + chunk] = best.numpy()
    return out


@torch.no_grad()
def pairwise_max_ncc(clips: np.ndarray, max_lag: int, chunk: int = 4) -> np.ndarray:
    """[n, n] largest |sum x_i[t + lag] x_j[t]| / (|x_i| |x_j|) over lags -max_lag..max_lag (1.0 for a
    copy, a scaled, shifted or inverted one; 0 where a clip is silent). Symmetric, 1 on the diagonal
    of non-silent clips."""
    x = torch.as_tensor(np.ascontiguousarray(np.atleast_2d(clips), dtype=np.float32))
    n, length = x.shape
    out = np.zeros((n, n))
    if n == 0 or length == 0:
        return out
    max_lag = max(0, min(int(max_lag), length - 1))
    nfft = fast_len(length + max_lag + 1)
    norms = x.double().norm(dim=1)
    spec = torch.fft.rfft(x, n=nfft)
    lags = lag_index(nfft, max_lag)
    for s in range(0, n, chunk):  # the upper triangle (and a little more): the rest is its mirror
        out[s:s + chunk, s:] = lag_max(spec[s:s + chunk], spec[s:].conj(), nfft, lags).double().numpy()
    denom = np.outer(norms.numpy(), norms.numpy())
    with np.errstate(invalid="ignore", divide="ignore"):
        ncc = np.where(denom > 0, out / np.where(denom > 0, denom, 1.0), 0.0)
    return np.maximum(ncc, ncc.T)


@torch.no_grad()
def near_copy_pairs(clips: np.ndarray, max_lag: int, threshold: float, sample_rate: int,
                    chunk: int = 64) -> list[tuple[int, int, float]]:
    """(i, j, ncc) for every pair i < j whose pairwise_max_ncc is at least threshold, without computing
    all n^2 / 2 correlations: for any lag, |sum x_i[t + lag] x_j[t]| <= sum_f |X_i(f)| |X_j(f)| over the
    full zero-padded spectrum (Parseval and the triangle inequality), and pooling |X|^2 over a band
    (Cauchy-Schwarz) only loosens that bound. So a cosine similarity of magnitude spectra (bins of
    ~1 Hz below BOUND_FINE_HZ, BOUND_BANDS pooled bands above) screens the pairs, and only those at
    or above threshold get the exact correlation. Memory stays O(n * (fine bins + bands))."""
    x = np.ascontiguousarray(np.atleast_2d(clips), dtype=np.float32)
    n, length = x.shape
    if n < 2 or length == 0:
        return []
    max_lag = max(0, min(int(max_lag), length - 1))
    nfft = fast_len(length + max_lag + 1)
    n_bins = nfft // 2 + 1
    weight = torch.full((n_bins,), math.sqrt(2.0), dtype=torch.float64)  # each rfft bin stands for two
    weight[0] = 1.0
    if nfft % 2 == 0:
        weight[-1] = 1.0
    k_fine = min(n_bins, int(BOUND_FINE_HZ * nfft / sample_rate) + 1)
    edges = torch.as_tensor(np.linspace(0, n_bins - k_fine, min(BOUND_BANDS, n_bins - k_fine) + 1).astype(np.int64))
    feats = []
    for s in range(0, n, chunk):
        mag = torch.fft.rfft(torch.from_numpy(x[s:s + chunk]), n=nfft).abs().double() * weight
        cum = torch.nn.functional.pad(torch.cumsum(mag[:, k_fine:] ** 2, dim=1), (1, 0))
        bands = (cum[:, edges[1:]] - cum[:, edges[:-1]]).clamp(min=0).sqrt()
        feats.append(torch.cat([mag[:, :k_fine], bands], dim=1))
    f = torch.cat(feats)
    norms = f.norm(dim=1)
    f = torch.where(norms[:, None] > 0, f / norms.clamp(min=1e-300)[:, None], torch.zeros_like(f))
    candidates: dict[int, list[int]] = {}
    for s in range(0, n, 256):
        bound = (f[s:s + 256] @ f.T).numpy()
        for a, j in zip(*np.nonzero(bound >= threshold - 1e-9)):
            if j > s + a:
                candidates.setdefault(int(s + a), []).append(int(j))
    lags = lag_index(nfft, max_lag)
    clip_norm = np.linalg.norm(x.astype(np.float64), axis=1)
    out = []
    for i, js in sorted(candidates.items()):
        xi = torch.fft.rfft(torch.from_numpy(x[i]), n=nfft)
        for s in range(0, len(js), chunk):
            jj = js[s:s + chunk]
            c = lag_max(xi[None, :], torch.fft.rfft(torch.from_numpy(x[jj]), n=nfft).conj(), nfft, lags)[0]
            best = c.double().numpy() / (clip_norm[i] * clip_norm[jj])
            out += [(i, j, float(v)) for j, v in zip(jj, best) if v >= threshold]
    return out
