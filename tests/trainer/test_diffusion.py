"""Schedule and sampler math: closed forms, exact recovery with the true noise, save/reload identity."""

from __future__ import annotations

import json
import math

import pytest
import torch

from trainer.diffusion import (
    SAMPLERS,
    Denoiser,
    NoiseSchedule,
    add_noise,
    multires_stft_loss,
    run_sampler,
    sample_ddim,
    sample_dpmpp_2m,
)


@pytest.mark.parametrize("name", ["cosine", "linear"])
@pytest.mark.parametrize("T", [0, 1000])
def test_schedule_endpoints_and_monotone(name, T):
    s = NoiseSchedule(name, T)
    t = torch.linspace(0, 1, 1001, dtype=torch.float64)
    a, sig = s.alpha_sigma(t)
    assert a[0] == 1.0 and sig[0] == 0.0  # clean at t = 0: the last sampling step returns x0 itself
    assert torch.allclose(a**2 + sig**2, torch.ones_like(a))  # variance preserving
    assert (a[1:] <= a[:-1]).all()
    assert a[-1] < 0.01  # (nearly) pure noise at t = 1


def test_linear_discrete_matches_ddpm_cumprod():
    s = NoiseSchedule("linear", 1000)
    betas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64)
    ab = torch.cumprod(1 - betas, 0)
    for i in (0, 1, 9, 99, 499, 999):
        t = torch.tensor((i + 1) / 1000, dtype=torch.float64)
        assert torch.isclose(s.log_alpha_bar(t).exp(), ab[i], rtol=1e-12)
    # known values of Ho et al.'s schedule
    assert math.isclose(float(ab[0]), 1 - 1e-4, rel_tol=1e-12)
    assert float(ab[-1]) == pytest.approx(4.04e-5, rel=0.01)


def test_cosine_closed_form_midpoint():
    s = NoiseSchedule("cosine", 1000)
    f = lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2  # noqa: E731
    for t in (0.25, 0.5, 0.75):
        assert float(s.log_alpha_bar(torch.tensor(t)).exp()) == pytest.approx(f(t) / f(0.0), rel=1e-12)


def test_sample_t_on_grid_and_curriculum():
    s = NoiseSchedule("cosine", 1000)
    g = torch.Generator().manual_seed(0)
    t = s.sample_t(4096, g)
    assert ((t * 1000).round() == t * 1000).all() and t.min() >= 1 / 1000 and t.max() <= 1
    t_hi = s.sample_t(4096, g, t_min=0.7)
    assert t_hi.min() >= 0.7
    t_lo = s.sample_t(4096, g, low_noise_bias=2.0)
    assert t_lo.mean() < t.mean()


