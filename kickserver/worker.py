"""The one thread that owns the model: takes queued kicks in batches, renders them, and emits what became of each
(kickserver.jobs outcomes: `Done`, `Refused`, `Located`, `Serving`); the front end encodes them as OSC.

The receive loop only calls `submit` (never blocks on the model) with a typed, resolved job (kickserver.jobs), which
it prices first at the serving model's prices (kickserver.pricing: measured in this thread once per model, before it
serves); the queue and its fairness are kickserver.fair_queue's, counted in those prices (`busy` past `queue_limit`,
or past `client_limit` for one host; the host that had the least work first; kicks that share a batch key made
together, up to `max_batch`). A batch is rendered by its job (`KickJob.render`: the one place that calls the
generator) and never looked at by kind here.
A new model handed over by `offer_model` is swapped in between batches, so no request is lost; before it serves
(and the first model before the first batch) its render is captured in this thread (kickmodel.capture: CUDA graphs or
torch.compile per `capture`, warmed up; eager when that fails), logged in one line with its resident memory. Nothing
renders meanwhile: queued kicks wait for the new model's warm-up and are then made by it (no wait under "off", the
CPU default, where capture does nothing), with their settings resolved again for it (as after a new `policy`). The
old model's compiled state is released first (kickmodel.capture.release).
Under a capture mode every batch is padded up to the next size warmed up (kickmodel.capture.capture_sizes) with
copies of its first kick, whose rows are dropped after the render: the networks never meet a size they were not
captured for (dynamic=False would compile or record a graph on a musician's request, and past torch's recompile
limit run eagerly while the log says "graphs"). Kicks do not depend on their batch (test_batch_independence).
Writing is off the render's critical path: a rendered batch goes to the writer thread (kickserver.writer.WriterThread,
through a queue of one batch), which writes its files, answers its kicks and applies retention, while this thread
renders the next batch. Every answer after a render goes through that thread in order.
A new output (SIGHUP: folder, sample rate, retention; `set_output`) goes the same way: this thread takes it between
batches and hands the writer thread the change after every batch rendered before it, so each batch is rendered and
written at one rate and lands in one folder.
`stop` cancels the batch on the device (the generator checks between network calls and raises),
lets the file being written land, and answers every other kick "shutting down".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kickmodel.capture import CaptureReport, capture, capture_sizes, padded_size, release
from kickmodel.generator import MODEL_DEFAULTS, Cancelled, StepPolicy

from .fair_queue import FairQueue
from .jobs import Answer, Job, Kick, Locate, Refused, Serving, measure_prices, warm_up
from .pricing import Prices, price, untimed
from .writer import KickWriter, Output, WriterThread

log = logging.getLogger("kickserver.worker")


def resident_memory(device: Any) -> str:
    """What the daemon holds now, in one phrase. On CUDA: "cuda:0 allocator reserved <MB> MB, peak <MB> MB, device
    used <MB> of <MB> MB": torch's caching allocator's reserve now and the peak allocated since start (a hot swap
    holds two models for a moment) -- neither counts the CUDA context or the kernels, often hundreds of MB -- then
    the device's memory in use (torch.cuda.mem_get_info: total - free), which counts those and every other
    process on the device. Else the process's resident set size."""
    dev = torch.device(device)
    if dev.type == "cuda":
        mb = 1 << 20
        free, total = torch.cuda.mem_get_info(dev)
        return (f"{dev} allocator reserved {torch.cuda.memory_reserved(dev) / mb:.0f} MB, "
                f"peak {torch.cuda.max_memory_allocated(dev) / mb:.0f} MB, "
                f"device used {(total - free) / mb:.0f} of {total / mb:.0f} MB")
    return f"{dev} RSS {_rss_bytes() / 1e6:.0f} MB"


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read(4096).split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the peak, in KiB on Linux


@dataclass
class _Offer:
    gen: Any
    name: str
    answer: Answer | None = None
    on_swap: Callable[[], None] | None = None  # called in the worker thread once gen serves


