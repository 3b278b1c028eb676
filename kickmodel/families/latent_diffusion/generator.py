"""Serving latent diffusion: sample a normalised latent with the project's samplers (guided by the
controls), undo the normalisation, decode with the VAE's decoder and inverter."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact, ArtifactError
from ...diffusion import Denoiser
from ...generator import ENCODE, Item, by_row
from ..diffusion_common import DiffusionGenerator
from ..mel_vae.generator import build_parts
from .network import LatentDenoiserNet


class LatentDiffusionGenerator(DiffusionGenerator):
    family = "latent_diffusion"
    capabilities = DiffusionGenerator.capabilities | {ENCODE}  # the VAE's encoder: the space the map shows
    row_by_row = True  # Griffin-Lim: a kick's networks run on it alone, never on its batch (by_row)

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config_of("denoiser")
        vae_hash = artifact.part_hashes.get("vae")
        if cfg.vae.sha256 and vae_hash and vae_hash != cfg.vae.sha256:
            raise ArtifactError(f"{artifact.path}: its vae part (sha256 {vae_hash[:12]}...) is not the VAE the "
                                f"denoiser was trained in ({cfg.vae.sha256[:12]}...)")
        self.front, self.vae, self.inverter = build_parts(artifact, device)
        dim = artifact.config_of("vae").vae.latent_dim
        net = LatentDenoiserNet(cfg.model, dim, len(cfg.controls))
        artifact.load_part(net, "denoiser")
        super().__init__(artifact, device, Denoiser.from_config(net, cfg.diffusion), artifact.config.sampling)
        self.net = self.denoiser.net
        self.latent_shape = (dim,)
        self.latent_dim = dim

    def to_latent(self, audio: torch.Tensor) -> torch.Tensor:
        mu = by_row(lambda a: self.vae.encode(self.front(a))[0], audio)
        return self.net.normalise(mu) * self.denoiser.data_scale

    def from_latent(self, z: torch.Tensor, items: Sequence[Item] = ()) -> np.ndarray:
        self.check_cancel()
        mel = by_row(self.vae.decode, self.net.denormalise(z / self.denoiser.data_scale))
        self.check_cancel()
        return by_row(self.inverter, mel).float().cpu().numpy()

    @torch.inference_mode()
    def encode(self, clips: np.ndarray) -> np.ndarray:
        """Prepared clips [n, length] -> the VAE's posterior means (the space the map shows)."""
        x = torch.as_tensor(np.asarray(clips, dtype=np.float32)).reshape(-1, self.length).to(self.device)
        return self.vae.encode(self.front(x))[0].float().cpu().numpy()  # batched: no inverter follows (a map)

    @torch.inference_mode()
    def decode_latents(self, latents: np.ndarray, items: Sequence[Item]) -> np.ndarray:
        """VAE latents [n, latent_dim] (what encode gives, a kit map's) -> raw kicks, as a sampled latent is decoded
        (from_latent: the VAE's decoder and the inverter, kick by kick)."""
        z = torch.as_tensor(np.asarray(latents, dtype=np.float32)).reshape(-1, self.latent_dim).to(self.device)
        return self.from_latent(self.net.normalise(z) * self.denoiser.data_scale, items)
