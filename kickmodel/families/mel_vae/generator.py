"""Serving the mel-VAE: one pass per kick -- a latent from the learned prior (given the controls), decoded by the
mel codec (kickmodel.codecs.mel: the decoder's log-mel, the inverter's audio). Variations move the source's latent
toward a fresh one. `mel_codec` builds that codec from an artifact's parts for latent diffusion too."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact
from ...codecs.mel import MelCodec
from ...generator import CONTROLS, ENCODE, INTERPOLATION, VARIATION, Endpoint, GeneratorBase, Hook, Item, Settings
from .inverter import build_inverter
from .mel import MelFrontEnd
from .network import MelVAE


def build_parts(artifact: Artifact, device: torch.device) -> tuple[MelFrontEnd, MelVAE, torch.nn.Module]:
    """The front end, the VAE and the inverter of an artifact's `vae` (and `inverter`) parts, on device."""
    cfg = artifact.config_of("vae")
    front = MelFrontEnd(cfg.mel, cfg.data.sample_rate, cfg.data.length)
    vae = MelVAE(cfg.mel, cfg.vae, cfg.prior, front.frames, len(cfg.controls))
    artifact.load_part(vae, "vae")
    inverter = build_inverter(cfg.inverter, front)
    if cfg.inverter.kind != "griffin-lim":
        artifact.load_part(inverter, "inverter")
    for m in (front, vae, inverter):
        m.to(device).eval().requires_grad_(False)
    return front, vae, inverter


def mel_codec(artifact: Artifact, device: torch.device) -> MelCodec:
    """The mel codec of an artifact's `vae` (and `inverter`) parts, on device."""
    front, vae, inverter = build_parts(artifact, device)
    return MelCodec(front, vae, inverter, artifact.config_of("vae").vae.latent_dim, device)


class MelVAEGenerator(GeneratorBase):
    family = "mel_vae"
    capabilities = frozenset({CONTROLS, VARIATION, INTERPOLATION, ENCODE})  # one pass: no samplers, no guidance

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        super().__init__(artifact, device)
        self.codec = mel_codec(artifact, device)
        self.temperature = artifact.config.sampling.temperature
        self.latent_dim = self.codec.latent_dim
        self.inversion = artifact.config_of("vae").inverter.kind

    def _gens(self, items: Sequence[Item], offset: int = 0) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(int(it.seed) + offset) for it in items]

    # The prior runs kick by kick too (the codec's note: a kick must not depend on its batch).
    def prior_latents(self, items: Sequence[Item]) -> torch.Tensor:
        cond, mask = self.conditioning(items)
        gens = self._gens(items)
        prior = self.codec.vae.prior  # the VAE's learned prior over its latents, given the controls
        return torch.cat([prior.sample(None if cond is None else cond[i:i + 1],
                                       None if mask is None else mask[i:i + 1], [g], self.temperature)
                          for i, g in enumerate(gens)])

    def decode(self, z: torch.Tensor, hook: Hook) -> np.ndarray:
        """Latents [n, latent_dim] -> raw audio [n, length] (the codec)."""
        return self.codec.decode(z, hook)

    @torch.inference_mode()
    def encode(self, clips: np.ndarray, hook: Hook | None = None) -> np.ndarray:
        """Prepared clips [n, length] -> posterior means [n, latent_dim] (for maps)."""
        return self.codec.encode_batch(clips)

    @torch.inference_mode()
    def decode_latents(self, latents: np.ndarray, items: Sequence[Item], hook: Hook | None = None) -> np.ndarray:
        """Latents [n, latent_dim] (what encode gives, a kit map's) -> raw kicks (decode)."""
        z = torch.as_tensor(np.asarray(latents, dtype=np.float32)).reshape(-1, self.latent_dim)
        return self.decode(z, hook or (lambda info: None))

    @torch.inference_mode()
    def _sample(self, items: Sequence[Item], settings: Settings, hook: Hook) -> np.ndarray:
        return self.decode(self.prior_latents(items), hook)

    @torch.inference_mode()
    def _vary(self, source: np.ndarray, strength: float, items: Sequence[Item], settings: Settings,
              hook: Hook) -> np.ndarray:
        """The source's latent moved toward a fresh prior latent (per item): z = mu + strength (z_new - mu),
        0 < strength <= 1; 1 is a fresh kick."""
        src = self._source_tensor(source, len(items))
        mu = self.codec.encode(src[:1]).expand(len(items), -1)
        z = mu + strength * (self.prior_latents(items) - mu)
        return self.decode(z, hook)

    def _endpoint_latent(self, e: Endpoint, controls: dict) -> torch.Tensor:
        if e.seed is not None:
            return self.prior_latents([Item(seed=e.seed, controls=controls)])[0]
        return self.codec.encode(self._source_tensor(e.source, 1))[0]

    @torch.inference_mode()
    def _morph(self, a: Endpoint, b: Endpoint, ts: Sequence[float], items: Sequence[Item], settings: Settings,
               hook: Hook) -> np.ndarray:
        """Kicks along the straight line between a's and b's latents (a seed's prior sample given the
        controls, a file's posterior mean): t = 0 decodes a's latent, 1 b's."""
        controls = dict(items[0].controls) if items else {}
        za, zb = self._endpoint_latent(a, controls), self._endpoint_latent(b, controls)
        z = torch.stack([za if t == 0.0 else zb if t == 1.0 else za + t * (zb - za) for t in ts])
        return self.decode(z, hook)

    def describe(self) -> dict:
        return super().describe() | {"inverter": self.inversion, "latent_dim": self.latent_dim}
