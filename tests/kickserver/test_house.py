"""The daemon's house, read from its source and driven in-process: no class over 300 lines in kickserver, a request
resolved once (one resolver, called once per request by the front end and never by the worker), and the fair queue
as the pure bookkeeping it is (no threads)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from daemon_util import REPO, build_message, parse_replies, wait_until

from kickmodel.generator import GeneratorBase
from kickserver import jobs
from kickserver.config import ServerConfig
from kickserver.fair_queue import FairQueue
from kickserver.frontend import FrontEnd
from kickserver.worker import Worker
from kickserver.writer import KickWriter

MAX_CLASS_LINES = 300


def classes(root: Path) -> list[tuple[str, int]]:
    """(file:Class, lines) for every class in the source under root."""
    out = []
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ClassDef):
                out.append((f"{f.relative_to(root)}:{node.name}", node.end_lineno - node.lineno + 1))
    return out


def test_no_class_in_kickserver_is_over_300_lines():
    big = [(name, n) for name, n in classes(REPO / "kickserver") if n > MAX_CLASS_LINES]
    assert not big, f"classes over {MAX_CLASS_LINES} lines: {big}"


def test_the_class_reader_sees_a_long_class(tmp_path):
    (tmp_path / "m.py").write_text("class A:\n" + "    x = 1\n" * 300 + "\n\nclass B:\n    pass\n")
    assert classes(tmp_path) == [("m.py:A", 301), ("m.py:B", 2)]


# ------------------------------------------------------------------ steps resolved once


def settings_calls(root: Path) -> list[str]:
    """Where kickserver calls a generator's `settings(...)` (the steps and sampler resolver): module.function."""
    out = []
    for f in sorted(root.rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                            and node.func.attr == "settings"):
                        out.append(f"{f.stem}.{fn.name}")
    return sorted(set(out))


def test_one_resolver_of_steps_in_the_serving_path():
    """A request's steps and sampler are resolved in one place, KickJob.resolve; the only other callers are the
    warm-up's throw-away kick, the throw-away kick a model's prices are timed with (jobs.measure_prices) and
    `kickserver render` (offline, no request). A second resolver fails here."""
    assert settings_calls(REPO / "kickserver") == ["cli.cmd_render", "jobs.measure_prices", "jobs.resolve",
                                                   "jobs.warm_up"]


class CountingGen(GeneratorBase):
    """A generator without a network that counts how often its settings are resolved."""

    capabilities = frozenset({"controls", "samplers", "variation", "interpolation"})
    samplers = ("ddim", "ddpm", "dpmpp_2m")
    interpolation_samplers = ("dpmpp_2m", "ddim")
    max_steps = 1000

    def __init__(self):
        self.name, self.family, self.sample_rate, self.length, self.device = "c", "fake", 44100, 256, "cpu"
        self.controls, self.unit_controls, self.kit_map, self.kit_map_missing = ("decay",), (), None, "none"
        self.default_steps, self.default_sampler = 7, "ddim"
        self.resolved = 0

    def settings(self, *a, **kw):
        self.resolved += 1
        return super().settings(*a, **kw)

    def prepare_source(self, audio, sample_rate, *, whole=False):
        return np.zeros(self.length, dtype=np.float32)

    def _sample(self, items, settings, hook):
        t = np.arange(self.length) / self.sample_rate
        return np.stack([np.sin(2 * np.pi * (50 + it.seed) * t) for it in items]).astype(np.float32)

    def _vary(self, source, strength, items, settings, hook):
        return self._sample(items, settings, hook)

    def _morph(self, a, b, ts, items, settings, hook):
        return self._sample(items, settings, hook)


class Sent:
    """The front end's socket, as far as replies go: what it sent."""

    def __init__(self):
        self.sent: list[bytes] = []

    def sendto(self, data, addr):
        self.sent.append(data)


