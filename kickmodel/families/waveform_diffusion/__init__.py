"""Family "waveform_diffusion": a compact 1-D U-Net denoiser over the raw waveform.

Sections: `model` (UNetConfig: the network), `diffusion` and `sampling` (kickmodel/diffusion.py).
Artifact part: `denoiser` (the U-Net's weights). How it works and why: docs/model.md. Its training:
trainer/recipes/waveform_diffusion.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ...config import Config, ConfigError, DataConfig, TrainConfig
from ...diffusion import DiffusionConfig, check_diffusion_config
from .. import make_config
from ..base import Family
from .config import UNetConfig, WaveformSamplingConfig

CONTROLS = ("decay", "pitch", "click")


class WaveformDiffusion(Family):
    name = "waveform_diffusion"
    summary = "diffusion over the raw waveform with a compact 1-D U-Net"
    sections = {"model": UNetConfig, "diffusion": DiffusionConfig, "sampling": WaveformSamplingConfig}
    parts = ("denoiser",)

    def presets(self) -> dict[str, Config]:
        from ...config import ConditioningConfig

        cond = ConditioningConfig(controls=CONTROLS)
        tiny = make_config(
            self.name, "tiny", data=DataConfig(length=4096), conditioning=cond,
            model=UNetConfig(patch=8, patch_kernel=16, widths=(16, 32), heads=2, emb_dim=32, out_smoothing=5,
                             dilations=(1,)),
            train=TrainConfig(batch_size=4, micro_batch=4, max_steps=40, warmup_steps=5, log_every=5, val_every=10,
                              ckpt_every=10, sample_every=0, ema_decay=0.9),
            sampling=WaveformSamplingConfig(steps=10))
        small = make_config(
            self.name, "small", conditioning=cond, model=UNetConfig(widths=(32, 48, 64, 96, 128)),
            diffusion=DiffusionConfig(low_noise_bias=0.5),
            train=TrainConfig(batch_size=16, micro_batch=16, max_steps=3000, sample_every=500))
        base = make_config(
            self.name, "base", conditioning=cond,
            model=UNetConfig(widths=(64, 96, 128, 192, 256), blocks_per_level=2, dilations=(1, 3, 9)),
            train=TrainConfig(batch_size=32, micro_batch=16, max_steps=30000, mixed_precision="auto",
                              grad_checkpointing=True, lr=2e-4))
        return {"tiny": tiny, "small": small, "base": base}

    def check_config(self, cfg: Config) -> None:
        from .pqmf import edge_frames

        m = cfg.model
        stride = m.patch * 2 ** (len(m.widths) - 1)
        levels = 2 ** (len(m.widths) - 1)
        if m.io == "pqmf" and m.patch >= 1 and m.pqmf_taps >= 2:
            frames = cfg.data.length // m.patch + 2 * edge_frames(m.patch, m.pqmf_taps)
            fits = cfg.data.length % m.patch == 0 and frames % levels == 0
        else:
            fits = cfg.data.length % stride == 0
        checks = check_diffusion_config(cfg.diffusion, cfg.sampling) + [
            (m.io in ("conv", "pqmf"), f"model.io {m.io!r} is not conv or pqmf"),
            (m.io != "pqmf" or (m.pqmf_taps >= 2 and m.pqmf_taps % 2 == 0), "model.pqmf_taps must be even"),
            (len(m.widths) >= 1 and all(w > 0 and w % m.heads == 0 for w in m.widths),
             "model.widths must be positive multiples of model.heads"),
            (m.patch >= 1 and m.patch_kernel >= m.patch and (m.patch_kernel - m.patch) % 2 == 0,
             "model.patch_kernel must be >= model.patch and differ from it by an even number"),
            (fits, f"data.length {cfg.data.length} does not fit the model's levels (its subband frames must "
                   f"halve {len(m.widths) - 1} times)"),
            (m.blocks_per_level >= 1 and len(m.dilations) >= 1, "model needs at least one block and one dilation"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ConfigError(msg)

    def check_limits(self, cfg: Config) -> None:
        m = cfg.model
        if (len(m.widths) > 8 or max(m.widths) > 1024 or m.blocks_per_level > 4 or len(m.dilations) > 6
                or max(m.dilations) > 243 or m.patch_kernel > 256 or m.emb_dim > 1024 or m.heads > 64
                or m.out_smoothing > 63 or m.pqmf_taps > 2048 or m.patch > 64):
            raise ConfigError("its model section is larger than any kick model this kickserver serves "
                              "(widths <= 1024 on <= 8 levels, <= 4 blocks, kernels <= 256)")

    def render_passes(self, modules: Mapping[str, torch.nn.Module], configs: Mapping[str, Config]) -> list:
        """The U-Net over the whole clip, once per step (twice with guidance)."""
        from ..render_cost import RenderPass, denoiser_evaluations

        cfg, net = configs["denoiser"], modules["denoiser"]
        n = len(cfg.controls)

        def step() -> torch.Tensor:
            cond = (torch.zeros(1, n), torch.ones(1, n)) if n else (None, None)
            return net(torch.zeros(1, 1, cfg.data.length), torch.zeros(1), *cond)

        return [RenderPass(step, denoiser_evaluations(cfg.sampling.steps, cfg.sampling.guidance, n),
                           steps=cfg.sampling.steps)]

    def part_modules(self, configs: Mapping[str, Config]) -> dict[str, torch.nn.Module]:
        from .network import WaveUNet

        cfg = configs["denoiser"]
        return {"denoiser": WaveUNet(cfg.model, n_controls=len(cfg.controls))}

    def generator_class(self):
        from .generator import WaveformDiffusionGenerator

        return WaveformDiffusionGenerator


FAMILY = WaveformDiffusion()
