"""The daemon's render capture and resident memory (issue 24), through a running daemon on the CPU.

`--render-capture graphs` on the CPU is refused by kickmodel.capture itself (CUDA graphs need a CUDA device): the
daemon serves eagerly, says so in one log line per model load (at start, and again once after a hot swap), and
/kick/status ends with what the daemon holds in memory."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import soundfile as sf
from daemon_util import make_artifact, models_folder, start_daemon

from kickserver.config import CAPTURE_MODES, ServerConfig, ServerConfigError, load_config

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


def _kick(d, seed: int) -> str:
    (a, p), = d.send("/kick/generate", "steps", 2, "seed", seed, timeout=30)
    assert a == "/kick/done", p
    assert sf.info(p[1]).frames > 0
    return p[1]


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
