"""Serving the waveform U-Net: diffusion straight in the waveform, paired with the waveform codec
(kickmodel.codecs.identity: the clip scaled into the denoiser's units, and the output stage's image dip)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact
from ...codecs.identity import WaveformCodec
from ...diffusion import Denoiser
from ...generator import Hook, Item
from ..diffusion_common import DiffusionGenerator
from .network import WaveUNet


class WaveformDiffusionGenerator(DiffusionGenerator):
    family = "waveform_diffusion"

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config_of("denoiser")
        net = WaveUNet(cfg.model, n_controls=len(cfg.controls))
        artifact.load_part(net, "denoiser")
        super().__init__(artifact, device, Denoiser.from_config(net, cfg.diffusion), artifact.config.sampling)
        self.latent_shape = (1, self.length)
        # the image dip belongs to the strided-convolution output stage; a filter bank has no images to dip
        dip = artifact.config.sampling.image_reject_db if cfg.model.io == "conv" else 0.0
        self.codec = WaveformCodec(cfg.diffusion.data_scale, self.sample_rate, cfg.model.patch, dip)

    def to_latent(self, audio: torch.Tensor, hook: Hook) -> torch.Tensor:
        return self.codec.encode(audio, hook)

    def from_latent(self, z: torch.Tensor, items: Sequence[Item], hook: Hook) -> np.ndarray:
        return self.codec.decode(z, hook)

