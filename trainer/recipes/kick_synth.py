"""Training the kick-synth family (kickmodel.families.kick_synth): every clip is fitted once (analysis by synthesis,
kickmodel/families/kick_synth/fit.py, which a served model also runs on a variation's source), and a denoiser learns
the distribution of the fitted numbers (the project's diffusion over a vector, as latent diffusion does over a
VAE's latents).

The fits are kept by the clip's content hash in memory and in the run folder (FITS_FILE, safetensors: tensors
only, nothing unpickled), so a resumed run, a second run over the same folder and validation fit a clip once.

With `transient.enabled`, the learned transient (kickmodel/families/kick_synth/transient.py) is trained as a phase of
its own, once the training clips are fitted and before the prior's first step (SynthObjective.fit_data,
trainer/transient.py): what it learns from, each clip and the synth playing its fit, is fixed once the fits are, and it
shares no gradient with the prior, so training it jointly would only render every batch's synth again at every prior
step (the synth's render costs many times the prior's step) for the same pairs. It rides in the trained module's
state under `transient.` (the denoiser's child, outside its forward: the prior's loss never reaches it, its weights
take no gradient after the phase), so checkpoints, the EMA and a resume carry it as they carry the prior; an export
splits it into the artifact's `transient` part. Each validation logs its window loss on the validation clips' fits
(`transient`, beside `transient_off`: the synth's alone).

The family's presets choose the step an export keeps by its dials, not by the prior's validation loss
(train.select_by = "dials", trainer/selection.py): that loss, on the held-out kicks' fitted numbers, rises while the
prior learns its conditioning and its kicks get nearer the held-out ones.

    kicktrain fit DATA --family kick-synth --preset tiny --set transient.enabled=true --run-dir runs/t
    kicktrain export runs/t runs/t/model.safetensors
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import torch

from kickmodel.config import Config
from kickmodel.families.kick_synth.fit import fit
from kickmodel.families.kick_synth.synth import U_LIMIT, n_params, params_for
from kickmodel.families.kick_synth.transient import transient_net

from ..transient import Pairs, figures, train_transient
from .base import Contents, FitContext, Recipe, prefixed, unprefixed
from .diffusion import SAMPLING_KEYS, DiffusionObjective, finetune_config

FITS_FILE = "synth_fits.safetensors"
MAX_FITS_BYTES = 256 << 20
KEY_SAMPLES = 4096
PRINT_STRIDE = 8
UNFADED_MS = 40.0  # the end a fingerprint leaves out: trainer.augment fades the last 30 ms of every batch
MAX_PRINT = 1 << 16  # samples in a fingerprint (a 1.02 s clip: 9164)
MATCH_TOLERANCE = 1e-4  # largest sample difference (at peak 1) of the same clip faded and levelled again
PROGRESS_S = 20.0  # while fitting a run's clips, a progress line at least this often (seconds on CLOCK)
MAP_FIT_CHUNK = 4  # kicks the kit map's fits take at once (a progress line may follow each chunk)
CLOCK: Callable[[], float] = time.monotonic  # tests put a fake clock here


def clip_key(clip: torch.Tensor) -> str:
    return hashlib.blake2b(clip.detach().float().cpu().contiguous().numpy().tobytes(), digest_size=16).hexdigest()


def fingerprint(clips: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """[n, <= MAX_PRINT]: each clip at peak 1, its first KEY_SAMPLES samples and every PRINT_STRIDE-th sample of its
    first 90 % (at most: never the last UNFADED_MS). The trainer's batches are the clips faded over their last 30 ms
    (trainer.augment, with nothing drawn): the same kick to within float rounding before the fade, which must find its
    fit; another kick, even one with the same first 93 ms and another tail, differs by far more than MATCH_TOLERANCE."""
    x = clips.detach().float().cpu().reshape(clips.shape[0], -1)
    x = x / x.abs().amax(dim=1, keepdim=True).clamp(min=1e-9)
    body = x[:, :max(1, min(int(0.9 * x.shape[1]), x.shape[1] - int(UNFADED_MS * sample_rate / 1000)))]
    return torch.cat([x[:, :min(KEY_SAMPLES, x.shape[1] // 2)], body[:, ::PRINT_STRIDE]], dim=1)[:, :MAX_PRINT]


def out_of_range(u: torch.Tensor, version: int = 1) -> str | None:
    """None when fitted numbers u [n_params(version)] are within what a fit makes (each within +-U_LIMIT, the ends of
    its range in kickmodel.families.kick_synth.synth.params_for(version)), else the first that is not, named."""
    bad = (u.abs() > U_LIMIT * (1 + 1e-6)).nonzero()
    if len(bad) == 0:
        return None
    i = int(bad[0, 0])
    p = params_for(version)[i]
    return f"{p.name} at {float(u[i]):.3g} past the end of its range {p.lo:g}..{p.hi:g}{p.unit} (+-{U_LIMIT:g})"


FIT_VERSION = 3  # the fit's code: 2 added the log-mel term (c7c67ec), 3 each clip's own length; others are refitted


def fit_stamp(cfg: Config) -> str:
    """What a fit depends on besides its clip: the synth, the fit's code and settings, the clips' rate."""
    f, version = cfg.fit, cfg.synth.version
    # a version-1 stamp reads as before versions existed, so a run's fits made then are still found
    synth = "" if version == 1 else f" synth={version}"
    return (f"v{FIT_VERSION} numbers={n_params(version)}{synth} rate={cfg.data.sample_rate} iters={f.iters} "
            f"restart_iters={f.restart_iters} lr={f.lr}")


def stamp_version(stamp: str | None) -> int:
    """The synth version a fit_stamp names (1 when it names none: written before versions, or by version 1)."""
    for word in (stamp or "").split():
        if word.startswith("synth="):
            try:
                return int(word[len("synth="):])
            except ValueError:
                raise ValueError(f"stamp {stamp!r}: no synth version") from None
    return 1


class FitCache:
    """Fitted numbers by clip key; written to path (atomically) after each fit, read back when a run starts."""

    def __init__(self, path: Path | None, log: Callable[[str], None], read_only: bool = False) -> None:
        self.path, self.log, self.read_only = path, log, read_only
        self.stamp: str | None = None  # the settings the fits in it were made with (fit_stamp)
        self.fits: dict[str, torch.Tensor] = {}
        self.prints: dict[str, torch.Tensor] = {}
        self.distances: dict[str, float] = {}
        if path is not None and path.is_file():
            self._read(path)

    def _read(self, path: Path) -> None:
        from safetensors import SafetensorError, safe_open
        from safetensors.torch import load

        try:
            if path.stat().st_size > MAX_FITS_BYTES:
                raise ValueError(f"larger than {MAX_FITS_BYTES >> 20} MB")
            with safe_open(str(path), "pt") as f:
                self.stamp = (f.metadata() or {}).get("stamp")
            tensors = load(path.read_bytes())
            version = stamp_version(self.stamp)
            numbers = n_params(version)  # ValueError for a version this kickserver does not know: refitted
            keys = [k for k in tensors if k.startswith("u.")]
            outside: list[str] = []
            for k in keys:
                u = tensors[k]
                f = tensors.get("f." + k[2:])
                if (u.shape == (numbers,) and u.dtype == torch.float32 and bool(torch.isfinite(u).all())
                        and f is not None and f.dtype == torch.float32 and f.ndim == 1 and f.numel() <= MAX_PRINT
                        and bool(torch.isfinite(f).all())):
                    wrong = out_of_range(u, version)
                    if wrong:  # finite but no fit makes it: a damaged or planted file, refitted rather than trained on
                        outside.append(wrong)
                        continue
                    self.fits[k[2:]], self.prints[k[2:]] = u, f
                    d = tensors.get("d." + k[2:])
                    self.distances[k[2:]] = float(d) if d is not None and d.numel() == 1 else float("nan")
            if outside:
                self.log(f"synth fits: {len(outside)} of {len(keys)} in {path.name} lie outside the synth's ranges "
                         f"(e.g. {outside[0]}); those clips are fitted again")
            self.log(f"synth fits: {len(self.fits)} kept in {path.name}")
        except (OSError, ValueError, SafetensorError) as e:  # a damaged cache is refitted, never trusted
            self.fits.clear()
            self.prints.clear()
            self.log(f"synth fits: {path.name} unreadable ({e}); fitting again")

    def _write(self) -> None:
        if self.path is None or self.read_only:
            return
        from safetensors.torch import save

        from kickmodel.fsutil import atomic_write_bytes

        tensors = {f"u.{k}": v.contiguous() for k, v in self.fits.items()}
        tensors |= {f"d.{k}": torch.tensor(self.distances.get(k, float("nan"))) for k in self.fits}
        tensors |= {f"f.{k}": self.prints[k].contiguous() for k in self.fits}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, save(tensors, metadata={"stamp": self.stamp or ""}))

    def _find(self, clips: torch.Tensor, sample_rate: int) -> list[str | None]:
        """The key of each clip's fit: the clip itself, or one whose fingerprint it matches; None when unfitted."""
        keys: list[str | None] = [clip_key(c) for c in clips]
        missing = [i for i, k in enumerate(keys) if k not in self.fits]
        if missing and self.prints:
            prints = fingerprint(clips[missing], sample_rate)
            names = [k for k, v in self.prints.items() if v.shape == prints.shape[1:]]
            if names:
                refs = torch.stack([self.prints[k] for k in names])  # [m, K]: one comparison a clip, not m
                for i, fp in zip(missing, prints):
                    gap = (refs - fp).abs().amax(dim=1)
                    j = int(gap.argmin())
                    if float(gap[j]) <= MATCH_TOLERANCE:
                        keys[i] = names[j]
        return [k if k in self.fits else None for k in keys]

    def numbers(self, clips: torch.Tensor, cfg: Config) -> torch.Tensor:
        """[n, n_params(cfg.synth.version)] fitted numbers of clips [n, L], fitting (and keeping) those not fitted yet.
        Fits made under other settings (another synth, rate or fit: fit_stamp) are dropped first, not mixed in."""
        stamp = fit_stamp(cfg)
        if self.stamp != stamp:
            if self.fits:
                self.log(f"synth fits: {len(self.fits)} were made with other settings ({self.stamp or 'unknown'}); "
                         "fitting again")
            self.fits.clear()
            self.prints.clear()
            self.distances.clear()
            self.stamp = stamp
        found = self._find(clips, cfg.data.sample_rate)
        first: dict[str, int] = {}
        for i, k in enumerate(found):
            if k is None:
                first.setdefault(clip_key(clips[i]), i)
        todo = sorted(first.values())
        if todo:
            f = cfg.fit
            u, d = fit(clips[todo].detach().float().cpu(), cfg.data.sample_rate, iters=f.iters,
                       restart_iters=f.restart_iters, lr=f.lr, batch=f.batch, version=cfg.synth.version,
                       log=self.log if len(todo) > 1 else None, progress_s=PROGRESS_S, clock=CLOCK)
            prints = fingerprint(clips[todo], cfg.data.sample_rate)
            for i, row, dist, fp in zip(todo, u, d.tolist(), prints):
                k = clip_key(clips[i])
                self.fits[k], self.distances[k], self.prints[k] = row.clone(), dist, fp.clone()
            self._write()
            found = self._find(clips, cfg.data.sample_rate)
        return torch.stack([self.fits[k] for k in found])


