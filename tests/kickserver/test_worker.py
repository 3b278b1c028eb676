"""The worker in-process: batching by key, the bounded queue, swaps between batches, stopping."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kickserver import osc_api
from kickserver.worker import Job, Worker
from kickserver.writer import KickWriter
from trainer.generator import load_generator


class FakeGen:
    def __init__(self, name="fake", delay=0.0):
        self.name, self.delay = name, delay
        self.sample_rate, self.length, self.device = 44100, 512, "cpu"
        self.controls = ("decay",)
        self.default_steps, self.default_sampler = 7, "ddim"
        self.calls: list[tuple[int, int, str]] = []
        self.started = threading.Event()

    def sample(self, items, steps=None, sampler=None):
        self.started.set()
        self.calls.append((len(items), steps, sampler))
        time.sleep(self.delay)
        t = np.arange(self.length) / self.sample_rate
        return np.stack([np.sin(2 * np.pi * (50 + it.seed) * t) for it in items]).astype(np.float32)


class Collect:
    def __init__(self):
        self.replies: list[tuple[str, list]] = []
        self.lock = threading.Lock()

    def __call__(self, data: bytes):
        from daemon_util import parse_replies

        with self.lock:
            self.replies.extend(parse_replies(data))

    def wait(self, n, timeout=10.0):
        deadline = time.monotonic() + timeout
        while len(self.replies) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.replies)


def job(id, n, reply, **kw):
    return Job(id=id, seeds=list(range(100 * id, 100 * id + n)), reply=reply, **kw)


def test_batches_share_steps_and_sampler(tmp_path):
    gen = FakeGen(delay=0.2)
    w = Worker(gen, "fake", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=4)
    r = Collect()
    w.submit(job(1, 1, r))  # taken alone while the others queue up behind it
    w.start()
    assert gen.started.wait(5)
    w.submit(job(2, 3, r))
    w.submit(job(3, 2, r, steps=3))
    w.submit(job(4, 2, r))  # default steps: batched with job 2 (3 + 1 <= 4), the rest next time
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
    assert w.submit(job(1, 4, r)) is None
    assert w.submit(job(2, 2, r)).startswith("busy")
    assert w.submit(job(3, 1, r)) is None
    assert w.queued == 5
    w.stop()
    w.start()
    assert w.join(5)
    got = r.wait(5)
    assert [p[1] for _, p in got] == ["shutting down"] * 5
    assert w.submit(job(4, 1, r)) == "shutting down"


def test_model_swap_happens_between_batches(tmp_path):
    old, new = FakeGen("old", delay=0.3), FakeGen("new")
    w = Worker(old, "old", KickWriter(tmp_path, 44100), sample_rate=44100, max_batch=2)
    r = Collect()
    w.start()
    w.submit(job(1, 2, r))
    assert old.started.wait(5)
    w.submit(job(2, 2, r))
    w.offer_model(new, "new", r)
    got = r.wait(5)
    w.stop()
    w.join(5)
    assert [a for a, _ in got] == ["/kick/done", "/kick/done", "/kick/model", "/kick/done", "/kick/done"]
    assert len(old.calls) == 1 and len(new.calls) == 1 and w.model_name == "new"


def test_stop_lets_the_file_being_written_land(tmp_path):
    class SlowWriter(KickWriter):
        def write(self, audio, info):
            started.set()
            time.sleep(0.3)
            return super().write(audio, info)

    started = threading.Event()
    w = Worker(FakeGen(), "fake", SlowWriter(tmp_path, 44100), sample_rate=44100, max_batch=4)
    r = Collect()
    w.submit(job(1, 3, r))
    w.submit(job(2, 1, r, steps=2))
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
    w.submit(Job(id=1, seeds=list(range(8)), reply=r, steps=1000))
    w.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    w.stop()
    assert w.join(5)
    assert time.monotonic() - t0 < 1.0
    got = r.wait(8, timeout=2)
    assert [p[1] for _, p in got] == ["shutting down"] * 8
    assert list(tmp_path.iterdir()) == []


def test_errors_from_the_model_are_replied(tmp_path):
    class Broken(FakeGen):
        def sample(self, items, steps=None, sampler=None):
            raise ValueError("unknown control(s) colour")

    w = Worker(Broken(), "b", KickWriter(tmp_path, 44100), sample_rate=44100)
    r = Collect()
    w.submit(job(1, 2, r))
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
    w.submit(job(1, 1, r))
    w.start()
    (a, p), = r.wait(1)
    w.stop()
    w.join(5)
    assert a == "/kick/done"
    assert sf.info(p[1]).samplerate == rate
    assert abs(sf.info(p[1]).frames - 512 * rate / 44100) < 1.5


def test_replies_are_int_float_string_only():
    for data in (osc_api.done(2**40, "/a.wav", 3), osc_api.error(-1, "x" * 5000), osc_api.models(["m" * 100] * 100)):
        assert len(data) <= osc_api.MAX_DATAGRAM
