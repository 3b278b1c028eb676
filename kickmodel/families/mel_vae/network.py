"""The mel-VAE: a 1-D convolutional encoder over mel frames to one latent vector per kick, a decoder
back to the log-mel, a small learned prior p(z | controls), and the ELBO's terms.

Kicks are onset-aligned, so the encoder keeps where in the clip things happen: after the strided
convolutions the frames are flattened (not pooled) into the linear layer that gives the posterior's
mean and log-variance; the decoder mirrors it (linear, then nearest-neighbour upsampling of frames
and convolutions). Upsampling happens over mel frames, never over audio samples: the audio comes from
the inverter.

ELBO (Kingma & Welling 2014) as trained here, per kick:
    recon  = mean over mel bins of |x - x_hat| (l1) or (x - x_hat)^2 (l2), in normalised log-mel units
    KL_d   = 0.5 (mu_d^2 + sigma_d^2 - 1 - log sigma_d^2)          (closed form against N(0, 1))
    loss   = recon + beta_t * sum_d max(mean_batch KL_d, free_bits)  (free bits: Kingma et al. 2016)
    beta_t = beta * min(1, step / kl_warmup_steps)                     (KL warm-up: Bowman et al. 2016)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from .config import MelConfig, PriorConfig, VAEConfig


def _groups(c: int) -> int:
    for g in (16, 8, 4, 2):
        if c % g == 0:
            return g
    return 1


# ---------------------------------------------------------------- the ELBO's terms


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, exp(logvar)) || N(0, 1)) per dimension, same shape as mu (nats)."""
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar)


def free_bits_kl(kl: torch.Tensor, free_bits: float) -> torch.Tensor:
    """sum_d max(mean over the batch of KL[:, d], free_bits): dimensions below free_bits nats are not
    pushed further down (against posterior collapse). kl: [B, D] -> scalar."""
    return kl.mean(0).clamp(min=free_bits).sum()


def kl_beta(step: int, beta: float, warmup_steps: int) -> float:
    """The KL weight at a training step: linear warm-up from 0 to beta over warmup_steps."""
    if warmup_steps <= 0:
        return beta
    return beta * min(1.0, step / warmup_steps)


