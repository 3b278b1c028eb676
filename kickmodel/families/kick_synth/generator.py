"""Serving the kick-synth family: the prior samples the synth's numbers (the project's samplers, guided by the
controls), the synth plays them. A control given in units is then set exactly: the kick is measured as the
descriptors measure it (pitch, decay, click) and the one number that moves it is corrected, a few times over.

Variations and morphs of a file start from that file's fitted numbers (analysis by synthesis when asked), and a
file's place on the map is its fit's: the fit starts from the guess of the synth's amortised inverse (inverse.py)
where one is shipped for the model's synth version, else from its measured starts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact
from ...batching import in_render_shape
from ...codecs.synth import SynthCodec
from ...diffusion import Denoiser
from ...dsp import finish_kick
from ...generator import ENCODE, KIT_NUMBERS, UNITS, Endpoint, Hook, Item, Settings
from ..diffusion_common import DiffusionGenerator
from . import inverse
from .fit import adjust, fit, fit_seconds, serve_options
from .network import prior_net
from .synth import from_params, n_params, params_for, synth_for, to_params


def seeds_of(items: Sequence[Item]) -> torch.Tensor:
    """Each kick's seed [n] (int64): a synth that draws its noise per kick draws it from this (version 1 ignores it)."""
    return torch.tensor([int(it.seed) for it in items], dtype=torch.int64)


