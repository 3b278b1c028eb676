"""The prior's denoiser: the latent-diffusion family's residual MLP over the synth's (normalised) numbers.

Its buffers latent_mean / latent_std hold the training fits' per-number mean and spread."""

from __future__ import annotations

from ..latent_diffusion.network import LatentDenoiserNet
from .synth import N_PARAMS


def prior_net(cfg, n_controls: int) -> LatentDenoiserNet:
    return LatentDenoiserNet(cfg, N_PARAMS, n_controls)
