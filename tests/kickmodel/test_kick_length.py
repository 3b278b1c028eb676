"""A kick is as long as it sounds: a file ends where the kick has decayed (kickmodel.dsp.trim_tail), and a kick-synth
kick renders as long as its decay needs, up to 3 s (decay_s up to 2.5 s, measured as asked), each kick its own length
and its own samples in any batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kickmodel import descriptors
from kickmodel.dsp import TAIL_FADE_MS, TAIL_FLOOR_DB, tail_end, trim_tail
from kickmodel.generator import Item

SR = 44100
SHIPPED_SYNTH = Path(__file__).resolve().parents[2] / "kickserver" / "models" / "kick-synth.safetensors"


def _kick(n: int = SR, tau: float = 0.05, floor: float = 0.0) -> np.ndarray:
    t = np.arange(n) / SR
    x = np.sin(2 * np.pi * 50 * t) * np.exp(-t / tau) * (1 - np.exp(-t / 0.002))
    x = x + floor * np.random.default_rng(0).standard_normal(n)
    return (0.89 * x / np.abs(x).max()).astype(np.float32)


def test_tail_end_is_one_past_the_last_sample_above_the_floor():
    x = np.zeros(100, dtype=np.float32)
    x[[3, 10, 40]] = [1.0, 0.01, 0.0009]  # -40 dB is above the -60 dB floor; -61 dB is under it
    assert tail_end(x) == 11
    assert tail_end(x, floor_db=-70.0) == 41
    assert tail_end(np.zeros(50)) == 0
    assert list(tail_end(np.stack([x, np.zeros(100, np.float32)]))) == [11, 0]


def test_a_decayed_kick_is_cut_after_its_tail_and_keeps_its_samples_bit_for_bit():
    x = _kick(tau=0.05)  # -60 dB at about 0.35 s of 1 s
    y = trim_tail(x, SR)
    end = tail_end(x)
    n_fade = round(SR * TAIL_FADE_MS / 1000)
    assert len(y) == end + n_fade < len(x) and 0.3 * SR < end < 0.4 * SR
    assert y.dtype == np.float32 and y[0] == 0.0 and y[-1] == 0.0
    assert np.array_equal(y[:end], x[:end])  # what it keeps is the kick, bit for bit
    tail = np.abs(y[end:])
    assert tail.max() < np.abs(x).max() * 10 ** (TAIL_FLOOR_DB / 20)
    ramp = y[end:] / np.where(x[end:end + n_fade] == 0, 1, x[end:end + n_fade])  # the fade-out, falling to 0
    assert np.all(np.diff(ramp[x[end:end + n_fade] != 0]) <= 1e-6)


def test_a_kick_still_sounding_at_its_end_or_silence_is_left_as_it_is():
    x = _kick(tau=0.5)  # -60 dB after 3 s: still sounding at 1 s
    assert trim_tail(x, SR) is not None and np.array_equal(trim_tail(x, SR), x)
    z = np.zeros(1000, dtype=np.float32)
    assert np.array_equal(trim_tail(z, SR), z)
    noisy = _kick(tau=0.05, floor=0.01)  # a floor at -40 dB: it never decays under -60, so it keeps its length
    assert len(trim_tail(noisy, SR)) == len(noisy)


# ---------------------------------------------------------------- the kick synth: as long as its decay


@pytest.fixture(scope="module")
def shipped():
    from kickmodel.loading import load_generator

    return load_generator(SHIPPED_SYNTH, "cpu")


def test_the_long_synth_plays_the_models_kick_over_its_length():
    """The noise of a longer synth is the model's length's draw repeated, so a kick played longer is, over the
    model's length, the kick it was, bit for bit, in both synth versions."""
    from kickmodel.families.kick_synth.synth import n_params, synth_for

    for version in (1, 2):
        u = torch.randn(3, n_params(version), generator=torch.Generator().manual_seed(version)) * 2
        short, long = synth_for(version, SR, 8192), synth_for(version, SR, 3 * 8192 + 5, period=8192)
        for i in range(3):
            a = short(u[i:i + 1], torch.tensor([i]))
            b = long(u[i:i + 1], torch.tensor([i]))
            assert b.shape == (1, 3 * 8192 + 5) and torch.equal(a, b[:, :8192]), (version, i)
        noise = long._shaped_noise(1, torch.ones(1, long.noise_spec.shape[1]))
        assert torch.equal(noise[:, :8192], noise[:, 8192:16384])  # the period repeats


