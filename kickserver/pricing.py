"""What a job costs the worker, in kicks: the queue's limits and its hosts' turns (kickserver.fair_queue) count this,
not one per request (a kick-synth `/kick/locate` is a fit, ~2 s of the worker against 0.05 s for a
kick, and a 1.9 KB bundle of 32 of them held the worker 91 s).

The unit is one kick of the serving model at its default settings, counted as at least FLOOR_S seconds of the
worker: the limits' defaults (64 and 32 kicks) were sized for kicks of about that time (the bundled model's, 0.3 s
on a 2-core CPU), and a model whose kicks take 0.05 s would otherwise price its own 2 s fit at 40 kicks, more than
one host's whole share. A job's price (`price`): one per kick it renders (a morph's file end inverted counts one
more, per batch; a kick rendered longer than the model's length, a kick-synth kick asked for a long decay_s, counts
as that many lengths, jobs.Job.length_factor: up to 3 s is 3 of the shipped model's kicks), plus each encoding of a
source file its work holds (jobs.Job.work) at `Prices.encode` kicks, at least 1 in all. Until the model is timed,
an encoding counts as UNTIMED kicks.

`jobs.measure_prices` prices a model once, in the worker thread before it serves (after its warm-up and
capture): the model's own estimate of encoding one source file (GeneratorBase.encode_seconds: an encoder pass,
timed; the kick synth's fit from a few of its steps, about a tenth of a fit, kickmodel/families/kick_synth/fit.py
fit_seconds), on a clip as long as the model's that sounds over all of it (the most a fit weighs), and, only when
that is worth half a kick or more, one kick at the default settings. A job keeps the price it was queued at; a
model swapped in prices the jobs queued after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

FLOOR_S = 0.25  # the least time one kick counts as (the unit's), in seconds of the worker
# what an encoding counts as while the model is not timed yet (the first model's warm-up, a few seconds after the
# start; or its timing failed): the default share of one address, so its host holds one such job at a time and
# the other hosts keep their room (the whole queue's, 64, left another host's kick `busy` meanwhile)
UNTIMED = 32


@dataclass(frozen=True)
class Prices:
    """What the serving model was measured to take: one kick (0: not measured, an encoding costing less than a
    kick), one source file's encoding (0: none, or nothing to speak of), and what that encoding is, in words."""

    kick_s: float = 0.0
    encode_s: float = 0.0
    encoder: str = "an encoder pass"
    timed: bool = True  # False: not measured (yet): an encoding counts as UNTIMED kicks

    @property
    def unit_s(self) -> float:
        """The seconds one kick counts as."""
        return max(self.kick_s, FLOOR_S)

    @property
    def encode(self) -> int:
        """The kicks one source file's encoding counts as (beyond the kicks made from it)."""
        if not self.timed or not math.isfinite(self.encode_s):
            return UNTIMED
        return int(round(self.encode_s / self.unit_s))

    def describe(self) -> str:
        if not self.timed:
            return f"not timed: an encoding counts as {UNTIMED} kicks"
        kick = f"a kick {self.kick_s:.3f} s" if self.kick_s else "a kick not timed"
        return (f"{kick}, {self.encoder} of a source file about {self.encode_s:.2f} s: a kick counts as "
                f"{self.unit_s:.2f} s, an encoding as {self.encode} kicks")


def untimed(gen: Any) -> Prices:
    """A model's prices until it is timed: a model without an encoder uses a source as it is (its kicks are its
    work); any other's encoding counts as UNTIMED kicks."""
    from kickmodel.generator import ENCODE

    return Prices(encoder=getattr(gen, "encoder_name", Prices.encoder),
                  timed=ENCODE not in getattr(gen, "capabilities", ()))


def price(job: Any, prices: Prices, max_batch: int) -> tuple[int, str]:
    """(a kickserver.jobs.Job's price in kicks, why, in a few words) at these prices, batched up to max_batch at a
    time (jobs imports this module: the job is read through its `work` and `count` only)."""
    renders, encodes = job.work(max_batch)
    factor = max(1, int(getattr(job, "length_factor", 1)))
    cost = max(1, renders * factor + encodes * prices.encode)
    longer = (f"kicks {job.length_s:.1f} s long, {factor} kicks' worth each" if factor > 1 else "")
    if not encodes or cost == job.count:
        return cost, longer
    what = f"{encodes} x {prices.encoder}" if encodes > 1 else prices.encoder
    each = " each" if encodes > 1 else ""
    took = f"about {prices.encode_s:.1f} s here" if prices.timed else "not timed yet: the model is warming up"
    return cost, (f"{what} ({took}, {prices.encode} kicks' worth{each})"
                  + (f" beside its {renders} kick{'s' if renders > 1 else ''}" if renders else "")
                  + (f" ({longer})" if longer else ""))
