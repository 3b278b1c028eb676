"""The one thread that owns the model: takes queued kicks in batches, generates, writes, replies.

The receive loop only calls `submit` (never blocks on the model): a request that would push the
queue past `queue_limit` kicks, or its host's kicks past `client_limit`, is refused at once
(`busy`). A host is a source address: the daemon passes (address, port) as the job's client, and
every port of one address shares that address's limit and its turn, so opening more sockets buys
no larger share (issue 22: four ports filled the whole queue). Batches start from the hosts in turn
(round-robin), and within a host from its clients (ports) in turn, so one host's backlog never
starves another host's single kick: a host waits at most one batch per other host with work
queued; two programs on one machine (Max and Pd, both 127.0.0.1) share that machine's limit and
take turns within it. Queued kicks that share a key (steps and sampler for fresh kicks; the same
request for variations and interpolations) are generated together, up to `max_batch` at a time,
taken one per host per pass.
A new model handed over by `offer_model` is swapped in between batches, so no request is lost; before it serves
(and the first model before the first batch) its render is captured in this thread (kickmodel.capture: CUDA graphs or
torch.compile per `capture`, warmed up; eager when that fails), logged in one line with its resident memory. Nothing
renders meanwhile: queued kicks wait for the new model's warm-up and are then made by it (no wait under "off", the
CPU default, where capture does nothing). The old model's compiled state is released first (kickmodel.capture.release).
Under a capture mode every batch is padded up to the next size warmed up (kickmodel.capture.capture_sizes) with
copies of its first kick, whose rows are dropped after the render: the networks never meet a size they were not
captured for (dynamic=False would compile or record a graph on a musician's request, and past torch's recompile
limit run eagerly while the log says "graphs"). Kicks do not depend on their batch (test_batch_independence).
Writing is off the render's critical path: a rendered batch goes to the writer thread (`kick-writer`, through a
queue of one batch), which writes its files (KickWriter.write: temp file, fsync, rename), answers its kicks and
applies retention, while this thread renders the next batch. Every reply after a render goes through that thread in
order, so one client's replies keep the order of its kicks, and only that thread touches the KickWriter's ledger.
A new output (SIGHUP: folder, sample rate, retention; `set_output`) goes the same way: this thread takes it between
batches and hands the writer thread the change after every batch rendered before it, so each batch is rendered and
written at one rate and lands in one folder; there the old writer saves its ledger, then the new one is made (stray
temp files cleaned only in a folder that changed, never while a write is in flight).
`stop` cancels the batch on the device (the generator checks between network calls and raises),
lets the file being written land, and answers every other kick "shutting down".
"""

from __future__ import annotations

import collections
import logging
import os
import queue as queue_mod
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kickmodel.capture import CaptureReport, capture, capture_sizes, padded_size, release
from kickmodel.clips import BadAudio
from kickmodel.generator import MODEL_DEFAULTS, Cancelled, Endpoint, Interpolation, Item, Near, StepPolicy, Variation

from . import osc_api
from .reload import warm_up
from .sources import Source, SourceError
from .writer import KickInfo, KickWriter, WriteError

log = logging.getLogger("kickserver.worker")

Reply = Callable[[bytes], None]
WRITE_QUEUE = 1  # rendered batches waiting for the writer thread (the next one renders meanwhile)


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
class End:
    """One end of an interpolation: a seed, or a file the receive loop opened and checked (decoded once, by the
    worker, from that descriptor)."""

    seed: int | None = None
    source: Source | None = None
    _audio: Any = None
    _error: Exception | None = None

    @property
    def tag(self) -> int | str:
        """What the file's tags record: the seed, or the file's path."""
        return self.seed if self.source is None else str(self.source)

    def decoded(self) -> tuple[np.ndarray, int]:
        """The file's (samples, rate), decoded on first use; a failure fails every later use alike."""
        if self._error is not None:
            raise self._error
        if self._audio is None:
            try:
                self._audio = self.source.decode()
            except Exception as e:
                self._error = e
                raise
        return self._audio


