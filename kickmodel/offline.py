"""The one offline renderer: seeds -> finished kicks -> files, in batches, with no daemon in between.

    paths = render_kicks(gen, first_seed=7, n=8, controls={"decay": 0.8}, settings=gen.settings(10),
                         write=lambda audio, info: ...)   # one file per kick; returns what write returned

`kickserver render` writes through the daemon's KickWriter (its names, tags and retention); `kicktrain sample`
writes NAME_SEED.wav files. Both resolve their settings with gen.settings and encode with kickmodel.wavfile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from .generator import Item, Settings
from .wavfile import KickInfo

T = TypeVar("T")


def render_kicks(gen: Any, *, first_seed: int, n: int, controls: Mapping[str, float], settings: Settings,
                 write: Callable[[np.ndarray, KickInfo], T], sample_rate: int | None = None, batch: int = 8,
                 software: str = "kickserver") -> Iterator[T]:
    """Render kicks first_seed .. first_seed + n - 1 (batch at a time) and hand each to write(audio, info),
    yielding what write returns as each lands. ValueError from the model (a bad control, steps, sampler) and
    write's own errors propagate."""
    if n < 1 or batch < 1:
        raise ValueError("n and batch must be >= 1")
    for start in range(0, n, batch):
        seeds = list(range(first_seed + start, first_seed + min(n, start + batch)))
        audio = gen.generate([Item(seed=s, controls=dict(controls)) for s in seeds], settings,
                             sample_rate=sample_rate)
        for s, a in zip(seeds, audio):
            yield write(a, KickInfo(model=gen.name, seed=s, steps=settings.steps, sampler=settings.sampler,
                                    controls=dict(controls), software=software))
