"""Training the mel-VAE family (kickmodel.families.mel_vae): the ELBO (with KL warm-up and free bits), the learned
prior's fit to the posterior, and the learned inverter, all in one forward pass (so DistributedDataParallel sees
one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from kickmodel.config import Config
from kickmodel.families.mel_vae.inverter import inverter_loss
from kickmodel.families.mel_vae.mel import MelFrontEnd
from kickmodel.families.mel_vae.network import (
    MelVAE,
    active_dims,
    band_weights,
    free_bits_kl,
    gaussian_kl,
    kl_beta,
    linear_error,
    low_centroid_error,
    recon_error,
)

from .base import Contents, FitContext, Objective, Recipe


class MelVAEModule(nn.Module):
    """What a mel-VAE run trains: the VAE (encoder, decoder, prior) and, when learned, the inverter."""

    def __init__(self, vae: MelVAE, inverter: nn.Module | None, posterior_noise: bool = True) -> None:
        super().__init__()
        self.vae = vae
        self.inverter = inverter
        self.posterior_noise = posterior_noise

    def forward(self, mel: torch.Tensor, audio: torch.Tensor, cond: torch.Tensor | None, mask: torch.Tensor | None,
                eps: torch.Tensor, front: MelFrontEnd, inverter_batch: int) -> dict[str, torch.Tensor]:
        mu, logvar = self.vae.encode(mel)
        z = mu + (0.5 * logvar).exp() * eps if self.posterior_noise else mu
        mel_hat = self.vae.decode(z)
        out = {"mu": mu, "logvar": logvar, "mel_hat": mel_hat,
               "prior_nll": self.vae.prior.nll(z.detach(), cond, mask)}
        if self.inverter is not None:
            n = max(1, min(inverter_batch, mel.shape[0]))
            out["inverter"] = inverter_loss(self.inverter(mel[:n]), audio[:n], front)
        return out


def _active_dims(mu: torch.Tensor, threshold: float = 0.01) -> torch.Tensor | int:
    """network.active_dims (the same threshold) as a tensor on mu's device, read back with the step's other
    figures."""
    return (mu.float().var(0) > threshold).sum() if mu.shape[0] >= 2 else active_dims(mu, threshold)


class MelVAEObjective(Objective):
    def __init__(self, cfg: Config, module: MelVAEModule, front: MelFrontEnd) -> None:
        self.cfg = cfg
        self.module = module
        self.front = front
        self.parts = ("vae", "inverter") if module.inverter is not None else ("vae",)
        self.centres_hz = front.band_centres_hz
        self.band_weights = band_weights(self.centres_hz, cfg.vae.recon_low_hz, cfg.vae.recon_low_weight)
        if not cfg.vae.train_encoder:  # no gradient, so the optimiser leaves the encoder exactly as it was
            module.vae.encoder.requires_grad_(False)

    @torch.no_grad()
    def prepare_batch(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.front(x), x

    def _terms(self, module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], cond, mask, g: torch.Generator,
               step: int) -> tuple[torch.Tensor, dict[str, Any]]:
        v, p, inv = self.cfg.vae, self.cfg.prior, self.cfg.inverter
        mel, x = batch
        eps = torch.randn(x.shape[0], v.latent_dim, generator=g).to(x.device)
        out = module(mel, x, cond, mask, eps, self.front, inv.batch)
        recon = recon_error(out["mel_hat"], mel, v.recon, self.band_weights).mean()
        kl = gaussian_kl(out["mu"].float(), out["logvar"].float())
        beta = kl_beta(step, v.beta, v.kl_warmup_steps)
        loss = recon + beta * free_bits_kl(kl, v.free_bits) + p.weight * out["prior_nll"].mean()
        # figures stay tensors on the device: the loop reads a step's back at once, not each on its own (a wait each)
        figures: dict[str, Any] = {"recon": recon.detach(), "kl": kl.sum(1).mean().detach(), "beta": beta,
                                   "active_dims": _active_dims(out["mu"].detach()),
                                   "prior_nll": out["prior_nll"].mean().detach()}
        if v.recon_linear_weight > 0:  # logged on its own, so "recon" stays comparable between runs
            lin = linear_error(out["mel_hat"], mel, self.cfg.mel.floor_db).mean()
            loss = loss + v.recon_linear_weight * lin
            figures["recon_linear"] = lin.detach()
        if v.recon_pitch_weight > 0:
            track = low_centroid_error(out["mel_hat"], mel, self.centres_hz, v.recon_low_hz,
                                       self.cfg.mel.floor_db).mean()
            loss = loss + v.recon_pitch_weight * track
            figures["recon_pitch"] = track.detach()
        if "inverter" in out:
            inv_loss = out["inverter"].mean()
            loss = loss + inv.weight * inv_loss
            figures["inverter"] = inv_loss.detach()
        return loss, figures | {"_kl_per_dim": kl.mean(0).detach().cpu(), "_mu": out["mu"].detach()}

    def loss(self, module: nn.Module, x: torch.Tensor, cond, mask, g: torch.Generator, step: int
             ) -> tuple[torch.Tensor, dict[str, Any]]:
        """(loss, figures): the figures 0-dim tensors on the device (or plain numbers), read by the loop once a step."""
        loss, figures = self._terms(module, x, cond, mask, g, step)
        return loss, {k: v for k, v in figures.items() if not k.startswith("_")}

    @torch.no_grad()
    def val_loss(self, module: nn.Module, x: torch.Tensor, cond, mask, g: torch.Generator) -> dict[str, Any]:
        """The ELBO at full beta (so runs compare at any step), its parts, the KL per latent dimension,
        the active dimensions, and how far the aggregate posterior is from N(0, I): the KL of a
        Gaussian with its per-dimension mean and variance against N(0, I) (large: sample the learned
        prior, not N(0, I))."""
        v = self.cfg.vae
        loss, figures = self._terms(module, x, cond, mask, g, max(v.kl_warmup_steps, 1))
        mu = figures.pop("_mu").float()
        kl_dim = figures.pop("_kl_per_dim")
        figures = {k: (int(v) if k == "active_dims" else float(v)) if isinstance(v, torch.Tensor) else v
                   for k, v in figures.items()}
        figures["loss"] = loss.item()
        figures["kl_per_dim"] = [round(float(k), 4) for k in kl_dim]
        if mu.shape[0] >= 2:
            mean, var = mu.mean(0), mu.var(0)
            figures["aggregate_kl"] = float(0.5 * (mean.pow(2) + var - 1.0 - var.clamp(min=1e-8).log()).sum())
        return figures

    def clip_groups(self) -> list[list[torch.nn.Parameter]]:
        groups = [list(self.module.vae.encoder.parameters()) + list(self.module.vae.decoder.parameters()),
                  list(self.module.vae.prior.parameters())]
        if self.module.inverter is not None:
            groups.append(list(self.module.inverter.parameters()))
        return groups

    def artifact_tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return dict(state_dict)  # the module's own names are already vae.* and inverter.*

    def load_init(self, art) -> None:
        self.module.load_state_dict(art.tensors, strict=True)


def _parts(cfg: Config) -> tuple[str, ...]:
    """The parts a run of cfg trains: the VAE, and the inverter when it is a learned one."""
    return ("vae", "inverter") if cfg.inverter.kind == "vocos" else ("vae",)


class MelVAERecipe(Recipe):
    family = "mel_vae"
    # its default sampling, and its inversion: Griffin-Lim needs no weights, so a run that trained a learned
    # inverter can ship either
    export_keys = {"sampling": ("temperature",), "inverter": ("kind", "griffin_lim_iters")}

    def fit_config(self, cfg: Config, ctx: FitContext) -> Config:
        if ctx.init is None:
            return cfg
        art = ctx.init
        for section in ("mel", "prior", "inverter", "conditioning"):
            cfg = cfg.with_section(section, getattr(art.config, section))
        # the network's shape comes from the artifact; how it is trained (beta, warm-up, free bits, the
        # reconstruction error and its band weights) from this run's preset and --set
        shape = {k: getattr(art.config.vae, k) for k in ("channels", "blocks_per_level", "latent_dim", "kernel")}
        cfg = cfg.replace("vae", **shape)
        ctx.log(f"fine-tuning: taking the mel, prior and inverter settings and the VAE's shape of {art.path.name}")
        return cfg.replace("data", sample_rate=art.config.data.sample_rate, length=art.config.data.length)

    def objective(self, cfg: Config, ctx: FitContext) -> MelVAEObjective:
        parts = self.serving.part_modules({"vae": cfg})
        front = MelFrontEnd(cfg.mel, cfg.data.sample_rate, cfg.data.length).to(ctx.device)
        module = MelVAEModule(parts["vae"], parts.get("inverter"), cfg.vae.posterior_noise)
        return MelVAEObjective(cfg, module.to(ctx.device), front)

    def artifact_contents(self, cfg: Config, weights: Mapping[str, torch.Tensor], ctx: FitContext) -> Contents:
        return dict(weights), {p: cfg.to_dict() for p in _parts(cfg)}  # the module's names are vae.*, inverter.*


RECIPE = MelVAERecipe()
