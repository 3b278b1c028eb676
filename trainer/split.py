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
pairs are screened by a bound on their magnitude spectra first (`trainer.xcorr.near_copy_pairs`), so a
library of thousands of kicks does not need millions of full cross-correlations.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from .xcorr import near_copy_pairs

NEAR_COPY_NCC = 0.98
NEAR_COPY_LAG_MS = 5.0
LAYER_SERIES_MAX = 8
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
