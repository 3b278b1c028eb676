"""The latent-diffusion family's own config section (its `model` is kickmodel.families.mlp_denoiser's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VAERefConfig:
    """The frozen mel-VAE the run learns in, by the content hash of its `vae` part only. A run keeps the VAE
    itself in its folder (RUN/vae.safetensors) and a served artifact carries it as its own parts, so nothing
    needs to say where the VAE came from: a path would name a folder of the machine that made the file,
    which no other machine has. Configs written before this recorded a `path` too; it is dropped when they
    are read (LatentDiffusion.upgrade), so no config that is read can carry one into a file written later."""

    sha256: str = ""
