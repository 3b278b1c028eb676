"""The mel-VAE as a codec: audio -> the mel front end's log-mel -> the VAE's posterior mean (encode), and a latent ->
the decoder's log-mel -> the inverter's audio (decode). The mel-VAE family pairs it with the VAE's own learned prior;
latent diffusion pairs it with a denoiser over its latents. Its networks are built from an artifact's `vae` (and
`inverter`) parts by the mel-VAE family (kickmodel.families.mel_vae.generator.mel_codec), which knows them.

Every network runs at its render shape (kickmodel.batching): Griffin-Lim turns the float rounding a batch brings into
an audible difference, and a kick must not depend on what else is in its batch."""

from __future__ import annotations

import numpy as np
import torch

from ..batching import in_render_shape
from ..generator import Hook


class MelCodec:
    """front: audio -> log-mel (its `length` and `frames`); vae: `encode(mel) -> (mu, ...)`, `decode(z) -> mel`;
    inverter: log-mel -> audio. All on device, in eval mode."""

    def __init__(self, front: torch.nn.Module, vae: torch.nn.Module, inverter: torch.nn.Module, latent_dim: int,
                 device: torch.device) -> None:
        self.front, self.vae, self.inverter = front, vae, inverter
        self.latent_dim = int(latent_dim)
        self.length = int(front.length)
        self.device = device

    def encode(self, audio: torch.Tensor, hook: Hook | None = None) -> torch.Tensor:
        """Clips [n, length] on the device -> posterior means [n, latent_dim], at the VAE's render shape (a
        variation's or a morph's source: what it decodes back to must not depend on its batch)."""
        return in_render_shape(lambda a: self.vae.encode(self.front(a))[0], audio, like=self.vae)

    def encode_batch(self, clips: np.ndarray) -> np.ndarray:
        """Prepared clips [n, length] -> posterior means [n, latent_dim] in one batch (a kit map: no inverter
        follows, so the batch's rounding reaches no kick)."""
        x = torch.as_tensor(np.asarray(clips, dtype=np.float32)).reshape(-1, self.length).to(self.device)
        return self.vae.encode(self.front(x))[0].float().cpu().numpy()

    def decode(self, z: torch.Tensor, hook: Hook) -> np.ndarray:
        """Latents [n, latent_dim] -> raw audio [n, length] float32 (the decoder's log-mel, then the inverter)."""
        hook({"stage": "decode"})
        mel = in_render_shape(self.vae.decode, z.to(self.device))
        hook({"stage": "invert"})
        return in_render_shape(self.inverter, mel).float().cpu().numpy()
