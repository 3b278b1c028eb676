"""The daemon's render capture and resident memory, through a running daemon on the CPU.

`--render-capture graphs` on the CPU is refused by kickmodel.capture itself (CUDA graphs need a CUDA device): the
daemon serves eagerly, says so in one log line per model load (at start, and again once after a hot swap), and
/kick/status ends with what the daemon holds in memory."""

from __future__ import annotations

import gc
import os
import re
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from daemon_util import make_artifact, models_folder, start_daemon, wait_until

from kickmodel.generator import Item
from kickmodel.loading import load_generator
from kickserver.config import CAPTURE_MODES, ServerConfig, ServerConfigError, load_config
from kickserver.frontend import encode
from kickserver.jobs import Fresh
from kickserver.worker import Worker, resident_memory
from kickserver.writer import KickWriter

FELL_BACK = "fell back to eager: CUDA graphs need a CUDA device; the model is on cpu"


def _count(d, needle: str) -> int:
    return d.stderr_text().count(needle)


def _wait_count(d, needle: str, n: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _count(d, needle) >= n:
            break
        time.sleep(0.05)
    return _count(d, needle)


class Collect:
    """A job's reply callable: every reply parsed, in order."""

    def __init__(self):
        self.replies: list[tuple[str, list]] = []

    def __call__(self, data):
        """A reply datagram, or an outcome the worker emitted (encoded as the front end encodes it)."""
        from daemon_util import parse_replies

        self.replies.extend(parse_replies(data if isinstance(data, bytes) else encode(data)))


def submit(w, job):
    """Submit as the front end does: the job resolved once against the serving model and the server's policy."""
    job.resolve(w.gen, w.policy)
    return w.submit(job)


def _kick(d, seed: int) -> str:
    (a, p), = d.send("/kick/generate", "steps", 2, "seed", seed, timeout=30)
    assert a == "/kick/done", p
    assert sf.info(p[1]).frames > 0
    return p[1]


@pytest.mark.slow  # torch.compile of the tiny model: 1-7 min on the loaded 2-core box
def test_ready_comes_only_once_the_render_is_captured(tmp_path, tiny_artifact):
    """Under `--render-capture compile` on the CPU the daemon announced READY=1 after 3.8 s and
    answered its first kick after 68.5 s (torch.compile ran in the worker after READY). Now READY=1 comes once the
    worker's capture is done: when it arrives, the log already holds the capture's line, and a kick asked then is
    answered at a kick's speed (compared with a second kick, not with a fixed time)."""
    import socket
    import tempfile

    sock_path = Path(tempfile.mkdtemp(prefix="ks-notify-")) / "n.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(sock_path))
    models = models_folder(tmp_path / "models", tiny_artifact)
    env = {"NOTIFY_SOCKET": str(sock_path)}
    try:
        with start_daemon(tmp_path, models, env=env, extra_args=["--render-capture", "compile"]) as d:
            listener.settimeout(600)  # the capture's own time, whatever the box (pytest's timeout bounds the test)
            while b"READY=1" not in listener.recv(4096):
                pass
            log_at_ready = d.stderr_text()
            assert "render capture compile (asked compile)" in log_at_ready or "fell back to eager" in log_at_ready, \
                log_at_ready
            t0 = time.monotonic()
            _kick(d, 1)
            first = time.monotonic() - t0
            t0 = time.monotonic()
            _kick(d, 2)
            second = time.monotonic() - t0
            print(f"first kick after READY {first:.2f} s, second {second:.2f} s")
            assert first < 10 * second + 1.0, (first, second, d.stderr_text())
    finally:
        listener.close()


def test_graphs_on_the_cpu_fall_back_to_eager_logged_once_per_load(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models, extra_args=["--render-capture", "graphs"]) as d:
        assert _wait_count(d, FELL_BACK, 1) == 1, d.stderr_text()
        for seed in (1, 2, 3):
            _kick(d, seed)
        (a, p), = d.send("/kick/status", timeout=5)
        assert a == "/kick/status" and p[:2] == ["tiny", "cpu"] and len(p) == 6, p
        assert re.fullmatch(r"cpu RSS \d+ MB", p[5]) and int(p[5].split()[2]) > 0, p
        log = d.stderr_text()
        assert log.count(FELL_BACK) == 1, log
        line, = [x for x in log.splitlines() if FELL_BACK in x]
        assert "model tiny (waveform_diffusion): render capture off (asked graphs)" in line, line
        assert re.search(r"resident: cpu RSS \d+ MB", line), line
        # a hot swap: the pinned model's file replaced; the new model's load says it once more, and only once
        (tmp_path / "new").mkdir()
        new = make_artifact(tmp_path / "new" / "tiny.safetensors", seed=2)
        tmp = models / ".tiny.safetensors.part"
        tmp.write_bytes(Path(new).read_bytes())
        os.replace(tmp, models / "tiny.safetensors")
        assert _wait_count(d, FELL_BACK, 2) == 2, d.stderr_text()
        for seed in (4, 5):
            _kick(d, seed)
        assert _count(d, FELL_BACK) == 2, d.stderr_text()
        assert _count(d, "now serving model tiny") == 1


def test_off_is_one_line_without_a_fallback(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models, extra_args=["--render-capture", "off"]) as d:
        assert _wait_count(d, "render capture off (asked off)", 1) == 1, d.stderr_text()
        _kick(d, 1)
        assert "fell back" not in d.stderr_text()


def test_render_capture_is_a_setting_like_the_others(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('render_capture = "compile"\n')
    assert load_config(toml, {})[0].render_capture == "compile"
    assert load_config(toml, {"render_capture": "off"})[0].render_capture == "off"
    assert ServerConfig().render_capture == "auto"
    toml.write_text('render_capture = "turbo"\n')
    try:
        load_config(toml, {})
    except ServerConfigError as e:
        assert str(e) == "render_capture must be auto, off, compile, graphs, got 'turbo'"
    else:
        raise AssertionError("an unknown render_capture was accepted")


def test_the_daemons_modes_are_captures_modes():
    from kickmodel.capture import MODES

    assert CAPTURE_MODES == MODES


# ------------------------------------------------------------------ the worker under a capture mode (stand-in compile)


class _StandIn(torch.nn.Module):
    """What torch.compile(dynamic=False) gives, for these tests: a module that runs the eager one, records the batch
    size of every call (each new size is a compile, or a graph recorded, on a musician's request) and, as dynamo's
    caches do (pytorch#104095), stays referenced from a process-wide cache until torch._dynamo.reset()."""

    cache: list = []

    def __init__(self, module, sizes):
        super().__init__()
        self.inner, self.sizes = module, sizes
        _StandIn.cache.append(self)

    def forward(self, x, *a, **k):
        self.sizes.append(int(x.shape[0]))
        return self.inner(x, *a, **k)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["inner"], name)


@pytest.fixture
def stand_in(monkeypatch):
    sizes: list[int] = []
    resets: list[int] = []
    _StandIn.cache = []
    monkeypatch.setattr(torch, "compile", lambda module, mode, dynamic: _StandIn(module, sizes))

    def reset():
        resets.append(len(_StandIn.cache))
        _StandIn.cache.clear()

    monkeypatch.setattr(torch._dynamo, "reset", reset)
    yield sizes, resets
    _StandIn.cache = []


def _worker(gen, out, **kw):
    return Worker(gen, "tiny", KickWriter(out, gen.sample_rate), sample_rate=gen.sample_rate, capture="compile", **kw)


def test_under_a_capture_mode_only_captured_batch_sizes_reach_the_network(tmp_path, tiny_artifact, stand_in):
    """Kicks in batches of 3, 5, 6 and 7 (and 1) are padded to the sizes warmed up at load (1, 2, 4, 8), so the
    networks never see a size they were not captured for; the padding is neither written nor answered, and each
    kick is the one an eager model makes unpadded (kicks are batch-independent: test_batch_independence)."""
    sizes, _ = stand_in
    gen = load_generator(tiny_artifact, "cpu")
    w = _worker(gen, tmp_path / "out", max_batch=8)
    w.start()
    assert wait_until(lambda: w.capture_report is not None, 20)
    assert w.capture_report.used == "compile" and w.capture_report.batches == (1, 2, 4, 8)
    warmed = set(sizes)
    sizes.clear()
    r = Collect()
    jobs = {1: 3, 2: 5, 3: 6, 4: 7, 5: 1}
    answered = 0
    for j, n in jobs.items():  # one at a time, so each batch is its job
        submit(w, Fresh(id=j, seeds=list(range(10 * j, 10 * j + n)), answer=r, steps=2, controls={"decay": 0.4}))
        answered += n
        assert wait_until(lambda want=answered: len(r.replies) == want, 30)
    w.stop()
    assert w.join(10)
    assert [a for a, _ in r.replies] == ["/kick/done"] * 22, r.replies
    assert sizes and set(sizes) <= warmed, (sorted(set(sizes)), sorted(warmed))
    assert len(list((tmp_path / "out").glob("kick_*.wav"))) == 22
    eager = load_generator(tiny_artifact, "cpu")
    lsb = 2.0 ** -23
    for j in jobs:
        paths = [p[1] for _, p in r.replies if p[0] == j]
        seeds = [p[2] for _, p in r.replies if p[0] == j]
        assert seeds == list(range(10 * j, 10 * j + jobs[j]))
        want = eager.generate([Item(seed=s, controls={"decay": 0.4}) for s in seeds], eager.settings(2))
        for path, kick in zip(paths, want, strict=True):
            got, _ = sf.read(path, dtype="float64")
            assert np.abs(got - kick).max() <= 10 * lsb, (path, np.abs(got - kick).max() / lsb)


def test_under_off_nothing_is_padded(tmp_path, tiny_artifact, stand_in):
    sizes, _ = stand_in
    gen = load_generator(tiny_artifact, "cpu")
    seen = []
    real = gen.generate
    gen.generate = lambda items, settings, **k: seen.append(len(items)) or real(items, settings, **k)
    w = Worker(gen, "tiny", KickWriter(tmp_path, gen.sample_rate), sample_rate=gen.sample_rate, capture="off",
               max_batch=8)
    r = Collect()
    submit(w, Fresh(id=1, seeds=[1, 2, 3], answer=r, steps=2))
    w.start()
    assert wait_until(lambda: len(r.replies) == 3, 30)
    w.stop()
    assert w.join(10)
    assert seen == [3] and not sizes


def test_a_hot_swap_under_a_capture_mode_releases_the_old_models_compiled_state(tmp_path, tiny_artifact, stand_in):
    """Before the new model is captured the old one's compiled state is dropped (torch._dynamo.reset, then the
    garbage and the CUDA cache), so repeated swaps do not pile up compiled graphs: the old wrapped modules are gone
    once the new model serves."""
    _, resets = stand_in
    w = _worker(load_generator(tiny_artifact, "cpu"), tmp_path / "out", max_batch=2)
    w.start()
    assert wait_until(lambda: w.capture_report is not None, 20)
    old = [weakref.ref(m) for m in vars(w.gen).values() if isinstance(m, _StandIn)]
    assert old
    r = Collect()
    w.offer_model(load_generator(tiny_artifact, "cpu"), "tiny2", r)
    assert wait_until(lambda: len(r.replies) == 1, 30)
    assert r.replies == [("/kick/model", ["tiny2"])]
    assert resets and resets[-1] >= len(old)  # reset before the new capture: the old model's modules were cached
    assert all(isinstance(m, _StandIn) for m in vars(w.gen).values() if isinstance(m, torch.nn.Module))
    gc.collect()
    assert [ref() for ref in old] == [None] * len(old)
    submit(w, Fresh(id=1, seeds=[1], answer=r, steps=2))
    assert wait_until(lambda: len(r.replies) == 2, 30)
    w.stop()
    assert w.join(10)
    assert r.replies[1][0] == "/kick/done"


# ------------------------------------------------------------------ the memory /kick/status shows on CUDA


def test_cuda_memory_says_what_the_allocator_holds_and_what_the_device_has_in_use(monkeypatch):
    """torch.cuda.memory_reserved is the caching allocator's reserve, not the CUDA context or kernels: the phrase
    names it as such and adds the device's own figure (mem_get_info: total - free, every process's)."""
    mb = 1 << 20
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev=None: 300 * mb)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda dev=None: 250 * mb)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (140_000 * mb, 143_771 * mb))
    assert resident_memory("cuda:0") == ("cuda:0 allocator reserved 300 MB, peak 250 MB, "
                                         "device used 3771 of 143771 MB")
