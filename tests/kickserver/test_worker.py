"""The worker in-process: batching by key, the bounded queue, swaps between batches, stopping."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from daemon_util import wait_until

from kickmodel.generator import GeneratorBase
from kickmodel.loading import load_generator
from kickserver import jobs, osc_api
from kickserver.frontend import encode
from kickserver.worker import Worker
from kickserver.writer import KickWriter


class FakeGen(GeneratorBase):
    """A generator without a network: GeneratorBase's render (settings, finishing, resampling) around sines."""

    capabilities = frozenset({"controls", "samplers", "variation"})
    samplers = ("ddim", "ddpm", "dpmpp_2m")
    max_steps = 1000

    def __init__(self, name="fake", delay=0.0):
        self.name, self.delay = name, delay
        self.sample_rate, self.length, self.device = 44100, 512, "cpu"
        self.controls, self.unit_controls = ("decay",), ()
        self.default_steps, self.default_sampler = 7, "ddim"
        self.calls: list[tuple[int, int, str]] = []
        self.started = threading.Event()
        self._cancel = None

    def prepare_source(self, audio, sample_rate, *, whole=False):
        return np.zeros(self.length, dtype=np.float32)

    def _sample(self, items, settings, hook):
        self.started.set()
        self.calls.append((len(items), settings.steps, settings.sampler))
        time.sleep(self.delay)
        t = np.arange(self.length) / self.sample_rate
        return np.stack([np.sin(2 * np.pi * (50 + it.seed) * t) for it in items]).astype(np.float32)


class Collect:
    def __init__(self):
        self.replies: list[tuple[str, list]] = []
        self.lock = threading.Lock()

    def __call__(self, data):
        """A reply datagram, or an outcome the worker emitted (encoded as the front end encodes it)."""
        from daemon_util import parse_replies

        data = data if isinstance(data, bytes) else encode(data)
        with self.lock:
            self.replies.extend(parse_replies(data))

    def wait(self, n, timeout=10.0):
        deadline = time.monotonic() + timeout
        while len(self.replies) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.replies)


def job(id, n, reply, **kw):
    return jobs.Fresh(id=id, seeds=list(range(100 * id, 100 * id + n)), answer=reply, **kw)


def submit(w, job):
    """Submit as the front end does: the job resolved once against the serving model and the server's policy."""
    job.resolve(w.gen, w.policy)
    return w.submit(job)


def test_batches_share_steps_and_sampler(tmp_path):
    gen = FakeGen(delay=0.2)
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=4)
    r = Collect()
    submit(w, job(1, 1, r))  # taken alone while the others queue up behind it
    w.start()
    assert gen.started.wait(5)
    submit(w, job(2, 3, r))
    submit(w, job(3, 2, r, steps=3))
    submit(w, job(4, 2, r))  # default steps: batched with job 2 (3 + 1 <= 4), the rest next time
    got = r.wait(8)
    w.stop()
    assert w.join(5)
    assert len(got) == 8 and all(a == "/kick/done" for a, _ in got)
    assert gen.calls[0] == (1, 7, "ddim")
    assert gen.calls[1] == (4, 7, "ddim")  # job 2 (3 kicks) + the first of job 4
    assert sorted(gen.calls[2:]) == [(1, 7, "ddim"), (2, 3, "ddim")]
    assert w.generated == 8


def test_queue_limit_refuses_with_busy(tmp_path):
    w = Worker(FakeGen(), "fake", KickWriter(tmp_path, 44100), sample_rate=44100, queue_limit=5)
    r = Collect()
    assert submit(w, job(1, 4, r)) is None
    assert submit(w, job(2, 2, r)).startswith("busy")
    assert submit(w, job(3, 1, r)) is None
    assert w.queued == 5
    w.stop()
    w.start()
    assert w.join(5)
    got = r.wait(5)
    assert [p[1] for _, p in got] == ["shutting down"] * 5
    assert submit(w, job(4, 1, r)) == "shutting down"


def test_model_swap_happens_between_batches(tmp_path):
    old, new = FakeGen("old", delay=0.3), FakeGen("new")
    w = Worker(old, "old", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=2)
    r = Collect()
    w.start()
    submit(w, job(1, 2, r))
    assert old.started.wait(5)
    submit(w, job(2, 2, r))
    w.offer_model(new, "new", r)
    got = r.wait(5)
    w.stop()
    w.join(5)
    assert [a for a, _ in got] == ["/kick/done", "/kick/done", "/kick/model", "/kick/done", "/kick/done"]
    assert len(old.calls) == 1 and len(new.calls) == 1 and w.model_name == "new"


