"""Render capture (kickmodel/capture.py): modes, the warm-up at load, the fallback to eager, and the
samplers' ownership of what outlives a network call (CUDA graphs overwrite a call's output at the next replay).

No test runs torch.compile itself (inductor takes minutes on a 2-core box): the compile step is replaced by a
stand-in where the test is about what capture() does around it."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from kickmodel import capture as cap
from kickmodel.diffusion import NoiseSchedule, run_sampler
from kickmodel.generator import Item
from kickmodel.loading import load_generator

log = logging.getLogger("test.capture")


@pytest.fixture(scope="module")
def gen_path(tmp_path_factory):
    from daemon_util import make_artifact

    return make_artifact(tmp_path_factory.mktemp("capture") / "tiny.safetensors")


@pytest.fixture
def gen(gen_path):
    return load_generator(gen_path, "cpu")


def _modules(g) -> dict:
    return {k: v for k, v in vars(g).items() if isinstance(v, torch.nn.Module)}


# ------------------------------------------------------------------ samplers


@pytest.mark.parametrize("sampler", ["ddim", "ddpm", "dpmpp_2m"])
def test_samplers_do_not_keep_a_network_output_across_the_next_call(sampler):
    """A CUDA graph writes every call's output into the same buffer: a sampler that keeps one step's estimate for
    the next (dpmpp_2m's old x0) read the next step's instead. With a denoiser that reuses its buffer, every
    sampler must give what it gives with fresh outputs."""
    sched = NoiseSchedule("cosine", 1000)
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(1))
    ts = torch.linspace(1.0, 0.0, 7, dtype=torch.float64) ** 0.35

    def fresh(x, t):
        return torch.tanh(x * 0.5) * (1 - t.to(x.dtype)[:, None] * 0.3)

    buf = torch.empty(2, 64)

    def reused(x, t):
        buf.copy_(fresh(x, t))
        return buf

    want = run_sampler(sampler, fresh, x.clone(), ts, sched, generator=[torch.Generator().manual_seed(s)
                                                                         for s in (3, 4)])
    got = run_sampler(sampler, reused, x.clone(), ts, sched, generator=[torch.Generator().manual_seed(s)
                                                                        for s in (3, 4)])
    assert torch.equal(got, want)


# ------------------------------------------------------------------ modes


def test_modes_resolve_per_device():
    assert cap.resolve_mode("auto", "cpu") == "off"
    assert cap.resolve_mode("auto", torch.device("cuda:0")) == "graphs"
    assert cap.resolve_mode("auto", "meta") == "off"
    assert cap.resolve_mode("compile", "cpu") == "compile"
    with pytest.raises(ValueError, match=r"render capture 'fast' is not known; choose one of auto, off, compile, "
                                         r"graphs"):
        cap.resolve_mode("fast", "cpu")


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_off_and_auto_on_the_cpu_leave_the_model_eager_without_a_warm_up(gen, mode, monkeypatch):
    before = _modules(gen)
    monkeypatch.setattr(gen, "generate", lambda *a, **k: pytest.fail("no warm-up render for an eager model"))
    r = cap.capture(gen, mode, log)
    assert (r.asked, r.used, r.error, r.warmup_s) == (mode, "off", None, 0.0)
    assert _modules(gen) == before and all(_modules(gen)[k] is v for k, v in before.items())
    assert r.describe() == f"render capture off (asked {mode})"


def test_graphs_on_the_cpu_are_refused_with_the_reason_and_the_model_serves_eager(gen):
    before = _modules(gen)
    r = cap.capture(gen, "graphs", log, batches=(1, 8))
    assert r.used == "off" and r.fell_back
    assert r.error == "CUDA graphs need a CUDA device; the model is on cpu"
    assert all(_modules(gen)[k] is v for k, v in before.items())
    assert gen.generate([Item(seed=3)], gen.settings(2)).shape[0] == 1
    assert r.describe() == ("render capture off (asked graphs); fell back to eager: CUDA graphs need a CUDA device; "
                            "the model is on cpu")


def test_compile_wraps_every_module_and_warms_each_batch_size(gen, monkeypatch):
    calls = []

    class Compiled(torch.nn.Module):  # a stand-in for OptimizedModule: a new module that runs the old one
        def __init__(self, module):
            super().__init__()
            self.inner = module

        def forward(self, *a, **k):
            return self.inner(*a, **k)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._modules["inner"], name)

    def fake_compile(module, mode, dynamic):
        calls.append((mode, dynamic))
        return Compiled(module)

    monkeypatch.setattr(torch, "compile", fake_compile)
    rendered = []
    real = gen.generate
    monkeypatch.setattr(gen, "generate", lambda items, s, **k: rendered.append(len(items)) or real(items, s, **k))
    before = _modules(gen)
    r = cap.capture(gen, "compile", log, batches=(1, 3, 3))
    assert r.used == "compile" and r.error is None and r.batches == (1, 3)
    assert set(r.modules) == set(before) and r.modules
    assert calls == [("default", False)] * len(before)
    assert all(isinstance(_modules(gen)[k], Compiled) for k in before)
    per_size = 3 if gen.controls else 2  # twice plain (compile, then replay), once with controls (guidance: 2n)
    assert rendered == [1] * per_size + [3] * per_size
    assert r.warmup_s > 0
    assert gen.generate([Item(seed=3)], gen.settings(2)).shape[0] == 1


def test_a_capture_that_fails_in_its_warm_up_puts_the_eager_modules_back(gen, monkeypatch):
    class Broken(torch.nn.Module):
        def forward(self, *a, **k):
            raise RuntimeError("accessing tensor output of CUDAGraphs that has been overwritten\nstack: ...")

    monkeypatch.setattr(torch, "compile", lambda module, mode, dynamic: Broken())
    before = _modules(gen)
    want = gen.generate([Item(seed=3)], gen.settings(2))
    r = cap.capture(gen, "compile", log)
    assert r.used == "off" and r.asked == "compile"
    assert r.error == "RuntimeError: accessing tensor output of CUDAGraphs that has been overwritten"
    assert all(_modules(gen)[k] is v for k, v in before.items())
    np.testing.assert_array_equal(gen.generate([Item(seed=3)], gen.settings(2)), want)


def test_a_capture_that_fails_to_wrap_falls_back(gen, monkeypatch):
    def refuse(module, mode, dynamic):
        raise RuntimeError("Dynamo is not supported on Python 3.14+")

    monkeypatch.setattr(torch, "compile", refuse)
    before = _modules(gen)
    r = cap.capture(gen, "compile", log)
    assert r.used == "off" and r.error == "RuntimeError: Dynamo is not supported on Python 3.14+"
    assert all(_modules(gen)[k] is v for k, v in before.items())


def test_graph_step_returns_its_own_copy_and_passes_attributes_through():
    class Static(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.buf = torch.zeros(3)
            self.cfg = "the module's config"

        def forward(self, x):
            self.buf.copy_(x)
            return self.buf

    m = cap.GraphStep(Static())
    a = m(torch.ones(3))
    b = m(torch.full((3,), 2.0))
    assert torch.equal(a, torch.ones(3)) and torch.equal(b, torch.full((3,), 2.0))
    assert m.cfg == "the module's config"
