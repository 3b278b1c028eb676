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
    warm-up's throw-away kick and `kickserver render` (offline, no request). A second resolver fails here."""
    assert settings_calls(REPO / "kickserver") == ["cli.cmd_render", "jobs.resolve", "jobs.warm_up"]


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

    def prepare_source(self, audio, sample_rate):
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