def test_stop_lets_the_file_being_written_land(tmp_path):
    class SlowWriter(KickWriter):
        def write_prepared(self, kick):  # the file's write (its kick measured before: writer.prepare)
            started.set()
            time.sleep(0.3)
            return super().write_prepared(kick)

    started = threading.Event()
    w = Worker(FakeGen(), "fake", SlowWriter(tmp_path, 44100), sample_rate=44100, max_batch=4)
    r = Collect()
    submit(w, job(1, 3, r))
    submit(w, job(2, 1, r, steps=2))
    w.start()
    assert started.wait(5)
    w.stop()
    assert w.join(5)
    got = r.wait(4, timeout=2)
    assert got[0][0] == "/kick/done"  # the kick being written finished
    assert [p[1] for _, p in got[1:]] == ["shutting down"] * 3
    assert len(list(tmp_path.glob("*.wav"))) == 1 and not list(tmp_path.glob(".*"))


def test_stop_cancels_a_batch_on_the_device(tmp_path, tiny_artifact):
    gen = load_generator(tiny_artifact, "cpu")
    w = Worker(gen, "tiny", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=8)
    r = Collect()
    submit(w, jobs.Fresh(id=1, seeds=list(range(8)), answer=r, steps=1000))
    w.start()
    time.sleep(0.3)
    w.stop()
    assert w.join(30)  # every kick answered "shutting down" and none written (below): the batch was cancelled, not run
    got = r.wait(8, timeout=30)
    assert [p[1] for _, p in got] == ["shutting down"] * 8
    assert list(tmp_path.iterdir()) == []


def test_errors_from_the_model_are_replied(tmp_path):
    class Broken(FakeGen):
        def _sample(self, items, settings, hook):
            raise ValueError("unknown control(s) colour")

    w = Worker(Broken(), "b", KickWriter(tmp_path, 44100), sample_rate=44100)
    r = Collect()
    submit(w, job(1, 2, r))
    w.start()
    got = r.wait(2)
    w.stop()
    w.join(5)
    assert got == [("/kick/error", [1, "unknown control(s) colour"])] * 2


@pytest.mark.parametrize("rate", [44100, 48000])
def test_output_rate(tmp_path, rate):
    import soundfile as sf

    w = Worker(FakeGen(), "fake", KickWriter(tmp_path, rate), sample_rate=rate)
    r = Collect()
    submit(w, job(1, 1, r))
    w.start()
    (a, p), = r.wait(1)
    w.stop()
    w.join(5)
    assert a == "/kick/done"
    assert sf.info(p[1]).samplerate == rate
    assert abs(sf.info(p[1]).frames - 512 * rate / 44100) < 1.5