class Worker:
    def __init__(self, gen: Any, name: str, writer: KickWriter, *, sample_rate: int, queue_limit: int = 64,
                 client_limit: int = 32, max_batch: int = 8, software: str = "kickserver", threads: int = 0,
                 policy: StepPolicy = MODEL_DEFAULTS, capture: str = "off") -> None:
        self.gen = gen
        self._policy = policy  # the server's default steps and cap (--steps, --max-steps); SIGHUP replaces it
        self.threads = int(threads)
        self.model_name = name
        self.sample_rate = int(sample_rate)  # the rate kicks render at now; replaced by this thread (set_output)
        self._out = Output(self.sample_rate, writer.out_dir, writer.max_files, writer.max_mb,
                           name_pattern=writer.name_pattern, writer=writer)
        self._new_out: Output | None = None  # set_output's, not taken by the worker thread yet
        self.max_batch = int(max_batch)
        self.capture = capture  # kickmodel.capture's mode for every model this worker serves
        self.capture_report: CaptureReport | None = None  # the serving model's
        # set once the first model is warm in this thread (its warm-up and capture done, or given up): the daemon
        # says READY=1 only then (under --render-capture compile on the CPU the capture took 65 s)
        self.warm = threading.Event()
        self.batches = 0
        self.prices = untimed(gen)  # what a job costs in kicks on the serving model (kickserver.pricing)
        self._queue = FairQueue(queue_limit, client_limit)
        self._cond = threading.Condition()
        self._offer: _Offer | None = None
        self._stopping = False
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kick-worker", daemon=True)
        self.out = WriterThread(writer, self._cond, software=software, stopping=lambda: self._stopping,
                                threads=self.threads or torch.get_num_threads())  # torch's count: set here by now

    # ------------------------------------------------------------ called from other threads
    def start(self) -> None:
        self.out.start()
        self._thread.start()

    @property
    def queued(self) -> int:
        """Kicks waiting, being generated or being written."""
        return self._queue.waiting + self.out.running + self.out.writing

    @property
    def generated(self) -> int:
        return self.out.generated

    @property
    def writer(self) -> KickWriter:
        """The KickWriter kicks are written with now (the writer thread's; it replaces it on set_output)."""
        return self.out.writer

    def set_limits(self, queue_limit: int, client_limit: int, max_batch: int) -> None:
        """New limits (SIGHUP), for the requests and batches from now on."""
        with self._cond:
            self._queue.queue_limit, self._queue.client_limit = int(queue_limit), int(client_limit)
            self.max_batch = int(max_batch)

    @property
    def policy(self) -> StepPolicy:
        return self._policy

    @policy.setter
    def policy(self, policy: StepPolicy) -> None:
        """A new --steps / --max-steps (SIGHUP): the queued jobs are resolved again with it."""
        with self._cond:
            self._policy = policy
            for job in self._queue.jobs():
                job.resolve(self.gen, policy)

    def resident(self) -> str:
        """The memory the daemon holds now (resident_memory on the serving model's device)."""
        return resident_memory(self.gen.device)

    @property
    def device(self) -> str:
        return str(self.gen.device)

    def submit(self, job: Job) -> str | None:
        """Queue a job's kicks (resolved by the caller: Job.resolve); None, or the reason it was refused ("busy",
        "shutting down")."""
        with self._cond:
            if self._stopping:
                return "shutting down"
            job.price, job.price_note = price(job, self.prices, self.max_batch)  # at the serving model's prices
            refused = self._queue.add(job)
            if refused is None:
                self._cond.notify()
            return refused

    def offer_model(self, gen: Any, name: str, answer: Answer | None = None,
                    on_swap: Callable[[], None] | None = None) -> None:
        """Swap this loaded generator in before the next batch (replacing an earlier offer not yet taken).
        answer gets Serving(name) once it serves (or Refused if superseded); on_swap() runs right after the swap."""
        with self._cond:
            if self._offer is not None and self._offer.answer is not None:
                self._offer.answer(Refused(None, f"model {self._offer.name} was superseded by {name}"))
            self._offer = _Offer(gen, name, answer, on_swap)
            self._cond.notify()

    def set_output(self, out_dir: Any, sample_rate: int, *, max_files: int | None = None,
                   max_mb: float | None = None, name_pattern: str | None = None) -> None:
        """Write kicks rendered from now on at sample_rate into out_dir (with this retention, and named by
        name_pattern: None keeps the one kicks are named by now); every batch rendered
        before is written as it was rendered, into the folder it was rendered for (see the module doc). Raises
        OSError, now, when out_dir cannot be created; the KickWriter itself is made by the writer thread."""
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        with self._cond:
            pattern = name_pattern if name_pattern is not None else self._out.name_pattern
            self._new_out = Output(int(sample_rate), Path(out_dir), max_files, max_mb, name_pattern=pattern)
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cancel.set()
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker, which ends after the writer thread has answered everything handed to it."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------ the thread
    def _swap_if_offered(self) -> None:
        with self._cond:
            offer, self._offer = self._offer, None
        if offer is None:
            return
        if self.capture_report is not None and (self.capture_report.used != "off" or self.capture_report.fell_back):
            release(self.gen)  # the old model's compiled modules, caches and graph pools: it renders no more
        try:
            # Nothing renders during the capture: queued kicks wait for the new model's warm-up (none under "off")
            report = self._capture(offer.gen)
            prices = self._measure(offer.gen, offer.name)
        except Cancelled:
            if offer.answer is not None:
                self.out.post(lambda: offer.answer(Refused(None, "shutting down")))
            return
        old = self.gen
        with self._cond:
            self.gen, self.model_name, self.prices = offer.gen, offer.name, prices  # queued jobs keep their prices
            for job in self._queue.jobs():  # the kicks still queued are made by this model: with its settings
                job.resolve(self.gen, self._policy)
        del old
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        log.info("now serving model %s on %s", offer.name, self.device)
        self._log_capture(offer.name, report)
        if offer.on_swap is not None:
            try:
                offer.on_swap()
            except Exception as e:  # noqa: BLE001 - bookkeeping must not stop serving
                log.error("after swapping in %s: %s: %s", offer.name, type(e).__name__, e)
        if offer.answer is not None:
            self.out.post(lambda: offer.answer(Serving(offer.name)))  # after the old model's kicks' answers

    def _capture(self, gen: Any) -> CaptureReport:
        """gen's render captured (kickmodel.capture) for the batch sizes batches are padded to (capture_sizes), in
        this thread, which renders."""
        if self.threads:
            torch.set_num_threads(self.threads)  # see _run
        return capture(gen, self.capture, log, batches=capture_sizes(self.max_batch), cancel=self._cancel.is_set)

    def _measure(self, gen: Any, name: str) -> Prices:
        """What gen takes here (jobs.measure_prices, in this thread, which renders), in one log line; a failure is
        logged and leaves it untimed (an encoding counts as pricing.UNTIMED kicks: such a job is taken alone)."""
        if self.threads:
            torch.set_num_threads(self.threads)  # see _run
        try:
            prices = measure_prices(gen, self._policy, cancel=self._cancel.is_set)
        except Cancelled:
            raise
        except Exception as e:  # noqa: BLE001 - the model serves without its prices
            prices = untimed(gen)
            log.warning("model %s: its work could not be timed (%s: %s); %s", name, type(e).__name__, e,
                        prices.describe())
            return prices
        log.info("model %s: %s (kickserver.pricing)", name, prices.describe())
        return prices

    def _pad_to(self, n: int) -> int:
        """The batch size n kicks render as: the next captured size under a capture mode that serves, else n."""
        r = self.capture_report
        if r is None or r.used == "off":
            return n
        return padded_size(n, r.batches)

    def _switch_output(self) -> None:
        """Take set_output's change (this thread, between batches): later batches render at its rate, and the writer
        thread makes its KickWriter after writing every batch handed to it before."""
        with self._cond:
            new, self._new_out = self._new_out, None
            if new is None:
                return
            old = self._out
            self._out, self.sample_rate = new, new.sample_rate
        self.out.switch(old, new)

    def _log_capture(self, name: str, report: CaptureReport) -> None:
        """The one line per model load: family, capture asked and used, warm-up time, why it fell back, memory."""
        self.capture_report = report
        line = "model %s (%s): %s; resident: %s"
        args = (name, getattr(self.gen, "family", "?"), report.describe(), self.resident())
        (log.warning if report.fell_back else log.info)(line, *args)

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
                warm_up(self.gen, cancel=self._cancel.is_set)  # this thread's kernels, for the first request
            except Cancelled:
                pass  # stopped during the warm-up
            except Exception as e:  # noqa: BLE001 - a failed warm-up shows again, answered, on the first request
                log.warning("worker warm-up failed: %s: %s", type(e).__name__, e)
        try:
            try:
                self._log_capture(self.model_name, self._capture(self.gen))
                self.prices = self._measure(self.gen, self.model_name)
            except Cancelled:
                pass  # stopped during the warm-up: the loop below ends at once
            self.warm.set()
            self._serve()
        finally:
            self.warm.set()  # a worker that died warms nothing more: nobody waits for it
            self.out.finish()  # after everything handed over: the writer thread answers it all, then ends

    def _serve(self) -> None:
        while True:
            self._swap_if_offered()
            self._switch_output()
            with self._cond:
                while (not self._queue.waiting and not self._stopping and self._offer is None
                       and self._new_out is None):
                    self._cond.wait(timeout=1.0)
                if self._stopping:
                    break
                if not self._queue.waiting or self._new_out is not None:
                    continue  # a model offer or a new output woke us: taken before the next batch
                batch = self._queue.take(self.max_batch)
                self.out.running = len(batch)
            try:
                self._generate(batch)
            except Exception as e:  # never let the worker die: answer the kicks not answered yet
                log.error("batch failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
                self.out.answer_all(batch, f"generation failed: {type(e).__name__}: {e}", only_unanswered=True)
            finally:
                self.out.running = 0
        with self._cond:
            left = self._queue.drain()

        def shutting_down() -> None:
            for k in left:
                k.job.answer(Refused(k.job.id, "shutting down"))
            for job in {id(k.job): k.job for k in left}.values():
                job.close()
            if left:
                log.info("answered %d queued kick(s) with 'shutting down'", len(left))

        self.out.post(shutting_down)

    # ------------------------------------------------------------ one batch
    def _generate(self, batch: list[Kick]) -> None:
        job = batch[0].job
        if isinstance(job, Locate):  # no kick: a point on the map, answered in order with the kicks' replies
            self.out.answer_all(batch, outcome=job.place(self.gen, self.model_name))
            return
        if job.refused is not None:  # an earlier batch of this job was refused by the model
            self.out.answer_all(batch, job.refused)
            return
        with self._cond:
            out = self._out  # the rate this batch renders at and the folder it goes to, together
        if self.threads:
            torch.set_num_threads(self.threads)  # see _run
        t0 = time.perf_counter()
        try:
            pad = self._pad_to(len(batch)) - len(batch)  # copies of the first kick up to a captured size
            audio = job.render(self.gen, batch, pad, out.sample_rate, self._cancel.is_set)
        except Cancelled:
            self.out.answer_all(batch, "shutting down")
            return
        except Exception as e:
            reason = job.refusal(e)
            log.warning("request %d refused by the model: %s", job.id, reason)
            self.out.answer_all(batch, reason)
            return
        self.batches += 1
        s = batch[0].settings
        log.debug("batch of %d (%s, %s steps) in %.3f s", len(batch), s.sampler, s.steps, time.perf_counter() - t0)
        self.out.write_batch(batch, audio, self.model_name, out)
