"""Family "kick_synth": a differentiable kick synthesiser (synth.py) whose few dozen numbers a prior generates.

    kicktrain fit DATA --family kick-synth --preset small --run-dir runs/synth

Training fits the synth to every clip (analysis by synthesis, fit.py: the clip's numbers), then a denoiser
learns the distribution of those numbers given the controls (the project's diffusion and samplers over a
vector, with latent diffusion's residual MLP). Serving samples numbers and plays them: the sweep, the
attack from silence and the pitch exist by construction, and a control given in units (pitch_hz, decay_s,
click_db) is set exactly. Sections: `model` (the prior's network), `diffusion`, `sampling`, `fit`, `synth` (which
synth version plays the numbers: absent in configs written before versions, which are version 1), `transient` (a learned
transient played after the synth, transient.py: absent or not enabled in every model made before it, which play the
synth alone).
Artifact parts: `denoiser` (the prior, with the numbers' normalisation); `transient` (only when enabled); the synth has
no weights. Its training (the
fits kept by clip, the prior's objective): trainer/recipes/kick_synth.py; fit.py stays here, as a served model
fits a variation's source file too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ...config import AugmentConfig, ConditioningConfig, Config, ConfigError, DataConfig, TrainConfig, without_keys
from ...diffusion import DiffusionConfig, SamplingConfig, check_diffusion_config
from .. import make_config
from ..base import Family
from ..mlp_denoiser import MLPDenoiserConfig
from . import synth_v2  # noqa: F401  (registers synth version 2 with synth.py's version lookup)
from .config import SynthConfig, SynthFitConfig, TransientConfig

CONTROLS = ("decay", "pitch", "click")
NO_AUGMENT = AugmentConfig(gain_p=0.0, pitch_p=0.0, stretch_p=0.0, offset_p=0.0, noise_p=0.0, reverb_p=0.0, eq_p=0.0)
# the fitted numbers normalised to unit spread: v-prediction, no STFT term (numbers, not audio), x0 within +-5
SYNTH_DIFFUSION = DiffusionConfig(prediction="v", stft_loss_weight=0.0, data_scale=1.0, clip_x0=5.0)
SYNTH_SAMPLING = SamplingConfig(steps=10, time_power=0.35)
MAX_FIT_ITERS = 2000  # a fit's steps, each bounded here: a served model runs them when asked for a file's variation
# the transient's sizes: its network stays a few tens of thousands of weights, its window within a kick's attack
MAX_TRANSIENT_CHANNELS, MAX_TRANSIENT_LAYERS, MAX_TRANSIENT_MS, MAX_TRANSIENT_STEPS = 64, 10, 100.0, 100_000


class KickSynthFamily(Family):
    name = "kick_synth"
    summary = "a differentiable kick synthesiser whose numbers a diffusion prior generates (fitted to each kick)"
    sections = {"model": MLPDenoiserConfig, "diffusion": DiffusionConfig, "sampling": SamplingConfig,
                "fit": SynthFitConfig, "synth": SynthConfig, "transient": TransientConfig}
    parts = ("denoiser", "transient")

    def presets(self) -> dict[str, Config]:
        from .synth import LATEST

        common = {"conditioning": ConditioningConfig(controls=CONTROLS), "diffusion": SYNTH_DIFFUSION,
                  "augment": NO_AUGMENT, "synth": SynthConfig(version=LATEST)}
        tiny = make_config(self.name, "tiny", data=DataConfig(length=4096), model=MLPDenoiserConfig(width=32, blocks=2,
                                                                                                 emb_dim=32),
                           sampling=SamplingConfig(steps=10, time_power=1.0),
                           fit=SynthFitConfig(iters=20, restart_iters=5, serve_iters=10),
                           train=TrainConfig(batch_size=4, micro_batch=4, max_steps=40, warmup_steps=5, log_every=5,
                                             val_every=10, ckpt_every=10, sample_every=0, ema_decay=0.9,
                                             select_by="dials", select_kicks=2), **common)
        small = make_config(self.name, "small", model=MLPDenoiserConfig(width=256, blocks=4), sampling=SYNTH_SAMPLING,
                            train=TrainConfig(batch_size=64, micro_batch=64, max_steps=3000, lr=5e-4, warmup_steps=100,
                                              sample_every=0, val_every=250, ckpt_every=500, ema_decay=0.995,
                                              select_by="dials"),
                            **common)
        base = make_config(self.name, "base", model=MLPDenoiserConfig(width=512, blocks=6), sampling=SYNTH_SAMPLING,
                           fit=SynthFitConfig(iters=400, restart_iters=60),
                           train=TrainConfig(batch_size=128, micro_batch=128, max_steps=20000, lr=3e-4,
                                             sample_every=0, select_by="dials"), **common)
        return {"tiny": tiny, "small": small, "base": base}

    def upgrade(self, data: dict[str, Any]) -> dict[str, Any]:
        """Configs written when the sampling section carried the waveform family's image_reject_db (0: off; the
        shipped kick-synth model's among them): the key dropped."""
        return without_keys(data, "sampling", "image_reject_db")

    def check_config(self, cfg: Config) -> None:
        from .synth import VERSIONS

        m, f = cfg.model, cfg.fit
        aug = cfg.augment
        augmenting = [k for k in vars(aug) if k.endswith("_p") and getattr(aug, k) > 0]
        checks = check_diffusion_config(cfg.diffusion, cfg.sampling) + [
            (m.width >= 1 and m.blocks >= 1 and m.emb_dim >= 2 and m.emb_dim % 2 == 0,
             "model: width and blocks >= 1, emb_dim even"),
            (cfg.diffusion.stft_loss_weight == 0, "diffusion.stft_loss_weight must be 0: the prior makes numbers"),
            (f.iters >= 1 and f.restart_iters >= 1 and f.serve_iters >= 1 and f.batch >= 1 and 0 < f.lr <= 1
             and 0 <= f.jitter <= 2, "fit: iters, restart_iters, serve_iters and batch >= 1, lr within (0, 1], "
                                     "jitter within 0..2"),
            (not augmenting, f"augment: a kick-synth run fits each clip once, so it takes no augmentation (set "
                             f"{', '.join('augment.' + k + '=0' for k in augmenting)})"),
            (cfg.data.length >= 2048, "data.length must be at least 2048 samples"),
            (cfg.synth.version in VERSIONS, f"synth.version {cfg.synth.version}: this kickserver plays synth "
                                            f"version {', '.join(map(str, VERSIONS))}"),
        ]
        tr = cfg.transient
        if tr.enabled:
            checks += [
                (tr.channels >= 1 and tr.layers >= 1, f"transient.channels ({tr.channels}) and transient.layers "
                                                      f"({tr.layers}) must be >= 1"),
                (1.0 <= tr.window_ms <= MAX_TRANSIENT_MS,
                 f"transient.window_ms {tr.window_ms:g}: set it within 1..{MAX_TRANSIENT_MS:g} ms (the attack)"),
                (tr.window_ms * cfg.data.sample_rate / 1000 < cfg.data.length,
                 f"transient.window_ms {tr.window_ms:g} is longer than the clip (data.length): set it shorter"),
                (-60.0 <= tr.max_db <= 0.0, f"transient.max_db {tr.max_db:g}: set it within -60..0 dB (re the kick's "
                                            "peak)"),
                (tr.steps >= 1 and 0 < tr.lr <= 1, f"transient.steps ({tr.steps}) must be >= 1 and transient.lr "
                                                   f"({tr.lr:g}) within (0, 1]"),
            ]
        for ok, msg in checks:
            if not ok:
                raise ConfigError(msg)

    def check_limits(self, cfg: Config) -> None:
        m, f = cfg.model, cfg.fit
        if (m.width > 4096 or m.blocks > 32 or m.emb_dim > 1024 or f.serve_iters > MAX_FIT_ITERS
                or f.restart_iters > MAX_FIT_ITERS or f.iters > MAX_FIT_ITERS or f.batch > 1024):
            raise ConfigError("its model or fit section is larger than any kick model this kickserver serves")
        tr = cfg.transient
        if tr.enabled and (tr.channels > MAX_TRANSIENT_CHANNELS or tr.layers > MAX_TRANSIENT_LAYERS
                           or tr.window_ms > MAX_TRANSIENT_MS or tr.steps > MAX_TRANSIENT_STEPS):
            raise ConfigError(f"its transient section is larger than any this kickserver serves (at most "
                              f"{MAX_TRANSIENT_CHANNELS} channels, {MAX_TRANSIENT_LAYERS} layers, "
                              f"{MAX_TRANSIENT_MS:g} ms, {MAX_TRANSIENT_STEPS} steps)")

    def part_names(self, cfg: Config, part_configs: Mapping[str, Config] | None = None) -> tuple[str, ...]:
        """The transient's part only where the config enables it."""
        return ("denoiser", "transient") if cfg.transient.enabled else ("denoiser",)

    def part_modules(self, configs: Mapping[str, Config]) -> dict[str, torch.nn.Module]:
        from .network import prior_net
        from .synth import n_params
        from .transient import transient_net

        cfg = configs["denoiser"]
        out = {"denoiser": prior_net(cfg)}
        if cfg.transient.enabled:
            out["transient"] = transient_net(configs.get("transient", cfg), n_params(cfg.synth.version))
        return out

    def render_passes(self, modules: Mapping[str, torch.nn.Module], configs: Mapping[str, Config]) -> list:
        """The prior over the numbers, once per step (twice with guidance), then the synth over the clip (and its
        transient, where the model has one); a source file's fit (a variation, a morph's end) is serve_iters renders
        and their gradients (the fit is the synth's alone)."""
        from ..render_cost import RenderPass, denoiser_evaluations
        from .fit import Target, distance
        from .synth import n_params, synth_for

        cfg, net = configs["denoiser"], modules["denoiser"]
        n, version = len(cfg.controls), cfg.synth.version
        numbers = n_params(version)

        def step() -> torch.Tensor:
            cond = (torch.zeros(1, n), torch.ones(1, n)) if n else (None, None)
            return net(torch.zeros(1, numbers), torch.zeros(1), *cond)

        synth = synth_for(version, cfg.data.sample_rate, cfg.data.length).to("meta")
        # a kick with a long decay is played (and its decay_s adjusted) at up to MAX_KICK_S: counted at that length,
        # the most one kick's play costs
        from .generator import MAX_KICK_S

        longest = synth_for(version, cfg.data.sample_rate,
                            max(cfg.data.length, int(round(MAX_KICK_S * cfg.data.sample_rate)))).to("meta")

        def play() -> torch.Tensor:
            return longest(torch.zeros(1, numbers))

        def fit_step() -> torch.Tensor:  # forward only: the backward costs about twice as much again
            return distance(synth(torch.zeros(1, numbers)), Target(torch.zeros(1, cfg.data.length),
                                                                    cfg.data.sample_rate))

        from .fit import serve_restart_iters, starts_for

        starts = len(starts_for(version >= 2))  # version 2's fit starts from a pitch track: fewer shapes
        fit_rows = cfg.fit.serve_iters + starts * serve_restart_iters(cfg.fit)  # one-kick passes of a fit
        passes = [RenderPass(step, denoiser_evaluations(cfg.sampling.steps, cfg.sampling.guidance, n),
                             steps=cfg.sampling.steps), RenderPass(play)]
        transient = modules.get("transient")
        if transient is not None:
            passes.append(RenderPass(lambda: transient(torch.zeros(1, longest.length), torch.zeros(1, numbers))))
        return passes + [RenderPass(fit_step, 3 * fit_rows, encode=True)]

    def generator_class(self):
        from .generator import KickSynthGenerator

        return KickSynthGenerator

    def map_latent_dim(self, part_configs: Mapping[str, Config]) -> int | None:
        from .synth import n_params

        # the synth's fitted numbers, normalised (its encoder is the fit)
        return n_params(part_configs["denoiser"].synth.version)


FAMILY = KickSynthFamily()
