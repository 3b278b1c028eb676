"""Training a denoiser in the latent space of a frozen mel-VAE: each augmented batch is encoded on the
fly (the VAE's encoder is cheap next to a waveform network), normalised, and diffused. With augmentation
off every clip always encodes to the same latent, so each is encoded once and kept (keyed by the clip's
content): the encoding was ~80 % of a step (docs/profiling.md). A batch is encoded ENCODE_CHUNK clips at a time,
on the training device, without gradient: the encoder's activations for a whole batch of 64 took 8.3 GB of a GPU
(issue 24); a chunk of 8 takes an eighth of that, and the latents are the same (the encoder treats each clip on its
own)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping

import torch

from ...artifact import Artifact
from ...config import Config
from ..diffusion_common import DiffusionObjective, prefixed, unprefixed
from ..mel_vae.generator import build_parts
from .network import LatentDenoiserNet

ENCODE_CHUNK = 8  # clips the VAE encodes at a time


class LatentObjective(DiffusionObjective):
    def __init__(self, cfg: Config, net: LatentDenoiserNet, vae_art: Artifact, device: torch.device) -> None:
        super().__init__(cfg, net, parts=("denoiser",) + tuple(p for p in ("vae", "inverter")
                                                                 if vae_art.part_tensors(p)))
        self.vae_art = vae_art
        self.front, self.vae, _ = build_parts(vae_art, device)
        self.device = device
        self.encode_chunk = ENCODE_CHUNK
        aug = cfg.augment
        self.cache: dict[bytes, torch.Tensor] | None = (
            {} if all(getattr(aug, f.name) == 0 for f in dataclasses.fields(aug) if f.name.endswith("_p")) else None)

    @torch.no_grad()
    def posterior_means(self, x: torch.Tensor) -> torch.Tensor:
        """The VAE's posterior means of clips x [B, L], encoded on the device encode_chunk clips at a time."""
        x, n = x.to(self.device), max(1, self.encode_chunk)
        return torch.cat([self.vae.encode(self.front(x[i:i + n]))[0].float() for i in range(0, len(x), n)])

    def to_latent(self, x: torch.Tensor) -> torch.Tensor:
        return self.module.normalise(self.posterior_means(x))

    @torch.no_grad()
    def prepare_batch(self, x: torch.Tensor) -> torch.Tensor:
        if self.cache is None:
            return self.to_latent(x)
        # no augmentation: a clip is always the same samples, so its latent is encoded once. Keys are
        # content hashes of the clips as given; the prefetch thread and validation may both add entries (dict
        # updates are atomic; at worst a clip is encoded twice)
        rows = x.detach().float().cpu().contiguous()
        keys = [hashlib.blake2b(r.numpy().tobytes(), digest_size=16).digest() for r in rows]
        todo = sorted({i for i, k in enumerate(keys) if k not in self.cache})
        if todo:
            for i, mu in zip(todo, self.posterior_means(x[todo]).cpu()):
                self.cache[keys[i]] = mu
        mus = torch.stack([self.cache[k] for k in keys]).to(self.device)
        return self.module.normalise(mus)

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
        theirs = art.part_hashes.get("vae")
        if theirs and theirs != self.cfg.vae.sha256 and not same_latent_space(art, self.vae_art):
            raise ValueError(f"{art.path.name} was trained over another VAE than this run's, whose encoder differs "
                             "(another latent space); only a decoder-only fine-tune of its VAE "
                             "(vae.train_encoder=false) can take its place")
        self.module.load_state_dict(unprefixed("denoiser", art.tensors), strict=True)


def same_latent_space(a: Artifact, b: Artifact) -> bool:
    """Whether two artifacts' VAEs put every clip at the same latent: the same mel front end and clip, and
    bit-identical encoders. A decoder-only fine-tune (vae.train_encoder=false) keeps them, so a denoiser
    trained over the one is as valid over the other, and its latent normalisation too."""
    ca, cb = a.config_of("vae"), b.config_of("vae")
    if (ca.mel, ca.data.sample_rate, ca.data.length, ca.vae.latent_dim) != (
            cb.mel, cb.data.sample_rate, cb.data.length, cb.vae.latent_dim):
        return False
    ea, eb = a.part_tensors("vae"), b.part_tensors("vae")
    ea = {k: v for k, v in ea.items() if k.startswith("encoder.")}
    eb = {k: v for k, v in eb.items() if k.startswith("encoder.")}
    return bool(ea) and ea.keys() == eb.keys() and all(torch.equal(ea[k], eb[k]) for k in ea)
