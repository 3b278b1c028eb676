"""The denoiser over one vector per kick, which two families share: `net(z_t, t, cond=None, cond_mask=None)` over
normalised vectors [B, D] (latent diffusion: a mel-VAE's latents; kick-synth: the synth's numbers), a residual MLP
whose blocks are modulated by the noise level and the controls (the U-Net's residual blocks with linear layers in
place of convolutions: there is no time axis left to convolve). `MLPDenoiserConfig` is its config section (`model`).

It also holds the vectors' normalisation (per-dimension mean and spread of the training set's vectors, measured
once when a run starts): buffers, so they travel in checkpoints and in the artifact's `denoiser` part with the
weights they belong to.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .diffusion_common import timestep_embedding


@dataclass(frozen=True)
class MLPDenoiserConfig:
    """The residual MLP's size: `width` of its hidden vector, `blocks` modulated residual blocks, `emb_dim` of the
    noise level's and the controls' embedding, `dropout` inside each block."""

    width: int = 256
    blocks: int = 4
    emb_dim: int = 128
    dropout: float = 0.0


class ResMLPBlock(nn.Module):
    def __init__(self, width: int, emb_dim: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.emb = nn.Linear(emb_dim, 2 * width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)
        self.drop = nn.Dropout(dropout)
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, h: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        scale, shift = self.emb(emb).chunk(2, dim=1)
        x = self.norm(h) * (1 + scale) + shift
        return h + self.fc2(self.drop(torch.nn.functional.silu(self.fc1(x))))


class MLPDenoiser(nn.Module):
    # one row at a time on the CPU (kickmodel.batching): the bundled model's eight kicks cost 1.3 s, which eight rows
    # do not move (1,366 vs 1,319 ms through the daemon, 2-core dev box), while its bits would change. The
    # kick-synth's prior runs at eight rows instead (kick_synth/network.py): once on one thread (below), eight rows
    # cost its one kick 3 ms and save its eight kicks 26 ms. (Measured on two threads, eight rows had cost one kick
    # 10-20 ms and saved eight nothing: the sleeping second thread's wake-ups.)
    per_kick_on_cpu = True
    one_thread_on_cpu = True  # too small to split: a second (sleeping) OpenMP thread costs more than it saves

    def __init__(self, cfg: MLPDenoiserConfig, dim: int, n_controls: int) -> None:
        super().__init__()
        e = cfg.emb_dim
        self.cfg, self.dim, self.n_controls = cfg, dim, n_controls
        self.t_mlp = nn.Sequential(nn.Linear(e, 2 * e), nn.SiLU(), nn.Linear(2 * e, e))
        if n_controls:
            self.c_mlp = nn.Sequential(nn.Linear(2 * n_controls, 2 * e), nn.SiLU(), nn.Linear(2 * e, e))
        self.inp = nn.Linear(dim, cfg.width)
        self.blocks = nn.ModuleList(ResMLPBlock(cfg.width, e, cfg.dropout) for _ in range(cfg.blocks))
        self.out_norm = nn.LayerNorm(cfg.width)
        self.out = nn.Linear(cfg.width, dim)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.register_buffer("latent_mean", torch.zeros(dim))
        self.register_buffer("latent_std", torch.ones(dim))

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None,
                cond_mask: torch.Tensor | None = None) -> torch.Tensor:
        emb = self.t_mlp(timestep_embedding(t, self.cfg.emb_dim).to(x.dtype))
        if self.n_controls:
            if cond is None:
                cond = x.new_zeros(x.shape[0], self.n_controls)
                cond_mask = torch.zeros_like(cond)
            elif cond_mask is None:
                cond_mask = torch.ones_like(cond)
            c = torch.cat([cond.to(x.dtype) * cond_mask.to(x.dtype), cond_mask.to(x.dtype)], dim=1)
            emb = emb + self.c_mlp(c)
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h, emb)
        return self.out(torch.nn.functional.silu(self.out_norm(h)))

    def normalise(self, mu: torch.Tensor) -> torch.Tensor:
        return (mu - self.latent_mean) / self.latent_std

    def denormalise(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.latent_std + self.latent_mean
