"""Family "mel_vae": a VAE over log-mel spectrograms with a learned prior and a learned inverter.

One pass per kick (no sampler, no steps): a latent from the prior p(z | controls), the decoder's
log-mel, the inverter's audio. Its encoder gives every kick a point in a latent space a user can see
as a map (`kicktrain map`). Sections: `mel`, `vae`, `prior`, `inverter`, `sampling`
(config.py). Artifact parts: `vae` (encoder, decoder, prior) and `inverter` (none for Griffin-Lim). Its training:
trainer/recipes/mel_vae.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ...config import ConditioningConfig, Config, ConfigError, DataConfig, TrainConfig
from .. import make_config
from ..base import Family
from .config import InverterConfig, MelConfig, PriorConfig, VAEConfig, VAESamplingConfig

CONTROLS = ("decay", "pitch", "click")


class MelVAEFamily(Family):
    name = "mel_vae"
    summary = "a VAE over log-mel spectrograms, a learned prior, and a learned (or Griffin-Lim) inverter"
    sections = {"mel": MelConfig, "vae": VAEConfig, "prior": PriorConfig, "inverter": InverterConfig,
                "sampling": VAESamplingConfig}
    parts = ("vae", "inverter")

    def presets(self) -> dict[str, Config]:
        cond = ConditioningConfig(controls=CONTROLS)
        tiny = make_config(
            self.name, "tiny", data=DataConfig(length=4096), conditioning=cond,
            mel=MelConfig(n_mels=32, n_fft=512, hop=128),
            vae=VAEConfig(channels=(16, 32), blocks_per_level=1, latent_dim=8, kl_warmup_steps=20),
            prior=PriorConfig(components=2, hidden=16), inverter=InverterConfig(dim=32, blocks=1),
            train=TrainConfig(batch_size=4, micro_batch=4, max_steps=40, warmup_steps=5, log_every=5, val_every=10,
                              ckpt_every=10, sample_every=0, ema_decay=0.9))
        small = make_config(
            self.name, "small", conditioning=cond,
            train=TrainConfig(batch_size=16, micro_batch=16, max_steps=8000, sample_every=1000, ema_decay=0.998))
        base = make_config(
            self.name, "base", conditioning=cond, vae=VAEConfig(channels=(128, 256, 384), latent_dim=64),
            inverter=InverterConfig(dim=384, blocks=8, batch=16),
            train=TrainConfig(batch_size=32, micro_batch=16, max_steps=30000, mixed_precision="auto",
                              grad_checkpointing=True, lr=2e-4))
        return {"tiny": tiny, "small": small, "base": base}

    def check_config(self, cfg: Config) -> None:
        m, v, p, i = cfg.mel, cfg.vae, cfg.prior, cfg.inverter
        frames = cfg.data.length // m.hop if m.hop > 0 else 0
        checks = [
            (m.hop >= 16 and m.n_fft >= 2 * m.hop and m.n_fft % 2 == 0, "mel: n_fft must be even and >= 2 x hop >= 32"),
            (cfg.data.length % max(m.hop, 1) == 0, f"data.length must be a multiple of mel.hop ({m.hop})"),
            (8 <= m.n_mels <= m.n_fft // 2, "mel.n_mels must be within 8..n_fft/2"),
            (0 <= m.f_min < m.f_max, "mel.f_min must be below mel.f_max"),
            (m.floor_db < -20, "mel.floor_db must be below -20"),
            (len(v.channels) >= 1 and all(c > 0 for c in v.channels), "vae.channels must be positive"),
            (frames >= 2 ** (len(v.channels) - 1), "the clip has fewer mel frames than the VAE's levels need"),
            (v.latent_dim >= 1 and v.blocks_per_level >= 1 and v.kernel % 2 == 1, "vae: latent_dim and blocks >= 1, "
             "kernel odd"),
            (v.recon in ("l1", "l2"), f"vae.recon {v.recon!r} is not l1 or l2"),
            (0 < v.recon_low_weight <= 100 and 0 < v.recon_low_hz < 20000,
             "vae.recon_low_weight must be within (0, 100] and vae.recon_low_hz within (0, 20000) Hz"),
            (0 <= v.recon_linear_weight <= 100 and 0 <= v.recon_pitch_weight <= 100,
             "vae.recon_linear_weight and vae.recon_pitch_weight must be within [0, 100]"),
            (v.beta >= 0 and v.free_bits >= 0 and v.kl_warmup_steps >= 0, "vae: beta, free_bits, warm-up >= 0"),
            (p.components >= 1 and p.hidden >= 1, "prior: components and hidden >= 1"),
            (i.kind in ("vocos", "griffin-lim"), f"inverter.kind {i.kind!r} is not vocos or griffin-lim"),
            (i.dim >= 1 and i.blocks >= 0 and i.griffin_lim_iters >= 1 and i.batch >= 1 and i.nnls_iters >= 0,
             "inverter: dim, batch and iterations >= 1, nnls_iters >= 0"),
            (cfg.sampling.temperature > 0, "sampling.temperature must be > 0"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ConfigError(msg)

    def check_limits(self, cfg: Config) -> None:
        m, v, p, i = cfg.mel, cfg.vae, cfg.prior, cfg.inverter
        if (len(v.channels) > 6 or max(v.channels) > 1024 or v.blocks_per_level > 6 or v.kernel > 31
                or v.latent_dim > 512 or m.n_mels > 256 or m.n_fft > 8192 or p.components > 64 or p.hidden > 1024
                or i.dim > 1024 or i.blocks > 16 or i.griffin_lim_iters > 256 or i.nnls_iters > 1000):
            raise ConfigError("its vae/mel/prior/inverter sections are larger than any kick model this "
                              "kickserver serves")

    def part_names(self, cfg: Config, part_configs: Mapping[str, Config] | None = None) -> tuple[str, ...]:
        return ("vae",) if cfg.inverter.kind == "griffin-lim" else ("vae", "inverter")

    def _modules(self, cfg: Config):
        from .inverter import VocosInverter
        from .mel import mel_frames
        from .network import MelVAE

        frames = mel_frames(cfg)
        vae = MelVAE(cfg.mel, cfg.vae, cfg.prior, frames, len(cfg.controls))
        inv = None
        if cfg.inverter.kind == "vocos":
            inv = VocosInverter(cfg.inverter, cfg.mel.n_mels, cfg.mel.n_fft, cfg.mel.hop, cfg.data.length)
        return vae, inv

    def render_passes(self, modules: Mapping[str, torch.nn.Module], configs: Mapping[str, Config]) -> list:
        """A source's encoding (a variation, an interpolation's file end: its STFT, mel and encoder), and a
        latent's decoding (decoder, then the inverter: Vocos and its inverse STFT, or NNLS and Griffin-Lim)."""
        from ..render_cost import RenderPass
        from .inverter import build_inverter
        from .mel import MelFrontEnd

        cfg, vae = configs["vae"], modules["vae"]
        # the front end's filterbank is computed on the CPU (n_fft/2 + 1 by n_mels: check_limits bounds it), then
        # moved to the meta device, where Griffin-Lim's pseudo-inverse of it costs nothing
        front = MelFrontEnd(cfg.mel, cfg.data.sample_rate, cfg.data.length).to("meta")
        inverter = modules.get("inverter")
        if inverter is None:  # Griffin-Lim: no weights, so not among the part modules
            with torch.device("meta"):
                inverter = build_inverter(cfg.inverter, front)

        def encode() -> torch.Tensor:
            return vae.encode(front(torch.zeros(1, cfg.data.length)))[0]

        def decode(**loops: int) -> torch.Tensor:
            if loops:  # Griffin-Lim's iterations and its NNLS updates, as many as render_cost traces
                inverter.iters, inverter.nnls_iters = loops["griffin_lim"], loops["nnls"]
            return inverter(vae.decode(torch.zeros(1, cfg.vae.latent_dim)))

        i = cfg.inverter
        loops = {"griffin_lim": i.griffin_lim_iters, "nnls": i.nnls_iters} if i.kind == "griffin-lim" else {}
        return [RenderPass(encode, encode=True), RenderPass(decode, loops=loops)]

    def part_modules(self, configs: Mapping[str, Config]) -> dict[str, torch.nn.Module]:
        vae, inv = self._modules(configs["vae"])
        return {"vae": vae} | ({"inverter": inv} if inv is not None else {})

    def generator_class(self):
        from .generator import MelVAEGenerator

        return MelVAEGenerator

    def map_latent_dim(self, part_configs: Mapping[str, Config]) -> int | None:
        return int(part_configs["vae"].vae.latent_dim)  # the posterior means (its encoder)


FAMILY = MelVAEFamily()