@pytest.mark.parametrize("message, kicks", [
    (("/kick/generate", [3, "steps", 4, "seed", 1]), 3),
    (("/kick/generate", ["seed", 1]), 1),
    (("/kick/variation", ["src.wav", "count", 2, "seed", 5]), 2),
    (("/kick/interpolate", ["a", 1, "b", 2, "count", 4, "sampler", "ddim"]), 4),
])
def test_a_request_is_resolved_once_and_the_worker_never_resolves_again(tmp_path, message, kicks):
    import soundfile as sf

    out = tmp_path / "out"
    out.mkdir()
    sf.write(out / "src.wav", np.zeros(800, dtype=np.float32), 8000, subtype="PCM_16")
    gen = CountingGen()
    cfg = ServerConfig(host="127.0.0.1", out=str(out), models=str(tmp_path / "models"))
    worker = Worker(gen, "c", KickWriter(out, 44100), sample_rate=44100, max_batch=2)
    house = SimpleNamespace(cfg=cfg, worker=worker, loader=None, catalog=None)
    front = FrontEnd(house)
    front.sock = Sent()
    front._handle_datagram(build_message(*message), ("127.0.0.1", 5555))
    assert gen.resolved == 1
    worker.start()
    assert wait_until(lambda: len(front.sock.sent) == 2 * kicks, 20)  # each reply to the port and the reply port
    worker.stop()
    assert worker.join(5)
    assert {parse_replies(d)[0][0] for d in front.sock.sent} == {"/kick/done"}
    assert gen.resolved == 1  # the worker batched and rendered them (in batches of 2) without resolving again


# ------------------------------------------------------------------ the fair queue, without threads


def fresh(id, n, client, steps=None):
    job = jobs.Fresh(id=id, seeds=list(range(100 * id, 100 * id + n)), answer=lambda o: None, client=client,
                     steps=steps)
    job.settings = jobs.Settings(steps or 7, "ddim")
    return job


def test_the_queue_refuses_past_its_limits():
    q = FairQueue(queue_limit=6, client_limit=4)
    assert q.add(fresh(1, 4, ("10.0.0.1", 1))) is None
    assert q.add(fresh(2, 1, ("10.0.0.1", 2))) == "busy: 4 kicks from your address queued (limit 4 per address)"
    assert q.add(fresh(3, 3, ("10.0.0.2", 1))) == "busy: 4 kicks queued (limit 6)"
    assert q.add(fresh(4, 2, ("10.0.0.2", 1))) is None
    assert len(q) == 6


def test_hosts_take_turns_and_ports_share_their_hosts_turn():
    """Host A (two ports) has 4 kicks queued before host B's one: B waits one batch, not A's backlog, and A's
    ports alternate within A's turns."""
    q = FairQueue()
    q.add(fresh(1, 2, ("A", 1)))
    q.add(fresh(2, 2, ("A", 2)))
    q.add(fresh(3, 1, ("B", 1)))
    assert [(k.job.id, k.seed) for k in q.take(2)] == [(1, 100), (2, 200)]
    assert [(k.job.id, k.seed) for k in q.take(2)] == [(3, 300), (1, 101)]
    assert [(k.job.id, k.seed) for k in q.take(2)] == [(2, 201)]
    assert q.take(2) == [] and len(q) == 0


def test_a_batch_shares_one_key():
    q = FairQueue()
    q.add(fresh(1, 2, ("A", 1), steps=10))
    q.add(fresh(2, 2, ("B", 1), steps=20))
    q.add(fresh(3, 1, ("C", 1), steps=10))
    batch = q.take(8)
    assert {k.job.settings.steps for k in batch} == {10} and len(batch) == 3
    assert [k.job.id for k in q.take(8)] == [2, 2]


def test_a_morph_is_batched_alone_in_the_order_of_t():
    q = FairQueue()
    morph = jobs.Morph(id=1, seeds=[1, -1, 2], answer=lambda o: None, client=("A", 1), ts=[0.0, 0.5, 1.0])
    q.add(morph)
    q.add(fresh(2, 2, ("B", 1)))
    assert [k.t for k in q.take(8)] == [0.0, 0.5, 1.0]
    assert [k.job.id for k in q.take(8)] == [2, 2]


