"""Training the waveform U-Net: the shared diffusion objective on the waveform itself."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..diffusion_common import DiffusionObjective, prefixed, unprefixed


class WaveformObjective(DiffusionObjective):
    def to_latent(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, None]  # [B, 1, L]: the U-Net's one input channel

    def artifact_tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return prefixed("denoiser", state_dict)

    def load_init(self, art) -> None:
        self.module.load_state_dict(unprefixed("denoiser", art.tensors), strict=True)
