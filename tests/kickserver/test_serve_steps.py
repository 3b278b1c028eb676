"""Steps as the running daemon resolves them: --max-steps and --steps (and their config keys, reloaded on SIGHUP)
seen where a user sees them, in the WAV's tags and in the replies; not only on the worker they configure."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import soundfile as sf
from daemon_util import root_conftest, start_daemon

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def thousand_step_model(tmp_path_factory) -> Path:
    """A tiny model whose artifact says sampling.steps = 1000 (an artifact is not trusted to set the cost)."""
    from kickmodel.families import preset

    folder = tmp_path_factory.mktemp("models")
    cfg = preset("tiny").replace("sampling", steps=1000)
    root_conftest().make_tiny_artifact(folder / "slow.safetensors", cfg=cfg)
    return folder


def steps_tag(path: str) -> str:
    comment = sf.SoundFile(path).copy_metadata()["comment"]
    return next(w for w in comment.split() if w.startswith("steps="))


def test_max_steps_caps_an_artifacts_own_default_through_the_daemon(tmp_path, thousand_step_model):
    with start_daemon(tmp_path, thousand_step_model, extra_args=["--max-steps", "50"]) as d:
        (addr, (_, path, _)), = d.send("/kick/generate", "seed", 3, timeout=60)
        assert addr == "/kick/done"
        assert steps_tag(path) == "steps=50"
        # a request past the cap is refused, naming the limit
        (addr, args), = d.send("/kick/generate", "steps", 51, "id", 4)
        assert addr == "/kick/error" and args[0] == 4 and "steps" in args[1] and "50" in args[1]
        (addr, (_, path, _)), = d.send("/kick/generate", "steps", 3, "seed", 5, timeout=30)
        assert addr == "/kick/done" and steps_tag(path) == "steps=3"


def test_server_default_steps_and_the_cap_reload_on_sighup(tmp_path, thousand_step_model):
    config = tmp_path / "kickserver.toml"
    config.write_text("steps = 4\n")
    with start_daemon(tmp_path, thousand_step_model, config=config) as d:
        (addr, (_, path, _)), = d.send("/kick/generate", "seed", 1, timeout=30)
        assert addr == "/kick/done" and steps_tag(path) == "steps=4"  # --steps / steps: the server's default
        config.write_text("max_steps = 6\n")  # no default: the artifact's 1000, capped at 6
        d.signal(signal.SIGHUP)
        assert d.wait_for_log("SIGHUP: config re-read", timeout=15), d.stderr_text()
        (addr, (_, path, _)), = d.send("/kick/generate", "seed", 2, timeout=30)
        assert addr == "/kick/done" and steps_tag(path) == "steps=6"
        (addr, _), = d.send("/kick/generate", "steps", 7, "id", 8)
        assert addr == "/kick/error"
