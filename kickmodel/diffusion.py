"""Noise schedules, the denoiser wrapper, the training loss, and samplers.

Everything here sees the network only as a callable. Time is continuous, t in [0, 1]
(t = 0 clean, t = 1 pure noise); a discrete DDPM schedule of T steps trains on the grid
t = (i + 1) / T. The process is variance preserving: x_t = alpha(t) x0 + sigma(t) eps with
alpha^2 + sigma^2 = 1. Schedule math is done in float64.

Samplers are pure functions `sample_x(denoise, x, ts, schedule, ...)` where
`denoise(x, t) -> x0_hat` (k-diffusion style). Every sampler's last step to t = 0 returns the
clean estimate itself, never x_t with noise added back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .config import MAX_STEPS

SAMPLER_NAMES = ("ddim", "ddpm", "dpmpp_2m")


@dataclass(frozen=True)
class DiffusionConfig:
    """The diffusion process of a diffusion family (waveform or latent)."""

    schedule: str = "cosine"  # "cosine" | "linear"
    prediction: str = "x0"  # "x0" | "v" | "eps" (x0: see docs/model.md)
    timesteps: int = 1000  # discrete DDPM steps for training; 0 = continuous time
    stft_loss_weight: float = 0.5  # multi-resolution STFT term on the predicted clean signal (low noise)
    data_scale: float = 3.0  # the network sees x0 * data_scale (kicks are quiet on average: RMS ~0.1)
    low_noise_bias: float = 0.0  # > 0 samples low-noise t more often (t = u ** (1 + bias))
    curriculum_steps: int = 0  # > 0: train high-noise levels first, widening to all t by this step
    clip_x0: float = 1.0  # clean estimates are clamped to +- clip_x0 (data units; 0: off)


@dataclass(frozen=True)
class SamplingConfig:
    """A diffusion family's default sampler settings (an export may change them: no retraining)."""

    sampler: str = "dpmpp_2m"  # "ddim" | "ddpm" | "dpmpp_2m"
    steps: int = 25
    guidance: float = 1.0  # classifier-free guidance scale for controls (1: plain conditional)
    # sampling times t_i = (i / steps) ** time_power: < 1 spends more steps at high noise and ends with one
    # x0 estimate from moderate noise. Bundled model, 10 steps: KID 1.89 at 1.0, 1.40 at 0.35 (docs/model.md)
    time_power: float = 0.35



def check_diffusion_config(d: DiffusionConfig, s: SamplingConfig) -> list[tuple[bool, str]]:
    """(ok, message) pairs for the diffusion and sampling sections (used by the diffusion families)."""
    return [
        (d.schedule in ("cosine", "linear"), f"diffusion.schedule {d.schedule!r} is not cosine or linear"),
        (d.prediction in ("v", "eps", "x0"), f"diffusion.prediction {d.prediction!r} is not v, eps or x0"),
        (0 <= d.timesteps <= 100_000, "diffusion.timesteps must be within 0..100000"),
        (d.data_scale > 0, "diffusion.data_scale must be > 0"),
        (d.clip_x0 >= 0, "diffusion.clip_x0 must be >= 0"),
        (s.sampler in SAMPLER_NAMES, f"sampling.sampler {s.sampler!r} is not known"),
        (1 <= s.steps <= MAX_STEPS, f"sampling.steps must be 1..{MAX_STEPS}"),
        (s.time_power > 0, "sampling.time_power must be > 0"),
        (s.guidance >= 0, "sampling.guidance must be >= 0"),
    ]

Denoise = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Generators = torch.Generator | Sequence[torch.Generator] | None

_COSINE_S = 0.008
_LINEAR_BETA = (1e-4, 0.02)
_MIN_ALPHA_BAR = 1e-7  # alpha_bar(1) of the cosine schedule would be exactly 0


