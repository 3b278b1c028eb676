"""Family "latent_diffusion": the project's diffusion (schedules, samplers, guidance) in the latent space
of a frozen mel-VAE artifact.

Sections: `model` (MLPDenoiserConfig), `diffusion`, `sampling`, `vae` (which VAE, by the content hash of
its vae part). The served artifact is one self-contained file: `denoiser` (with the latents'
normalisation), `vae` and `inverter` copied from the VAE artifact, each with its config; a vae part
whose hash is not the one the denoiser was trained with is refused. Its training (which VAE a run
trains over, its --vae option, the objective over the VAE's latents): trainer/recipes/latent_diffusion.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ...config import ConditioningConfig, Config, ConfigError, TrainConfig, without_keys
from ...diffusion import DiffusionConfig, SamplingConfig, check_diffusion_config
from .. import make_config
from ..base import Family
from ..mlp_denoiser import MLPDenoiserConfig
from .config import VAERefConfig

CONTROLS = ("decay", "pitch", "click")
# latents are normalised to unit spread: v-prediction, no STFT term (there is no audio here), x0 within
# +-5 standard deviations. Sampling: 10 steps with the waveform family's time_power 0.35; on the model of
# MODEL_CARD.md (64 kicks against 20 held-out) it gave KID 0.61 at 10 steps against 0.67 with a uniform grid
# (1.0), as good as 25 uniform steps (0.60), at the same cost per step
LATENT_DIFFUSION = DiffusionConfig(prediction="v", stft_loss_weight=0.0, data_scale=1.0, clip_x0=5.0)
LATENT_SAMPLING = SamplingConfig(steps=10, time_power=0.35)


class LatentDiffusion(Family):
    name = "latent_diffusion"
    summary = "diffusion in the latent space of a frozen mel-VAE, decoded by its decoder and inverter"
    sections = {"model": MLPDenoiserConfig, "diffusion": DiffusionConfig, "sampling": SamplingConfig,
                "vae": VAERefConfig}
    parts = ("denoiser", "vae", "inverter")

    def presets(self) -> dict[str, Config]:
        cond = ConditioningConfig(controls=CONTROLS)
        common = {"conditioning": cond, "diffusion": LATENT_DIFFUSION}
        tiny = make_config(self.name, "tiny", model=MLPDenoiserConfig(width=32, blocks=2, emb_dim=32),
                           sampling=SamplingConfig(steps=10, time_power=1.0),
                           train=TrainConfig(batch_size=4, micro_batch=4, max_steps=40, warmup_steps=5, log_every=5,
                                             val_every=10, ckpt_every=10, sample_every=0, ema_decay=0.9), **common)
        small = make_config(self.name, "small", model=MLPDenoiserConfig(), sampling=LATENT_SAMPLING,
                            train=TrainConfig(batch_size=64, micro_batch=64, max_steps=20000, lr=5e-4,
                                              sample_every=2000, val_every=500, ckpt_every=500), **common)
        base = make_config(self.name, "base", model=MLPDenoiserConfig(width=512, blocks=6), sampling=LATENT_SAMPLING,
                           train=TrainConfig(batch_size=128, micro_batch=64, max_steps=60000, lr=3e-4,
                                             mixed_precision="auto"), **common)
        return {"tiny": tiny, "small": small, "base": base}

    def check_config(self, cfg: Config) -> None:
        m = cfg.model
        checks = check_diffusion_config(cfg.diffusion, cfg.sampling) + [
            (m.width >= 1 and m.blocks >= 1 and m.emb_dim >= 2 and m.emb_dim % 2 == 0,
             "model: width and blocks >= 1, emb_dim even"),
            (cfg.diffusion.stft_loss_weight == 0, "diffusion.stft_loss_weight must be 0: latents are not audio"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ConfigError(msg)

    def check_limits(self, cfg: Config) -> None:
        if cfg.family != self.name:
            return  # the vae/inverter parts' configs: their own family checks them when built below
        m = cfg.model
        if m.width > 4096 or m.blocks > 32 or m.emb_dim > 1024:
            raise ConfigError("its model section is larger than any kick model this kickserver serves")

    def part_names(self, cfg: Config, part_configs: Mapping[str, Config] | None = None) -> tuple[str, ...]:
        vae_cfg = (part_configs or {}).get("vae")
        if vae_cfg is not None and vae_cfg.family == "mel_vae" and vae_cfg.inverter.kind == "griffin-lim":
            return ("denoiser", "vae")
        return self.parts

    def part_modules(self, configs: Mapping[str, Config]) -> dict[str, torch.nn.Module]:
        from ..mel_vae import FAMILY as MEL_VAE
        from ..mlp_denoiser import MLPDenoiser

        vae_cfg = configs.get("vae")
        if vae_cfg is None or vae_cfg.family != "mel_vae":
            raise ConfigError("its vae part is not a mel-vae model")
        MEL_VAE.check_limits(vae_cfg)
        den_cfg = configs["denoiser"]
        if (vae_cfg.data.sample_rate, vae_cfg.data.length) != (den_cfg.data.sample_rate, den_cfg.data.length):
            raise ConfigError("its denoiser and vae parts were made for different clips")
        mods = MEL_VAE.part_modules({"vae": vae_cfg})
        mods["denoiser"] = MLPDenoiser(den_cfg.model, vae_cfg.vae.latent_dim, len(den_cfg.controls))
        return mods

    def render_passes(self, modules: Mapping[str, torch.nn.Module], configs: Mapping[str, Config]) -> list:
        """The denoiser over a latent vector, once per step (twice with guidance), then its VAE's passes."""
        from ..mel_vae import FAMILY as MEL_VAE
        from ..render_cost import RenderPass, denoiser_evaluations

        cfg, net = configs["denoiser"], modules["denoiser"]
        n, dim = len(cfg.controls), configs["vae"].vae.latent_dim

        def step() -> torch.Tensor:
            cond = (torch.zeros(1, n), torch.ones(1, n)) if n else (None, None)
            return net(torch.zeros(1, dim), torch.zeros(1), *cond)

        vae = MEL_VAE.render_passes({k: v for k, v in modules.items() if k != "denoiser"}, {"vae": configs["vae"]})
        return [RenderPass(step, denoiser_evaluations(cfg.sampling.steps, cfg.sampling.guidance, n),
                           steps=cfg.sampling.steps), *vae]

    def upgrade(self, data: dict[str, Any]) -> dict[str, Any]:
        """Configs before runs kept their VAE recorded its path as vae.path (the bundled model's among them):
        dropped, not parsed, so that path goes nowhere again. The hash still says which VAE it is. And the
        sampling section's image_reject_db (0: off), which is the waveform family's own now."""
        data = without_keys(data, "sampling", "image_reject_db")
        vae = data.get("vae")
        if isinstance(vae, dict) and "path" in vae:
            data = dict(data, vae={k: v for k, v in vae.items() if k != "path"})
        return data

    def generator_class(self):
        from .generator import LatentDiffusionGenerator

        return LatentDiffusionGenerator

    def map_latent_dim(self, part_configs: Mapping[str, Config]) -> int | None:
        return int(part_configs["vae"].vae.latent_dim)  # the VAE's posterior means (its encoder)


FAMILY = LatentDiffusion()