def _type_tags(datagram: bytes) -> str:
    """The OSC type tag string of one message datagram (without the comma)."""
    end = datagram.index(b"\0")
    start = (end // 4 + 1) * 4
    tags = datagram[start:datagram.index(b"\0", start)].decode()
    assert tags.startswith(","), datagram[:64]
    return tags[1:]


def test_replies_are_int_float_string_only():
    """Every reply carries exactly the README's types (i, f, s: what Pd's [oscparse] and Max read), ints
    clamped to int32 rather than sent as 'h', and fits one datagram."""
    from daemon_util import parse_replies

    cases = [
        (osc_api.pong("1.2.3"), "/kick/pong", "s", ["1.2.3"]),
        (osc_api.done(2**40, "/a.wav", 3), "/kick/done", "isi", [2**31 - 1, "/a.wav", 3]),
        (osc_api.done(-(2**40), "/b.wav", 2**33), "/kick/done", "isi", [-(2**31), "/b.wav", 2**31 - 1]),
        (osc_api.error(-1, "x" * 5000), "/kick/error", "is", None),
        (osc_api.status("tiny", "cpu", 3, 2**35, "bundled default"), "/kick/status", "ssiis",
         ["tiny", "cpu", 3, 2**31 - 1, "bundled default"]),
        (osc_api.models(["m" * 100] * 100), "/kick/models", None, None),
        (osc_api.models([]), "/kick/models", "", []),
        (osc_api.model("tiny"), "/kick/model", "s", ["tiny"]),
    ]
    for data, address, tags, values in cases:
        assert len(data) <= osc_api.MAX_DATAGRAM
        got = _type_tags(data)
        assert set(got) <= {"i", "f", "s"}, (address, got)
        if tags is not None:
            assert got == tags, (address, got)
        (addr, params), = parse_replies(data)
        assert addr == address
        if values is not None:
            assert params == values, (address, params)
    models = osc_api.models(["m" * 100] * 100)
    assert 1 <= len(_type_tags(models)) < 100 and set(_type_tags(models)) == {"s"}  # as many names as fit
    assert parse_replies(osc_api.error(-1, "x" * 5000))[0][1][0] == -1


# ---------------------------------------------------------------- exactly one reply per kick


def _run_one(w, n, reply):
    """Submit one job of n kicks, wait for n replies, stop, join: afterwards every reply has been sent."""
    submit(w, job(1, n, reply))
    w.start()
    reply.wait(n)
    w.stop()
    assert w.join(5)
    return list(reply.replies)


def test_a_write_failing_with_any_exception_answers_only_that_kick(tmp_path):
    class Flaky(KickWriter):
        calls = 0

        def write_prepared(self, kick):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("codec exploded")  # not a WriteError
            return super().write_prepared(kick)

    r = Collect()
    got = _run_one(Worker(FakeGen(), "fake", Flaky(tmp_path, 44100), sample_rate=44100), 3, r)
    assert [a for a, _ in got] == ["/kick/done", "/kick/error", "/kick/done"], got
    assert got[1][1][0] == 1 and "RuntimeError: codec exploded" in got[1][1][1] and "seed 101" in got[1][1][1]
    assert len(list(tmp_path.glob("kick_*.wav"))) == 2


def test_a_batchs_kicks_are_measured_side_by_side_and_answered_in_order(tmp_path, monkeypatch):
    """The writer thread measures a batch's kicks (KickWriter's first half, kickserver.writer.prepare) side by side
    on the render pool, each on one torch thread, then writes and answers them in seed order; a kick whose
    measuring fails is answered alone, with its reason."""
    import torch

    from kickserver import writer as writer_mod

    seen = []
    real = writer_mod.with_measures
    together = threading.Barrier(2, timeout=10)  # two kicks at a time, or it breaks: side by side, not in turn

    def noting(x, rate, info):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        together.wait()
        if info.seed == 102:
            raise RuntimeError("meter exploded")
        return real(x, rate, info)

    monkeypatch.setattr(writer_mod, "with_measures", noting)
    was = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        r = Collect()
        got = _run_one(Worker(FakeGen(), "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=4), 4, r)
    finally:
        torch.set_num_threads(was)
    assert [a for a, _ in got] == ["/kick/done", "/kick/done", "/kick/error", "/kick/done"], got
    assert [p[2] for a, p in got if a == "/kick/done"] == [100, 101, 103]
    assert "RuntimeError: meter exploded" in got[2][1][1] and "seed 102" in got[2][1][1]
    assert len({name for name, _ in seen}) == 2 and all(name.startswith("kick-render") for name, _ in seen)
    assert {n for _, n in seen} == {1}


def test_a_failing_prune_does_not_answer_twice(tmp_path):
    class BadRetention(KickWriter):
        def prune(self):
            raise OSError("ledger folder vanished")

    r = Collect()
    w = Worker(FakeGen(), "fake", BadRetention(tmp_path, 44100, max_files=1), sample_rate=44100)
    got = _run_one(w, 3, r)
    assert [a for a, _ in got] == ["/kick/done"] * 3, got
    assert w.generated == 3


def test_a_batch_failing_midway_answers_only_the_kicks_not_yet_answered(tmp_path, monkeypatch):
    from kickserver import writer as writer_mod

    def done(id, path, seed):  # the second kick's outcome cannot even be made: the catch-all takes over
        if seed == 101:
            raise TypeError("boom")
        return jobs.Done(id, path, seed)

    monkeypatch.setattr(writer_mod, "Done", done)
    r = Collect()
    got = _run_one(Worker(FakeGen(), "fake", KickWriter(tmp_path, 44100), sample_rate=44100), 3, r)
    assert [a for a, _ in got] == ["/kick/done", "/kick/error", "/kick/error"], got
    assert all("generation failed" in p[1] for _, p in got[1:])


def test_worker_runs_every_batch_on_its_thread_count(tmp_path):
    # Start-up and reloads run torch on one thread (Server.run, ModelLoader). torch applies a thread's count
    # lazily, at its first op, from a process-wide value that any thread's set_num_threads changes: when the
    # loader's set_num_threads(1) lands between the worker's own call and its first op (a race the daemon
    # lost: 8 kicks took 11 s instead of 6 s on 2 cores), the worker ran on one thread for good. Here the
    # race is made to happen; the worker must still run its batches on its own count.
    import torch

    before = torch.get_num_threads()
    seen: list[int] = []

    class Racing(FakeGen):
        def _sample(self, items, settings, hook):
            if not seen:
                other = threading.Thread(target=torch.set_num_threads, args=(1,))  # what the loader does
                other.start()
                other.join()
            seen.append(torch.get_num_threads())
            return super()._sample(items, settings, hook)

    w = Worker(Racing(), "fake", KickWriter(tmp_path, 44100), sample_rate=44100, threads=3)
    r = Collect()
    try:
        w.start()
        submit(w, job(1, 1, r))
        submit(w, job(2, 1, r, steps=3))  # a second batch
        assert len(r.wait(2)) == 2
        w.stop()
        assert w.join(5)
        assert seen[1:] == [3, 3], seen  # after the warm-up (which lost the race), both batches run on 3
    finally:
        torch.set_num_threads(before)


def test_an_artifacts_default_steps_never_pass_the_servers_limit(tmp_path):
    """An artifact may say sampling.steps=1000; the server's --max-steps still bounds what runs."""
    from kickmodel.generator import Settings, StepPolicy

    gen = FakeGen()
    gen.default_steps = 1000
    assert gen.settings(None, None, StepPolicy(cap=200)) == Settings(200, "ddim")
    assert gen.settings(12, "ddpm", StepPolicy(cap=200)) == Settings(12, "ddpm")
    assert gen.settings(None, None, StepPolicy(default=30, cap=200)) == Settings(30, "ddim")
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, policy=StepPolicy(cap=20))
    r = Collect()
    submit(w, job(1, 1, r))
    w.start()
    assert [a for a, _ in r.wait(1)] == ["/kick/done"]
    w.stop()
    assert w.join(5)
    assert gen.calls == [(1, 20, "ddim")]


# ---------------------------------------------------------------- fairness between clients


def test_one_clients_backlog_does_not_starve_another_client(tmp_path):
    """Client A queues 32 slow kicks (steps 200), then B asks for one: B is answered after one batch of A's,
    not after A's whole backlog (a single FIFO answered B 33rd)."""
    gen = FakeGen(delay=0.02)
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=4, client_limit=32)
    r = Collect()
    assert submit(w, jobs.Fresh(id=1, seeds=list(range(16)), answer=r, steps=200, client="A")) is None
    assert submit(w, jobs.Fresh(id=2, seeds=list(range(16, 32)), answer=r, steps=200, client="A")) is None
    assert submit(w, jobs.Fresh(id=3, seeds=[99], answer=r, client="B")) is None
    w.start()
    got = r.wait(33)
    w.stop()
    assert w.join(5)
    ids = [p[0] for _, p in got]
    assert len(ids) == 33 and ids.count(3) == 1
    assert ids.index(3) == 4, ids  # after A's first batch of 4, B's turn
    assert gen.calls[:2] == [(4, 200, "ddim"), (1, 7, "ddim")]


def test_a_batch_takes_compatible_kicks_from_every_client_in_turn(tmp_path):
    gen = FakeGen(delay=0.02)
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=8)
    r = Collect()
    submit(w, jobs.Fresh(id=1, seeds=list(range(16)), answer=r, client="A"))
    submit(w, jobs.Fresh(id=2, seeds=[100], answer=r, client="B"))
    submit(w, jobs.Fresh(id=3, seeds=[200, 201], answer=r, client="C"))
    w.start()
    got = r.wait(19)
    w.stop()
    assert w.join(5)
    first_batch = [p[0] for _, p in got[:8]]
    assert sorted(first_batch) == [1, 1, 1, 1, 1, 2, 3, 3], first_batch  # B and C ride along in A's batch
    assert gen.calls[0] == (8, 7, "ddim")


