"""Serving the waveform U-Net: diffusion straight in the waveform, plus the output stage's image dip."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact
from ...diffusion import Denoiser
from ...generator import Item
from ..diffusion_common import DiffusionGenerator
from .network import WaveUNet


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


class WaveformDiffusionGenerator(DiffusionGenerator):
    family = "waveform_diffusion"

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config_of("denoiser")
        net = WaveUNet(cfg.model, n_controls=len(cfg.controls))
        artifact.load_part(net, "denoiser")
        super().__init__(artifact, device, Denoiser.from_config(net, cfg.diffusion), artifact.config.sampling)
        self.latent_shape = (1, self.length)
        self.scale = cfg.diffusion.data_scale
        self.patch = cfg.model.patch
        # the image dip belongs to the strided-convolution output stage; a filter bank has no images to dip
        self.image_reject_db = artifact.config.sampling.image_reject_db if cfg.model.io == "conv" else 0.0

    def to_latent(self, audio: torch.Tensor) -> torch.Tensor:
        return audio[:, None] * self.scale

    def from_latent(self, z: torch.Tensor, items: Sequence[Item] = ()) -> np.ndarray:
        audio = (z[:, 0] / self.scale).float().cpu().numpy()
        if self.image_reject_db > 0:
            audio = reject_images(audio, self.sample_rate, self.patch, self.image_reject_db)
        return audio

