"""Do a model's dials do what they say? Each control asked for alone over a few values, the kicks rendered as the
daemon renders them and measured by the descriptors the model was conditioned on (kickmodel.descriptors.measure).

Shared by the dial benchmark (bench/controls.py: the full sweep, its targets and plots) and the trainer, whose
kick-synth runs choose the step they export by how well its dials follow (trainer/recipes/kick_synth.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

VALUES = (0.1, 0.3, 0.5, 0.7, 0.9)  # the dial values asked for, each control alone, the others free
BATCH = 8  # kicks a generate call


def rankdata(a: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    a = np.asarray(a, dtype=np.float64)
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(len(a))
    s = a[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson's on average ranks); nan when either side is constant."""
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


def sweep(gen, control: str, values: Sequence[float], n: int, seed: int) -> np.ndarray:
    """Raw descriptors [len(values), n, 3] (CONTROL_NAMES order) of n kicks per value of `control` (seeds seed ..
    seed+n-1 at every value), at the generator's default steps and sampler."""
    import torch

    from kickmodel.descriptors import measure
    from kickmodel.generator import Item

    items = [Item(seed=seed + i, controls={control: float(v)}) for v in values for i in range(n)]
    batches = [gen.generate(items[s:s + BATCH], gen.settings()) for s in range(0, len(items), BATCH)]
    width = max(b.shape[1] for b in batches)  # a kick-synth batch with a long kick is longer: zeros after the others
    clips = np.concatenate([np.pad(b, ((0, 0), (0, width - b.shape[1]))) for b in batches])
    raw = measure(torch.from_numpy(np.ascontiguousarray(clips)), gen.sample_rate).numpy()
    return raw.reshape(len(values), n, raw.shape[1])


def following(gen, n: int, seed: int, values: Sequence[float] = VALUES) -> dict[str, float]:
    """{control: Spearman's r between the value asked and the control's own descriptor measured} for each of the
    generator's controls, n kicks a value (nan where the kicks measure all alike)."""
    from kickmodel.descriptors import CONTROL_NAMES

    asked = np.repeat(np.asarray(values, dtype=np.float64), n)
    return {c: spearman(asked, sweep(gen, c, values, n, seed)[:, :, CONTROL_NAMES.index(c)].ravel())
            for c in gen.controls}


SELECT_SEED = 9000  # the selection's seeds: the same kicks asked for at every check of a run


def miss(gen, n: int, seed: int = SELECT_SEED) -> dict[str, float]:
    """A run's dial figures at one check (train.select_by = "dials"): {"dial_r_<control>": r, ...,
    "dial_miss": 1 - the mean r}, a dial whose kicks measure all alike counting as r = 0. Lower miss is better: 0 when
    every dial orders its kicks exactly as asked."""
    rs = following(gen, n, seed)
    out = {f"dial_r_{c}": (0.0 if r != r else r) for c, r in rs.items()}
    out["dial_miss"] = 1.0 - float(np.mean(list(out.values())))
    return out
