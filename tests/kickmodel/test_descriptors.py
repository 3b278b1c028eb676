"""kickmodel.descriptors against synthetic kicks with known decay, pitch and click; quantile mapping."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kickmodel.descriptors import CONTROL_NAMES, fit_quantiles, from_dial, measure, to_dial
from trainer.synth import random_params, render_kick, synth_batch, synth_kick

SR = 44100


def kicks(values: list[dict], seed: int = 0, **common) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    base = {"drive": 0.0, "click": 0.0, "sweep": 0.008}
    return torch.from_numpy(np.stack([synth_kick(rng, SR, **{**base, **common, **v}) for v in values]))


def test_names_and_shape():
    assert CONTROL_NAMES == ("decay", "pitch", "click")
    x = torch.from_numpy(synth_batch(3, seed=0))
    m = measure(x, SR)
    assert m.shape == (3, 3) and m.dtype == torch.float32 and torch.isfinite(m).all()
    assert torch.allclose(measure(x[0], SR), m[:1])  # a single clip [L] is a batch of one
    with pytest.raises(ValueError):
        measure(torch.zeros(2, 3, 100), SR)


@pytest.mark.parametrize("click", [0.0, 0.3])
def test_pitch_tracks_the_body(click):
    truth = [42.0, 55.0, 70.0, 90.0, 130.0]
    m = measure(kicks([{"pitch_end": f} for f in truth], decay=0.4, click=click), SR)
    np.testing.assert_allclose(m[:, 1].numpy(), truth, atol=3.0)


def test_decay_tracks_the_envelope():
    truth = [0.12, 0.25, 0.4, 0.6, 0.8]
    m = measure(kicks([{"decay": d} for d in truth], pitch_end=55.0), SR)
    np.testing.assert_allclose(m[:, 0].numpy(), truth, rtol=0.1)
    assert (m[1:, 0] > m[:-1, 0]).all()


def test_decay_is_capped_at_the_clip_length():
    x = kicks([{"decay": 20.0}])
    assert float(measure(x, SR)[0, 0]) <= x.shape[1] / SR + 1e-6


def test_click_increases_with_the_click_level():
    levels = [0.0, 0.05, 0.15, 0.4, 0.8]
    m = measure(kicks([{"click": c} for c in levels], pitch_end=55.0, decay=0.3), SR)[:, 2]
    assert (m[1:] > m[:-1]).all(), m
    assert float(m[0]) < -40.0 and float(m[-1]) > -20.0
    assert (m >= -60.0).all() and (m <= 0.0).all()


def test_invariant_to_level_and_leading_silence():
    x = torch.from_numpy(synth_batch(4, seed=3))
    m = measure(x, SR)
    torch.testing.assert_close(measure(0.25 * x, SR), m, atol=1e-3, rtol=1e-4)
    late = torch.cat([torch.zeros(4, 2205), x[:, :-2205]], dim=1)  # 50 ms of silence first
    ml = measure(late, SR)
    torch.testing.assert_close(ml[:, 1:], m[:, 1:], atol=0.5, rtol=0.02)
    torch.testing.assert_close(ml[:, 0], m[:, 0], atol=0.02, rtol=0.05)


def test_silence_does_not_crash():
    m = measure(torch.zeros(2, 45056), SR)
    assert torch.isfinite(m).all()


def test_no_clip_measures_as_no_row():
    """A batch of no clips (the kicks of a set a tuner could not read, when it read them all) gives no rows, not MKL's
    "Inconsistent configuration parameters" from an FFT of none."""
    from kickmodel.descriptors import settled_pitch_hz, tuner_hz

    none = torch.zeros(0, 44100)
    assert measure(none, SR).shape == (0, 3)
    assert tuner_hz(none, SR).shape == (0,) and settled_pitch_hz(none, SR).shape == (0,)


def test_random_synth_params_tracked():
    rng = np.random.default_rng(7)
    ps = [random_params(rng, drive=0.0, click=0.0, sweep=0.006) for _ in range(12)]
    x = torch.from_numpy(np.stack([render_kick(p, SR) for p in ps]))
    m = measure(x, SR)
    np.testing.assert_allclose(m[:, 1].numpy(), [p["pitch_end"] for p in ps], atol=3.0)
    np.testing.assert_allclose(m[:, 0].numpy(), [p["decay"] for p in ps], rtol=0.1)


# ---------------------------------------------------------------------------------------------- quantiles


def test_quantiles_monotone_and_json():
    raw = torch.stack([torch.rand(200) * 0.7 + 0.1, torch.rand(200) * 100 + 40, torch.full((200,), -60.0)], dim=1)
    q = fit_quantiles(raw, n=17)
    assert len(q) == 3 and all(len(row) == 17 for row in q)
    for row in q:
        assert all(b > a for a, b in zip(row[:-1], row[1:], strict=True))  # strictly increasing, even a constant column
    assert json.loads(json.dumps(q)) == q
    assert q[0][0] == pytest.approx(float(raw[:, 0].min())) and q[1][-1] == pytest.approx(float(raw[:, 1].max()))
    assert fit_quantiles(raw.numpy(), n=17) == q


def test_to_dial_is_the_empirical_cdf_and_round_trips():
    g = torch.Generator().manual_seed(0)
    raw = torch.stack([torch.rand(501, generator=g) ** 2, 40 + 80 * torch.rand(501, generator=g),
                       -60 + 50 * torch.rand(501, generator=g)], dim=1)
    q = fit_quantiles(raw)
    u = to_dial(raw, q)
    assert u.shape == raw.shape and u.dtype == raw.dtype
    assert (u >= 0).all() and (u <= 1).all()
    med = to_dial(raw.median(dim=0).values[None], q)
    torch.testing.assert_close(med, torch.full((1, 3), 0.5), atol=0.02, rtol=0)
    torch.testing.assert_close(from_dial(u, q), raw, atol=1e-4, rtol=1e-4)
    dial = torch.linspace(0, 1, 11)[:, None].repeat(1, 3)
    torch.testing.assert_close(to_dial(from_dial(dial, q), q), dial, atol=1e-6, rtol=0)
    # outside the training range: clamped
    out = to_dial(torch.tensor([[-5.0, 0.0, -100.0], [5.0, 1000.0, 10.0]]), q)
    assert out.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    assert from_dial(torch.tensor([[-1.0, 2.0, 0.0]]), q)[0, 1] == pytest.approx(q[1][-1])
    with pytest.raises(ValueError):
        to_dial(torch.zeros(2, 2), q)


def test_quantiles_from_measured_synth_set():
    """The training set's own dial positions: each control keeps the order of its raw values and spreads
    them evenly over 0..1 (the k-th smallest of N sits at about k / (N - 1)), and maps back to them."""
    raw = measure(torch.from_numpy(synth_batch(24, seed=11)), SR)
    q = fit_quantiles(raw)
    u = to_dial(raw, q)
    assert abs(float(u.mean()) - 0.5) < 0.1
    even = np.linspace(0, 1, len(raw))
    for c, name in enumerate(CONTROL_NAMES):
        r, d = raw[:, c].numpy(), u[:, c].numpy()
        assert len(set(r.tolist())) == len(r), name  # 24 distinct values: ranks are well defined
        assert np.array_equal(np.argsort(d, kind="stable"), np.argsort(r, kind="stable")), name
        assert d.min() == 0.0 and d.max() == 1.0, name
        assert np.abs(np.sort(d) - even).max() < 0.04, (name, np.sort(d))
    torch.testing.assert_close(from_dial(u, q), raw, atol=1e-3, rtol=1e-4)


def test_quantiles_take_a_tensor_as_measured_wherever_it_was():
    """The trainer measures its clips on the training device: fit_quantiles takes the tensor as it is (numpy cannot
    read a GPU tensor, nor one that requires grad, which stands for it here) and gives what the CPU copy gives."""
    raw = torch.rand(50, 3, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 200.0, 40.0])
    assert fit_quantiles(raw.clone().requires_grad_(True)) == fit_quantiles(raw.numpy())


def test_measure_runs_on_the_clips_device_and_to_dial_follows():
    """The trainer measures each augmented batch where it was augmented (the meta device: shapes, no values, and
    nothing may be read back or copied to the CPU)."""
    x = torch.from_numpy(synth_batch(3, seed=1)).to("meta")
    raw = measure(x, 44100)
    assert raw.device.type == "meta" and raw.shape == (3, 3)
    assert to_dial(raw, [[0.0, 1.0, 2.0]] * 3).device.type == "meta"


def _swept(hz: float, sweep: float, tau: float, decay: float = 0.4, second: float = 0.0) -> torch.Tensor:
    """A kick body settling on hz: f(t) = hz (1 + sweep exp(-t / tau)), decaying in `decay` s; `second`: the level
    of its second harmonic."""
    t = torch.arange(SR, dtype=torch.float64) / SR
    phase = 2 * np.pi * torch.cumsum(hz * (1 + sweep * torch.exp(-t / tau)), 0) / SR
    x = (torch.sin(phase) + second * torch.sin(2 * phase)) * torch.exp(-t / decay) * (1 - torch.exp(-t / 0.001))
    return x.float()


@pytest.mark.parametrize("hz", [43.65, 61.74, 98.0])
def test_the_tuner_reads_the_body_80_to_200_ms_after_the_onset(hz):
    """A steady tone and a sweep over by 80 ms read as their settled pitch; a sweep still falling then reads as its
    mean frequency over 80..200 ms (the crossings counted over the window), not the peak's 40..250 ms."""
    from kickmodel.descriptors import settled_pitch_hz, tuner_hz

    tau = 0.025
    clips = torch.stack([_swept(hz, 0.0, 0.01), _swept(hz, 3.0, 0.012), _swept(hz, 3.0, tau)])
    cents = 1200 * np.log2(tuner_hz(clips, SR).numpy() / hz)
    a, b = 0.08, 0.2
    mean = 1 + 3.0 * tau / (b - a) * (np.exp(-a / tau) - np.exp(-b / tau))  # of f(t) / hz over the window
    assert abs(cents[0]) < 0.5 and abs(cents[1]) < 2, cents
    assert abs(cents[2] - 1200 * np.log2(mean)) < 8, (cents[2], 1200 * np.log2(mean))
    assert torch.equal(settled_pitch_hz(clips, SR), tuner_hz(clips, SR))


def test_the_tuner_reads_no_tone_where_the_body_is_gone():
    """Noise, or a body decayed by 80 ms under a noise floor, has no steady tone: NaN, and settled_pitch_hz falls back
    to the spectral peak; so does a tuner reading an octave off the peak (a second harmonic doubling the crossings)."""
    from kickmodel.descriptors import settled_pitch_hz, tuner_hz

    g = torch.Generator().manual_seed(0)
    noise = torch.randn(SR, generator=g) * 0.1
    gone = _swept(55.0, 1.0, 0.01, decay=0.008) + 1e-4 * torch.randn(SR, generator=g)
    doubled = _swept(55.0, 0.0, 0.01, second=0.8)
    clips = torch.stack([noise, gone, doubled])
    tuned = tuner_hz(clips, SR)
    assert bool(tuned[:2].isnan().all()), tuned
    assert float(tuned[2]) > 100, "a strong second harmonic doubles a zero-crossing tuner's reading"
    peak = measure(clips, SR)[:, 1]
    assert torch.equal(settled_pitch_hz(clips, SR), peak)
