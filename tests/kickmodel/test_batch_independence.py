"""A kick does not depend on what else is in its batch, yet a batch is computed as a batch.

The daemon batches kicks: a request's count, other clients' kicks with the same settings, a morph's t. A kernel's
float rounding depends on the shape it runs on, and Griffin-Lim (the mel-VAE's and the bundled latent model's
inverter) turns a rounding of 1e-7 into thousands of 24-bit steps. Every network therefore runs at one fixed
shape (kickmodel.batching: chunks of RENDER_ROWS rows, filled up with copies), where a row gives the same bits at
any position: the same seed gives the same kick, bit for bit, alone and at every position of batches of 2, 4 and
8 (and of a batch of 12, which spans two chunks), for every family, for a fresh kick, a variation, a morph's kick
and a kick from the map."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from kickmodel.batching import RENDER_ROWS, in_render_shape, render_rows, side_by_side
from kickmodel.families import family_names
from kickmodel.generator import ENCODE, Endpoint, Item

LSB = 2.0 ** -23  # one step of a 24-bit file
CASES = [*family_names(), "bundled", "kick-synth"]
SHIPPED_SYNTH = Path(__file__).resolve().parents[2] / "kickserver" / "models" / "kick-synth.safetensors"
BATCHES = (2, 4, 8)


@pytest.fixture(scope="module")
def generators(generators):
    """The runtime's generators, the shipped kick-synth model beside them (its kit map), and the bundled model's
    Griffin-Lim cut to 4 iterations: it runs kick by kick on the CPU whatever the batch (kickmodel.batching), and its
    32 cost most of this module's time; the networks before it are the bundled model's own."""
    from kickmodel.loading import load_generator

    gens = dict(generators)
    gens["kick-synth"] = load_generator(SHIPPED_SYNTH, "cpu")
    gens["bundled"].codec.inverter.iters, gens["bundled"].codec.inverter.nnls_iters = 4, 4
    return gens


def steps_of(gen) -> int | None:
    return 4 if gen.samplers else None


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert np.array_equal(got, want), f"{what}: differs by {np.abs(got - want).max() / LSB:.0f} LSB"


def assert_same_kick(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """got, a row of a batch (padded with zeros to the batch's longest kick: a kick-synth kick may be played long),
    is want, then zeros."""
    assert len(got) >= len(want), f"{what}: {len(got)} samples, the kick alone {len(want)}"
    assert_same(got[:len(want)], want, what)
    assert not got[len(want):].any(), f"{what}: more than its kick"


def at_every_position(render, seed: int, sizes=BATCHES) -> None:
    """render(seeds) -> kicks; the kick of `seed` alone against the same seed at every position of every size."""
    alone = render([seed])[0]
    for n in sizes:
        for at in range(n):
            seeds = [1000 + 37 * n + i for i in range(n - 1)]
            seeds.insert(at, seed)
            assert_same_kick(render(seeds)[at], alone, f"seed {seed} at {at} of {n}")


@pytest.mark.parametrize("which", CASES)
def test_a_fresh_kick_is_the_same_alone_and_at_every_position(generators, which):
    gen = generators[which]
    controls = {gen.controls[0]: 0.3} if gen.controls else {}
    settings = gen.settings(steps_of(gen))
    at_every_position(lambda seeds: gen.generate([Item(seed=s, controls=controls) for s in seeds], settings), 5)


def test_a_batch_over_one_chunk_keeps_its_kicks(generators):
    """12 kicks (24 rows under guidance): three chunks, the last one filled up."""
    gen = generators["bundled"]
    seeds = list(range(20, 32))
    settings = gen.settings(2)
    batch = gen.generate([Item(seed=s, controls={"decay": 0.6}) for s in seeds], settings)
    for at in (0, 7, 8, 11):
        assert_same(batch[at], gen.generate([Item(seed=seeds[at], controls={"decay": 0.6})], settings)[0], f"at {at}")


@pytest.mark.parametrize("which", [c for c in CASES if c != "kick-synth"])  # its fit: the tiny kick_synth's
def test_a_variation_is_the_same_alone_and_at_every_position(generators, which):
    gen = generators[which]
    settings = gen.settings(steps_of(gen))
    source = gen.prepare_source(gen.generate([Item(seed=2)], settings)[0], gen.sample_rate)
    at_every_position(lambda seeds: gen.vary(source, 0.4, [Item(seed=s) for s in seeds], settings), 41, sizes=(2, 8))


@pytest.mark.parametrize("which", CASES)
def test_a_morphs_kick_is_the_same_at_every_position(generators, which):
    """A morph's kick at t is the same whatever the other t's of its request; its seed ends are the seeds' kicks."""
    gen = generators[which]
    settings = gen.settings(steps_of(gen), gen.interpolation_samplers[0] if gen.samplers else None)

    def morph(ts):
        return gen.morph(Endpoint(seed=5), Endpoint(seed=9), ts, [Item(seed=0)] * len(ts), settings)

    alone = morph([0.3])[0]
    for n in (2, 8):
        for at in range(n):
            ts = [round(0.05 + 0.9 * i / n, 3) for i in range(n - 1)]
            ts.insert(at, 0.3)
            assert_same_kick(morph(ts)[at], alone, f"t 0.3 at {at} of {n}")
    ends = morph([0.0, 0.5, 1.0])
    for row, seed in ((0, 5), (-1, 9)):
        assert_same_kick(ends[row], gen.generate([Item(seed=seed)], settings)[0], f"end {seed}")


@pytest.mark.parametrize("which", ["bundled", "kick-synth"])
def test_a_kick_from_the_map_is_the_same_at_every_position(generators, which):
    gen = generators[which]
    assert ENCODE in gen.capabilities and gen.kit_map is not None
    at_every_position(lambda seeds: gen.from_map(0.3, 0.7, 0.2, [Item(seed=s) for s in seeds]), 3, sizes=(2, 8))


def test_the_render_shape_fills_up_and_drops_the_filler():
    seen = []

    def net(x, c):
        seen.append((tuple(x.shape), x.is_contiguous(), None if c is None else tuple(c.shape)))
        return x * 2

    x = torch.arange(11.0).reshape(11, 1)
    out = in_render_shape(net, x, None)
    assert torch.equal(out, x * 2)
    assert seen == [((RENDER_ROWS, 1), True, None), ((RENDER_ROWS, 1), True, None)]

    class PerKick(torch.nn.Module):
        per_kick_on_cpu = True

        def forward(self, a):
            seen.append(tuple(a.shape))
            return a

    seen.clear()
    assert render_rows(PerKick(), torch.device("cpu")) == 1
    assert render_rows(PerKick(), torch.device("cuda")) == RENDER_ROWS  # one launch for a batch on a GPU
    in_render_shape(PerKick(), torch.zeros(3, 2))
    assert seen == [(1, 2)] * 3


def test_a_network_is_asked_its_render_shape_through_a_method_or_a_function_around_it():
    class Net(torch.nn.Module):
        per_kick_on_cpu = True

        def decode(self, z):
            return z

    net, cpu = Net(), torch.device("cpu")
    assert render_rows(net.decode, cpu) == 1  # a bound method: its module's word
    assert render_rows(lambda z: net.decode(z), cpu) == RENDER_ROWS  # a function knows nothing of it...
    assert render_rows(lambda z: net.decode(z), cpu, like=net) == 1  # ...unless told which network it runs


def _denoiser_calls(gen, n: int) -> list[tuple[tuple[int, ...], int]]:
    """(rows, torch's CPU threads) of every call of gen's denoiser network while it makes n fresh kicks."""
    seen = []
    hook = gen.denoiser.net.register_forward_pre_hook(
        lambda mod, args: seen.append((tuple(args[0].shape), torch.get_num_threads())))
    try:
        gen.generate([Item(seed=s) for s in range(n)], gen.settings(3))
    finally:
        hook.remove()
    return seen


def test_the_kick_synth_prior_takes_eight_kicks_a_call_on_one_thread(generators):
    """Served on the CPU, the kick-synth's prior runs eight kicks in one call a step (its cost is the MLP's per-call
    overhead: kickmodel.families.kick_synth.network), on one thread, and torch's count is as it was after; the
    bundled model's MLP runs a kick a call, also on one thread."""
    was = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        synth = _denoiser_calls(generators["kick-synth"], 8)
        assert synth == [((RENDER_ROWS, synth[0][0][1]), 1)] * 3  # three steps: three calls of eight rows
        assert torch.get_num_threads() == 2
        bundled = _denoiser_calls(generators["bundled"], 2)
        assert {rows for (rows, _), _ in bundled} == {1} and {t for _, t in bundled} == {1}
        assert len(bundled) == 2 * 3
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(was)


class _OneThread(torch.nn.Module):
    """A per-kick, one-thread network that notes where each chunk ran."""
    per_kick_on_cpu = True
    one_thread_on_cpu = True

    def __init__(self, nested=False, together=None):
        super().__init__()
        self.seen, self.nested, self.together, self.inner_ok = [], nested, together, []

    def forward(self, x):
        me = threading.current_thread().name
        self.seen.append((me, torch.get_num_threads(), torch.is_grad_enabled(), torch.is_inference_mode_enabled()))
        if self.together is not None and len(self.seen) <= 2:
            self.together.wait()  # the first two chunks meet: they run side by side, not in turn
        if self.nested:  # a chunk that renders in chunks itself does so here, in turn, on one thread
            inner = _OneThread()
            in_render_shape(inner, torch.cat([x, x]))
            self.inner_ok.append({(name, n) for name, n, *_ in inner.seen} == {(me, 1)} and len(inner.seen) == 2)
        return x * 3


def test_a_one_thread_networks_chunks_run_side_by_side_each_on_one_thread():
    """Chunks of a `one_thread_on_cpu` network run on up to torch's thread count of pool threads, each on one torch
    thread, under the caller's grad and inference modes, the results in order; with one torch thread, in turn here."""
    was = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        net = _OneThread(together=threading.Barrier(2, timeout=10))
        x = torch.arange(7.0).reshape(7, 1)
        with torch.inference_mode():
            out = in_render_shape(net, x)
        assert torch.equal(out, x * 3)
        threads = {name for name, *_ in net.seen}
        assert len(threads) == 2 and all(name.startswith("kick-render") for name in threads)
        assert {(n, g, i) for _, n, g, i in net.seen} == {(1, False, True)}
        assert torch.get_num_threads() == 2
        net.seen.clear()
        with torch.no_grad():
            in_render_shape(net, x)
        assert {(n, g, i) for _, n, g, i in net.seen} == {(1, False, False)}
        net.seen.clear()
        in_render_shape(net, x)
        assert {(g, i) for _, _, g, i in net.seen} == {(True, False)}

        outer = _OneThread(nested=True)
        in_render_shape(outer, x[:4])
        assert outer.inner_ok == [True] * 4 and {name for name, *_ in outer.seen} != {threading.current_thread().name}

        torch.set_num_threads(1)
        net.seen.clear()
        net.together = None  # in turn now: nobody to meet
        in_render_shape(net, x)
        assert {name for name, *_ in net.seen} == {threading.current_thread().name}
    finally:
        torch.set_num_threads(was)


def test_a_chunks_failure_reaches_the_caller():
    class Fails(_OneThread):
        def forward(self, x):
            if bool((x == 5).any()):
                raise ValueError("chunk 5 failed")
            return x

    was = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match="chunk 5"):
            in_render_shape(Fails(), torch.arange(7.0).reshape(7, 1))
    finally:
        torch.set_num_threads(was)


