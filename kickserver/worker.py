"""The one thread that owns the model: takes queued kicks in batches, generates, writes, replies.

The receive loop only calls `submit` (never blocks on the model): a request that would push the
queue past `queue_limit` kicks is refused at once (`busy`). Queued kicks that share a key (steps
and sampler for fresh kicks; the same request for variations) are generated together, up to
`max_batch` at a time. A new model handed over by `offer_model` is swapped in between batches, so
no request is lost. `stop` cancels the batch on the device (a forward pre-hook raises at the next
network call), lets the file being written land, and answers every other kick "shutting down".
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.generator import Cancelled, Item, Variation

from . import osc_api
from .reload import warm_up
from .writer import KickInfo, KickWriter, WriteError

log = logging.getLogger("kickserver.worker")

Reply = Callable[[bytes], None]

MAX_SOURCE_S = 30.0  # a variation source is decoded whole: refuse long files before reading them
MAX_SOURCE_BYTES = 64 << 20


class SourceTooBig(ValueError):
    """A variation source that is too long (or too large) to read; the message is the reply's reason."""


def check_source(path: Path) -> None:
    """Refuse a variation source longer than MAX_SOURCE_S or larger than MAX_SOURCE_BYTES on disk.

    Reads the file's header only (soundfile.info), so the receive loop can call it and refuse at
    once; the worker calls it again right before decoding (the file may have changed meanwhile).
    A file soundfile cannot read is left to the decoder, which says why.
    """
    import soundfile as sf

    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return  # the decoder reports it
    if size > MAX_SOURCE_BYTES:
        raise SourceTooBig(f"source {osc_api.clip(path.name, 80)} is {size / (1 << 20):.0f} MB on disk; "
                           f"at most {MAX_SOURCE_BYTES >> 20} MB")
    try:
        info = sf.info(str(path))
    except Exception:  # noqa: BLE001 - not a sound file soundfile knows: the decoder refuses it with a reason
        return
    if info.samplerate > 0 and info.frames > 0:
        seconds = info.frames / info.samplerate
        if seconds > MAX_SOURCE_S:
            raise SourceTooBig(f"source {osc_api.clip(path.name, 80)} is {seconds:.1f} s long; "
                               f"at most {MAX_SOURCE_S:g} s")


def settings(gen: Any, steps: int | None, sampler: str | None, max_steps: int | None = None
             ) -> tuple[int | None, str | None]:
    """The (steps, sampler) a kick is made with: the request's, else the model's default, the steps
    capped at the server's max_steps (an artifact's own default is not trusted past it). A one-pass
    model takes neither: (None, None), whatever was asked."""
    if not gen.samplers:
        return None, None
    steps = int(steps) if steps is not None else int(gen.default_steps)
    if max_steps:
        steps = min(steps, int(max_steps))
    return steps, sampler if sampler is not None else gen.default_sampler


@dataclass
class Job:
    """One accepted /kick/generate or /kick/variation: `count` kicks, each answered exactly once."""

    id: int
    seeds: list[int]
    reply: Reply
    steps: int | None = None
    sampler: str | None = None
    controls: dict[str, float] = field(default_factory=dict)
    source: Path | None = None  # a variation's (already checked) source file
    strength: float = 0.5
    _source_audio: Any = None

    @property
    def count(self) -> int:
        return len(self.seeds)


@dataclass
class _Unit:
    job: Job
    seed: int
    answered: bool = False

    def answer(self, data: bytes) -> None:
        """Send this kick's one reply (/kick/done or /kick/error); marks it answered first."""
        self.answered = True
        self.job.reply(data)


@dataclass
class _Offer:
    gen: Any
    name: str
    reply: Reply | None = None