TRANSIENT = "transient"  # the transient's part, and its child's name in the trained module


def split_parts(cfg: Config, weights: Mapping[str, torch.Tensor]) -> Contents:
    """A run's module weights as the artifact's parts: the denoiser's, and the transient's (its `transient.` child,
    where the config enables it)."""
    head = TRANSIENT + "."
    tensors = prefixed("denoiser", {k: v for k, v in weights.items() if not k.startswith(head)})
    configs = {"denoiser": cfg.to_dict()}
    if cfg.transient.enabled:
        tensors |= prefixed(TRANSIENT, unprefixed(TRANSIENT, weights))
        configs[TRANSIENT] = cfg.to_dict()
    return tensors, configs


class WithClips(NamedTuple):
    """A prepared batch when the run trains a transient: the latents, and the clips (its validation's pairs)."""

    z: torch.Tensor
    clips: torch.Tensor


class SynthObjective(DiffusionObjective):
    def __init__(self, cfg: Config, net: torch.nn.Module, device: torch.device, cache: FitCache) -> None:
        self.transient = None
        if cfg.transient.enabled:  # the denoiser's child: see the module docstring
            self.transient = transient_net(cfg, n_params(cfg.synth.version)).to(device).requires_grad_(False)
            net.add_module(TRANSIENT, self.transient)
        super().__init__(cfg, net, parts=("denoiser", TRANSIENT) if self.transient is not None else ("denoiser",))
        self.device = device
        self.cache = cache
        self._served_fits: dict[str, torch.Tensor] = {}  # clip key -> its fit as served (map_encoder)
        self._val_pairs: dict[str, Pairs] = {}  # the validation clips' pairs, by their keys: rendered once

    def to_latent(self, x: torch.Tensor) -> torch.Tensor:
        return self.module.normalise(self.cache.numbers(x.detach().cpu(), self.cfg).to(self.device))

    @torch.no_grad()
    def prepare_batch(self, x: torch.Tensor):
        z = self.to_latent(x)
        return z if self.transient is None else WithClips(z, x)

    def loss(self, module, x, cond, mask, g, step):
        x = x.z if isinstance(x, WithClips) else x
        jitter = self.cfg.fit.jitter
        if jitter > 0:  # drawn first from this step's generator: a resumed run draws the same
            x = x + jitter * torch.randn(x.shape, generator=g).to(x.device)
        return super().loss(module, x, cond, mask, g, step)

    @torch.no_grad()
    def val_loss(self, module, x, cond, mask, g):
        if not isinstance(x, WithClips):
            return super().val_loss(module, x, cond, mask, g)
        out = super().val_loss(module, x.z, cond, mask, g)
        clips = x.clips.detach().float().cpu()
        key = ",".join(clip_key(c) for c in clips)
        pairs = self._val_pairs.get(key)
        if pairs is None:
            u = self.cache.numbers(clips, self.cfg)
            pairs = self._val_pairs[key] = Pairs.of(clips, u, self.transient, self.cfg.synth.version,
                                                    self.cfg.data.sample_rate)
        transient = getattr(module, TRANSIENT)  # the EMA's copy: the same weights, the phase being over
        return out | figures(transient, pairs.to(transient.window.device), self.cfg.data.sample_rate)

    def artifact_tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return split_parts(self.cfg, state_dict)[0]

    def load_init(self, art) -> None:
        """Fine-tuning: the artifact's prior, and its transient where it has one (fit_config took its transient
        section: a fine-tune keeps the artifact's, or its having none)."""
        state = unprefixed("denoiser", art.tensors)
        if self.transient is not None:
            state |= prefixed(TRANSIENT, unprefixed(TRANSIENT, art.tensors))
        self.module.load_state_dict(state, strict=True)

    def map_encoder(self):
        """The kit map's encoding of a clip is its fit as the served model fits it (fit.serve_iters), about a second a
        kick on two cores and the same at every export of the run: made once, remembered, so every export (not only
        the last) carries the map."""
        served = self._served_fits

        def encode(gen, clips):
            x = torch.as_tensor(clips, dtype=torch.float32).reshape(len(clips), -1)
            keys = [clip_key(c) for c in x]
            todo = [i for i, k in enumerate(keys) if k not in served]
            if todo:
                self.cache.log(f"kit map: fitting {len(todo)} kicks as the served model fits them (once a run)")
                started = said = CLOCK()
                for a in range(0, len(todo), MAP_FIT_CHUNK):  # a chunk at a time, for the progress lines
                    part = todo[a:a + MAP_FIT_CHUNK]
                    for i, row in zip(part, gen.codec.encode(x[part], lambda info: None).cpu()):
                        served[keys[i]] = row
                    now, done = CLOCK(), a + len(part)
                    if now - said >= PROGRESS_S and done < len(todo):
                        said = now
                        self.cache.log(f"kit map: fitted {done} of {len(todo)} kicks in {now - started:.0f} s, about "
                                       f"{(now - started) * (len(todo) - done) / done:.0f} s left")
            u = torch.stack([served[k] for k in keys]).to(gen.device)
            with torch.inference_mode():
                return gen.net.normalise(u).float().cpu().numpy()

        return encode

    def fit_data(self, clips: torch.Tensor) -> None:
        """Fit every training clip now (not step by step) and take the numbers' mean and spread."""
        u = self.cache.numbers(clips, self.cfg)
        self.module.latent_mean.copy_(u.mean(0))
        self.module.latent_std.copy_(u.std(0).clamp(min=1e-2) if len(u) > 1 else torch.ones_like(u[0]))
        if self.transient is not None:  # its own phase, before the prior's first step (the module docstring)
            t, sr = self.cfg.transient, self.cfg.data.sample_rate
            self.cache.log(f"transient: training on {len(u)} clips and their fits ({t.steps} steps)")
            pairs = Pairs.of(clips.cpu(), u, self.transient, self.cfg.synth.version, sr)
            got = train_transient(self.transient.cpu(), pairs, sr, t.steps, t.lr, log=self.cache.log)
            self.transient.to(self.device)
            self.cache.log(f"transient: window loss {got['before']:.4f} -> {got['after']:.4f} on the training clips "
                           f"(the synth alone: {got['synth_alone']:.4f})")


class KickSynthRecipe(Recipe):
    family = "kick_synth"
    export_keys = {"sampling": SAMPLING_KEYS}

    def fit_config(self, cfg: Config, ctx: FitContext) -> Config:
        if ctx.init is None:
            return cfg
        art = ctx.init
        ctx.log(f"fine-tuning: taking the prior's network and diffusion settings (and transient) of {art.path.name}")
        return finetune_config(cfg, art).with_section(TRANSIENT, art.config.transient)

    def objective(self, cfg: Config, ctx: FitContext) -> SynthObjective:
        net = self.serving.part_modules({"denoiser": cfg})["denoiser"].to(ctx.device)
        cache = FitCache(ctx.run_dir / FITS_FILE if ctx.run_dir is not None else None, ctx.log)
        return SynthObjective(cfg, net, ctx.device, cache)

    def artifact_contents(self, cfg: Config, weights: Mapping[str, torch.Tensor], ctx: FitContext) -> Contents:
        return split_parts(cfg, weights)  # the synth has no weights


RECIPE = KickSynthRecipe()