@dataclass(frozen=True)
class NoiseSchedule:
    """Variance-preserving schedule: "cosine" (Nichol & Dhariwal 2021) or "linear" (Ho et al. 2020).

    `timesteps` > 0 makes it discrete: training draws t from the grid (i + 1) / T and, for the
    linear schedule, alpha_bar is the exact cumulative product of (1 - beta_i).
    """

    name: str = "cosine"
    timesteps: int = 1000

    def __post_init__(self) -> None:
        if self.name not in ("cosine", "linear"):
            raise ValueError(f"unknown noise schedule {self.name!r}")
        if self.timesteps < 0:
            raise ValueError("timesteps must be >= 0")

    def log_alpha_bar(self, t: torch.Tensor) -> torch.Tensor:
        t = t.to(torch.float64).clamp(0.0, 1.0)
        if self.name == "cosine":
            f = torch.cos((t + _COSINE_S) / (1 + _COSINE_S) * math.pi / 2) ** 2
            f0 = math.cos(_COSINE_S / (1 + _COSINE_S) * math.pi / 2) ** 2
            return torch.log((f / f0).clamp(min=_MIN_ALPHA_BAR, max=1.0))
        b0, b1 = _LINEAR_BETA
        if self.timesteps > 0:
            # Exact DDPM: log alpha_bar at grid point i is sum_{j<=i} log(1 - beta_j); interpolate between.
            T = self.timesteps
            betas = torch.linspace(b0, b1, T, dtype=torch.float64)
            table = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(torch.log1p(-betas), 0)])
            pos = t * T
            lo = pos.floor().clamp(max=T - 1).long()
            w = pos - lo
            return table[lo] * (1 - w) + table[lo + 1] * w
        T = 1000
        return -(b0 * T * t + 0.5 * (b1 - b0) * T * t**2)

    def alpha_sigma(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ab = self.log_alpha_bar(t).exp()
        return ab.sqrt(), (1 - ab).clamp(min=0).sqrt()

    def sample_t(self, n: int, generator: torch.Generator | None = None, *, low_noise_bias: float = 0.0,
                 t_min: float = 0.0) -> torch.Tensor:
        """Training noise levels: uniform on the grid (or on (0, 1]); `t_min` > 0 keeps only high noise."""
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        if low_noise_bias > 0:
            u = u ** (1.0 + low_noise_bias)
        u = t_min + (1.0 - t_min) * u
        if self.timesteps > 0:
            T = self.timesteps
            return ((u * T).floor().clamp(0, T - 1) + 1) / T
        return u.clamp(min=1e-5)

    def timegrid(self, steps: int, t_start: float = 1.0) -> torch.Tensor:
        """steps + 1 times from t_start down to exactly 0 (uniform in t)."""
        if steps < 1:
            raise ValueError("steps must be >= 1")
        return torch.linspace(t_start, 0.0, steps + 1, dtype=torch.float64)


def randn_like(x: torch.Tensor, generator: Generators = None) -> torch.Tensor:
    """Gaussian noise shaped like x, drawn on the CPU so a seed gives the same noise on every device.
    A list of generators draws row i from generator i, so a kick does not depend on its batch-mates."""
    if isinstance(generator, (list, tuple)):
        rows = [torch.randn(x.shape[1:], generator=g) for g in generator]
        return torch.stack(rows).to(x.device, x.dtype)
    return torch.randn(x.shape, generator=generator).to(x.device, x.dtype)


def _bcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    v = v.to(like.device, like.dtype)
    if v.ndim == 0:
        return v
    return v.reshape(-1, *([1] * (like.ndim - 1)))


class Denoiser(torch.nn.Module):
    """Turns a network's raw output (v or eps) into a clean estimate; holds the training loss.

    The network is `net(x_t, t, cond=None, cond_mask=None)` with t in [0, 1].
    """

    def __init__(self, net: torch.nn.Module, schedule: NoiseSchedule, prediction: str = "v",
                 clip_x0: float = 1.0, data_scale: float = 1.0) -> None:
        super().__init__()
        if prediction not in ("v", "eps", "x0"):
            raise ValueError(f"unknown prediction {prediction!r}")
        self.net = net
        self.schedule = schedule
        self.prediction = prediction
        self.clip_x0 = clip_x0
        self.data_scale = data_scale

    @property
    def per_kick_on_cpu(self) -> bool:
        """Its network's word on its render shape on the CPU (kickmodel.batching)."""
        return bool(getattr(self.net, "per_kick_on_cpu", False))

    @property
    def one_thread_on_cpu(self) -> bool:
        """Its network's word on its CPU threads (kickmodel.batching)."""
        return bool(getattr(self.net, "one_thread_on_cpu", False))

    @classmethod
    def from_config(cls, net: torch.nn.Module, d: DiffusionConfig) -> Denoiser:
        return cls(net, NoiseSchedule(d.schedule, d.timesteps), d.prediction, clip_x0=d.clip_x0,
                   data_scale=d.data_scale)

    def x0_from_output(self, x_t: torch.Tensor, t: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a, s = self.schedule.alpha_sigma(t)
        a, s = _bcast(a, x_t), _bcast(s, x_t)
        if self.prediction == "v":
            return a * x_t - s * out
        if self.prediction == "x0":
            return out
        return (x_t - s * out) / a.clamp(min=1e-4)

    def forward(self, x_t: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None,
                cond_mask: torch.Tensor | None = None) -> torch.Tensor:
        if t.ndim == 0:
            t = t.expand(x_t.shape[0])
        # the samplers' time grids live on the CPU; the latent denoiser's time embedding did not move them, so
        # latent diffusion failed on a GPU at the first step (seen on an H200, 2026-12-04)
        t = t.to(x_t.device)
        out = self.net(x_t, t.to(x_t.dtype), cond, cond_mask)
        x0 = self.x0_from_output(x_t, t, out.to(x_t.dtype))
        if self.clip_x0:
            lim = self.clip_x0 * self.data_scale
            x0 = x0.clamp(-lim, lim)
        return x0

    def loss(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor, cond: torch.Tensor | None = None,
             cond_mask: torch.Tensor | None = None, stft_weight: float = 0.0) -> torch.Tensor:
        """Per-example loss for clean x0 (in data units): MSE on the network's target, plus a
        multi-resolution STFT term on the predicted clean signal at low noise only.

        The network works on x0 * data_scale (kicks are mostly near-silent tails, RMS ~0.1: scaling
        puts their detail above the noise over more of the schedule). The STFT term is weighted by
        alpha^2 exp(-(sigma / 0.3)^2): where the noise is low the clean estimate is sharp and its
        spectrum, hiss included, is decided; at high noise the estimate is a blurry posterior mean and
        a log-spectral loss would push it toward noise-like texture instead."""
        x0_data = x0
        x0 = x0 * self.data_scale
        a, s = self.schedule.alpha_sigma(t)
        a_, s_ = _bcast(a, x0), _bcast(s, x0)
        x_t = a_ * x0 + s_ * noise
        out = self.net(x_t, t.to(x0.dtype), cond, cond_mask).float()
        if self.prediction == "x0":
            # x0 error weighted by min(SNR + 1, 5): v-prediction's weight (SNR + 1) capped (Hang et al.
            # 2023), so the near-clean levels cannot drown the rest.
            snr = (a / s.clamp(min=1e-8)).pow(2)
            w = (snr + 1).clamp(max=X0_WEIGHT_CAP).to(out)
            loss = w * (out - x0.float()).pow(2).flatten(1).mean(1)
        else:
            target = a_ * noise - s_ * x0 if self.prediction == "v" else noise
            loss = (out - target.float()).pow(2).flatten(1).mean(1)
        if stft_weight > 0:
            x0_hat = self.x0_from_output(x_t.float(), t, out) / self.data_scale
            w = (a.pow(2) * torch.exp(-(s / 0.3).pow(2))).to(loss)
            loss = loss + stft_weight * w * multires_stft_loss(x0_hat, x0_data.float())
        return loss


_STFT_SIZES = (2048, 512, 128)
X0_WEIGHT_CAP = 5.0


def multires_stft_loss(pred: torch.Tensor, target: torch.Tensor, sizes=_STFT_SIZES) -> torch.Tensor:
    """Per-example multi-resolution STFT loss (spectral convergence + log-magnitude L1), Yamamoto et al. 2020."""
    pred, target = pred.flatten(1), target.flatten(1)
    total = torch.zeros(pred.shape[0], device=pred.device)
    for n in sizes:
        win = torch.hann_window(n, device=pred.device)
        P = torch.stft(pred, n, n // 4, window=win, return_complex=True).abs()
        T = torch.stft(target, n, n // 4, window=win, return_complex=True).abs()
        sc = (T - P).flatten(1).norm(dim=1) / T.flatten(1).norm(dim=1).clamp(min=1e-5)
        mag = (torch.log(P.clamp(min=1e-5)) - torch.log(T.clamp(min=1e-5))).abs().flatten(1).mean(1)
        total = total + sc + mag
    return total / len(sizes)


# ---------------------------------------------------------------- samplers


@torch.no_grad()
def sample_ddim(denoise: Denoise, x: torch.Tensor, ts: torch.Tensor, schedule: NoiseSchedule, eta: float = 0.0,
                generator: Generators = None) -> torch.Tensor:
    """DDIM (Song et al. 2021). eta = 0 is deterministic; eta = 1 is DDPM's ancestral sampler."""
    for i in range(len(ts) - 1):
        t, s = ts[i], ts[i + 1]
        x0 = denoise(x, t.to(x.dtype).expand(x.shape[0]))
        if float(s) <= 0.0:
            return x0
        a_t, s_t = schedule.alpha_sigma(t)
        a_s, s_s = schedule.alpha_sigma(s)
        eps = (x - float(a_t) * x0) / max(float(s_t), 1e-8)
        sig = 0.0
        if eta > 0:
            sig = eta * math.sqrt(max(float(s_s**2 / s_t**2 * (1 - a_t**2 / a_s**2)), 0.0))
        dir_coef = math.sqrt(max(float(s_s**2) - sig**2, 0.0))
        x = float(a_s) * x0 + dir_coef * eps
        if sig > 0:
            x = x + sig * randn_like(x, generator)
    return x


def sample_ddpm(denoise: Denoise, x: torch.Tensor, ts: torch.Tensor, schedule: NoiseSchedule,
                generator: Generators = None) -> torch.Tensor:
    """DDPM ancestral sampling (Ho et al. 2020), as DDIM with eta = 1."""
    return sample_ddim(denoise, x, ts, schedule, eta=1.0, generator=generator)


@torch.no_grad()
def sample_dpmpp_2m(denoise: Denoise, x: torch.Tensor, ts: torch.Tensor, schedule: NoiseSchedule,
                    generator: Generators = None) -> torch.Tensor:
    """DPM-Solver++(2M), the multistep second-order data-prediction solver (Lu et al. 2022)."""
    old_x0 = None
    h_last = None
    for i in range(len(ts) - 1):
        t, s = ts[i], ts[i + 1]
        x0 = denoise(x, t.to(x.dtype).expand(x.shape[0]))
        if float(s) <= 0.0:
            return x0
        a_t, s_t = schedule.alpha_sigma(t)
        a_s, s_s = schedule.alpha_sigma(s)
        lam_t, lam_s = torch.log(a_t / s_t), torch.log(a_s / s_s)
        h = float(lam_s - lam_t)
        if old_x0 is None or h_last is None:
            d = x0
        else:
            r = h_last / h
            d = (1 + 1 / (2 * r)) * x0 - (1 / (2 * r)) * old_x0
        x = float(s_s / s_t) * x - float(a_s) * math.expm1(-h) * d
        # kept across the next network call: a copy, as a CUDA graph's replay overwrites its output
        old_x0, h_last = x0.clone(), h
    return x


SAMPLERS = {"ddim": sample_ddim, "ddpm": sample_ddpm, "dpmpp_2m": sample_dpmpp_2m}
assert tuple(SAMPLERS) == SAMPLER_NAMES


def run_sampler(name: str, denoise: Denoise, x: torch.Tensor, ts: torch.Tensor, schedule: NoiseSchedule,
                generator: Generators = None) -> torch.Tensor:
    try:
        fn = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}") from None
    return fn(denoise, x, ts, schedule, generator=generator)
