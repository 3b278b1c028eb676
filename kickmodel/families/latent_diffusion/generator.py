"""Serving latent diffusion: sample a normalised latent with the project's samplers (guided by the
controls), undo the normalisation, decode with the mel codec (kickmodel.codecs.mel: the VAE's decoder and
inverter), the same codec the mel-VAE family serves with."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact, ArtifactError
from ...diffusion import Denoiser
from ...generator import ENCODE, Hook, Item
from ..diffusion_common import DiffusionGenerator
from ..mel_vae.generator import mel_codec
from ..mlp_denoiser import MLPDenoiser


class LatentDiffusionGenerator(DiffusionGenerator):
    family = "latent_diffusion"
    capabilities = DiffusionGenerator.capabilities | {ENCODE}  # the VAE's encoder: the space the map shows

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config_of("denoiser")
        vae_hash = artifact.part_hashes.get("vae")
        if cfg.vae.sha256 and vae_hash and vae_hash != cfg.vae.sha256:
            raise ArtifactError(f"{artifact.path}: its vae part (sha256 {vae_hash[:12]}...) is not the VAE the "
                                f"denoiser was trained in ({cfg.vae.sha256[:12]}...)")
        self.codec = mel_codec(artifact, device)
        dim = self.codec.latent_dim
        net = MLPDenoiser(cfg.model, dim, len(cfg.controls))
        artifact.load_part(net, "denoiser")
        super().__init__(artifact, device, Denoiser.from_config(net, cfg.diffusion), artifact.config.sampling)
        self.net = self.denoiser.net
        self.latent_shape = (dim,)
        self.latent_dim = dim

    def to_latent(self, audio: torch.Tensor, hook: Hook) -> torch.Tensor:
        return self.net.normalise(self.codec.encode(audio, hook)) * self.denoiser.data_scale

    def from_latent(self, z: torch.Tensor, items: Sequence[Item], hook: Hook) -> np.ndarray:
        return self.codec.decode(self.net.denormalise(z / self.denoiser.data_scale), hook)

    @torch.inference_mode()
    def encode(self, clips: np.ndarray, hook: Hook | None = None) -> np.ndarray:
        """Prepared clips [n, length] -> the VAE's posterior means (the space the map shows)."""
        return self.codec.encode_batch(clips)

    @torch.inference_mode()
    def decode_latents(self, latents: np.ndarray, items: Sequence[Item], hook: Hook | None = None) -> np.ndarray:
        """VAE latents [n, latent_dim] (what encode gives, a kit map's) -> raw kicks, as a sampled latent is decoded
        (from_latent: the VAE's decoder and the inverter, kick by kick)."""
        z = torch.as_tensor(np.asarray(latents, dtype=np.float32)).reshape(-1, self.latent_dim).to(self.device)
        return self.from_latent(self.net.normalise(z) * self.denoiser.data_scale, items, hook or (lambda info: None))
