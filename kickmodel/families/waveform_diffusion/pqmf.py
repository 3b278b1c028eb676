"""A pseudo-QMF filter bank: the waveform in and out of the U-Net as M critically sampled subbands.

Why: the U-Net's first design put the waveform through a learned stride-16 convolution and brought it
back with a stride-16 transposed convolution, which images the signal at multiples of
sample_rate / 16 (Pons et al., "Upsampling artifacts in neural audio synthesis", ICASSP 2021); the
bundled model's kicks carried the images, and the filter that dipped them left notches there. A
cosine-modulated filter bank splits the signal into M bands of sample_rate / M samples per second and
puts them back together with its aliasing cancelled: what the network changes in one band stays
within about one band's width (stopband about -97 dB), instead of being copied to every multiple.

Design (Lin & Vaidyanathan 1998, "A Kaiser window approach for the design of prototype filters of
cosine modulated filterbanks"; Nguyen 1994): a Kaiser-windowed sinc prototype h of TAPS + 1 taps whose
cut-off is chosen so that h convolved with its reverse is as close as possible to a Nyquist(2M)
filter (near-perfect reconstruction: about -70 dB for M = 16, TAPS = 256, beta 9). Analysis filters
h_k[n] = 2 h[n] cos((2k+1) pi/(2M) (n - TAPS/2) + (-1)^k pi/4), synthesis filters with the sign of
the phase term flipped; analysis is a strided convolution, synthesis a strided transposed one.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def prototype(taps: int, cutoff: float, beta: float) -> np.ndarray:
    n = np.arange(taps + 1) - taps / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        h = np.sin(cutoff * math.pi * n) / (math.pi * n)
    h[taps // 2] = cutoff
    return h * np.kaiser(taps + 1, beta)


def reconstruction_error(h: np.ndarray, bands: int) -> float:
    """Largest off-centre sample of (h * reversed h) at multiples of 2M, relative to its centre: 0 for a
    perfect reconstruction bank."""
    g = np.convolve(h, h[::-1])
    c = len(g) // 2
    idx = np.arange(c % (2 * bands), len(g), 2 * bands)
    off = g[idx[idx != c]]
    return float(np.abs(off).max() / g[c])


def design(bands: int, taps: int, beta: float = 9.0, grid: int = 2001) -> np.ndarray:
    """The prototype whose cut-off (searched on a grid in (0.2/M, 1/M)) minimises the reconstruction error."""
    cuts = np.linspace(0.2 / bands, 1.0 / bands, grid)
    errs = [reconstruction_error(prototype(taps, c, beta), bands) for c in cuts]
    return prototype(taps, float(cuts[int(np.argmin(errs))]), beta)


def edge_frames(bands: int, taps: int) -> int:
    """Subband frames kept beyond each end of the clip, so the filters' tails reconstruct its first and last
    samples too (a kick's attack is at its start)."""
    return math.ceil(taps / 2 / bands)


class PQMF(nn.Module):
    """analysis: [B, 1, L] -> [B, M, L / M + 2e]; synthesis: back to [B, 1, L] (L a multiple of M; e =
    edge_frames(M, taps) frames beyond each end, frame j centred on sample (j - e) M)."""

    def __init__(self, bands: int = 16, taps: int = 256, beta: float = 9.0) -> None:
        super().__init__()
        if taps % 2:
            raise ValueError("taps must be even")
        self.bands, self.taps = bands, taps
        self.edge = edge_frames(bands, taps)
        h = design(bands, taps, beta)
        n = np.arange(taps + 1) - taps / 2
        k = np.arange(bands)[:, None]
        phase = (-1.0) ** k * math.pi / 4
        arg = (2 * k + 1) * math.pi / (2 * bands) * n[None, :]
        analysis = 2 * h[None, :] * np.cos(arg + phase)
        synthesis = 2 * h[None, :] * np.cos(arg - phase)
        # fixed filters, rebuilt from the config: not saved with the weights
        self.register_buffer("h_analysis", torch.tensor(analysis[:, None, ::-1].copy(), dtype=torch.float32),
                             persistent=False)
        self.register_buffer("h_synthesis", torch.tensor(synthesis[:, None, :] * bands, dtype=torch.float32),
                             persistent=False)

    def analysis(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.taps // 2 + self.edge * self.bands
        return F.conv1d(F.pad(x, (pad, pad)), self.h_analysis.to(x.dtype), stride=self.bands)

    def synthesis(self, y: torch.Tensor) -> torch.Tensor:
        # the transposed convolution of stride M is the upsample-by-zeros-then-filter of the synthesis bank
        out = F.conv_transpose1d(y, self.h_synthesis.to(y.dtype), stride=self.bands)
        start = self.taps // 2 + self.edge * self.bands
        return out[..., start: start + (y.shape[-1] - 2 * self.edge) * self.bands]