class _InRenderShape(torch.nn.Module):
    """The synth played at its render shape (kickmodel.batching: a kick never depends on its batch)."""

    def __init__(self, synth: torch.nn.Module) -> None:
        super().__init__()
        self.synth, self.sample_rate, self.version = synth, synth.sample_rate, synth.version

    def forward(self, u: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        return in_render_shape(self.synth, u, seeds)


class KickSynthGenerator(DiffusionGenerator):
    family = "kick_synth"
    # the fitted numbers are the map's space, and a kit's layers and robins are moves of them
    capabilities = DiffusionGenerator.capabilities | {ENCODE, UNITS, KIT_NUMBERS}
    encoder_name = "a fit of the synth"

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config_of("denoiser")
        net = prior_net(cfg)
        artifact.load_part(net, "denoiser")
        super().__init__(artifact, device, Denoiser.from_config(net, cfg.diffusion), artifact.config.sampling)
        self.net = self.denoiser.net
        f = self.fit_config = cfg.fit
        self.synth_version = version = cfg.synth.version
        numbers = n_params(version)

        # the synth's amortised inverse (None: none shipped for this version, or refused: the measured starts)
        self.inverse = inverse.shipped(version)
        self.fit_options = serve_options(f, version, self.inverse.guess if self.inverse is not None else None)
        if self.inverse is not None:  # what the daemon's price lines call an encoding (kickserver.pricing)
            self.encoder_name = "a fit of the synth from its inverse's guess"

        def fit_served(x: torch.Tensor, check) -> torch.Tensor:
            return fit(x, self.sample_rate, **self.fit_options, check=check)[0]

        synth = synth_for(version, self.sample_rate, self.length).to(device)
        self.codec = SynthCodec(synth, fit_served, numbers, device)
        self.latent_shape = (numbers,)
        self.latent_dim = numbers

    def _morph(self, a: Endpoint, b: Endpoint, ts: Sequence[float], items: Sequence[Item], settings: Settings,
               hook: Hook) -> np.ndarray:
        """The diffusion families' morph, whose kicks take the synth's noise (drawn per kick from a seed, version 2)
        from the nearer end: a's seed for t < 0.5, else b's (an end that is a file: the kick's own seed), so the
        seed ends are those seeds' kicks, texture and all."""
        def seeded(t: float, it: Item) -> Item:
            end = a if t < 0.5 else b
            return Item(seed=it.seed if end.seed is None else end.seed, controls=it.controls)

        return super()._morph(a, b, ts, [seeded(t, it) for t, it in zip(ts, items)], settings, hook)

    def encode_seconds(self, clip: np.ndarray, hook: Hook | None = None) -> float:
        """A served fit's time, estimated from a few of its steps (fit.fit_seconds): a whole fit may take minutes."""
        hook = hook or (lambda info: None)
        x = torch.as_tensor(np.asarray(clip, dtype=np.float32)).reshape(1, -1)
        o = self.fit_options
        with torch.inference_mode(False):
            return fit_seconds(x, self.sample_rate, iters=o["iters"], restart_iters=o["restart_iters"], lr=o["lr"],
                               check=lambda: hook({"stage": "fit"}), version=self.synth_version,
                               guess=o.get("guess"), guess_iters=o.get("guess_iters"),
                               keep_nearer=o.get("keep_nearer", False))

    # the numbers <-> the denoiser's space
    def numbers(self, z: torch.Tensor) -> torch.Tensor:
        return self.net.denormalise(z / self.denoiser.data_scale)

    def to_latent(self, audio: torch.Tensor, hook: Hook) -> torch.Tensor:
        u = self.codec.encode(audio[:1], hook).expand(audio.shape[0], -1)
        return self.net.normalise(u) * self.denoiser.data_scale

    def from_latent(self, z: torch.Tensor, items: Sequence[Item], hook: Hook) -> np.ndarray:
        return self.codec.decode(self.set_units(self.numbers(z), items, hook), hook, seeds_of(items))

    def set_units(self, u: torch.Tensor, items: Sequence[Item], hook: Hook) -> torch.Tensor:
        """Kicks whose item gives a control in units get the numbers that move it corrected until they measure so
        (fit.adjust, on the finished kick); the others are left as the prior made them."""
        if len(items) != u.shape[0]:
            raise ValueError(f"{len(items)} items for {u.shape[0]} kicks")
        names = ("decay_s", "pitch_hz", "click_db")  # descriptors.measure's order
        targets = torch.tensor([[float(it.controls.get(k, float("nan"))) for k in names] for it in items])
        rows = [i for i in range(len(items)) if not bool(targets[i].isnan().all())]
        if not rows:
            return u
        u = u.clone()

        def finish(y: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(finish_kick(y.float().cpu().numpy(), self.sample_rate))

        u[rows] = adjust(_InRenderShape(self.codec.synth), u[rows], targets[rows], finish,
                         check=lambda: hook({"stage": "units"}), seeds=seeds_of(items)[rows])
        return u

    @torch.inference_mode()
    def encode(self, clips: np.ndarray, hook: Hook | None = None) -> np.ndarray:
        """Prepared clips [n, length] -> their fitted numbers, normalised (the map's space)."""
        x = torch.as_tensor(np.asarray(clips, dtype=np.float32)).reshape(-1, self.length)
        u = self.codec.encode(x, hook or (lambda info: None))
        return self.net.normalise(u).float().cpu().numpy()

    @torch.inference_mode()
    def decode_latents(self, latents: np.ndarray, items: Sequence[Item], hook: Hook | None = None) -> np.ndarray:
        """Normalised numbers [n, latent_dim] (what encode gives, a kit map's) -> raw kicks: played by the synth as a
        sampled kick is (from_latent), controls in units set exactly."""
        z = torch.as_tensor(np.asarray(latents, dtype=np.float32)).reshape(-1, self.latent_dim).to(self.device)
        return self.from_latent(z * self.denoiser.data_scale, items, hook or (lambda info: None))

    @torch.inference_mode()
    def _kit_numbers(self, items: Sequence[Item], layers: int, robins: int, settings: Settings,
                     source: np.ndarray | None, strength: float, sample_rate: int,
                     hook: Hook) -> list[list[np.ndarray]]:
        """items[0]'s numbers (sampled as _sample samples them, or as _vary varies source's, with its controls in
        units set), made into a kit by kits.synth_kit: each hit's numbers played by the synth and finished as every
        kick is. The top layer's first robin plays the kick's own numbers: it is the kick generate makes (every hit
        takes that kick's seed, so a synth that draws its noise per kick gives the kit one texture)."""
        from .kits import clamped, synth_kit

        version = self.synth_version
        params = params_for(version)
        z = (self._vary_latent(source, strength, items, settings, hook) if source is not None
             else self._sample_latent(items, settings, hook))
        u = self.set_units(self.numbers(z[:1]), items[:1], hook)[0]
        top = clamped(dict(zip((p.name for p in params), to_params(u[None], version)[0].tolist(), strict=True)))

        def render(numbers: list[dict[str, float]]) -> list[np.ndarray]:
            rows = torch.stack([u if n == top else from_params(torch.tensor([[n[p.name] for p in params]],
                                                                             dtype=u.dtype, device=u.device),
                                                               version)[0]
                                for n in numbers])
            seeds = seeds_of(items[:1]).expand(len(numbers))
            return list(self._finish(self.codec.decode(rows, hook, seeds), sample_rate))

        return synth_kit(top, render, sample_rate, layers, robins, int(items[0].seed))

    def describe(self) -> dict:
        return super().describe() | {"synth_numbers": self.latent_dim, "synth_version": self.synth_version,
                                     "unit_controls": list(self.unit_controls),
                                     "synth_inverse": self.inverse is not None}
