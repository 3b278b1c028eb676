"""Training the waveform U-Net (kickmodel.families.waveform_diffusion): the shared diffusion objective on the
waveform itself."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from kickmodel.config import Config

from .base import Contents, FitContext, Recipe
from .diffusion import SAMPLING_KEYS, DiffusionObjective, denoiser_contents, finetune_config


class WaveformObjective(DiffusionObjective):
    def to_latent(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, None]  # [B, 1, L]: the U-Net's one input channel


class WaveformRecipe(Recipe):
    family = "waveform_diffusion"
    export_keys = {"sampling": (*SAMPLING_KEYS, "image_reject_db")}  # its output upsampler's image rejection too

    def fit_config(self, cfg: Config, ctx: FitContext) -> Config:
        if ctx.init is None:
            return cfg
        art = ctx.init
        if (art.config.model, art.config.diffusion) != (cfg.model, cfg.diffusion):
            ctx.log(f"fine-tuning: taking the model and diffusion settings of {art.path.name}")
        return finetune_config(cfg, art)

    def objective(self, cfg: Config, ctx: FitContext) -> WaveformObjective:
        return WaveformObjective(cfg, self.serving.part_modules({"denoiser": cfg})["denoiser"].to(ctx.device))

    def artifact_contents(self, cfg: Config, weights: Mapping[str, torch.Tensor], ctx: FitContext) -> Contents:
        return denoiser_contents(cfg, weights)


RECIPE = WaveformRecipe()