def test_drain_empties_the_queue_and_the_jobs_are_listed_once():
    q = FairQueue()
    a, b = fresh(1, 3, ("A", 1)), fresh(2, 1, ("B", 1))
    q.add(a)
    q.add(b)
    assert list(q.jobs()) == [a, b]
    assert len(q.drain()) == 4 and len(q) == 0 and list(q.jobs()) == [] and q.take(1) == []
    assert q.add(fresh(3, 4, ("A", 1))) is None  # the host's count was reset with it


# ------------------------------------------------------------------ work priced in kicks


def locate(id, client, price):
    """A /kick/locate priced as the worker prices it (kickserver.pricing: a kick-synth fit is tens of kicks)."""
    job = jobs.Locate(id=id, seeds=[-1], answer=lambda o: None, client=client)
    job.price, job.price_note = price, "a fit of the synth"
    return job


def test_a_job_counts_its_price_against_the_limits():
    """32 locates priced 10 kicks each from one host: before, each was one kick (32 queued, the limit); now 3 fit
    its share of 32 and the others are busy, saying what the request costs and why."""
    q = FairQueue(queue_limit=64, client_limit=32)
    refused = [q.add(locate(i, ("A", 1), 10)) for i in range(32)]
    assert refused[:3] == [None] * 3 and all(r is not None for r in refused[3:])
    assert refused[3] == ("busy: 30 kicks' worth of work (3 requested kicks) from your address queued (limit 32 per "
                          "address; this request costs 10 kicks' worth: a fit of the synth; it is taken once nothing "
                          "of your address is queued)")
    assert len(q) == 3 and q.units == 30
    assert q.add(fresh(40, 16, ("B", 1))) is None  # other hosts: their own shares, within the queue's room
    assert q.add(fresh(41, 16, ("C", 1))) is None
    assert q.add(fresh(42, 3, ("D", 1))) == "busy: 62 kicks' worth of work (35 requested kicks) queued (limit 64)"


def test_a_job_priced_past_a_limit_is_taken_alone_and_plain_kicks_are_refused_as_before():
    """A fit worth more than a host's share (or the whole queue) goes when nothing is queued there: a locate is
    never refused for good, and a host holds one such job at a time. Kicks alone past a limit are refused as ever."""
    q = FairQueue(queue_limit=64, client_limit=32)
    assert q.add(locate(1, ("A", 1), 100)) is None  # past both limits: the queue was empty
    assert q.add(fresh(2, 1, ("B", 1))).startswith("busy: 100 kicks' worth of work (1 requested kick) queued")
    assert q.add(locate(3, ("A", 2), 40)).endswith("it is taken once nothing is queued)")
    assert [k.job.id for k in q.take(8)] == [1] and q.units == 0
    assert q.add(locate(4, ("A", 1), 40)) is None  # its host had nothing queued: over its share, alone
    assert q.add(locate(5, ("A", 1), 1)).startswith("busy: 40 kicks' worth of work (1 requested kick) from your")
    assert q.add(fresh(6, 16, ("B", 1))) is None
    assert q.add(fresh(7, 33, ("C", 1))) == "busy: 56 kicks' worth of work (17 requested kicks) queued (limit 64)"
    empty = FairQueue(queue_limit=64, client_limit=32)
    assert empty.add(fresh(8, 33, ("C", 1))) == "busy: 0 kicks from your address queued (limit 32 per address)"


def test_a_host_that_took_an_expensive_job_waits_until_the_others_had_as_much():
    """Host A queues two locates priced 10 kicks, host B twelve single kicks (one a batch). Before: A's second locate
    went after one of B's kicks (turns by batch, whatever they cost). Now: after B has had ten kicks."""
    q = FairQueue(queue_limit=64, client_limit=32)
    assert q.add(locate(1, ("A", 1), 10)) is None and q.add(locate(2, ("A", 1), 10)) is None
    for i in range(12):
        assert q.add(fresh(10 + i, 1, ("B", 1))) is None
    order = []
    while len(q):
        order += [k.job.id for k in q.take(1)]
    assert order == [1] + list(range(10, 20)) + [2, 20, 21], order