def test_per_client_limit_refuses_only_that_client(tmp_path):
    w = Worker(FakeGen(), "fake", KickWriter(tmp_path, 44100), sample_rate=44100, queue_limit=64, client_limit=20)
    r = Collect()
    assert submit(w, jobs.Fresh(id=1, seeds=list(range(16)), answer=r, client="A")) is None
    why = submit(w, jobs.Fresh(id=2, seeds=list(range(16)), answer=r, client="A"))
    assert why == "busy: 16 kicks from your address queued (limit 20 per address)"
    assert submit(w, jobs.Fresh(id=3, seeds=list(range(16)), answer=r, client="B")) is None
    assert w.queued == 32
    w.stop()
    w.start()
    assert w.join(5)
    assert len(r.wait(32, timeout=5)) == 32


def test_the_limit_holds_per_host_not_per_source_port(tmp_path):
    """Four sockets of one host (four source ports) share that host's limit, so they cannot fill
    the whole queue and leave another host `busy`."""
    w = Worker(FakeGen(), "fake", KickWriter(tmp_path, 44100), sample_rate=44100, queue_limit=64, client_limit=32)
    r = Collect()
    refused = []
    for rep in range(2):
        for port in (5001, 5002, 5003, 5004):
            why = submit(w, jobs.Fresh(id=port * 10 + rep, seeds=list(range(16)), answer=r, client=("127.0.0.1", port)))
            if why is not None:
                refused.append(why)
    assert w.queued == 32 and len(refused) == 6, refused
    assert refused[0] == "busy: 32 kicks from your address queued (limit 32 per address)"
    assert submit(w, jobs.Fresh(id=1, seeds=list(range(16)), answer=r, client=("127.0.0.2", 5001))) is None
    assert w.queued == 48
    w.stop()
    w.start()
    assert w.join(5)
    assert len(r.wait(48, timeout=5)) == 48