def test_decay_s_takes_the_range_the_docs_promise(shipped):
    assert shipped.unit_range("decay_s") == ("decay", 0.05, 2.5)
    assert shipped.max_length == 3 * SR and shipped.length == 45056
    with pytest.raises(ValueError, match=r"decay_s must be within 0\.05\.\.2\.5, got 2\.6"):
        shipped.generate([Item(seed=1, controls={"decay_s": 2.6})], shipped.settings())


def test_a_long_decay_renders_long_and_measures_as_asked(shipped):
    got = shipped.generate([Item(seed=3, controls={"decay_s": 2.0, "pitch_hz": 50.0})], shipped.settings())[0]
    kick = trim_tail(got, SR)
    assert len(got) == shipped.max_length and len(kick) > 2.0 * SR
    decay, _, _ = descriptors.measure(torch.from_numpy(kick)[None], SR)[0].tolist()
    pitch = float(descriptors.settled_pitch_hz(torch.from_numpy(kick)[None], SR)[0])  # as a pitch_hz sets it
    assert abs(decay / 2.0 - 1) < 0.1 and abs(1200 * np.log2(pitch / 50.0)) < 25, (decay, pitch)
    assert got[0] == 0.0 and got[-1] == 0.0


def test_a_short_decay_stays_at_the_models_length_and_its_file_is_short(shipped):
    got = shipped.generate([Item(seed=3, controls={"decay_s": 0.1})], shipped.settings())
    assert got.shape == (1, shipped.length)
    kick = trim_tail(got[0], SR)
    assert len(kick) < 0.3 * SR
    assert abs(descriptors.measure(torch.from_numpy(kick)[None], SR)[0, 0].item() / 0.1 - 1) < 0.1


def test_kicks_of_different_lengths_in_one_batch_are_each_the_kick_alone(shipped):
    """A long kick (asked, and one the prior makes long: seed 7), short ones and one at another rate: in one batch
    each row is that kick alone, then zeros; its file is the same."""
    items = [Item(seed=1, controls={"decay_s": 1.6}), Item(seed=2, controls={"decay_s": 0.1}), Item(seed=7),
             Item(seed=0)]
    for rate in (None, 48000):
        batch = shipped.generate(items, shipped.settings(), sample_rate=rate)
        alone = [shipped.generate([it], shipped.settings(), sample_rate=rate)[0] for it in items]
        r = rate or SR
        assert batch.shape[1] == max(len(a) for a in alone) and len(alone[0]) > 2 * len(alone[1])
        assert len(alone[2]) > len(alone[1])  # seed 7's tail outlasts the model's length: played long
        for row, one in zip(batch, alone, strict=True):
            assert np.array_equal(row[:len(one)], one) and not row[len(one):].any()
            assert np.array_equal(trim_tail(row, r), trim_tail(one, r))


def test_the_render_cost_counts_the_longest_kick(shipped):
    """The artifact check's estimate of one kick plays the synth at its longest (3 s), not at the model's length."""
    from kickmodel.families import get_family

    fam = get_family("kick_synth")
    configs = {"denoiser": shipped.artifact.config_of("denoiser")}
    with torch.device("meta"):
        modules = fam.part_modules(configs)
    play = fam.render_passes(modules, configs)[1]
    with torch.device("meta"), torch.inference_mode():
        assert play.run().shape == (1, shipped.max_length)
