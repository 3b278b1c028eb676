"""The latent-diffusion family's own config sections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LatentNetConfig:
    """The denoiser over a mel-VAE's latent vector: a residual MLP whose blocks are modulated by the noise
    level and the controls (the U-Net's residual blocks with linear layers in place of convolutions: the
    latent is one vector per kick, with no time axis left to convolve)."""

    width: int = 256
    blocks: int = 4
    emb_dim: int = 128
    dropout: float = 0.0


@dataclass(frozen=True)
class VAERefConfig:
    """The frozen mel-VAE artifact the run learns in: where it was and the content hash of its `vae` part.
    `kicktrain fit --vae FILE` fills both; a served artifact carries the VAE itself, and a VAE whose hash
    differs is refused."""

    path: str = ""
    sha256: str = ""
