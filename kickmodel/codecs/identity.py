"""The waveform as its own latent: waveform diffusion's codec. encode scales the clip into the denoiser's units;
decode scales back and, for a model whose output stage is a strided transposed convolution, dips the images that
stage leaves at multiples of sample_rate / patch (reject_images)."""

from __future__ import annotations

import numpy as np
import torch

from ..generator import Hook


def reject_images(audio: np.ndarray, sample_rate: int, period: int, depth_db: float = 30.0,
                  width_hz: float = 200.0) -> np.ndarray:
    """Attenuate bands around multiples of sample_rate / period (zero phase, FFT domain).

    A network whose output layer upsamples frames of `period` samples leaves images of the signal
    around those frequencies (for the 16-sample frames of the waveform U-Net: 2756, 5512, 8269 Hz,
    ...: the body's frequency as sidebands of each). Each band gets a Gaussian dip of depth_db at
    its centre and width_hz standard deviation; the rest of the spectrum is untouched."""
    x = np.atleast_2d(np.asarray(audio, dtype=np.float64))
    n = x.shape[1]
    pad = n + 8192  # no wrap-around of the filter's short ring
    freqs = np.fft.rfftfreq(pad, 1.0 / sample_rate)
    f0 = sample_rate / period
    gain = np.ones_like(freqs)
    depth = 1.0 - 10 ** (-depth_db / 20)
    k = 1
    while k * f0 < sample_rate / 2:
        gain *= 1.0 - depth * np.exp(-0.5 * ((freqs - k * f0) / width_hz) ** 2)
        k += 1
    y = np.fft.irfft(np.fft.rfft(x, pad, axis=1) * gain, pad, axis=1)[:, :n]
    out = y.astype(np.float32)
    return out[0] if np.ndim(audio) == 1 else out


class WaveformCodec:
    """audio [n, length] <-> [n, 1, length] in the denoiser's units (scale: its data_scale). image_reject_db > 0 dips
    the output stage's images at multiples of sample_rate / patch on the way back (0: off)."""

    def __init__(self, scale: float, sample_rate: int, patch: int, image_reject_db: float = 0.0) -> None:
        self.scale = float(scale)
        self.sample_rate = int(sample_rate)
        self.patch = int(patch)
        self.image_reject_db = float(image_reject_db)

    def encode(self, audio: torch.Tensor, hook: Hook | None = None) -> torch.Tensor:
        return audio[:, None] * self.scale

    def decode(self, z: torch.Tensor, hook: Hook | None = None) -> np.ndarray:
        audio = (z[:, 0] / self.scale).float().cpu().numpy()
        if self.image_reject_db > 0:
            audio = reject_images(audio, self.sample_rate, self.patch, self.image_reject_db)
        return audio