def test_calls_from_several_threads_share_the_pool_whatever_their_thread_counts():
    """The worker's render and the writer's measuring call side_by_side at once, with thread counts of their own: every
    call gets all its results, in order (a pool replaced when a call asked for more threads than it had refused the
    other thread's tasks)."""
    failures, done = [], []

    def caller(sizes):
        torch.set_num_threads(64)  # this thread's own count: none of the calls below is capped by it
        try:
            for threads in sizes:
                items = list(range(threads + 3))
                got = side_by_side(lambda i: (i * 7, threading.current_thread().name), items, threads)
                assert [v for v, _ in got] == [i * 7 for i in items]
            done.append(True)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    callers = [threading.Thread(target=caller, args=([2] * 3000,)),
               threading.Thread(target=caller, args=(list(range(2, 120)),))]
    for t in callers:
        t.start()
    for t in callers:
        t.join(60)
    assert not failures and len(done) == 2


def test_a_compiled_networks_chunks_run_in_turn_here():
    """torch.compile's code (kickmodel.capture's "compile" on the CPU) is not for several threads at once: a compiled
    one-thread network's chunks run in the calling thread, one torch thread, in turn."""
    class Compiled(torch.nn.Module):  # what torch.compile returns: the module it wraps as _orig_mod
        def __init__(self, net):
            super().__init__()
            self._orig_mod = net

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._modules["_orig_mod"], name)

        def forward(self, x):
            return self._orig_mod(x)

    was = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        net = _OneThread()
        out = in_render_shape(Compiled(net), torch.arange(5.0).reshape(5, 1))
        assert torch.equal(out, torch.arange(5.0).reshape(5, 1) * 3)
        assert {(name, n) for name, n, *_ in net.seen} == {(threading.current_thread().name, 1)}
        assert len(net.seen) == 5 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(was)


def _in_a_forked_child(_):
    return side_by_side(lambda i: i * 5, list(range(6)), 2)


def test_a_forked_child_renders_side_by_side_with_a_pool_of_its_own():
    """A process forked after the pool had threads (a DataLoader worker, multiprocessing's fork) gets a pool of its
    own: the parent's copied pool believes it has idle threads that do not exist in the child, and waited for ever."""
    import multiprocessing

    was = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        import time
        together = threading.Barrier(2, timeout=10)
        assert side_by_side(lambda i: (together.wait(), i)[1], [0, 1], 2) == [0, 1]  # two of the pool's threads...
        time.sleep(0.2)  # ...idle, waiting for work, when the child is forked
        with multiprocessing.get_context("fork").Pool(1) as pool:
            got = pool.map_async(_in_a_forked_child, [0]).get(timeout=30)
        assert got == [[i * 5 for i in range(6)]]
    finally:
        torch.set_num_threads(was)