def test_hosts_take_turns_and_a_hosts_ports_take_turns_within_its_share(tmp_path):
    """One host's four ports each queue 8 slow kicks, another host asks for one: the other host's kick comes right
    after the first batch (not after one batch per port), and that first batch holds a kick of each port."""
    gen = FakeGen(delay=0.02)
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=4, client_limit=32)
    r = Collect()
    for port in (1, 2, 3, 4):
        job = jobs.Fresh(id=port, seeds=list(range(8)), answer=r, steps=200, client=("10.0.0.1", port))
        assert submit(w, job) is None
    assert submit(w, jobs.Fresh(id=9, seeds=[99], answer=r, client=("10.0.0.2", 1))) is None
    w.start()
    got = r.wait(33)
    w.stop()
    assert w.join(5)
    ids = [p[0] for _, p in got]
    assert len(ids) == 33 and ids.index(9) == 4, ids
    assert sorted(ids[:4]) == [1, 2, 3, 4], ids
    assert gen.calls[:2] == [(4, 200, "ddim"), (1, 7, "ddim")]


# ---------------------------------------------------------------- variation sources


def test_the_worker_decodes_the_open_source_and_refuses_one_grown_past_the_limit(tmp_path):
    import soundfile as sf

    from kickserver.sources import open_source

    out = tmp_path / "out"
    out.mkdir()
    sf.write(out / "k.wav", np.zeros(8000, dtype=np.float32), 8000, subtype="PCM_16")
    src = open_source("k.wav", out, [])
    sf.write(tmp_path / "long.wav", np.zeros(40 * 8000, dtype=np.float32), 8000, subtype="PCM_16")
    with open(out / "k.wav", "r+b") as f:  # the same file grows in place after the check
        f.write((tmp_path / "long.wav").read_bytes())
    r = Collect()
    w = Worker(FakeGen(), "fake", KickWriter(out, 44100), sample_rate=44100, max_batch=1)
    submit(w, jobs.Variation(id=9, seeds=[1, 2], answer=r, source=jobs.Opened(src)))
    w.start()
    got = r.wait(2)
    w.stop()
    assert w.join(5)
    assert got == [("/kick/error", [9, "source k.wav is 40.0 s long; at most 30 s"])] * 2  # both batches say so
    assert src.closed


