"""Training a denoiser in the latent space of a frozen mel-VAE (kickmodel.families.latent_diffusion): each augmented
batch is encoded on the fly (the VAE's encoder is cheap next to a waveform network), normalised, and diffused. With
augmentation off every clip always encodes to the same latent, so each is encoded once and kept (keyed by the clip's
content): the encoding was ~80 % of a step (docs/profiling.md). A batch is encoded ENCODE_CHUNK clips at a time,
on the training device, without gradient: the encoder's activations for a whole batch of 64 took 8.3 GB of a GPU;
a chunk of 8 takes an eighth of that, and the latents are the same (the encoder treats each clip on its
own).

    kicktrain fit DATA --family latent-diffusion --vae vae.safetensors --run-dir runs/ld
    kicktrain fit DATA --init ld.safetensors --run-dir runs/mine     (fine-tune: the VAE comes with it)

A run keeps its VAE in its own folder (RUN/vae.safetensors, written when it starts), so resuming and exporting it
need no other file, and no file records where a VAE once was; the config names it by the content hash of its vae
part (vae.sha256), and a file with another is refused, never trained over."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from kickmodel.artifact import Artifact
from kickmodel.config import Config, ConfigError
from kickmodel.families.latent_diffusion.config import VAERefConfig
from kickmodel.families.mel_vae.generator import build_parts
from kickmodel.families.mlp_denoiser import MLPDenoiser
from kickmodel.loading import load_artifact

from .base import Contents, FamilyOption, FitContext, Recipe, prefixed, unprefixed
from .diffusion import SAMPLING_KEYS, DiffusionObjective

ENCODE_CHUNK = 8  # clips the VAE encodes at a time
VAE_FILE = "vae.safetensors"  # a run's own copy of the VAE it trains over, in its run folder


class LatentObjective(DiffusionObjective):
    def __init__(self, cfg: Config, net: MLPDenoiser, vae_art: Artifact, device: torch.device) -> None:
        super().__init__(cfg, net, parts=_parts(vae_art))
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
        return _contents(self.cfg, state_dict, self.vae_art)[0]

    def part_configs(self, cfg: Config) -> dict[str, dict]:
        return _contents(cfg, {}, self.vae_art)[1]

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


def _parts(vae_art: Artifact) -> tuple[str, ...]:
    return ("denoiser",) + tuple(p for p in ("vae", "inverter") if vae_art.part_tensors(p))


def _contents(cfg: Config, weights: Mapping[str, torch.Tensor], vae_art: Artifact) -> Contents:
    """The served file is self-contained: the trained denoiser, and the VAE's parts (vae, inverter) with their
    config, copied from the VAE it trained over."""
    tensors = prefixed("denoiser", weights) | {k: v for k, v in vae_art.tensors.items()
                                               if k.split(".", 1)[0] in ("vae", "inverter")}
    vae_cfg = vae_art.config_of("vae").to_dict()
    return tensors, {p: (cfg.to_dict() if p == "denoiser" else vae_cfg) for p in _parts(vae_art)}


def load_vae(path: Path) -> Artifact:
    """An artifact that holds a mel-VAE as its `vae` part: a mel-vae model, or a latent-diffusion model (which
    carries the VAE it was trained over), for --vae. ConfigError names the file when it is neither."""
    art = load_artifact(path)
    if art.family not in ("mel_vae", "latent_diffusion"):
        raise ConfigError(f"--vae {path.name} is a {art.family} model, not a mel-vae model (nor a latent-diffusion "
                          "model, which carries one)")
    return art


class LatentDiffusionRecipe(Recipe):
    family = "latent_diffusion"
    export_keys = {"sampling": SAMPLING_KEYS}
    options = (
        FamilyOption("vae", "the mel-vae model whose latent space it learns (or a latent-diffusion model, which "
                            "carries one); a resumed run takes only its own VAE", commands=("fit", "profile", "bench"),
                     metavar="FILE", type=Path, artifact_of="mel_vae"),
        FamilyOption("vae", "a decoder-only fine-tune (vae.train_encoder=false) of the run's VAE, exported in its "
                            "place", commands=("export",), metavar="FILE", type=Path),
    )

    def check_resume(self, cfg: Config, options: Mapping[str, Any]) -> None:
        """--vae given to resume a run must be the VAE the run trains over (its vae part's hash, cfg.vae.sha256):
        vae_artifact refuses another, here at once, before the run reads its data."""
        if options.get("vae"):
            self.vae_artifact(cfg, FitContext(device=torch.device("cpu"), log=lambda m: None, options=options))

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

    def objective(self, cfg: Config, ctx: FitContext) -> LatentObjective:
        vae_art = self.vae_artifact(cfg, ctx)
        net = MLPDenoiser(cfg.model, vae_art.config_of("vae").vae.latent_dim, len(cfg.controls)).to(ctx.device)
        return LatentObjective(cfg, net, vae_art, ctx.device)

    def artifact_contents(self, cfg: Config, weights: Mapping[str, torch.Tensor], ctx: FitContext) -> Contents:
        return _contents(cfg, weights, self.vae_artifact(cfg, ctx))


RECIPE = LatentDiffusionRecipe()
