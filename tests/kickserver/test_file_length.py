"""A file is as long as its kick: what the daemon's writer, `kickserver render` and a kit write ends where the kick has
decayed (its tail under -60 dB re its peak, then a 10 ms fade-out), not where the model's render ends; the samples it
keeps are the kick's, and every other guarantee of a file stays (first sample 0, last 0, 24-bit, the smpl chunk).
Through the CLI: the kick-synth model asked for decay_s 2.0 gives a file longer than 2 s that measures so, decay_s 0.1
a short file, and the bundled model's kick a file that ends where it decays."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from daemon_util import daemon_env

from kickmodel.descriptors import measure, settled_pitch_hz
from kickmodel.dsp import TAIL_FADE_MS, finish_kick, tail_end
from kickserver import kitfiles
from kickserver.writer import KickInfo, KickWriter

SR = 44100
REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "kickserver" / "models"


def _kick(n: int = SR, tau: float = 0.04) -> np.ndarray:
    t = np.arange(n) / SR
    x = np.sin(2 * np.pi * 55 * t) * np.exp(-t / tau) * (1 - np.exp(-t / 0.002))
    return finish_kick(x, SR)


def _pcm24(x: np.ndarray) -> np.ndarray:
    """What a 24-bit file of the whole of x holds, read back (float64): what a file held before files were cut."""
    buf = io.BytesIO()
    sf.write(buf, np.asarray(x, dtype=np.float32), SR, subtype="PCM_24", format="WAV")
    buf.seek(0)
    return sf.read(buf, dtype="float64")[0]


def test_the_writer_cuts_a_decayed_kick_after_its_tail(tmp_path):
    x = _kick()
    end = tail_end(x)
    p = KickWriter(tmp_path, SR).write(x, KickInfo(model="m", seed=1, steps=None, sampler=None, controls={}))
    info = sf.info(p)
    assert (info.subtype, info.samplerate) == ("PCM_24", SR)
    assert info.frames == end + round(SR * TAIL_FADE_MS / 1000) < len(x) // 2
    y, _ = sf.read(p, dtype="float64")
    assert np.array_equal(y[:end], _pcm24(x)[:end])  # the kick's own samples, kept
    assert y[0] == 0.0 and y[-1] == 0.0
    data = p.read_bytes()
    assert b"smpl" in data[:data.index(b"data")]  # its measured pitch still maps it in a sampler
    assert [q for q in tmp_path.iterdir() if q.name.startswith(".")] == []  # no temp file left


def test_a_kit_writes_each_hit_as_long_as_it_sounds(tmp_path):
    hits = [kitfiles.KitHit(_kick(tau=tau), 0, r) for r, tau in enumerate((0.02, 0.08))]
    made = kitfiles.write_kit(kitfiles.Kit(name="k", hits=hits, note="A1", sample_rate=SR), tmp_path)
    frames = [sf.info(made.folder / w).frames for w in made.wavs]
    ends = [tail_end(h.audio) for h in hits]
    assert frames == [e + round(SR * TAIL_FADE_MS / 1000) for e in ends] and frames[0] < frames[1] < SR


def _render(tmp_path: Path, *args: str) -> list[Path]:
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "kickserver", "render", "--config", str(cfg), "--out", str(out),
                        "--device", "cpu", "--sample-rate", str(SR), *args], cwd=REPO, env=daemon_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return [Path(p) for p in r.stdout.split()]


def _measured(path: Path) -> tuple[np.ndarray, tuple[float, float, float]]:
    """(audio, (decay s, pitch Hz, click dB)): the pitch as a pitch_hz sets it, the settled body's."""
    audio, rate = sf.read(path, dtype="float32")
    assert rate == SR and audio.ndim == 1
    clip = torch.from_numpy(np.ascontiguousarray(audio))[None]
    decay, peak, click = measure(clip, rate)[0].tolist()
    return audio, (decay, float(settled_pitch_hz(clip, rate)[0]), click)