def test_sources_of_kicks_never_generated_are_closed_at_shutdown(tmp_path):
    import soundfile as sf

    from kickserver.sources import open_source

    sf.write(tmp_path / "k.wav", np.zeros(800, dtype=np.float32), 8000, subtype="PCM_16")
    src = open_source("k.wav", tmp_path, [])
    r = Collect()
    w = Worker(FakeGen(), "fake", KickWriter(tmp_path / "out", 44100), sample_rate=44100)
    submit(w, jobs.Variation(id=4, seeds=[1], answer=r, source=jobs.Opened(src)))
    w.stop()
    w.start()
    assert w.join(5)
    assert r.wait(1) == [("/kick/error", [4, "shutting down"])] and src.closed


# ---------------------------------------------------------------- interpolations


class MorphGen(FakeGen):
    """FakeGen that can interpolate: each kick a sine whose pitch follows t; records (kicks, a, b) per call."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.morphs: list[tuple[int, object, object]] = []

    capabilities = FakeGen.capabilities | {"interpolation"}
    interpolation_samplers = ("dpmpp_2m", "ddim")

    def _morph(self, a, b, ts, items, settings, hook):
        self.started.set()
        self.morphs.append((len(ts), a.seed if a.source is None else "file", b.seed if b.source is None else "file"))
        time.sleep(self.delay)
        t = np.arange(self.length) / self.sample_rate
        return np.stack([np.sin(2 * np.pi * (50 + 100 * x) * t) for x in ts]).astype(np.float32)


def morph(id, ts, reply, a=1, b=2, **kw):
    seeds = [a if t == 0 else b if t == 1 else osc_api.NO_SEED for t in ts]
    return jobs.Morph(id=id, seeds=seeds, answer=reply, ends=(jobs.End(seed=a), jobs.End(seed=b)), ts=list(ts), **kw)


def test_an_interpolation_counts_against_the_limits_and_is_batched_alone_in_order(tmp_path):
    gen = MorphGen(delay=0.05)
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=4, client_limit=8)
    r = Collect()
    ts = [i / 5 for i in range(6)]
    assert submit(w, morph(1, ts, r, client="A")) is None
    busy = "busy: {} kicks from your address queued (limit 8 per address)"
    assert submit(w, jobs.Fresh(id=2, seeds=[7, 8, 9], answer=r, client="A")) == busy.format(6)
    assert submit(w, jobs.Fresh(id=3, seeds=[7, 8], answer=r, client="A")) is None
    assert submit(w, morph(4, [0.5], r, a=3, b=4, client="A")) == busy.format(8)
    w.start()
    got = r.wait(8)
    w.stop()
    assert w.join(5)
    assert [a for a, _ in got] == ["/kick/done"] * 8
    mine = [p for _, p in got if p[0] == 1]
    assert [p[2] for p in mine] == [1, -1, -1, -1, -1, 2]  # in the order of t: a's seed first, b's last
    assert all("_t" in p[1] for p in mine[1:5]) and mine[0][1].endswith("_1.wav")
    assert gen.morphs == [(4, 1, 2), (2, 1, 2)]  # never mixed with job 3's kicks, though the settings match
    assert gen.calls == [(2, 7, "ddim")]


def test_a_morph_whose_file_fails_answers_each_kick_once_and_closes_the_other_file(tmp_path):
    """a's file grew past the limit after the check: every kick gets a's reason (the second batch without trying
    again), and b's file, never decoded, is closed."""
    import soundfile as sf

    from kickserver.sources import open_source

    for name in ("a.wav", "b.wav"):
        sf.write(tmp_path / name, np.zeros(800, dtype=np.float32), 8000, subtype="PCM_16")
    src_a, src_b = open_source("a.wav", tmp_path, []), open_source("b.wav", tmp_path, [])
    sf.write(tmp_path / "long.wav", np.zeros(40 * 8000, dtype=np.float32), 8000, subtype="PCM_16")
    with open(tmp_path / "a.wav", "r+b") as f:
        f.write((tmp_path / "long.wav").read_bytes())
    gen = MorphGen()
    w = Worker(gen, "fake", KickWriter(tmp_path / "out", 44100), sample_rate=44100, max_batch=2)
    r = Collect()
    ends = (jobs.End(file=jobs.Opened(src_a)), jobs.End(file=jobs.Opened(src_b)))
    submit(w, jobs.Morph(id=5, seeds=[-1] * 5, answer=r, ends=ends, ts=[0.1, 0.2, 0.3, 0.4, 0.5]))
    w.start()
    got = r.wait(5)
    w.stop()
    assert w.join(5)
    assert got == [("/kick/error", [5, "a: source a.wav is 40.0 s long; at most 30 s"])] * 5
    assert src_a.closed and src_b.closed and gen.morphs == []


