"""Family "latent_diffusion": the project's diffusion (schedules, samplers, guidance) in the latent space
of a frozen mel-VAE artifact.

    kicktrain fit DATA --family latent-diffusion --vae vae.safetensors --run-dir runs/ld
    kicktrain fit DATA --init ld.safetensors --run-dir runs/mine     (fine-tune: the VAE comes with it)

Sections: `model` (LatentNetConfig), `diffusion`, `sampling`, `vae` (which VAE, by the content hash of
its vae part). The served artifact is one self-contained file: `denoiser` (with the latents'
normalisation), `vae` and `inverter` copied from the VAE artifact, each with its config; a vae part
whose hash is not the one the denoiser was trained with is refused. A run keeps its VAE in its own
folder (RUN/vae.safetensors, written when it starts), so resuming and exporting it need no other file,
and no file records where a VAE once was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ...config import ConditioningConfig, Config, ConfigError, TrainConfig, without_keys
from ...diffusion import DiffusionConfig, SamplingConfig, check_diffusion_config
from .. import make_config
from ..base import Family, FamilyOption, FitContext
from .config import LatentNetConfig, VAERefConfig

if TYPE_CHECKING:
    from ...artifact import Artifact

VAE_FILE = "vae.safetensors"  # a run's own copy of the VAE it trains over, in its run folder
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
    sections = {"model": LatentNetConfig, "diffusion": DiffusionConfig, "sampling": SamplingConfig,
                "vae": VAERefConfig}
    parts = ("denoiser", "vae", "inverter")
    options = (
        FamilyOption("vae", "the mel-vae model whose latent space it learns (or a latent-diffusion model, which "
                            "carries one); a resumed run takes only its own VAE", commands=("fit", "profile", "bench"),
                     metavar="FILE", type=Path, artifact_of="mel_vae"),
        FamilyOption("vae", "a decoder-only fine-tune (vae.train_encoder=false) of the run's VAE, exported in its "
                            "place", commands=("export",), metavar="FILE", type=Path),
    )

    def presets(self) -> dict[str, Config]:
        cond = ConditioningConfig(controls=CONTROLS)
        common = {"conditioning": cond, "diffusion": LATENT_DIFFUSION}
        tiny = make_config(self.name, "tiny", model=LatentNetConfig(width=32, blocks=2, emb_dim=32),
                           sampling=SamplingConfig(steps=10, time_power=1.0),
                           train=TrainConfig(batch_size=4, micro_batch=4, max_steps=40, warmup_steps=5, log_every=5,
                                             val_every=10, ckpt_every=10, sample_every=0, ema_decay=0.9), **common)
        small = make_config(self.name, "small", model=LatentNetConfig(), sampling=LATENT_SAMPLING,
                            train=TrainConfig(batch_size=64, micro_batch=64, max_steps=20000, lr=5e-4,
                                              sample_every=2000, val_every=500, ckpt_every=500), **common)
        base = make_config(self.name, "base", model=LatentNetConfig(width=512, blocks=6), sampling=LATENT_SAMPLING,
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

    def check_resume(self, cfg: Config, options: Mapping[str, Any]) -> None:
        """--vae given to resume a run must be the VAE the run trains over (its vae part's hash, cfg.vae.sha256):
        vae_artifact refuses another, here at once, before the run reads its data."""
        if options.get("vae"):
            self.vae_artifact(cfg, FitContext(device=torch.device("cpu"), log=lambda m: None, options=options))

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
        from .network import LatentDenoiserNet

        vae_cfg = configs.get("vae")
        if vae_cfg is None or vae_cfg.family != "mel_vae":
            raise ConfigError("its vae part is not a mel-vae model")
        MEL_VAE.check_limits(vae_cfg)
        den_cfg = configs["denoiser"]
        if (vae_cfg.data.sample_rate, vae_cfg.data.length) != (den_cfg.data.sample_rate, den_cfg.data.length):
            raise ConfigError("its denoiser and vae parts were made for different clips")
        mods = MEL_VAE.part_modules({"vae": vae_cfg})
        mods["denoiser"] = LatentDenoiserNet(den_cfg.model, vae_cfg.vae.latent_dim, len(den_cfg.controls))
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

    def fit_config(self, cfg: Config, ctx: FitContext) -> Config:
        """A new run's VAE: --vae FILE, else the VAE inside the --init artifact (fine-tuning needs nothing
        else). It is copied into the run folder now, so the run never needs the file again."""
        if ctx.options.get("vae"):
            vae_art = load_vae(Path(ctx.options["vae"]))
        elif ctx.init is not None:
            vae_art = ctx.init  # a latent-diffusion artifact carries its VAE as its vae (and inverter) parts
        else:
            raise ConfigError("latent-diffusion trains in a mel-vae model's latent space: give it with --vae FILE "
                              "(or fine-tune a latent-diffusion model with --init FILE, which carries its VAE)")
        vcfg = vae_art.config_of("vae")
        if ctx.run_dir is not None:
            Path(ctx.run_dir).mkdir(parents=True, exist_ok=True)
            vae_art.save(Path(ctx.run_dir) / VAE_FILE)
        cfg = cfg.with_section("vae", VAERefConfig(sha256=vae_art.part_hashes["vae"]))
        if ctx.init is not None:
            cfg = cfg.with_section("model", ctx.init.config.model).with_section("diffusion", ctx.init.config.diffusion)
        ctx.log(f"latent diffusion over the VAE of {vae_art.path.name}: {vcfg.vae.latent_dim}-dimensional latents, "
                f"{vcfg.inverter.kind} inverter" + (f" (a copy kept as {VAE_FILE} in the run folder)"
                                                    if ctx.run_dir is not None else ""))
        return cfg.replace("data", sample_rate=vcfg.data.sample_rate, length=vcfg.data.length)

    def export_config(self, cfg: Config, options: Mapping[str, Any], log: Callable[[str], None],
                      run_dir: Path | None = None) -> Config:
        """--vae FILE: export with a decoder-only fine-tune of the run's VAE (vae.train_encoder=false) in place
        of the VAE it learned in. Only the encoder (the latent space) reaches the denoiser, so it is as valid
        over the one as over the other; a VAE with another encoder is refused."""
        from .objective import same_latent_space

        unknown = set(options) - {"vae"}
        if unknown:
            raise ConfigError(f"export of a latent-diffusion model takes no {', '.join('--' + k for k in unknown)}")
        if not options.get("vae"):
            return cfg
        path = Path(options["vae"])
        new = load_vae(path)
        if new.part_hashes["vae"] == cfg.vae.sha256:
            return cfg  # the run's own VAE: nothing to swap
        old = self.vae_artifact(cfg, FitContext(device=torch.device("cpu"), run_dir=run_dir))
        if not same_latent_space(old, new):
            raise ConfigError(f"--vae {path.name}: its encoder differs from that of the VAE this run learned in "
                              "(another latent space); only a decoder-only fine-tune of it can take its place")
        log(f"exporting with {path.name}'s decoder: a decoder-only fine-tune of the VAE this run learned in")
        return cfg.with_section("vae", VAERefConfig(sha256=new.part_hashes["vae"]))

    def vae_artifact(self, cfg: Config, ctx: FitContext) -> Artifact:
        """The VAE a run trains over (cfg.vae.sha256): --vae FILE when given (it must be that VAE), else the
        run folder's own copy. A file whose vae part has another hash is refused, never trained over."""
        from ...artifact import load_artifact

        want = cfg.vae.sha256
        if ctx.options.get("vae"):
            path = Path(ctx.options["vae"])
            art = load_vae(path)
            if art.part_hashes["vae"] != want:
                raise ConfigError(f"--vae {path.name} is not the VAE this run trains over: it has changed since this "
                                  f"run started (its vae part's sha256 begins {art.part_hashes['vae'][:12]}, the "
                                  f"run's {want[:12]}); leave --vae out to use the run's own copy, or start a new "
                                  "run over it")
            return art
        copy = Path(ctx.run_dir) / VAE_FILE if ctx.run_dir is not None else None
        if copy is None or not copy.is_file():
            where = f"{ctx.run_dir} holds no copy of the VAE it trains over ({VAE_FILE}; runs started before " \
                    "kicktrain kept one have none)" if ctx.run_dir is not None else "no run folder to take it from"
            raise ConfigError(f"latent diffusion needs its VAE: {where}; give that VAE with --vae FILE (its vae "
                              f"part's sha256 begins {want[:12]})")
        art = load_artifact(copy)
        if art.part_hashes.get("vae") != want:
            raise ConfigError(f"{copy}: the run's copy of its VAE has changed since this run started (its vae part's "
                              f"hash is not the run's {want[:12]}...); put the VAE it started with back, or start a "
                              "new run")
        return art

    def objective(self, cfg: Config, ctx: FitContext):
        from .network import LatentDenoiserNet
        from .objective import LatentObjective

        vae_art = self.vae_artifact(cfg, ctx)
        net = LatentDenoiserNet(cfg.model, vae_art.config_of("vae").vae.latent_dim, len(cfg.controls)).to(ctx.device)
        return LatentObjective(cfg, net, vae_art, ctx.device)

    def load_generator(self, art, device: torch.device):
        from .generator import LatentDiffusionGenerator

        return LatentDiffusionGenerator(art, device)

    def map_latent_dim(self, part_configs: Mapping[str, Config]) -> int | None:
        return int(part_configs["vae"].vae.latent_dim)  # the VAE's posterior means (its encoder)


FAMILY = LatentDiffusion()


def load_vae(path: Path) -> Artifact:
    """An artifact that holds a mel-VAE as its `vae` part: a mel-vae model, or a latent-diffusion model (which
    carries the VAE it was trained over), for --vae. ConfigError names the file when it is neither."""
    from ...artifact import load_artifact

    art = load_artifact(path)
    if art.family not in ("mel_vae", "latent_diffusion"):
        raise ConfigError(f"--vae {path.name} is a {art.family} model, not a mel-vae model (nor a latent-diffusion "
                          "model, which carries one)")
    return art
