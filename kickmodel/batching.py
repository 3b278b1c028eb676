"""Batched networks whose kicks do not depend on their batch: every network call sees one fixed shape.

A kick must be the same, bit for bit, alone or anywhere in any batch (Griffin-Lim turns a float rounding of 1e-7
in a mel into thousands of 24-bit steps: the bundled model's seed 5 alone and in a batch of three differed by
6,646). A kernel's rounding depends on the shape it runs on (a BLAS picks gemv for one row, blocked gemm for
eight, and blocks them by the batch's size), but at one fixed shape every row is computed alike: the row of a
kick gives the same bits at any position among any other rows (checked for every network the families serve:
tests/kickmodel/test_batch_independence.py). So a network runs on chunks of exactly `rows` rows, the last one
filled up with copies of its first row, every chunk a fresh contiguous tensor (a view's offset would change the
data's alignment, and with it a vectorised kernel's split), and the filler rows are dropped.

How many rows a chunk has is fixed per device and network, never by the batch or a measurement:
- CUDA: RENDER_ROWS for every network (one launch per call for a whole batch of up to eight kicks).
- CPU: one row at a time for every network the families serve (each is marked `per_kick_on_cpu = True`), as on
  2 cores a row already fills the cores: padding one kick up to eight rows costs seven kicks' work (Griffin-Lim 121
  ms for one row, 1,065 ms for eight; the waveform U-Net 52 vs 336 ms; the synth 5.4 vs 23.7 ms; the mel-VAE's
  decoder 6.6 vs 20.9 ms), and even the MLP denoisers, 1.6x at eight rows, bought eight kicks nothing measurable
  through the daemon while one kick paid 10-20 ms (bench/studies/batch_ab.py). A network left unmarked (the tiny
  Vocos inverter: 0.5 vs 1.5 ms) runs at RENDER_ROWS. A kick on the CPU is therefore the same bits it was before the
  render shape existed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

RENDER_ROWS = 8  # the rows of every network call (a batch of up to eight kicks is one call); never change lightly:
# it is part of what a seed means (a kick rendered at another shape differs in its last bits)


def render_rows(fn: Callable[..., torch.Tensor], device: torch.device, like: object = None) -> int:
    """The rows fn is always run on, on device: 1 for a `per_kick_on_cpu` network (or a method of one, or a
    function that runs the network `like`) on the CPU, else RENDER_ROWS."""
    owner = like if like is not None else getattr(fn, "__self__", fn)  # a bound method (vae.decode): its module
    if device.type == "cpu" and (getattr(fn, "per_kick_on_cpu", False) or getattr(owner, "per_kick_on_cpu", False)):
        return 1
    return RENDER_ROWS


def _chunk(b: torch.Tensor, start: int, rows: int) -> torch.Tensor:
    part = b[start:start + rows]
    if part.shape[0] < rows:
        part = torch.cat([part, part[:1].expand(rows - part.shape[0], *part.shape[1:])])
    return part.clone(memory_format=torch.contiguous_format)


def in_render_shape(fn: Callable[..., torch.Tensor], *batched: torch.Tensor | None, like: object = None
                    ) -> torch.Tensor:
    """fn over the batched tensors (one row per kick; None passes as None), run on chunks of render_rows(fn) rows:
    each kick's row gives the same bits in any batch, at any position. The rows' results, in order. `like`: the
    network whose render shape a function (a lambda around it) takes."""
    first = next(b for b in batched if b is not None)
    n, rows = first.shape[0], render_rows(fn, first.device, like)
    out = []
    for start in range(0, n, rows):
        got = fn(*(None if b is None else _chunk(b, start, rows) for b in batched))
        out.append(got[:min(rows, n - start)])
    return out[0] if len(out) == 1 else torch.cat(out)