# ---------------------------------------------------------------- writes off the render's critical path


class RenderLog(FakeGen):
    """FakeGen that records each render's start (an event per render) and refuses steps=3 with a ValueError."""

    def __init__(self):
        super().__init__()
        self.renders: list[threading.Event] = [threading.Event() for _ in range(8)]
        self.n = 0

    def _sample(self, items, settings, hook):
        self.renders[min(self.n, 7)].set()
        self.n += 1
        if settings.steps == 3:
            raise ValueError("steps 3 refused by this model")
        return super()._sample(items, settings, hook)


def test_the_next_batch_renders_while_the_last_one_is_written(tmp_path):
    """The writer of batch 1 waits for batch 2's render to start: with writes on the render's thread it never
    would. Writes run on one thread, the writer thread, which alone owns the KickWriter (its ledger)."""
    gen = RenderLog()
    seen = []

    class Waiting(KickWriter):
        def write_prepared(self, kick):
            seen.append((threading.current_thread().name, gen.renders[1].wait(5)))
            return super().write_prepared(kick)

    w = Worker(gen, "fake", Waiting(tmp_path, 44100, max_files=10), sample_rate=44100, max_batch=2)
    r = Collect()
    submit(w, job(1, 4, r))  # two batches of two
    w.start()
    got = r.wait(4)
    w.stop()
    assert w.join(5)
    assert [a for a, _ in got] == ["/kick/done"] * 4, got
    assert seen and all(ok for _, ok in seen), "batch 2 did not render while batch 1 was written"
    assert {name for name, _ in seen} == {"kick-writer"}
    assert sorted(w.writer.written) == sorted(p.name for p in tmp_path.glob("kick_*.wav"))  # the ledger


def test_one_clients_replies_keep_the_order_of_its_kicks(tmp_path):
    """From one client: two kicks, a request the model refuses, then six kicks (three batches). The refusal, made
    while the first kicks are still being written, comes after their /kick/done, and every /kick/done in seed
    order."""
    gen = RenderLog()

    class Slow(KickWriter):
        def write_prepared(self, kick):
            gen.renders[1].wait(5)  # the refused request's render has happened
            return super().write_prepared(kick)

    w = Worker(gen, "fake", Slow(tmp_path, 44100), sample_rate=44100, max_batch=2)
    r = Collect()
    submit(w, job(1, 2, r))
    submit(w, job(2, 1, r, steps=3))
    submit(w, job(3, 6, r))
    w.start()
    got = r.wait(9)
    w.stop()
    assert w.join(5)
    assert gen.renders[1].is_set()
    assert [(a, p[0]) for a, p in got] == [("/kick/done", 1)] * 2 + [("/kick/error", 2)] + [("/kick/done", 3)] * 6, got
    assert [p[2] for _, p in got if p[0] != 2] == [100, 101] + list(range(300, 306))
    assert got[2][1][1] == "steps 3 refused by this model"


def test_stop_during_writes_loses_no_file_and_leaves_no_temp_file(tmp_path):
    started = threading.Event()

    class Slow(KickWriter):
        def write_prepared(self, kick):
            started.set()
            time.sleep(0.05)
            return super().write_prepared(kick)

    w = Worker(FakeGen(), "fake", Slow(tmp_path, 44100, max_files=100), sample_rate=44100, max_batch=2)
    r = Collect()
    submit(w, job(1, 6, r))
    w.start()
    assert started.wait(5)
    w.stop()
    assert w.join(5)
    got = list(r.replies)
    assert len(got) == 6 and {p[0] for _, p in got} == {1}, got  # every kick answered once
    done = [p[1] for a, p in got if a == "/kick/done"]
    assert done and all(p[1] == "shutting down" for a, p in got if a == "/kick/error")
    assert sorted(done) == sorted(str(p) for p in tmp_path.glob("kick_*.wav"))  # every file answered, none lost
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
    assert sorted(w.writer.written) == sorted(p.name for p in tmp_path.glob("kick_*.wav"))
    assert w.queued == 0