def recon_error(x_hat: torch.Tensor, x: torch.Tensor, kind: str = "l1",
                band_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Per-kick mean reconstruction error over all mel bins: [B, n_mels, frames] -> [B]. band_weights
    [n_mels] (mean 1) weights each band's error."""
    d = x_hat.float() - x.float()
    e = d.abs() if kind == "l1" else d.pow(2)
    if band_weights is not None:
        e = e * band_weights.to(e)[:, None]
    return e.flatten(1).mean(1)


def _magnitude(u: torch.Tensor, floor_db: float) -> torch.Tensor:
    """Normalised log-mel (MelFrontEnd's units) -> linear mel magnitude."""
    db = (u.float() + 1.0) / 2.0 * (-floor_db) + floor_db
    return torch.pow(10.0, db / 20.0)


def linear_error(x_hat: torch.Tensor, x: torch.Tensor, floor_db: float) -> torch.Tensor:
    """Per-kick relative L1 error of linear mel magnitudes, sum |S^ - S| / sum S: [B, n_mels, frames] of
    normalised log-mel (MelFrontEnd's units) -> [B]. The prediction is clamped a little beyond the unit
    range first, so a wild output cannot overflow the exponential (the log term pulls it back)."""
    s, s_hat = _magnitude(x, floor_db), _magnitude(x_hat.clamp(-1.5, 1.5), floor_db)
    return (s_hat - s).abs().flatten(1).sum(1) / s.flatten(1).sum(1).clamp(min=1e-8)


def low_centroid_error(x_hat: torch.Tensor, x: torch.Tensor, centres_hz: torch.Tensor, low_hz: float,
                       floor_db: float) -> torch.Tensor:
    """Per-kick error of the body's frequency track, in octaves: frame by frame, the centroid (on a log2
    Hz axis) of the linear mel magnitudes in the bands centred below low_hz, where a kick's body and its
    pitch sweep are; |decoded - real|, averaged over frames weighted by the real kick's level in those
    bands (its silent frames do not count). [B, n_mels, frames] -> [B].

    The mel errors count a band's level, not where the level sits among the low bands: a decoder whose
    bands are each 1-3 dB off can move the strongest one and lose the sweep (MODEL_CARD.md)."""
    low = centres_hz < low_hz
    logf = torch.log2(centres_hz[low].clamp(min=1.0)).to(x.device).float()[None, :, None]
    s, s_hat = _magnitude(x[:, low], floor_db), _magnitude(x_hat[:, low].clamp(-1.5, 1.5), floor_db)
    c = (s * logf).sum(1) / s.sum(1).clamp(min=1e-8)
    c_hat = (s_hat * logf).sum(1) / s_hat.sum(1).clamp(min=1e-8)
    w = s.sum(1)
    return (w * (c_hat - c).abs()).sum(1) / w.sum(1).clamp(min=1e-8)


def band_weights(centres_hz: torch.Tensor, low_hz: float, low_weight: float) -> torch.Tensor | None:
    """Weights per mel band: low_weight below low_hz, 1 above, scaled to mean 1 (None when all equal)."""
    if low_weight == 1.0:
        return None
    w = torch.ones_like(centres_hz)
    w[centres_hz < low_hz] = float(low_weight)
    return w / w.mean()


def active_dims(mu: torch.Tensor, threshold: float = 0.01) -> int:
    """Latent dimensions whose posterior mean varies across kicks (Burda et al. 2016's activity)."""
    if mu.shape[0] < 2:
        return 0
    return int((mu.float().var(0) > threshold).sum())


# ---------------------------------------------------------------- layers


class ResBlock1d(nn.Module):
    def __init__(self, c: int, kernel: int, dilation: int = 1) -> None:
        super().__init__()
        pad = dilation * (kernel // 2)
        self.net = nn.Sequential(
            nn.GroupNorm(_groups(c), c), nn.SiLU(), nn.Conv1d(c, c, kernel, padding=pad, dilation=dilation),
            nn.GroupNorm(_groups(c), c), nn.SiLU(), nn.Conv1d(c, c, kernel, padding=kernel // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


def latent_frames(frames: int, levels: int) -> int:
    n = frames
    for _ in range(levels - 1):
        n = (n + 1) // 2
    return n


class Encoder(nn.Module):
    def __init__(self, mel: MelConfig, cfg: VAEConfig, frames: int) -> None:
        super().__init__()
        c = cfg.channels
        self.grad_checkpointing = False
        self.inp = nn.Conv1d(mel.n_mels, c[0], cfg.kernel, padding=cfg.kernel // 2)
        self.levels = nn.ModuleList()
        for i, ch in enumerate(c):
            blocks = [ResBlock1d(ch, cfg.kernel, dilation=3 ** (j % 2)) for j in range(cfg.blocks_per_level)]
            down = [nn.Conv1d(ch, c[i + 1], 4, stride=2, padding=1)] if i < len(c) - 1 else []
            self.levels.append(nn.Sequential(*blocks, *down))
        self.t_lat = latent_frames(frames, len(c))
        self.norm = nn.GroupNorm(_groups(c[-1]), c[-1])
        self.head = nn.Linear(c[-1] * self.t_lat, 2 * cfg.latent_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, n_mels, frames] -> (mu, logvar), each [B, latent_dim]."""
        h = self.inp(x)
        for level in self.levels:
            h = checkpoint(level, h, use_reentrant=False) if self.grad_checkpointing and self.training else level(h)
        h = F.silu(self.norm(h))
        mu, logvar = self.head(h.flatten(1)).chunk(2, dim=1)
        return mu, logvar.clamp(-12.0, 8.0)


class Decoder(nn.Module):
    def __init__(self, mel: MelConfig, cfg: VAEConfig, frames: int) -> None:
        super().__init__()
        c = cfg.channels
        self.grad_checkpointing = False
        self.frames = frames
        self.t_lat = latent_frames(frames, len(c))
        self.inp = nn.Linear(cfg.latent_dim, c[-1] * self.t_lat)
        self.levels = nn.ModuleList()
        self.ups = nn.ModuleList()
        for i in reversed(range(len(c))):
            self.levels.append(nn.Sequential(*[ResBlock1d(c[i], cfg.kernel, dilation=3 ** (j % 2))
                                               for j in range(cfg.blocks_per_level)]))
            if i > 0:
                self.ups.append(nn.Conv1d(c[i], c[i - 1], 3, padding=1))
        self.norm = nn.GroupNorm(_groups(c[0]), c[0])
        self.out = nn.Conv1d(c[0], mel.n_mels, cfg.kernel, padding=cfg.kernel // 2)
        self.channels = c

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """[B, latent_dim] -> [B, n_mels, frames] normalised log-mel."""
        h = self.inp(z).reshape(z.shape[0], self.channels[-1], self.t_lat)
        sizes = [self.frames]
        for _ in range(len(self.channels) - 1):
            sizes.append((sizes[-1] + 1) // 2)
        sizes = sizes[::-1]  # frames per level, coarsest first
        for i, level in enumerate(self.levels):
            h = checkpoint(level, h, use_reentrant=False) if self.grad_checkpointing and self.training else level(h)
            if i < len(self.ups):
                h = self.ups[i](F.interpolate(h, size=sizes[i + 1], mode="nearest"))
        return self.out(F.silu(self.norm(h)))


class MixturePrior(nn.Module):
    """p(z | controls) = sum_k w_k N(m_k, s_k^2): an MLP gives w, m, log s from the controls and their
    presence mask (all zero: the unconditional prior)."""

    def __init__(self, cfg: PriorConfig, latent_dim: int, n_controls: int) -> None:
        super().__init__()
        self.k, self.d = cfg.components, latent_dim
        self.net = nn.Sequential(nn.Linear(max(2 * n_controls, 1), cfg.hidden), nn.SiLU(),
                                 nn.Linear(cfg.hidden, cfg.hidden), nn.SiLU(),
                                 nn.Linear(cfg.hidden, self.k * (1 + 2 * latent_dim)))
        self.n_controls = n_controls

    def params(self, cond: torch.Tensor | None, mask: torch.Tensor | None, n: int,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log weights [n, K], means [n, K, D], log scales [n, K, D])."""
        if self.n_controls == 0:
            inp = torch.zeros(n, 1, device=device)
        else:
            if cond is None:
                cond = torch.zeros(n, self.n_controls, device=device)
                mask = torch.zeros_like(cond)
            elif mask is None:
                mask = torch.ones_like(cond)
            inp = torch.cat([cond * mask, mask], dim=1).float()
        out = self.net(inp)
        logits, rest = out[:, : self.k], out[:, self.k:].reshape(n, self.k, 2, self.d)
        return F.log_softmax(logits, dim=1), rest[:, :, 0], rest[:, :, 1].clamp(-7.0, 3.0)

    def nll(self, z: torch.Tensor, cond: torch.Tensor | None, mask: torch.Tensor | None) -> torch.Tensor:
        """-log p(z | controls) per kick [B] (nats)."""
        logw, m, logs = self.params(cond, mask, z.shape[0], z.device)
        zz = z[:, None, :].float()
        log_n = -0.5 * ((zz - m) / logs.exp()).pow(2) - logs - 0.5 * math.log(2 * math.pi)
        return -torch.logsumexp(logw + log_n.sum(-1), dim=1)

    @torch.no_grad()
    def sample(self, cond: torch.Tensor | None, mask: torch.Tensor | None, generators: list[torch.Generator],
               temperature: float = 1.0) -> torch.Tensor:
        """One z per generator (each kick from its own seeded CPU generator)."""
        n = len(generators)
        device = next(self.parameters()).device
        logw, m, logs = self.params(cond, mask, n, device)
        out = []
        for i, g in enumerate(generators):
            k = int(torch.multinomial(logw[i].exp().float().cpu(), 1, generator=g))
            eps = torch.randn(self.d, generator=g).to(device)
            out.append(m[i, k] + temperature * logs[i, k].exp() * eps)
        return torch.stack(out)


class MelVAE(nn.Module):
    """Encoder, decoder and learned prior: the artifact's `vae` part."""

    # convolutions over a whole kick's mel: the work grows with every row (its decoder: 6.6 ms of CPU time for one
    # row, 20.9 ms for eight on the 2-core dev box), so the CPU runs it one row at a time (kickmodel.batching)
    per_kick_on_cpu = True

    def __init__(self, mel: MelConfig, cfg: VAEConfig, prior: PriorConfig, frames: int, n_controls: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(mel, cfg, frames)
        self.decoder = Decoder(mel, cfg, frames)
        self.prior = MixturePrior(prior, cfg.latent_dim, n_controls)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z)
