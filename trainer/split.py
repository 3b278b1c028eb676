"""The held-out split: which prepared clips train and which are held out, with near-copies on one side.

    train_idx, val_idx = split_indices(prepared.audio, prepared.manifest, 0.3)   # = PreparedSet.split(0.3)
    record = describe_split(prepared.manifest, train_idx, val_idx)               # names and hashes, for the artifact

A kit ships velocity layers (BD_Soft / BD_Hard, Kick-1 .. Kick-5) and the same recording under other
names; a held-out clip that is a near-copy of a training clip makes the evaluation look better than it
is. So clips are first grouped, and the split moves whole groups. Two clips are in one group when
(transitively) any of these holds:
- the same file content (sha256);
- near-copies: the largest normalised cross-correlation of their prepared clips (onset-aligned,
  peak-normalised, as `kickmodel.clips.prepare_audio` makes them) over lags within +-NEAR_COPY_LAG_MS is at
  least NEAR_COPY_NCC (a layer at another level, a re-encoding, a slightly shifted copy);
- layer names: in one folder, file names that are the same once velocity words (VELOCITY_WORDS:
  Soft, Med, Hard, Hardest, Loud, pp .. ff, v1 .. v9, ...) and numbers are taken out (`layer_key`),
  unless more than LAYER_SERIES_MAX files (or half the set) share that name: then it is a numbered
  series of different sounds (kick01 .. kick40), not layers of one.
Groups are ranked by a hash of their members' sha256s, and the held-out side takes whole groups that
fit, in that order, until it holds round(N * val_fraction) clips. When no group fits and there are
at least 5 groups, it takes the smallest group (the first-ranked of those), so the held-out side is
never empty then. Nothing depends on the order of the files: the same files (contents and names) give
the same split (the correlations are computed in the order of the sha256s). The correlations of all
pairs are screened by a bound on their magnitude spectra first (`near_copy_pairs`), so a library of
thousands of kicks does not need millions of full cross-correlations.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import numpy as np
import torch

NEAR_COPY_NCC = 0.98
NEAR_COPY_LAG_MS = 5.0
LAYER_SERIES_MAX = 8
BOUND_FINE_HZ = 1000.0  # near_copy_pairs' screen: ~1 Hz bins below this, BOUND_BANDS pooled bands above
BOUND_BANDS = 256
MIN_GROUPS_FOR_HELDOUT = 5
VELOCITY_WORDS = frozenset({
    "soft", "softer", "softest", "medium", "med", "mid", "hard", "harder", "hardest", "loud", "louder", "loudest",
    "quiet", "ppp", "pp", "p", "mp", "mf", "f", "ff", "fff", "vel", "velocity",
})
_SEPARATORS = re.compile(r"[-_ .()\[\]]+")
_VEL_NUMBER = re.compile(r"^(v|vel|velocity)\d+$")
_TRAILING_NUMBER = re.compile(r"^(.*?[a-z])\d+$")


def layer_key(source: str | Path) -> str:
    """Folder plus the file name (lower case, without its extension) with velocity words and numbers
    taken out: files that share it differ only by those. "BD_Soft.wav", "BD_Hard.wav" and "BD.wav" ->
    ".../bd"; "Kick-3.flac" -> ".../kick"; "bassdrum-soft4.flac" -> ".../bassdrum"."""
    p = Path(source)
    kept: list[str] = []
    toks = [t for t in _SEPARATORS.split(p.stem.lower()) if t]
    for k, tok in enumerate(toks):
        if tok.isdigit() or _VEL_NUMBER.match(tok):
            continue
        m = _TRAILING_NUMBER.match(tok)
        # "soft4" anywhere, "kick01" / "bd1" at the end: the number goes ("Kit2_bd" keeps its 2: another kit)
        if m and (k == len(toks) - 1 or m.group(1) in VELOCITY_WORDS):
            tok = m.group(1)
        if tok in VELOCITY_WORDS:
            continue
        kept.append(tok)
    return f"{p.parent}/{'_'.join(kept)}"


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
    nfft = _fast_len(length + max_lag + 1)
    norms = x.double().norm(dim=1)
    spec = torch.fft.rfft(x, n=nfft)
    lags = torch.cat([torch.arange(0, max_lag + 1), torch.arange(nfft - max_lag, nfft)])
    for s in range(0, n, chunk):  # the upper triangle (and a little more): the rest is its mirror
        c = torch.fft.irfft(spec[s:s + chunk, None, :] * spec[None, s:, :].conj(), n=nfft)[:, :, lags]
        out[s:s + chunk, s:] = c.abs().amax(dim=2).double().numpy()
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
    nfft = _fast_len(length + max_lag + 1)
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
    lags = torch.cat([torch.arange(0, max_lag + 1), torch.arange(nfft - max_lag, nfft)])
    clip_norm = np.linalg.norm(x.astype(np.float64), axis=1)
    out = []
    for i, js in sorted(candidates.items()):
        xi = torch.fft.rfft(torch.from_numpy(x[i]), n=nfft)
        for s in range(0, len(js), chunk):
            jj = js[s:s + chunk]
            c = torch.fft.irfft(xi[None, :] * torch.fft.rfft(torch.from_numpy(x[jj]), n=nfft).conj(), n=nfft)
            best = c[:, lags].abs().amax(dim=1).double().numpy() / (clip_norm[i] * clip_norm[jj])
            out += [(i, j, float(v)) for j, v in zip(jj, best) if v >= threshold]
    return out


def group_clips(audio: np.ndarray, manifest: list[dict], sample_rate: int) -> list[list[int]]:
    """Groups of clip indices that must stay on one side of the split (see the module docstring),
    each sorted, in the order of their smallest index."""
    n = len(manifest)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    first: dict[tuple[str, str], int] = {}
    keys = [layer_key(m["source"]) for m in manifest]
    sizes: dict[str, int] = {}
    for k in keys:
        sizes[k] = sizes.get(k, 0) + 1
    for i, m in enumerate(manifest):
        link = [("sha", m["sha256"])]
        if sizes[keys[i]] <= min(LAYER_SERIES_MAX, n // 2):
            link.append(("layer", keys[i]))
        for k in link:
            if k in first:
                union(i, first[k])
            else:
                first[k] = i

    audio = np.asarray(audio)
    if n > 1 and audio.ndim == 2 and audio.shape[0] == n and audio.shape[1] > 1:
        order = sorted(range(n), key=lambda i: (manifest[i]["sha256"], str(manifest[i]["source"])))
        lag = int(round(NEAR_COPY_LAG_MS * sample_rate / 1000))
        for a, b, _ in near_copy_pairs(audio[order], lag, NEAR_COPY_NCC, sample_rate):
            union(order[a], order[b])

    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def split_indices(audio: np.ndarray, manifest: list[dict], val_fraction: float,
                  sample_rate: int = 44100) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) index arrays (int64, sorted); see the module docstring."""
    n = len(manifest)
    if val_fraction <= 0 or n == 0:
        n_val = 0
    else:
        n_val = int(round(n * val_fraction))
        if n >= 5:
            n_val = max(1, n_val)
        n_val = min(n_val, n - 1)
    groups = group_clips(audio, manifest, sample_rate) if n_val > 0 else [[i] for i in range(n)]
    ranked = sorted(groups, key=lambda g: hashlib.sha256(
        ("split:" + "".join(sorted(manifest[i]["sha256"] for i in g))).encode()).hexdigest())
    val: list[int] = []
    for g in ranked:
        if len(val) + len(g) <= n_val:
            val.extend(g)
        if len(val) == n_val:
            break
    if not val and n_val > 0 and len(ranked) >= MIN_GROUPS_FOR_HELDOUT:
        val = list(min(ranked, key=len))  # min keeps the first-ranked among the smallest
    val_set = set(val)
    train = np.array([i for i in range(n) if i not in val_set], dtype=np.int64)
    return train, np.array(sorted(val), dtype=np.int64)


def describe_split(manifest: list[dict], train_idx, val_idx) -> dict[str, list[dict[str, str]]]:
    """{"train": [{"name": file name, "sha256": ...}, ...], "heldout": [...]} in index order: what an
    artifact records so that its evaluation can be repeated on the same files."""
    def rows(idx) -> list[dict[str, str]]:
        return [{"name": Path(manifest[int(i)]["source"]).name, "sha256": manifest[int(i)]["sha256"]}
                for i in sorted(int(i) for i in idx)]

    return {"train": rows(train_idx), "heldout": rows(val_idx)}
