"""What the diffusion recipes (waveform, latent, kick-synth) share: the denoising objective around
`kickmodel.diffusion.Denoiser`. A recipe says how audio becomes the space it diffuses in (`to_latent`); the t and
noise draws of training and the validation noise levels are here once."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from kickmodel.artifact import Artifact
from kickmodel.config import Config
from kickmodel.diffusion import Denoiser

from .base import Contents, Objective, prefixed, unprefixed

VAL_NOISE_LEVELS = (0.05, 0.2, 0.5, 0.8)
# settings a diffusion model's export may change without retraining: its default sampling
SAMPLING_KEYS = ("steps", "sampler", "time_power", "guidance")


def denoiser_contents(cfg: Config, weights: Mapping[str, torch.Tensor]) -> Contents:
    """An artifact whose one part the run trained: its denoiser (Recipe.artifact_contents)."""
    return prefixed("denoiser", weights), {"denoiser": cfg.to_dict()}


def finetune_config(cfg: Config, art) -> Config:
    """A fine-tune's config: the weights of artifact `art` only make sense with the network, process, controls and
    clip they were trained for, so those come from it; how it is trained (train, augment) is the run's."""
    cfg = cfg.with_section("model", art.config.model).with_section("diffusion", art.config.diffusion)
    cfg = cfg.with_section("conditioning", art.config.conditioning)
    return cfg.replace("data", sample_rate=art.config.data.sample_rate, length=art.config.data.length)


class DiffusionObjective(Objective):
    """Denoising loss at a random noise level per example (kickmodel/diffusion.py's Denoiser.loss).
    Subclasses give `to_latent(x)`: the clean signal in data units (before data_scale)."""

    def __init__(self, cfg: Config, module: torch.nn.Module, parts: tuple[str, ...] = ("denoiser",)) -> None:
        self.cfg = cfg
        self.module = module
        self.parts = parts
        self.schedule = Denoiser.from_config(module, cfg.diffusion).schedule

    def to_latent(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def artifact_tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return prefixed("denoiser", state_dict)

    def load_init(self, art: Artifact) -> None:
        self.module.load_state_dict(unprefixed("denoiser", art.tensors), strict=True)

    @torch.no_grad()
    def prepare_batch(self, x: torch.Tensor) -> torch.Tensor:
        return self.to_latent(x)

    def _t_min(self, step: int) -> float:
        d = self.cfg.diffusion
        return 0.7 * max(0.0, 1.0 - step / d.curriculum_steps) if d.curriculum_steps > 0 else 0.0

    def loss(self, module: torch.nn.Module, x: torch.Tensor, cond: torch.Tensor | None, mask: torch.Tensor | None,
             g: torch.Generator, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        d = self.cfg.diffusion
        z = x  # prepared: the clean signal in the space the denoiser works in
        den = Denoiser.from_config(module, d)
        t = self.schedule.sample_t(z.shape[0], g, low_noise_bias=d.low_noise_bias, t_min=self._t_min(step))
        noise = torch.randn(z.shape, generator=g).to(z.device)
        return den.loss(z, t.to(z.device), noise, cond, mask, stft_weight=d.stft_loss_weight).mean(), {}

    @torch.no_grad()
    def val_loss(self, module: torch.nn.Module, x: torch.Tensor, cond: torch.Tensor | None,
                 mask: torch.Tensor | None, g: torch.Generator) -> dict[str, float]:
        d = self.cfg.diffusion
        z = x
        den = Denoiser.from_config(module, d)
        losses = []
        for t_val in VAL_NOISE_LEVELS:
            t = torch.full((z.shape[0],), t_val, dtype=torch.float64)
            noise = torch.randn(z.shape, generator=g).to(z.device)
            losses.append(den.loss(z, t.to(z.device), noise, cond, mask, stft_weight=d.stft_loss_weight).mean().item())
        return {"loss": float(np.mean(losses))}