@pytest.mark.parametrize("move", [False, True], ids=["same-folder", "new-folder"])
def test_a_new_output_rate_and_folder_apply_between_batches_written_whole(tmp_path, monkeypatch, move):
    """SIGHUP changes sample_rate (and maybe the folder) while a batch is being written (held in its rename, its
    .part on disk) and another, rendered at the old rate, waits for the writer. Every file's header says the rate it
    was rendered at (its length matches), each batch lands whole in one folder, no .part is removed under the writer
    (stray temp files are cleaned in a new folder only), and the old folder's ledger keeps every kick written there."""
    import soundfile as sf

    from kickserver import writer as writer_mod

    held, go = threading.Event(), threading.Event()
    real_publish = writer_mod.publish

    def publish(src, dst, *dir_fd):
        if not held.is_set():
            held.set()
            go.wait(10)
        return real_publish(src, dst, *dir_fd)

    monkeypatch.setattr(writer_mod, "publish", publish)
    old_dir = tmp_path / "out"
    new_dir = tmp_path / "new" if move else old_dir
    gen = FakeGen()
    w = Worker(gen, "fake", KickWriter(old_dir, 44100, max_files=100), sample_rate=44100, max_batch=2)
    r = Collect()
    submit(w, job(1, 2, r))
    submit(w, job(2, 2, r))
    w.start()
    assert held.wait(5)  # batch 1's first kick: its .part written, not yet renamed
    assert wait_until(lambda: len(gen.calls) == 2)  # batch 2 rendered at 44100, waiting for the writer
    assert [p.name for p in old_dir.iterdir() if p.name.endswith(".part")]
    other = ".kick_20260101-000000_5.wav.99999.part"  # another writer's (kickserver render) on the same folder
    (old_dir / other).write_bytes(b"RIFF")
    if move:
        new_dir.mkdir()
        (new_dir / ".kick_20250101-000000_6.wav.99998.part").write_bytes(b"RIFF")  # a killed run's: removed
    w.set_output(new_dir, 48000, max_files=100)  # what the daemon's SIGHUP does
    submit(w, job(3, 2, r))  # rendered after: at 48000, into the new folder
    time.sleep(0.2)  # let a wrong implementation do its damage before the writer goes on
    go.set()
    got = r.wait(6)
    w.stop()
    assert w.join(5)
    assert sorted(a for a, _ in got) == ["/kick/done"] * 6, got
    by_job = {}
    for _, p in got:
        by_job.setdefault(p[0], []).append(p[1])
    for j, (folder, rate) in {1: (old_dir, 44100), 2: (old_dir, 44100), 3: (new_dir, 48000)}.items():
        for path in by_job[j]:
            info = sf.info(path)
            assert (Path(path).parent, info.samplerate) == (folder, rate), (j, path, info.samplerate)
            assert abs(info.frames - 512 * rate / 44100) < 1.5, (j, path, info.frames)
    # the folder is cleaned of stray temp files only when it changes: never under a writer still using it
    assert sorted(p.name for p in tmp_path.rglob("*.part")) == [other]
    old_names = sorted(Path(p).name for j in (1, 2) for p in by_job[j])
    on_disk = json.loads((old_dir / ".kickserver-ledger.json").read_text())["files"]
    assert set(old_names) <= {f["name"] for f in on_disk}
    assert sorted(w.writer.written) == sorted(p.name for p in new_dir.glob("kick_*.wav"))


def test_queued_counts_a_kick_once_while_the_worker_waits_for_the_writer(tmp_path):
    """Six kicks, batches of two, the writer held in its first write: one batch in the writer, one waiting in its
    queue, the third rendered and waiting to be handed over. /kick/status's queued is 6 throughout, never 8."""
    go = threading.Event()

    class Held(KickWriter):
        def write_prepared(self, kick):
            go.wait(10)
            return super().write_prepared(kick)

    gen = FakeGen()
    w = Worker(gen, "fake", Held(tmp_path, 44100), sample_rate=44100, max_batch=2)
    r = Collect()
    submit(w, job(1, 6, r))
    w.start()
    try:
        assert wait_until(lambda: len(gen.calls) == 3)
        seen = set()
        deadline = time.monotonic() + 1.0  # the third batch's hand-over blocks; watch it a while
        while time.monotonic() < deadline:
            seen.add(w.queued)
            time.sleep(0.005)
        assert seen == {6}, seen
    finally:
        go.set()
    assert len(r.wait(6)) == 6
    w.stop()
    assert w.join(5)
    assert w.queued == 0
