"""Serving the mel-VAE: one pass per kick -- a latent from the learned prior (given the controls), the
decoder's log-mel, the inverter's audio. Variations move the source's latent toward a fresh one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact
from ...generator import CONTROLS, ENCODE, INTERPOLATION, VARIATION, Endpoint, GeneratorBase, Item, by_row
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


class MelVAEGenerator(GeneratorBase):
    family = "mel_vae"
    capabilities = frozenset({CONTROLS, VARIATION, INTERPOLATION, ENCODE})  # one pass: no samplers, no guidance

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        super().__init__(artifact, device)
        self.front, self.vae, self.inverter = build_parts(artifact, device)
        self.temperature = artifact.config.sampling.temperature
        self.latent_dim = self.vae.cfg.latent_dim
        self.inversion = artifact.config_of("vae").inverter.kind

    def _gens(self, items: Sequence[Item], offset: int = 0) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(int(it.seed) + offset) for it in items]

    # Every network runs kick by kick (kickmodel.generator.by_row): Griffin-Lim turns the float rounding a batch
    # brings into an audible difference, and a kick must not depend on what else is in its batch.
    def prior_latents(self, items: Sequence[Item]) -> torch.Tensor:
        cond, mask = self.conditioning(items)
        gens = self._gens(items)
        return torch.cat([self.vae.prior.sample(None if cond is None else cond[i:i + 1],
                                                None if mask is None else mask[i:i + 1], [g], self.temperature)
                          for i, g in enumerate(gens)])

    def _mu(self, x: torch.Tensor) -> torch.Tensor:
        return by_row(lambda a: self.vae.encode(self.front(a))[0], x)

    def decode(self, z: torch.Tensor) -> np.ndarray:
        """Latents [n, latent_dim] -> raw audio [n, length]."""
        self.check_cancel()
        mel = by_row(self.vae.decode, z.to(self.device))
        self.check_cancel()
        return by_row(self.inverter, mel).float().cpu().numpy()

    @torch.inference_mode()
    def encode(self, clips: np.ndarray) -> np.ndarray:
        """Prepared clips [n, length] -> posterior means [n, latent_dim] (for maps and variations)."""
        x = torch.as_tensor(np.asarray(clips, dtype=np.float32)).reshape(-1, self.length).to(self.device)
        return self.vae.encode(self.front(x))[0].float().cpu().numpy()  # batched: no inverter follows (a map)

    @torch.inference_mode()
    def decode_latents(self, latents: np.ndarray, items: Sequence[Item]) -> np.ndarray:
        """Latents [n, latent_dim] (what encode gives, a kit map's) -> raw kicks (decode)."""
        return self.decode(torch.as_tensor(np.asarray(latents, dtype=np.float32)).reshape(-1, self.latent_dim))

    @torch.inference_mode()
    def sample(self, items: Sequence[Item], steps: int | None = None, sampler: str | None = None) -> np.ndarray:
        return self.decode(self.prior_latents(items))

    @torch.inference_mode()
    def vary(self, source: np.ndarray, strength: float, items: Sequence[Item], steps: int | None = None,
             sampler: str | None = None) -> np.ndarray:
        """The source's latent moved toward a fresh prior latent (per item): z = mu + strength (z_new - mu).
        0 returns the source itself; 1 is a fresh kick."""
        src = self._source_tensor(source, len(items))
        if strength == 0.0:
            return src.float().cpu().numpy().copy()
        mu = self._mu(src[:1]).expand(len(items), -1)
        z = mu + strength * (self.prior_latents(items) - mu)
        return self.decode(z)

    def _endpoint_latent(self, e: Endpoint, controls: dict) -> torch.Tensor:
        if e.seed is not None:
            return self.prior_latents([Item(seed=e.seed, controls=controls)])[0]
        return self._mu(self._source_tensor(e.source, 1))[0]

    @torch.inference_mode()
    def interpolate(self, a: Endpoint, b: Endpoint, ts, items, steps=None, sampler=None) -> np.ndarray:
        """Kicks along the straight line between a's and b's latents (a seed's prior sample given the
        controls, a file's posterior mean): t = 0 decodes a's latent, 1 b's."""
        controls = dict(items[0].controls) if items else {}
        za, zb = self._endpoint_latent(a, controls), self._endpoint_latent(b, controls)
        z = torch.stack([za if t == 0.0 else zb if t == 1.0 else za + t * (zb - za) for t in ts])
        return self.decode(z)

    def describe(self) -> dict:
        return super().describe() | {"inverter": self.inversion, "latent_dim": self.latent_dim}