def test_a_host_joins_at_the_current_turn_and_an_idle_one_saves_nothing_up():
    """A host that starts queueing joins at the start of the batch taken last: B, idle while A's two locates (10
    kicks' worth each) were taken, gets 10 kicks ahead of A's next job (the second locate's, which began when B
    came), not 20; and A, with nothing queued, is remembered as ahead while it is."""
    q = FairQueue(queue_limit=64, client_limit=32)
    q.add(locate(1, ("A", 1), 10))
    q.add(locate(2, ("A", 1), 10))
    assert [k.job.id for k in q.take(1)] == [1] and [k.job.id for k in q.take(1)] == [2]
    for i in range(15):
        q.add(fresh(10 + i, 1, ("B", 1)))
    q.add(fresh(3, 1, ("A", 1)))
    order = []
    while len(q):
        order += [k.job.id for k in q.take(1)]
    assert order == list(range(10, 20)) + [3] + list(range(20, 25)), order
    q.add(locate(5, ("A", 1), 10))
    assert [k.job.id for k in q.take(1)] == [5] and len(q) == 0
    q.add(fresh(6, 1, ("B", 1)))
    q.add(locate(7, ("A", 1), 10))  # A has nothing queued, but spent 10 more since B's turn: B goes first
    assert [k.job.id for k in q.take(1)] == [6]


def test_a_jobs_kicks_carry_its_price_split_as_evenly_as_whole_kicks_allow():
    job = jobs.Variation(id=1, seeds=list(range(16)), answer=lambda o: None, client=("A", 1), strength=0.5)
    assert job.work(8) == (16, 2) and job.work(16) == (16, 1)
    job.price = 16 + 2 * 10
    assert sorted(k.price for k in job.priced_kicks()) == [2] * 12 + [3] * 4
    assert jobs.Variation(id=2, seeds=[1], answer=None, strength=0.0).work(8) == (1, 0)  # the file given back
    morph = jobs.Morph(id=3, seeds=[1, -1, -1, 2], answer=None, ts=[0, 1 / 3, 2 / 3, 1],
                       ends=(jobs.End(seed=1), jobs.End(file=object())))
    assert morph.work(2) == (4 + 2, 2)  # its file end encoded and inverted once per batch
    assert jobs.Locate(id=4, seeds=[-1], answer=None).work(8) == (0, 1)
    kit = jobs.Kit(id=5, seeds=[7] * 8, answer=None, layers=4, robins=2, source=object(), strength=0.3)
    assert kit.work(4) == (8, 1)


def test_a_jobs_price_is_its_kicks_and_its_encodings_at_the_models_prices():
    """kickserver.pricing at the dev box's figures for the shipped kick-synth (a kick 0.05 s, a fit 2.6 s): a kick
    counts at least 0.25 s, so a fit is 10 kicks' worth; the bundled model's encoder pass (0.08 s against 0.3 s
    kicks) nothing; a model not timed yet counts an encoding as UNTIMED kicks, one without an encoder nothing."""
    from kickserver.pricing import FLOOR_S, UNTIMED, Prices, price, untimed

    synth = Prices(kick_s=0.05, encode_s=2.6, encoder="a fit of the synth")
    assert synth.unit_s == FLOOR_S and synth.encode == 10
    assert price(locate(1, ("A", 1), None), synth, 8) == (10, "a fit of the synth (about 2.6 s here, 10 kicks' worth)")
    vary = jobs.Variation(id=2, seeds=list(range(16)), answer=None, strength=0.5)
    assert price(vary, synth, 8) == (36, "2 x a fit of the synth (about 2.6 s here, 10 kicks' worth each) beside "
                                         "its 16 kicks")
    assert price(jobs.Variation(id=3, seeds=[1], answer=None, strength=0.0), synth, 8) == (1, "")
    assert price(fresh(4, 4, ("A", 1)), synth, 8) == (4, "")
    bundled = Prices(kick_s=0.3, encode_s=0.08)
    assert bundled.encode == 0 and price(locate(5, ("A", 1), None), bundled, 8)[0] == 1
    assert Prices(kick_s=1.3, encode_s=2.6).encode == 2  # a slow kick is the unit itself
    assert Prices(timed=False).encode == UNTIMED
    assert untimed(CountingGen()).timed and untimed(CountingGen()).encode == 0  # no encoder: nothing to time