@dataclass
class Job:
    """One accepted /kick/generate, /kick/variation or /kick/interpolate: `count` kicks, each answered exactly
    once. `seeds` are the kicks' seeds (an interpolation's: osc_api.Interpolate.reply_seed); `reply_seed` says
    what each reply carries."""

    id: int
    seeds: list[int]
    reply: Reply
    steps: int | None = None
    sampler: str | None = None
    controls: dict[str, float] = field(default_factory=dict)
    source: Source | None = None  # a variation's source, opened and checked by the receive loop; read once
    strength: float = 0.5
    client: Any = None  # whose queue the kicks join (the daemon: the source address and port; see `host`)
    ends: tuple[End, End] | None = None  # an interpolation's a and b
    ts: list[float] | None = None  # an interpolation's t per kick (0: a, 1: b), in the order of seeds
    near: Near | None = None  # /kick/near: kicks from the kit map's point, each its seed's noise scaled by the spread
    locate: str | None = None  # /kick/locate: no kick, the map point of `source`, replied with the name asked
    _failed: str | None = None  # an interpolation the model refused: its later batches get the same reason
    _source_audio: Any = None
    _source_error: Exception | None = None  # a source that failed to decode fails the job's later batches alike

    @property
    def count(self) -> int:
        return len(self.seeds)

    @property
    def host(self) -> Any:
        """Whose share the kicks count against: the source address of an (address, port) client, else the client."""
        return self.client[0] if isinstance(self.client, tuple) and self.client else self.client

    def reply_seed(self, seed: int) -> int:
        """The seed field of a kick's /kick/done: the seed /kick/generate turns into this very kick. A variation's
        seed is its noise, which /kick/generate would turn into another kick, so its reply carries NO_SEED and a
        client goes on from its file (`/kick/variation SOURCE seed S` with the same strength, steps and controls
        makes it again; its name and tags say S)."""
        return osc_api.NO_SEED if self.source is not None else seed

    def sources(self) -> list[Source]:
        """Every file this job holds open (to close when it is refused or dropped)."""
        ends = [e.source for e in self.ends or () if e.source is not None]
        return ([self.source] if self.source is not None else []) + ends

    def close(self) -> None:
        for s in self.sources():
            s.close()


@dataclass
class _Unit:
    job: Job
    seed: int
    t: float | None = None  # an interpolation's place between its ends
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
    on_swap: Callable[[], None] | None = None  # called in the worker thread once gen serves


@dataclass
class _Output:
    """Where and at what rate kicks go: what set_output asked for and, once the writer thread has made it (in order
    with the batches), its KickWriter (the previous one where the new folder could not be used). A batch keeps the
    _Output it was rendered for, so its files carry the rate it was rendered at."""

    sample_rate: int
    out_dir: Any
    max_files: int | None = None
    max_mb: float | None = None
    writer: KickWriter | None = None