@pytest.mark.parametrize("decay", [2.0, 0.1])
def test_render_gives_a_kick_synth_kick_its_decays_length(tmp_path, decay):
    (path,) = _render(tmp_path, "--models", str(MODELS), "--model", "kick-synth", "--n", "1", "--seed", "3",
                      "--control", f"decay_s={decay}", "--control", "pitch_hz=50")
    audio, (got, pitch, _) = _measured(path)
    assert abs(got / decay - 1) < 0.1, got
    assert abs(1200 * np.log2(pitch / 50.0)) < 25, pitch
    assert audio[0] == 0.0 and audio[-1] == 0.0
    if decay == 2.0:
        assert len(audio) > 2.0 * SR
    else:
        assert len(audio) < 0.3 * SR
    assert f"measured_decay_s={got:.3f}" in path.read_bytes().decode("latin-1")


def test_render_ends_a_bundled_model_kick_where_it_decays(tmp_path):
    """The bundled model (latent diffusion, a fixed 1.022 s render) gets a file cut where its kick decays: the same
    kick, sample for sample, as the model renders it, then the fade-out."""
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator

    (path,) = _render(tmp_path, "--n", "1", "--seed", "5", "--steps", "4")
    audio, _ = sf.read(path, dtype="float64")
    gen = load_generator(MODELS / "default.safetensors", "cpu")
    kick = gen.generate([Item(seed=5)], gen.settings(4), sample_rate=SR)[0]
    end = tail_end(kick)
    assert len(audio) == end + round(SR * TAIL_FADE_MS / 1000) < gen.length
    assert np.array_equal(audio[:end], _pcm24(kick)[:end])
    assert np.abs(kick[end:]).max() < np.abs(kick).max() * 1e-3  # what was cut is under -60 dB re its peak
    assert audio[0] == 0.0 and audio[-1] == 0.0


def test_a_long_kick_synth_kick_is_priced_as_its_length():
    """The daemon's queue counts a kick-synth kick asked for a long decay_s as the renders it takes (3 s: three of the
    model's 1.02 s kicks), a short one as one."""
    from kickmodel.generator import StepPolicy
    from kickmodel.loading import load_generator
    from kickserver.jobs import Fresh
    from kickserver.pricing import Prices, price

    gen = load_generator(MODELS / "kick-synth.safetensors", "cpu")
    costs = {}
    for decay in (0.3, 2.0):
        job = Fresh(id=1, seeds=[1, 2], answer=lambda o: None, controls={"decay_s": decay})
        job.resolve(gen, StepPolicy())
        costs[decay] = price(job, Prices(kick_s=0.01), 8)
    assert costs[0.3] == (2, "")
    assert costs[2.0] == (6, "kicks 3.0 s long, 3 kicks' worth each")


def test_the_daemon_writes_a_kick_synth_kick_as_long_as_its_decay(tmp_path):
    """Through OSC: the shipped kick-synth model asked for decay_s 2.0 (and a pitch) lands a file over 2 s that
    measures 2.0 s within 10 %; decay_s 0.1 a file under 0.3 s; both start and end at 0."""
    from daemon_util import models_folder, start_daemon

    with start_daemon(tmp_path, models_folder(tmp_path / "models", MODELS / "kick-synth.safetensors"),
                      model="kick-synth") as d:
        for decay, check in ((2.0, lambda n: n > 2.0 * SR), (0.1, lambda n: n < 0.3 * SR)):
            (address, params), = d.send("/kick/generate", "seed", 3, "decay_s", decay, "pitch_hz", 50.0, "id", 1,
                                        expect=1, timeout=120)
            assert address == "/kick/done", params
            audio, (got, pitch, _) = _measured(Path(params[1]))
            assert check(len(audio)) and abs(got / decay - 1) < 0.1, (decay, len(audio), got)
            assert abs(1200 * np.log2(pitch / 50.0)) < 25 and audio[0] == 0.0 and audio[-1] == 0.0