def _oracle(x0: torch.Tensor):
    """A denoiser that knows the clean signal."""
    return lambda x, t: x0.expand_as(x)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_sampler_with_oracle_recovers_clean(sampler):
    s = NoiseSchedule("cosine", 1000)
    g = torch.Generator().manual_seed(1)
    x0 = torch.randn(2, 1, 64, generator=g) * 0.3
    x = torch.randn(2, 1, 64, generator=g)
    out = run_sampler(sampler, _oracle(x0), x, s.timegrid(10), s, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(out, x0, atol=1e-6)


@pytest.mark.parametrize("sampler", ["ddim", "dpmpp_2m"])
def test_deterministic_samplers_invert_true_noise(sampler):
    """Noise x0 with eps to t, then a denoiser that uses the true eps: one ODE step lands on x0 exactly,
    and every intermediate state stays on the same noise trajectory."""
    s = NoiseSchedule("linear", 1000)
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(3, 1, 128, generator=g, dtype=torch.float64) * 0.5
    eps = torch.randn(3, 1, 128, generator=g, dtype=torch.float64)

    def true_eps_denoiser(x, t):
        a, sig = s.alpha_sigma(t[0])
        return (x - float(sig) * eps) / float(a)

    ts = s.timegrid(7, t_start=0.9)
    x = add_noise(s, x0, ts[0].expand(3), eps)
    fn = sample_ddim if sampler == "ddim" else sample_dpmpp_2m
    out = fn(true_eps_denoiser, x, ts, s)
    assert torch.allclose(out, x0, atol=1e-9)


def test_ddpm_ancestral_is_seeded():
    s = NoiseSchedule("cosine", 1000)
    x0 = torch.zeros(1, 1, 32)
    den = lambda x, t: x * 0.5  # noqa: E731  (any denoiser; the noise draws are what is tested)
    a = SAMPLERS["ddpm"](den, torch.ones(1, 1, 32), s.timegrid(20), s, generator=torch.Generator().manual_seed(5))
    b = SAMPLERS["ddpm"](den, torch.ones(1, 1, 32), s.timegrid(20), s, generator=torch.Generator().manual_seed(5))
    c = SAMPLERS["ddpm"](den, torch.ones(1, 1, 32), s.timegrid(20), s, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert x0.shape == a.shape


def test_schedule_save_reload_gives_identical_steps():
    s = NoiseSchedule("linear", 1000)
    s2 = NoiseSchedule.from_config(json.loads(json.dumps(s.to_config())))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, 64, generator=g)
    den = lambda x, t: torch.tanh(x) * 0.9  # noqa: E731
    ts = s.timegrid(12)
    assert torch.equal(sample_dpmpp_2m(den, x, ts, s), sample_dpmpp_2m(den, x, s2.timegrid(12), s2))


@pytest.mark.parametrize("prediction", ["v", "eps", "x0"])
def test_denoiser_parameterisations_are_consistent(prediction):
    """A network that outputs the exact target (v or eps) yields the exact x0."""
    s = NoiseSchedule("cosine", 1000)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(2, 1, 16, generator=g) * 0.3
    eps = torch.randn(2, 1, 16, generator=g)
    t = torch.tensor([0.3, 0.7], dtype=torch.float64)
    a, sig = s.alpha_sigma(t)
    a, sig = a.float().view(-1, 1, 1), sig.float().view(-1, 1, 1)
    target = {"v": a * eps - sig * x0, "eps": eps, "x0": x0}[prediction]

    class Exact(torch.nn.Module):
        def forward(self, x, t, cond=None, mask=None):
            return target

    den = Denoiser(Exact(), s, prediction)
    assert torch.allclose(den(a * x0 + sig * eps, t), x0, atol=1e-5)
    assert torch.allclose(den.loss(x0, t, eps), torch.zeros(2), atol=1e-10)


def test_stft_loss_zero_for_identical_and_positive_for_hiss():
    g = torch.Generator().manual_seed(0)
    x = torch.sin(torch.linspace(0, 200, 4096))[None] * torch.exp(-torch.linspace(0, 8, 4096))[None]
    assert multires_stft_loss(x, x).item() == pytest.approx(0.0, abs=1e-6)
    hiss = x + 0.01 * torch.randn(x.shape, generator=g)
    assert multires_stft_loss(hiss, x).item() > 0.1


def test_reject_images_dips_only_the_upsampler_bands():
    import numpy as np

    from trainer.families.waveform_diffusion.generator import reject_images

    sr, n = 44100, 45056
    t = np.arange(n) / sr

    def level(x, f):
        return np.abs(np.sum(x * np.exp(-2j * np.pi * f * t))) / n

    for f, expect_db in ((sr / 16, -25.0), (2 * sr / 16, -25.0), (1000.0, -0.5), (4000.0, -0.5), (60.0, -0.5)):
        x = np.sin(2 * np.pi * f * t).astype(np.float32)
        y = reject_images(x, sr, 16, depth_db=30.0)
        change = 20 * np.log10(level(y, f) / level(x, f))
        assert (change < expect_db) if expect_db < -1 else (change > expect_db), (f, change)
    batch = np.stack([np.sin(2 * np.pi * 2756.25 * t)] * 2)
    assert reject_images(batch, sr, 16).shape == batch.shape


def test_finish_kick_removes_subsonic_drift_and_keeps_the_body():
    import numpy as np

    from trainer.generator import finish_kick

    sr, n = 44100, 45056
    t = np.arange(n) / sr
    body = np.sin(2 * np.pi * 50 * t) * np.exp(-t / 0.05)  # -120 dB by the tail window
    drift = 10 ** (-50 / 20) * np.sin(2 * np.pi * 3 * t)  # the floor a model can leave under the tail
    tail = slice(int(0.7 * sr), int(0.95 * sr))

    def tail_db(x):
        return 20 * np.log10(np.sqrt(np.mean(x[tail] ** 2)) + 1e-12)

    raw = finish_kick(body + drift, sr, highpass_hz=0)
    done = finish_kick(body + drift, sr)
    assert tail_db(raw) > -60 and tail_db(done) < tail_db(raw) - 30, (tail_db(raw), tail_db(done))
    # the 50 Hz body keeps its level: within 1.5 dB after peak normalisation (a causal filter turns its
    # phase by about 34 degrees, as any DAW's does, which moves the peak; a filter at 100 Hz would cost 12 dB)
    early = slice(int(0.02 * sr), int(0.15 * sr))
    assert abs(20 * np.log10(np.std(done[early]) / np.std(raw[early]))) < 1.5
    assert done[-1] == 0.0 and abs(np.abs(done).max() - 10 ** (-1 / 20)) < 1e-4
    # a loud clip (a model may overshoot 1.0) is filtered, not clipped: torchaudio's biquads clamp to [-1, 1]
    loud, quiet = finish_kick(3.0 * np.stack([body, body]), sr), finish_kick(body, sr)
    assert loud.shape == (2, n) and np.abs(loud - quiet).max() < 1e-6
    # finite output from a broken clip; silence stays silence
    assert np.all(finish_kick(np.full(n, np.nan), sr) == 0.0)
