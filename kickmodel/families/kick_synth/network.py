"""The prior's denoiser: the residual MLP latent diffusion also uses (kickmodel.families.mlp_denoiser), over the
synth's (normalised) numbers.

Its buffers latent_mean / latent_std hold the training fits' per-number mean and spread."""

from __future__ import annotations

from ..mlp_denoiser import MLPDenoiser
from .synth import N_PARAMS


def prior_net(cfg, n_controls: int) -> MLPDenoiser:
    return MLPDenoiser(cfg, N_PARAMS, n_controls)