class Worker:
    def __init__(self, gen: Any, name: str, writer: KickWriter, *, sample_rate: int, queue_limit: int = 64,
                 max_batch: int = 8, software: str = "kickserver", threads: int = 0,
                 max_steps: int | None = None) -> None:
        self.gen = gen
        self.max_steps = max_steps
        self.threads = int(threads)
        self.model_name = name
        self.writer = writer
        self.sample_rate = int(sample_rate)
        self.queue_limit = int(queue_limit)
        self.max_batch = int(max_batch)
        self.software = software
        self.generated = 0
        self.batches = 0
        self._units: collections.deque[_Unit] = collections.deque()
        self._running = 0
        self._cond = threading.Condition()
        self._offer: _Offer | None = None
        self._stopping = False
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kick-worker", daemon=True)

    # ------------------------------------------------------------ called from other threads
    def start(self) -> None:
        self._thread.start()

    @property
    def queued(self) -> int:
        """Kicks waiting or being generated."""
        return len(self._units) + self._running

    @property
    def device(self) -> str:
        return str(getattr(self.gen, "device", "cpu"))

    def submit(self, job: Job) -> str | None:
        """Queue a job's kicks; returns None, or the reason it was refused ("busy", "shutting down")."""
        with self._cond:
            if self._stopping:
                return "shutting down"
            if len(self._units) + job.count > self.queue_limit:
                return f"busy: {len(self._units)} kicks queued (limit {self.queue_limit})"
            self._units.extend(_Unit(job, s) for s in job.seeds)
            self._cond.notify()
        return None

    def offer_model(self, gen: Any, name: str, reply: Reply | None = None) -> None:
        """Swap this loaded generator in before the next batch (replacing an earlier offer not yet taken)."""
        with self._cond:
            if self._offer is not None and self._offer.reply is not None:
                self._offer.reply(osc_api.error(osc_api.NO_ID, f"model {self._offer.name} was superseded by {name}"))
            self._offer = _Offer(gen, name, reply)
            self._cond.notify()

    def set_writer(self, writer: KickWriter) -> None:
        with self._cond:
            self.writer = writer

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cancel.set()
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------ the thread
    def _swap_if_offered(self) -> None:
        with self._cond:
            offer, self._offer = self._offer, None
        if offer is None:
            return
        old = self.gen
        self.gen, self.model_name = offer.gen, offer.name
        del old
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        log.info("now serving model %s on %s", offer.name, self.device)
        if offer.reply is not None:
            offer.reply(osc_api.model(offer.name))

    def _key(self, u: _Unit) -> tuple:
        j = u.job
        if j.source is not None:
            return ("variation", id(j))
        return ("generate",) + settings(self.gen, j.steps, j.sampler, self.max_steps)

    def _take_batch(self) -> list[_Unit]:
        """Up to max_batch queued units sharing the first one's key (caller holds the lock)."""
        first = self._units.popleft()
        key = self._key(first)
        batch = [first]
        keep: list[_Unit] = []
        while self._units and len(batch) < self.max_batch:
            u = self._units.popleft()
            (batch if self._key(u) == key else keep).append(u)
        self._units.extendleft(reversed(keep))
        return batch

    def _run(self) -> None:
        if self.threads:
            # This thread is the only one that runs the network on several CPU threads; start-up and reloads
            # run on one (a second OpenMP thread team made every step here 2-3x slower). torch applies a
            # thread's count lazily, at its first op, from a process-wide value that the loader's
            # set_num_threads(1) also writes; losing that race left this thread on one CPU for good, so
            # _generate sets the count again before every batch (tests/kickserver/test_worker.py); reading it
            # first makes torch's lazy init happen now. Measured on 2 cores: docs/daemon.md.
            torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                warm_up(self.gen)  # this thread's kernels, for the first request
            except Cancelled:
                pass  # stopped during the warm-up
            except Exception as e:  # noqa: BLE001 - a failed warm-up shows again, answered, on the first request
                log.warning("worker warm-up failed: %s: %s", type(e).__name__, e)
        while True:
            self._swap_if_offered()
            with self._cond:
                while not self._units and not self._stopping and self._offer is None:
                    self._cond.wait(timeout=1.0)
                if self._stopping:
                    break
                if not self._units:
                    continue  # a model offer woke us
                batch = self._take_batch()
                self._running = len(batch)
            try:
                self._generate(batch)
            except Exception as e:  # never let the worker die: answer the kicks not answered yet
                log.error("batch failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
                for u in batch:
                    if not u.answered:
                        u.answer(osc_api.error(u.job.id, f"generation failed: {type(e).__name__}: {e}"))
            finally:
                self._running = 0
        with self._cond:
            left, self._units = list(self._units), collections.deque()
        for u in left:
            u.job.reply(osc_api.error(u.job.id, "shutting down"))
        if left:
            log.info("answered %d queued kick(s) with 'shutting down'", len(left))

    # ------------------------------------------------------------ one batch
    def _source(self, job: Job) -> np.ndarray:
        """The variation's source, decoded once per job and prepared for the serving model."""
        if job._source_audio is None:
            from trainer.data import read_audio

            check_source(job.source)
            job._source_audio = read_audio(job.source)
        data, sr = job._source_audio
        return self.gen.prepare_source(data, sr)

    def _generate(self, batch: list[_Unit]) -> None:
        gen = self.gen
        job0 = batch[0].job
        steps, sampler = settings(gen, job0.steps, job0.sampler, self.max_steps)
        items = [Item(seed=u.seed, controls=dict(u.job.controls)) for u in batch]
        if self.threads:
            torch.set_num_threads(self.threads)  # see _run
        t0 = time.perf_counter()
        try:
            variation = Variation(self._source(job0), job0.strength) if job0.source is not None else None
            audio = gen.render(items, steps=steps, sampler=sampler, variation=variation,
                               sample_rate=self.sample_rate, cancel=self._cancel.is_set)
        except Cancelled:
            for u in batch:
                u.answer(osc_api.error(u.job.id, "shutting down"))
            return
        except Exception as e:
            reason = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            if type(e).__name__ == "BadAudio":
                reason = f"cannot use source {job0.source.name if job0.source else ''}: {e}"
            log.warning("request %d refused by the model: %s", job0.id, reason)
            for u in batch:
                u.answer(osc_api.error(u.job.id, reason))
            return
        t_gen = time.perf_counter() - t0
        self.batches += 1
        for i, u in enumerate(batch):
            if self._stopping:
                u.answer(osc_api.error(u.job.id, "shutting down"))
                continue
            try:
                info = KickInfo(model=self.model_name, seed=u.seed, steps=steps, sampler=sampler,
                                controls=u.job.controls, software=self.software,
                                source=str(u.job.source) if u.job.source else None,
                                strength=u.job.strength if u.job.source else None)
                path = self.writer.write(audio[i], info)
            except WriteError as e:
                log.error("request %d: %s", u.job.id, e)
                u.answer(osc_api.error(u.job.id, str(e)))
                continue
            except Exception as e:  # noqa: BLE001 - one kick's failure is that kick's reply, not the batch's
                log.error("request %d: writing seed %d failed: %s: %s", u.job.id, u.seed, type(e).__name__, e,
                          exc_info=log.isEnabledFor(logging.DEBUG))
                u.answer(osc_api.error(u.job.id, f"cannot write kick (seed {u.seed}): {type(e).__name__}: {e}"))
                continue
            self.generated += 1
            u.answer(osc_api.done(u.job.id, str(path), u.seed))
        log.debug("batch of %d (%s, %s steps) in %.3f s", len(batch), sampler, steps, t_gen)
        try:
            self.writer.prune()
        except Exception as e:  # noqa: BLE001 - every kick is answered by now; retention tries again next batch
            log.error("retention failed in %s: %s: %s", self.writer.out_dir, type(e).__name__, e,
                      exc_info=log.isEnabledFor(logging.DEBUG))