class Worker:
    def __init__(self, gen: Any, name: str, writer: KickWriter, *, sample_rate: int, queue_limit: int = 64,
                 client_limit: int = 32, max_batch: int = 8, software: str = "kickserver", threads: int = 0,
                 policy: StepPolicy = MODEL_DEFAULTS, capture: str = "off") -> None:
        self.gen = gen
        self.policy = policy  # the server's default steps and cap (--steps, --max-steps); SIGHUP replaces it
        self.threads = int(threads)
        self.model_name = name
        self.writer = writer  # the writer thread's; replaced there (set_output)
        self.sample_rate = int(sample_rate)  # the rate kicks render at now; replaced by this thread (set_output)
        self._out = _Output(self.sample_rate, writer.out_dir, writer.max_files, writer.max_mb, writer)
        self._new_out: _Output | None = None  # set_output's, not taken by the worker thread yet
        self.queue_limit = int(queue_limit)
        self.client_limit = int(client_limit)
        self.max_batch = int(max_batch)
        self.software = software
        self.capture = capture  # kickmodel.capture's mode for every model this worker serves
        self.capture_report: CaptureReport | None = None  # the serving model's
        self.generated = 0
        self.batches = 0
        # host -> client -> its queued kicks; each dict's order is its round-robin order (the host, and the
        # client within it, served last moves to the end). A client whose queue empties is removed, and a host
        # with no client left.
        self._queues: collections.OrderedDict[Any, collections.OrderedDict[Any, collections.deque[_Unit]]] = (
            collections.OrderedDict())
        self._host_waiting: dict[Any, int] = {}  # host -> its kicks in the queues
        self._waiting = 0  # kicks in all the queues
        self._running = 0
        self._cond = threading.Condition()
        self._offer: _Offer | None = None
        self._stopping = False
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kick-worker", daemon=True)
        # callables run in order by the writer thread: a batch's writes and replies, any reply after a render
        self._writes: queue_mod.Queue[Callable[[], None] | None] = queue_mod.Queue(maxsize=WRITE_QUEUE)
        self._writing = 0  # kicks handed to the writer thread, not answered yet
        self._writer_thread = threading.Thread(target=self._write_loop, name="kick-writer", daemon=True)

    # ------------------------------------------------------------ called from other threads
    def start(self) -> None:
        self._writer_thread.start()
        self._thread.start()

    @property
    def queued(self) -> int:
        """Kicks waiting, being generated or being written."""
        return self._waiting + self._running + self._writing

    def resident(self) -> str:
        """The memory the daemon holds now (resident_memory on the serving model's device)."""
        return resident_memory(self.gen.device)

    @property
    def device(self) -> str:
        return str(self.gen.device)

    def submit(self, job: Job) -> str | None:
        """Queue a job's kicks; returns None, or the reason it was refused ("busy", "shutting down")."""
        with self._cond:
            if self._stopping:
                return "shutting down"
            if self._waiting + job.count > self.queue_limit:
                return f"busy: {self._waiting} kicks queued (limit {self.queue_limit})"
            host = job.host
            mine = self._host_waiting.get(host, 0)
            if mine + job.count > self.client_limit:
                return f"busy: {mine} kicks from your address queued (limit {self.client_limit} per address)"
            q = self._queues.setdefault(host, collections.OrderedDict()).setdefault(job.client, collections.deque())
            ts = job.ts if job.ts is not None else [None] * job.count
            q.extend(_Unit(job, s, t) for s, t in zip(job.seeds, ts, strict=True))
            self._host_waiting[host] = mine + job.count
            self._waiting += job.count
            self._cond.notify()
        return None

    def offer_model(self, gen: Any, name: str, reply: Reply | None = None,
                    on_swap: Callable[[], None] | None = None) -> None:
        """Swap this loaded generator in before the next batch (replacing an earlier offer not yet taken).
        reply gets /kick/model once it serves (or an error if superseded); on_swap() runs right after the swap."""
        with self._cond:
            if self._offer is not None and self._offer.reply is not None:
                self._offer.reply(osc_api.error(osc_api.NO_ID, f"model {self._offer.name} was superseded by {name}"))
            self._offer = _Offer(gen, name, reply, on_swap)
            self._cond.notify()

    def set_output(self, out_dir: Any, sample_rate: int, *, max_files: int | None = None,
                   max_mb: float | None = None) -> None:
        """Write kicks rendered from now on at sample_rate into out_dir (with this retention); every batch rendered
        before is written as it was rendered, into the folder it was rendered for (see the module doc). Raises
        OSError, now, when out_dir cannot be created; the KickWriter itself is made by the writer thread."""
        from pathlib import Path

        Path(out_dir).mkdir(parents=True, exist_ok=True)
        with self._cond:
            self._new_out = _Output(int(sample_rate), Path(out_dir), max_files, max_mb)
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
        except Cancelled:
            if offer.reply is not None:
                self._post(lambda: offer.reply(osc_api.error(osc_api.NO_ID, "shutting down")))
            return
        old = self.gen
        self.gen, self.model_name = offer.gen, offer.name
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
        if offer.reply is not None:
            self._post(lambda: offer.reply(osc_api.model(offer.name)))  # after the old model's kicks' replies

    def _capture(self, gen: Any) -> CaptureReport:
        """gen's render captured (kickmodel.capture) for the batch sizes batches are padded to (capture_sizes), in
        this thread, which renders."""
        if self.threads:
            torch.set_num_threads(self.threads)  # see _run
        return capture(gen, self.capture, log, batches=capture_sizes(self.max_batch), cancel=self._cancel.is_set)

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

        def switch() -> None:
            prev = old.writer or self.writer
            prev.save_ledger()  # what the old writer wrote stays in its folder's ledger
            same = os.path.realpath(prev.out_dir) == os.path.realpath(new.out_dir)
            try:
                w = KickWriter(new.out_dir, new.sample_rate, max_files=new.max_files, max_mb=new.max_mb,
                               clean_temps=not same)
            except OSError as e:
                log.error("cannot use the output folder %s (%s); kicks still go to %s", new.out_dir, e, prev.out_dir)
                new.writer = prev
                return
            if same and prev.retention and w.retention:
                w.adopt_ledger(prev)  # the same folder: the old writer's ledger, as it is in memory
            new.writer = self.writer = w

        self._post(switch)

    def _log_capture(self, name: str, report: CaptureReport) -> None:
        """The one line per model load: family, capture asked and used, warm-up time, why it fell back, memory."""
        self.capture_report = report
        line = "model %s (%s): %s; resident: %s"
        args = (name, getattr(self.gen, "family", "?"), report.describe(), self.resident())
        (log.warning if report.fell_back else log.info)(line, *args)

    def _key(self, u: _Unit) -> tuple:
        j = u.job
        if j.locate is not None:
            return ("locate", id(j))
        if j.near is not None:
            return ("near", id(j))  # its kicks share a point and spread (steps and sampler do not apply)
        if j.source is not None:
            return ("variation", id(j))
        if j.ends is not None:
            return ("interpolate", id(j))  # its kicks share their ends (a file's is inverted per batch)
        s = self.gen.settings(j.steps, j.sampler, self.policy)
        return ("generate", s.steps, s.sampler)

    def _take_batch(self) -> list[_Unit]:
        """Up to max_batch queued units sharing a key (caller holds the lock).

        The batch starts with the oldest kick of the host whose turn it is, from that host's client whose turn
        it is; both then go to the end of their rounds. It is filled with kicks of the same key taken one per host
        per pass, in round order (each from the host's next client that has one), so a batch never takes a host's
        whole backlog while another host waits with the same key, and many ports buy one host no larger share."""
        first_host, clients = next(iter(self._queues.items()))
        first_client, q = next(iter(clients.items()))
        first = q.popleft()
        clients.move_to_end(first_client)
        key = self._key(first)
        batch = [first]
        progress = True
        while len(batch) < self.max_batch and progress:
            progress = False
            for clients in self._queues.values():
                if len(batch) >= self.max_batch:
                    break
                if self._take_one(clients, key, batch):
                    progress = True
        self._queues.move_to_end(first_host)
        for u in batch:
            host = u.job.host
            self._host_waiting[host] -= 1
            if not self._host_waiting[host]:
                del self._host_waiting[host]
        for host, clients in list(self._queues.items()):
            for client in [c for c, queue in clients.items() if not queue]:
                del clients[client]
            if not clients:
                del self._queues[host]
        self._waiting -= len(batch)
        return batch

    def _take_one(self, clients: collections.OrderedDict, key: tuple, batch: list[_Unit]) -> bool:
        """Move the oldest unit with `key` of the first of a host's clients (in their round order) that has one into
        batch; that client goes to the end of the host's round."""
        for client, queue in clients.items():
            for i, u in enumerate(queue):
                if self._key(u) == key:
                    del queue[i]
                    batch.append(u)
                    clients.move_to_end(client)
                    return True
        return False

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
            except Cancelled:
                pass  # stopped during the warm-up: the loop below ends at once
            self._serve()
        finally:
            self._writes.put(None)  # after everything handed over: the writer thread answers it all, then ends
            self._writer_thread.join()

    def _serve(self) -> None:
        while True:
            self._swap_if_offered()
            self._switch_output()
            with self._cond:
                while (not self._waiting and not self._stopping and self._offer is None
                       and self._new_out is None):
                    self._cond.wait(timeout=1.0)
                if self._stopping:
                    break
                if not self._waiting or self._new_out is not None:
                    continue  # a model offer or a new output woke us: taken before the next batch
                batch = self._take_batch()
                self._running = len(batch)
            try:
                self._generate(batch)
            except Exception as e:  # never let the worker die: answer the kicks not answered yet
                log.error("batch failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
                reason = f"generation failed: {type(e).__name__}: {e}"
                self._answer_all(batch, reason, only_unanswered=True)
            finally:
                self._running = 0
        with self._cond:
            left = [u for clients in self._queues.values() for q in clients.values() for u in q]
            self._queues.clear()
            self._host_waiting.clear()
            self._waiting = 0

        def shutting_down() -> None:
            for u in left:
                u.job.reply(osc_api.error(u.job.id, "shutting down"))
            for job in {id(u.job): u.job for u in left}.values():
                job.close()
            if left:
                log.info("answered %d queued kick(s) with 'shutting down'", len(left))

        self._post(shutting_down)

    # ------------------------------------------------------------ the writer thread
    def _post(self, fn: Callable[[], None], kicks: int = 0) -> None:
        """Hand fn to the writer thread (after everything handed before it); waits while WRITE_QUEUE batches wait.
        kicks: how many of the running batch's kicks fn answers: they move from `running` to `writing` (counted in
        `queued` until fn has run) in one step, so `queued` never counts them twice while this waits."""
        if kicks:
            with self._cond:
                self._writing += kicks
                self._running = max(0, self._running - kicks)
        self._writes.put(fn)

    def _write_loop(self) -> None:
        while True:
            fn = self._writes.get()
            if fn is None:
                return
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the writer thread must not die: later batches need it
                log.error("writing failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))

    def _answer_all(self, batch: list[_Unit], reason: str | None = None, *, only_unanswered: bool = False,
                    data: bytes | None = None) -> None:
        """Answer the batch's kicks (those not answered yet, with only_unanswered) with an error giving reason, or
        with data, in the writer thread (so after the replies of earlier batches)."""
        def answer() -> None:
            try:
                for u in batch:
                    if not (only_unanswered and u.answered):
                        u.answer(data if data is not None else osc_api.error(u.job.id, reason or ""))
            finally:
                with self._cond:
                    self._writing -= len(batch)

        self._post(answer, len(batch))

    # ------------------------------------------------------------ one batch
    def _source(self, job: Job) -> np.ndarray:
        """The variation's source as the serving model's input clip: decoded once, from the descriptor the
        receive loop opened (never by its path again), then prepared by the model like a training clip."""
        if job._source_error is not None:
            raise job._source_error
        if job._source_audio is None:
            try:
                job._source_audio = job.source.decode()
            except Exception as e:
                job._source_error = e
                raise
        audio, rate = job._source_audio
        return self.gen.prepare_source(audio, rate)

    def _interpolation(self, job: Job, batch: list[_Unit]) -> Interpolation:
        """The batch's morph: its ends as the serving model's endpoints (a file decoded once, prepared like a
        variation's source), one t per kick. A file that cannot be used raises ValueError naming its end."""
        ends = []
        for key, end in zip(("a", "b"), job.ends, strict=True):
            if end.source is None:
                ends.append(Endpoint(seed=end.seed))
                continue
            try:
                audio, rate = end.decoded()
                ends.append(Endpoint(source=self.gen.prepare_source(audio, rate)))
            except BadAudio as e:
                raise ValueError(f"{key}: cannot use source {end.source.name}: {e}") from None
            except SourceError as e:
                raise ValueError(f"{key}: {e}") from None
        return Interpolation(ends[0], ends[1], ts=[u.t for u in batch])

    def _generate(self, batch: list[_Unit]) -> None:
        gen = self.gen
        job0 = batch[0].job
        if job0.locate is not None:
            self._locate(batch)
            return
        if job0._failed is not None:  # an earlier batch of this interpolation was refused by the model
            self._answer_all(batch, job0._failed)
            return
        s = gen.settings(job0.steps, job0.sampler, self.policy)
        steps, sampler = (s.steps, s.sampler) if job0.near is None else (None, None)  # a map kick is decoded at once
        items = [Item(seed=max(0, u.seed), controls=dict(u.job.controls)) for u in batch]  # -1: an inner morph kick
        pad = self._pad_to(len(items)) - len(items)  # copies of the first kick up to a captured size, dropped after
        items += [Item(seed=items[0].seed, controls=dict(items[0].controls)) for _ in range(pad)]
        with self._cond:
            out = self._out  # the rate this batch renders at and the folder it goes to, together
        if self.threads:
            torch.set_num_threads(self.threads)  # see _run
        t0 = time.perf_counter()
        try:
            variation = Variation(self._source(job0), job0.strength) if job0.source is not None else None
            interpolation = self._interpolation(job0, batch) if job0.ends is not None else None
            if interpolation is not None and pad:
                interpolation.ts += [interpolation.ts[0]] * pad
            audio = gen.render(items, steps=steps, sampler=sampler, variation=variation, interpolation=interpolation,
                               sample_rate=out.sample_rate, cancel=self._cancel.is_set, near=job0.near)[:len(batch)]
        except Cancelled:
            self._answer_all(batch, "shutting down")
            return
        except Exception as e:
            reason = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            if type(e).__name__ == "BadAudio":
                reason = f"cannot use source {job0.source.name if job0.source else ''}: {e}"
            log.warning("request %d refused by the model: %s", job0.id, reason)
            if job0.ends is not None:
                job0._failed = reason
                job0.close()
            self._answer_all(batch, reason)
            return
        t_gen = time.perf_counter() - t0
        self.batches += 1
        log.debug("batch of %d (%s, %s steps) in %.3f s", len(batch), sampler, steps, t_gen)
        model_name = self.model_name

        def write() -> None:
            try:
                self._write(batch, audio, steps, sampler, model_name, out)
            except Exception as e:  # noqa: BLE001 - as _serve's catch-all: answer the kicks not answered yet
                log.error("batch failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
                for u in batch:
                    if not u.answered:
                        u.answer(osc_api.error(u.job.id, f"generation failed: {type(e).__name__}: {e}"))
            finally:
                with self._cond:
                    self._writing -= len(batch)

        self._post(write, len(batch))

    def _write(self, batch: list[_Unit], audio: np.ndarray, steps: int | None, sampler: str | None,
               model_name: str, out: _Output) -> None:
        """In the writer thread: drop each rendered kick (unless stopping: the one being written lands, the rest are
        answered "shutting down"), answer it, then apply retention and save the ledger -- all with the writer of
        `out`, the output the batch was rendered for, and at its rate."""
        writer = out.writer or self.writer
        for i, u in enumerate(batch):
            if self._stopping:
                u.answer(osc_api.error(u.job.id, "shutting down"))
                continue
            try:
                info = KickInfo(model=model_name, seed=u.seed, steps=steps, sampler=sampler,
                                controls=u.job.controls, software=self.software,
                                source=str(u.job.source) if u.job.source else None,
                                strength=u.job.strength if u.job.source else None,
                                a=u.job.ends[0].tag if u.job.ends else None,
                                b=u.job.ends[1].tag if u.job.ends else None, t=u.t,
                                **_map_tags(u.job.near))
                path = writer.write(audio[i], info, sample_rate=out.sample_rate)
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
            u.answer(osc_api.done(u.job.id, str(path), u.job.reply_seed(u.seed)))
        try:
            writer.prune()
        except Exception as e:  # noqa: BLE001 - every kick is answered by now; retention tries again next batch
            log.error("retention failed in %s: %s: %s", writer.out_dir, type(e).__name__, e,
                      exc_info=log.isEnabledFor(logging.DEBUG))

    def _locate(self, batch: list[_Unit]) -> None:
        """A /kick/locate: the source decoded from the descriptor the receive loop opened, prepared as a variation's
        source is, encoded and placed on the serving model's map; `/kick/locate x y source` (the name as asked), or
        the reason it cannot be, answered in order with the kicks' replies (the writer thread)."""
        job = batch[0].job
        try:
            x, y = self.gen.locate(self._source(job))
            data = osc_api.located(x, y, job.locate)
        except BadAudio as e:
            data = osc_api.error(job.id, f"cannot use source {job.source.name}: {e}")
        except (SourceError, ValueError) as e:  # a model without a map (swapped in meanwhile), a file gone bad
            data = osc_api.error(job.id, str(e))
        except Exception as e:  # noqa: BLE001 - one request's failure is its reply
            log.error("locating %s failed: %s: %s", job.source.name, type(e).__name__, e,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            data = osc_api.error(job.id, f"cannot locate {job.source.name}: {type(e).__name__}: {e}")
        finally:
            job.close()
        self._answer_all(batch, data=data)


def _map_tags(near: Near | None) -> dict[str, float]:
    """A kick's tags for the map point it was asked at (KickInfo's map_x, map_y, spread), none for other kicks."""
    return {} if near is None else {"map_x": near.x, "map_y": near.y, "spread": near.spread}
