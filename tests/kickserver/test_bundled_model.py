"""The bundled model ships inside the package, loads, and serves kicks through the daemon on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
from daemon_util import start_daemon

from trainer.artifact import load_artifact
from trainer.generator import Item, finish_kick, load_generator

BUNDLED = Path(__file__).resolve().parents[2] / "kickserver" / "models" / "default.safetensors"


def test_bundled_artifact_is_a_small_real_model():
    assert BUNDLED.is_file(), "kickserver/models/default.safetensors is missing"
    assert BUNDLED.stat().st_size <= 25 * 1024 * 1024
    art = load_artifact(BUNDLED)
    assert art.family == "waveform_diffusion"
    assert art.controls == ["decay", "pitch", "click"]
    assert art.step >= 1000, "the bundled model must be trained, not initialised"
    assert art.training  # where it came from: the run, its checkpoint, its data


def test_bundled_model_makes_a_kick_shaped_sound():
    """Not noise: an attack near the start, and a tail that decays to silence."""
    gen = load_generator(BUNDLED, "cpu")
    clips = finish_kick(gen.sample([Item(seed=s) for s in (1, 2)], steps=10), gen.sample_rate)
    sr = gen.sample_rate
    for x in clips:
        assert np.isfinite(x).all() and np.abs(x).max() <= 10 ** (-1 / 20) + 1e-6
        peak_at = int(np.abs(x).argmax())
        assert peak_at < 0.05 * sr  # the transient is at the start
        attack = np.sqrt(np.mean(x[: int(0.05 * sr)] ** 2))
        tail = np.sqrt(np.mean(x[int(0.6 * sr):] ** 2))
        # a silent tail: without the finishing high-pass this model leaves a subsonic floor at about -67 dB
        assert 20 * np.log10(tail / attack + 1e-12) < -80


def test_daemon_serves_the_bundled_model_on_cpu(tmp_path):
    empty = tmp_path / "models"
    empty.mkdir()
    with start_daemon(tmp_path, empty, model="default") as d:
        status = d.send("/kick/status")
        assert status[0][0] == "/kick/status" and status[0][1][0] == "default" and status[0][1][1] == "cpu"
        assert d.send("/kick/models")[0][1] == ["default"]
        replies = d.send("/kick/generate", "seed", 5, "steps", 4, "decay", 0.7, expect=1, timeout=60)
        assert replies[0][0] == "/kick/done", replies
        _, path, seed = replies[0][1]
        assert seed == 5
        audio, sr = sf.read(path)
        assert sr == 44100 and audio.ndim == 1 and len(audio) == 45056
