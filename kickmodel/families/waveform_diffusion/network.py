"""A compact 1-D U-Net over the raw waveform, `net(x_t, t, cond=None, cond_mask=None) -> x0, v or eps`.

What shapes it (see NOTES.md, "a first naive waveform diffusion"):
- the waveform enters and leaves through overlapping learned down/up-sampling (kernel larger than
  stride) and a short full-rate smoothing filter, not a plain reshape: a reshape leaves tones at
  sample_rate / patch;
- Fourier features of the position in the clip are added at the input: every kick is onset
  aligned, so "how long after the onset" is information the network needs;
- dilated convolutions, several halvings and self-attention at the lowest resolution give a
  receptive field that covers the whole clip;
- the noise level and the optional conditioning vector (controls, each with a presence mask so
  one network learns conditional and unconditional, for classifier-free guidance) modulate every
  block with an adaptive scale and shift.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..diffusion_common import timestep_embedding
from .config import UNetConfig
from .pqmf import PQMF


def _groups(c: int) -> int:
    for g in (16, 8, 4, 2):
        if c % g == 0:
            return g
    return 1


def position_features(n: int, count: int, device: torch.device) -> torch.Tensor:
    """[2*count, n] sin/cos of the position in the clip at octave-spaced frequencies."""
    pos = torch.linspace(0.0, 1.0, n, device=device)
    k = 2.0 ** torch.arange(count, device=device, dtype=torch.float32) * math.pi
    args = k[:, None] * pos[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=0)


class ResBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, emb_dim: int, dilations: tuple[int, ...], dropout: float) -> None:
        super().__init__()
        self.norm_in = nn.GroupNorm(_groups(c_in), c_in)
        self.conv_in = nn.Conv1d(c_in, c_out, 3, padding=1)
        self.emb = nn.Linear(emb_dim, 2 * c_out)
        self.layers = nn.ModuleList()
        for d in dilations:
            self.layers.append(nn.Sequential(
                nn.GroupNorm(_groups(c_out), c_out), nn.SiLU(), nn.Dropout(dropout),
                nn.Conv1d(c_out, c_out, 3, padding=d, dilation=d)))
        nn.init.zeros_(self.layers[-1][-1].weight)
        nn.init.zeros_(self.layers[-1][-1].bias)
        self.skip = nn.Conv1d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(F.silu(self.norm_in(x)))
        scale, shift = self.emb(emb)[:, :, None].chunk(2, dim=1)
        h = h * (1 + scale) + shift
        for layer in self.layers:
            h = h + layer(h)
        return self.skip(x) + h


class Attention(nn.Module):
    def __init__(self, c: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(_groups(c), c)
        self.qkv = nn.Conv1d(c, 3 * c, 1)
        self.out = nn.Conv1d(c, c, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor, emb: torch.Tensor | None = None) -> torch.Tensor:
        b, c, n = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, n).transpose(-1, -2).unbind(1)
        h = F.scaled_dot_product_attention(q, k, v)  # [b, heads, n, c/heads]
        return x + self.out(h.transpose(-1, -2).reshape(b, c, n))


class WaveUNet(nn.Module):
    """The network of family "waveform_diffusion"."""

    # a whole kick's samples through every level: its work grows with every row and fills the cores at one
    # (52 ms for one row, 336 ms for eight, the fixture model on the 2-core dev box): kickmodel.batching
    per_kick_on_cpu = True

    def __init__(self, cfg: UNetConfig, n_controls: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        w = cfg.widths
        self.n_controls = n_controls
        self.grad_checkpointing = False
        e = cfg.emb_dim
        self.t_mlp = nn.Sequential(nn.Linear(e, 2 * e), nn.SiLU(), nn.Linear(2 * e, e))
        if self.n_controls:
            self.c_mlp = nn.Sequential(nn.Linear(2 * self.n_controls, 2 * e), nn.SiLU(), nn.Linear(2 * e, e))
        pad = (cfg.patch_kernel - cfg.patch) // 2
        self.pqmf = PQMF(cfg.patch, cfg.pqmf_taps) if cfg.io == "pqmf" else None
        if self.pqmf is not None:  # subbands in, subbands out: nothing upsamples samples (pqmf.py)
            self.inp = nn.Conv1d(cfg.patch, w[0], 3, padding=1)
        else:  # the first design: a learned strided convolution in, a transposed one out
            self.inp = nn.Conv1d(1, w[0], cfg.patch_kernel, stride=cfg.patch, padding=pad)
        self.n_pos = 8
        self.pos = nn.Conv1d(2 * self.n_pos, w[0], 1)

        self.down = nn.ModuleList()
        self.downsample = nn.ModuleList()
        skip_ch = []
        for i, c in enumerate(w):
            blocks = nn.ModuleList(ResBlock(c, c, e, cfg.dilations, cfg.dropout) for _ in range(cfg.blocks_per_level))
            self.down.append(blocks)
            skip_ch.append(c)
            if i < len(w) - 1:
                self.downsample.append(nn.Conv1d(c, w[i + 1], 4, stride=2, padding=1))
        self.mid1 = ResBlock(w[-1], w[-1], e, cfg.dilations, cfg.dropout)
        self.mid_attn = Attention(w[-1], cfg.heads) if cfg.attention else None
        self.mid2 = ResBlock(w[-1], w[-1], e, cfg.dilations, cfg.dropout)

        self.up = nn.ModuleList()
        self.upsample = nn.ModuleList()
        for i in reversed(range(len(w))):
            c = w[i]
            blocks = nn.ModuleList()
            for j in range(cfg.blocks_per_level):
                blocks.append(ResBlock(c + (skip_ch[i] if j == 0 else 0), c, e, cfg.dilations, cfg.dropout))
            self.up.append(blocks)
            if i > 0:
                self.upsample.append(nn.Conv1d(c, w[i - 1], 3, padding=1))

        self.out_norm = nn.GroupNorm(_groups(w[0]), w[0])
        if self.pqmf is not None:
            self.out = nn.Conv1d(w[0], cfg.patch, 3, padding=1)
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)
            self.smooth = None
            return
        smooth_ch = 8 if cfg.out_smoothing else 1
        self.out = nn.ConvTranspose1d(w[0], smooth_ch, cfg.patch_kernel, stride=cfg.patch, padding=pad)
        if cfg.out_smoothing:
            k = cfg.out_smoothing
            self.smooth = nn.Conv1d(smooth_ch, 1, k, padding=k // 2)
            nn.init.zeros_(self.smooth.weight)
            nn.init.zeros_(self.smooth.bias)
        else:
            self.smooth = None
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)

    def _block(self, block: nn.Module, h: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        if self.grad_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(block, h, emb, use_reentrant=False)
        return block(h, emb)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None,
                cond_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: [B, 1, L] noisy waveform; t: [B] noise level in [0, 1]; cond, cond_mask: [B, n_controls]
        (values in 0..1; mask 1 where the control is given, 0 where not). Returns [B, 1, L]."""
        emb = self.t_mlp(timestep_embedding(t, self.cfg.emb_dim).to(x.dtype))
        if self.n_controls:
            b = x.shape[0]
            if cond is None:
                cond = x.new_zeros(b, self.n_controls)
                cond_mask = x.new_zeros(b, self.n_controls)
            elif cond_mask is None:
                cond_mask = torch.ones_like(cond)
            c = torch.cat([cond.to(x.dtype) * cond_mask.to(x.dtype), cond_mask.to(x.dtype)], dim=1)
            emb = emb + self.c_mlp(c)
        h = self.inp(self.pqmf.analysis(x) if self.pqmf is not None else x)
        h = h + self.pos(position_features(h.shape[-1], self.n_pos, h.device).to(h.dtype))[None]
        skips = []
        for i, blocks in enumerate(self.down):
            for blk in blocks:
                h = self._block(blk, h, emb)
            skips.append(h)
            if i < len(self.downsample):
                h = self.downsample[i](h)
        h = self._block(self.mid1, h, emb)
        if self.mid_attn is not None:
            h = self.mid_attn(h)
        h = self._block(self.mid2, h, emb)
        for j, blocks in enumerate(self.up):
            for k, blk in enumerate(blocks):
                if k == 0:
                    h = torch.cat([h, skips.pop()], dim=1)
                h = self._block(blk, h, emb)
            if j < len(self.upsample):
                h = self.upsample[j](F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.out(F.silu(self.out_norm(h)))
        if self.pqmf is not None:
            return self.pqmf.synthesis(h)
        if self.smooth is not None:
            h = self.smooth(h)
        return h

