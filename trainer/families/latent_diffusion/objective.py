"""Training a denoiser in the latent space of a frozen mel-VAE: each augmented batch is encoded on the
fly (the VAE's encoder is cheap next to a waveform network), normalised, and diffused."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ...artifact import Artifact
from ...config import Config
from ..diffusion_common import DiffusionObjective, prefixed, unprefixed
from ..mel_vae.generator import build_parts
from .network import LatentDenoiserNet


class LatentObjective(DiffusionObjective):
    def __init__(self, cfg: Config, net: LatentDenoiserNet, vae_art: Artifact, device: torch.device) -> None:
        super().__init__(cfg, net, parts=("denoiser",) + tuple(p for p in ("vae", "inverter")
                                                                 if vae_art.part_tensors(p)))
        self.vae_art = vae_art
        self.front, self.vae, _ = build_parts(vae_art, device)
        self.device = device

    @torch.no_grad()
    def posterior_means(self, x: torch.Tensor) -> torch.Tensor:
        return self.vae.encode(self.front(x.to(self.device)))[0].float()

    def to_latent(self, x: torch.Tensor) -> torch.Tensor:
        return self.module.normalise(self.posterior_means(x))

    def fit_data(self, clips: torch.Tensor) -> None:
        """The latents' per-dimension mean and spread over the training clips (batched, no augmentation)."""
        mus = torch.cat([self.posterior_means(clips[i:i + 32]) for i in range(0, len(clips), 32)])
        self.module.latent_mean.copy_(mus.mean(0))
        self.module.latent_std.copy_(mus.std(0).clamp(min=1e-3) if len(mus) > 1 else torch.ones_like(mus[0]))

    def artifact_tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return prefixed("denoiser", state_dict) | {k: v for k, v in self.vae_art.tensors.items()
                                                   if k.split(".", 1)[0] in ("vae", "inverter")}

    def part_configs(self, cfg: Config) -> dict[str, dict]:
        vae_cfg = self.vae_art.config_of("vae").to_dict()
        return {p: (cfg.to_dict() if p == "denoiser" else vae_cfg) for p in self.parts}

    def load_init(self, art: Artifact) -> None:
        if art.part_hashes.get("vae") and art.part_hashes.get("vae") != self.cfg.vae.sha256:
            raise ValueError(f"{art.path.name} was trained over another VAE than this run's")
        self.module.load_state_dict(unprefixed("denoiser", art.tensors), strict=True)
