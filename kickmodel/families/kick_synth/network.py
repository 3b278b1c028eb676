"""The prior's denoiser: the residual MLP latent diffusion also uses (kickmodel.families.mlp_denoiser), over the
synth's (normalised) numbers: as many as the config's synth version has (synth.n_params).

Its buffers latent_mean / latent_std hold the training fits' per-number mean and spread.

Served on the CPU, it runs eight kicks a call (kickmodel.batching.RENDER_ROWS rows, one thread), not a kick a call
as the bundled model's MLP does: a kick-synth kick is so cheap that the MLP's per-call cost was half of what eight
kicks took (six steps of eight calls), and a call of eight rows costs little more than a call of one (the prior's
sampling, 2-core dev box: one kick 5.2 -> 8.3 ms, eight 34 -> 8 ms). Each kick is still the same bits alone and
at every position of any batch (tests/kickmodel/test_batch_independence.py)."""

from __future__ import annotations

from ...config import Config
from ..mlp_denoiser import MLPDenoiser
from .synth import n_params


def prior_net(cfg: Config) -> MLPDenoiser:
    net = MLPDenoiser(cfg.model, n_params(cfg.synth.version), len(cfg.controls))
    net.per_kick_on_cpu = False  # eight kicks in one call a step (the module docstring)
    return net
