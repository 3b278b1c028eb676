"""What kit tests measure a kit by: a tie-aware Spearman rank correlation, and the starter kit's space (the
evaluation embedding, trainer.embeddings "mfcc-stats", standardised by the kit's statistics as evaluation does)
with the median distance between two of its kicks, which a kit's robins must lie nearer each other than."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf

SR = 44100
KICKS = Path(__file__).resolve().parents[1] / "kickserver" / "data" / "kicks"


def _ranks(v) -> np.ndarray:
    """Ranks with ties sharing their mean rank (so a constant series has no order: its correlation is nan)."""
    v = np.asarray(v, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    for x in np.unique(v):
        r[v == x] = r[v == x].mean()
    return r


def spearman(a, b) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def _second(x: np.ndarray) -> np.ndarray:
    return x[:SR] if len(x) >= SR else np.pad(x, (0, SR - len(x)))


def kit_space() -> tuple[Callable[[Sequence[np.ndarray]], np.ndarray], float]:
    """(embed, median pair distance of the starter kit's kicks at 44.1 kHz): embed(clips at 44.1 kHz) -> standardised
    mfcc-stats vectors."""
    from trainer.embeddings import get_embedding

    emb = get_embedding("mfcc-stats")
    kicks = []
    for f in sorted(KICKS.iterdir()):
        try:
            x, sr = sf.read(f, dtype="float32", always_2d=True)
        except Exception:  # noqa: BLE001 - the kit holds one malformed file (NOTES.md); it is no kick to compare
            continue
        if sr == SR:
            x = _second(x.mean(axis=1))
            kicks.append(x / np.abs(x).max() * 10 ** (-1 / 20))
    z = emb(np.stack(kicks), SR)
    mu, sd = z.mean(axis=0), z.std(axis=0) + 1e-9

    def embed(clips: Sequence[np.ndarray]) -> np.ndarray:
        return (emb(np.stack([_second(np.asarray(c, dtype=np.float32)) for c in clips]), SR) - mu) / sd

    zs = embed(kicks)
    return embed, float(np.median([np.linalg.norm(a - b) for a, b in itertools.combinations(zs, 2)]))


def robin_spread(embed: Callable[[Sequence[np.ndarray]], np.ndarray], robins: Sequence[np.ndarray]) -> float:
    """The largest distance between two robins on the kit space."""
    z = embed(robins)
    return float(max(np.linalg.norm(a - b) for a, b in itertools.combinations(z, 2)))
