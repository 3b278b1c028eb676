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
- CPU: one row at a time for the networks marked `per_kick_on_cpu = True`, as on 2 cores a row already fills the
  cores: padding one kick up to eight rows costs seven kicks' work (Griffin-Lim 121 ms for one row, 1,065 ms for
  eight; the waveform U-Net 52 vs 336 ms; the synth 5.4 vs 23.7 ms; the mel-VAE's decoder 6.6 vs 20.9 ms); the
  bundled model's MLP denoiser too (eight rows do not move its eight kicks' 1.3 s, and would change its bits). A
  network left unmarked (the tiny Vocos inverter: 0.5 vs 1.5 ms; the kick-synth's prior, whose kicks cost the
  MLP's per-call overhead, not its arithmetic: kickmodel.families.kick_synth.network) runs at RENDER_ROWS.

A network marked `one_thread_on_cpu` (the MLP denoisers, the kick synth) runs each chunk on one CPU thread: its ops
are too short to split, and the daemon's OpenMP threads sleep between calls (OMP_WAIT_POLICY=PASSIVE), so an op that
wakes a second thread pays more for the wake-up than it saves (2-core dev box, the kick-synth model: its prior's
sampling of one kick 15.3 ms at eight rows on two threads, 8.3 ms on one; its eight kicks' synth 81 against 60 ms).
Where such a network has several chunks (the synth: a chunk per kick), they run side by side (side_by_side: a pool
every call shares, up to torch's thread count of threads, each chunk alone on its thread: the synth's eight kicks
60 -> 39 ms). A chunk's bits depend on neither the thread count nor the thread it ran on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import torch

RENDER_ROWS = 8  # the rows of every network call (a batch of up to eight kicks is one call); never change lightly:
# it is part of what a seed means (a kick rendered at another shape differs in its last bits)


def render_rows(fn: Callable[..., torch.Tensor], device: torch.device, like: object = None) -> int:
    """The rows fn is always run on, on device: 1 for a `per_kick_on_cpu` network (or a method of one, or a
    function that runs the network `like`) on the CPU, else RENDER_ROWS."""
    if device.type == "cpu" and _says(fn, like, "per_kick_on_cpu"):
        return 1
    return RENDER_ROWS


def _owner(fn: Callable[..., torch.Tensor], like: object) -> object:
    return like if like is not None else getattr(fn, "__self__", fn)  # a bound method (vae.decode): its module


def _says(fn: Callable[..., torch.Tensor], like: object, flag: str) -> bool:
    return bool(getattr(fn, flag, False) or getattr(_owner(fn, like), flag, False))


@contextmanager
def one_thread_if(yes: bool) -> Iterator[None]:
    """torch's CPU threads set to one inside (when yes), and back to what they were after."""
    if not yes:
        yield
        return
    was = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(was)


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
    starts = range(0, n, rows)

    def run(start: int) -> torch.Tensor:
        return fn(*(None if b is None else _chunk(b, start, rows) for b in batched))[:min(rows, n - start)]

    one_thread = first.device.type == "cpu" and _says(fn, like, "one_thread_on_cpu")
    if one_thread:
        out = side_by_side(run, list(starts))
    else:
        out = [run(start) for start in starts]
    return out[0] if len(out) == 1 else torch.cat(out)


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


T = TypeVar("T")
R = TypeVar("R")


def side_by_side(fn: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """fn(item) for every item, each on one torch thread, side by side: dealt to up to `threads` tasks (at most, and
    by default, this thread's torch count) on a pool every call shares (task i runs items i, i + threads, ... in
    turn), under the caller's grad and inference modes (torch keeps them per thread); in turn here where that is one.
    The results in order; the first exception raised, raised here."""
    threads = min(torch.get_num_threads(), len(items), len(items) if threads is None else threads)
    if threads <= 1:  # also in the pool's own threads (one torch thread each): a task never waits on the pool
        with one_thread_if(True):
            return [fn(item) for item in items]
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < threads:
            old, _pool, _pool_size = _pool, ThreadPoolExecutor(threads, thread_name_prefix="kick-render"), threads
            if old is not None:
                old.shutdown(wait=False)
        pool = _pool
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    def task(mine: Sequence[T]) -> list[R]:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad), one_thread_if(True):
            return [fn(item) for item in mine]

    dealt = list(pool.map(task, [items[i::threads] for i in range(threads)]))
    return [dealt[i % threads][i // threads] for i in range(len(items))]
