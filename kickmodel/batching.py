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
60 -> 39 ms). Such a chunk always runs on one thread, whichever thread that is and whatever its caller's count, so
its bits do not depend on where it ran (the kicks' finishing and the writer's measuring run on one thread too).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
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
    """This thread's torch CPU threads set to one inside (when yes), and back to its count after. (torch keeps the
    count per thread once a thread has run an op; a thread that has run none takes the last count any thread set.)"""
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
    if one_thread and not _compiled(fn, like):
        out = side_by_side(run, list(starts))
    else:  # torch.compile's code (kickmodel.capture) is not for several threads at once: its chunks in turn
        with one_thread_if(one_thread):
            out = [run(start) for start in starts]
    return out[0] if len(out) == 1 else torch.cat(out)


def _compiled(fn: Callable[..., torch.Tensor], like: object) -> bool:
    return any(hasattr(x, "_orig_mod") for x in (fn, _owner(fn, like)))  # torch.compile's OptimizedModule


# Every call's tasks go to one pool, made once and never replaced (a pool replaced while another thread was about to
# use it refused that thread's tasks); its threads start as tasks need them, and a call deals its items to at most
# its own thread count of tasks, so the worker's render and the writer's measuring each get theirs.
def _new_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max(2 * RENDER_ROWS, 2 * (os.cpu_count() or 1)), thread_name_prefix="kick-render")


def _fresh_pool_in_child() -> None:
    """After a fork, in the child: a pool of its own (the parent's threads do not exist here, and a task handed to the
    copied pool could wait for ever on a thread it believes idle)."""
    global _pool
    _pool = _new_pool()


_pool = _new_pool()
os.register_at_fork(after_in_child=_fresh_pool_in_child)
_local = threading.local()  # .in_pool: this thread is one of the pool's


T = TypeVar("T")
R = TypeVar("R")


def side_by_side(fn: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """fn(item) for every item, each on one torch thread, side by side: dealt to `threads` tasks (default: this
    thread's torch count) on the shared pool (task i runs items i, i + threads, ... in turn) under the caller's grad
    and inference modes (torch keeps them per thread; no other thread-local state is carried: autocast, dispatch
    and function modes stay here); in turn here where that is one, and always in the pool's own threads (a task
    never waits on the pool). The results in order, once every task has ended; a task's exception (the earliest
    task's, when several fail) raised here."""
    threads = min(len(items), torch.get_num_threads() if threads is None else threads)
    if threads <= 1 or getattr(_local, "in_pool", False):
        with one_thread_if(True):
            return [fn(item) for item in items]
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    def task(mine: Sequence[T]) -> list[R]:
        _local.in_pool = True
        with torch.inference_mode(inference), torch.set_grad_enabled(grad), one_thread_if(True):
            return [fn(item) for item in mine]

    futures = [_pool.submit(task, items[i::threads]) for i in range(threads)]
    wait(futures)  # every task ended before this returns or raises: none still running behind the caller's back
    dealt = [f.result() for f in futures]
    return [dealt[i % threads][i // threads] for i in range(len(items))]
