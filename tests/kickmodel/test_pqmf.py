"""The pseudo-QMF bank the waveform U-Net can take its subbands from: near-perfect reconstruction, the
attack at sample 0 included, and no images at multiples of sample_rate / 16 where the first design had them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kickmodel.families.waveform_diffusion.pqmf import PQMF, design, reconstruction_error

SR, N = 44100, 45056


@pytest.fixture(scope="module")
def bank() -> PQMF:
    return PQMF(16, 256)


def _db(x: float) -> float:
    return 20 * np.log10(max(x, 1e-30))


def test_the_prototype_is_near_perfect_reconstruction():
    h = design(16, 256)
    assert _db(reconstruction_error(h, 16)) < -65
    H = np.abs(np.fft.rfft(h, 1 << 16))
    f = np.linspace(0, 0.5, len(H))
    assert _db(H[f > 1.5 / 32].max() / H[0]) < -90  # stopband


def test_analysis_then_synthesis_gives_the_signal_back_from_its_first_sample(bank):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 1, N, generator=g)
    x[..., :4] = 1.0  # an attack right at the start
    y = bank.analysis(x)
    assert y.shape == (2, 16, N // 16 + 2 * bank.edge)
    r = bank.synthesis(y)
    assert r.shape == x.shape
    assert _db((r - x).abs().max().item() / x.abs().max().item()) < -55
    assert _db((r - x)[..., :256].abs().max().item()) < -50


def _image_db(bank: PQMF, change) -> float:
    """A 1 kHz tone through the bank with one band changed: the strongest image at k*sr/16 +- 1 kHz."""
    t = torch.arange(N) / SR
    y = bank.analysis((0.5 * torch.sin(2 * np.pi * 1000 * t))[None, None])
    out = bank.synthesis(change(y))[0, 0].numpy()
    spec = np.abs(np.fft.rfft(out * np.hanning(N)))
    f = np.fft.rfftfreq(N, 1 / SR)
    tone = spec[np.argmin(np.abs(f - 1000))]
    return max(_db(spec[np.abs(f - (k * SR / 16 + s * 1000)) < 20].max() / tone) for k in (1, 2, 3) for s in (-1, 1))


def test_a_changed_band_stays_near_its_band(bank):
    """What the network does to one band leaks only near that band's edge (the tone's mirror at sr/16 - 1 kHz
    is 40 dB down), and nowhere else: the transposed convolution copied it to every multiple."""
    def boost(y):
        y = y.clone()
        y[:, 0] *= 1.3
        return y

    assert _image_db(bank, lambda y: y) < -90
    assert _image_db(bank, boost) < -35
    # the measure sees images when they are there: a stride-16 zero-stuffing upsampler makes them 0 dB
    def zero_stuff(y):
        x = torch.zeros(1, 1, N)
        x[..., ::16] = bank.synthesis(y)[..., ::16] * 16
        return bank.analysis(x)

    assert _image_db(bank, zero_stuff) > -10
