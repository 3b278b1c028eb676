"""The prior's denoiser: the residual MLP latent diffusion also uses (kickmodel.families.mlp_denoiser), over the
synth's (normalised) numbers: as many as the config's synth version has (synth.n_params).

Its buffers latent_mean / latent_std hold the training fits' per-number mean and spread."""

from __future__ import annotations

from ...config import Config
from ..mlp_denoiser import MLPDenoiser
from .synth import n_params


def prior_net(cfg: Config) -> MLPDenoiser:
    return MLPDenoiser(cfg.model, n_params(cfg.synth.version), len(cfg.controls))
