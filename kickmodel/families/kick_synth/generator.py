"""Serving the kick-synth family: the prior samples the synth's numbers (the project's samplers, guided by the
controls), the synth plays them. A control given in units is then set exactly: the kick is measured as the
descriptors measure it (pitch, decay, click) and the one number that moves it is corrected, a few times over.

Variations and morphs of a file start from that file's fitted numbers (analysis by synthesis when asked), and a
file's place on the map is its fit's: the fit starts from the guess of the synth's amortised inverse (inverse.py)
where one is shipped for the model's synth version, else from its measured starts.

A kick is as long as its decay needs, up to MAX_KICK_S: each is played at the model's length first (the shipped
model's kicks that decay within it are the bits they always were); one whose finished tail is still above the floor
where that render's fade-out begins (kickmodel.dsp.tail_end: -60 dB re its peak) is played again at max_length, and so
is, from the start, one asked for a decay_s longer than the model's length can measure (adjusted at max_length). The
raw kicks then come back Ragged, each finished over its own length (kickmodel.generator._finish).

A model with a transient part (transient.py) plays it after the synth wherever numbers are played (a kick, a variation,
a morph, a point on the map, a kit's hits): both synths below are the synth followed by its transient, so the unit
controls are measured (fit.adjust) on the kick as it is played, transient and all. A fit of a file is the synth's
alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...artifact import Artifact
from ...batching import in_render_shape, side_by_side
from ...codecs.synth import SynthCodec
from ...diffusion import Denoiser
from ...dsp import TAIL_FADE_MS, finish_kick, tail_end
from ...generator import ENCODE, KIT_NUMBERS, UNITS, Endpoint, Hook, Item, Ragged, Settings
from ..diffusion_common import DiffusionGenerator
from .fit import adjust, fit, fit_seconds, serve_options
from .inverse import shipped as shipped_inverse
from .network import prior_net
from .synth import from_params, n_params, params_for, synth_for, to_params
from .transient import WithTransient, transient_net

MAX_KICK_S = 3.0  # the longest kick, in seconds: a decay_s up to 2.5 s (measured 40 dB down) and its tail
END_FADE_MS = 20.0  # finish_kick's fade-out at the end of a render (its default)


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
        self.inverse = shipped_inverse(version)
        self.fit_options = serve_options(f, version, self.inverse.guess if self.inverse is not None else None)
        if self.inverse is not None:  # what the daemon's price lines call an encoding (kickserver.pricing)
            self.encoder_name = "a fit of the synth from its inverse's guess"

        def fit_served(x: torch.Tensor, check) -> torch.Tensor:
            return fit(x, self.sample_rate, **self.fit_options, check=check)[0]

        # the learned transient, where the model has one: played after the synth, whatever plays it
        self.transient = None
        if cfg.transient.enabled:
            self.transient = transient_net(artifact.config_of("transient"), numbers).eval()
            artifact.load_part(self.transient, "transient")
            self.transient.requires_grad_(False).to(device)

        def played(s: torch.nn.Module) -> torch.nn.Module:
            return s if self.transient is None else WithTransient(s, self.transient)

        synth = played(synth_for(version, self.sample_rate, self.length).to(device))
        self.codec = SynthCodec(synth, fit_served, numbers, device)
        # a kick whose decay outlasts the model's length: played again (and a long decay_s adjusted) at max_length
        self.max_length = max(self.length, int(round(MAX_KICK_S * self.sample_rate)))
        # its noise the model's length's draw, repeated: a kick played longer is, over that length, the kick it was
        self.long_synth = played(synth_for(version, self.sample_rate, self.max_length, period=self.length).to(device))
        # the longest decay_s the model's own length measures (what unit_range allowed before kicks grew): a longer
        # one is adjusted at max_length from the start
        self.short_decay_s = round(0.9 * self.length / self.sample_rate, 2)
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

    def from_latent(self, z: torch.Tensor, items: Sequence[Item], hook: Hook) -> np.ndarray | Ragged:
        u, long = self.settle(self.numbers(z), items, hook)
        return self.play(u, seeds_of(items), hook, long)

    def render_length(self, controls: dict[str, float]) -> int:
        """max_length for a kick asked for a decay_s longer than the model's length measures, else the model's
        length (a kick the prior makes long is known to be only once it is played)."""
        return self.max_length if self._asks_long(controls) else self.length

    def _asks_long(self, controls: dict[str, float]) -> bool:
        return float(controls.get("decay_s", 0.0)) > self.short_decay_s

    def _decayed(self, raw: np.ndarray) -> np.ndarray:
        """[n] bool: each raw kick of the model's length, finished, has fallen under the tail floor before its
        render's fade-out (and the trimmed file's own fade) begins: it is whole at that length."""
        sr = self.sample_rate
        margin = int(round(sr * END_FADE_MS / 1000)) + int(round(sr * TAIL_FADE_MS / 1000))
        # each kick alone (as alone, in any batch), side by side on one torch thread each (kickmodel.batching)
        ends = np.array(side_by_side(lambda row: tail_end(finish_kick(row, sr)), list(raw)))
        return ends <= raw.shape[1] - margin

    def play(self, u: torch.Tensor, seeds: torch.Tensor, hook: Hook,
             long: torch.Tensor | None = None) -> np.ndarray | Ragged:
        """Numbers [n, N] -> raw kicks: at the model's length, where each kick has decayed within it ([n, length],
        the bits it always was); else Ragged, the kicks that had not (and those `long` [n] bool marks) played at
        max_length. Each kick alone: its length and samples do not depend on its batch."""
        n = u.shape[0]
        long = torch.zeros(n, dtype=torch.bool) if long is None else long.clone()
        short = (~long).nonzero()[:, 0]
        raw_short = None
        if len(short):
            raw_short = self.codec.decode(u if len(short) == n else u[short], hook,
                                          seeds if len(short) == n else seeds[short])
            grew = torch.from_numpy(~self._decayed(raw_short))
            long[short[grew]] = True
            if not bool(long.any()):
                return raw_short
        rows = long.nonzero()[:, 0]
        hook({"stage": "play"})
        raw_long = in_render_shape(self.long_synth, u[rows], seeds[rows]).float().cpu().numpy()
        out = np.zeros((n, self.max_length), dtype=np.float32)
        out[rows.numpy()] = raw_long
        lengths = [self.max_length] * n
        for j, i in enumerate(short.tolist()):
            if not bool(long[i]):
                out[i, :self.length] = raw_short[j]
                lengths[i] = self.length
        return Ragged(out, tuple(lengths))

    def settle(self, u: torch.Tensor, items: Sequence[Item], hook: Hook) -> tuple[torch.Tensor, torch.Tensor]:
        """(numbers with each item's controls in units set, [n] bool: which kicks are played at max_length). A kick
        asked for a decay_s beyond the model's length is adjusted at max_length; one adjusted at the model's length
        whose tail then outlasts it is adjusted again at max_length, from the prior's numbers, so it measures as
        asked in the kick it is played as."""
        long = torch.tensor([self._asks_long(it.controls) for it in items], dtype=torch.bool)
        out = self.set_units(u, items, hook, long)
        units = torch.tensor([any(k in it.controls for k in self.unit_controls) for it in items], dtype=torch.bool)
        rows = (units & ~long).nonzero()[:, 0]
        if len(rows):
            grew = rows[torch.from_numpy(~self._decayed(self.codec.decode(out[rows], hook, seeds_of(items)[rows])))]
            if len(grew):
                long[grew] = True
                out = out.clone()
                out[grew] = self.set_units(u[grew], [items[i] for i in grew.tolist()], hook,
                                           torch.ones(len(grew), dtype=torch.bool))
        return out, long

    def set_units(self, u: torch.Tensor, items: Sequence[Item], hook: Hook,
                  long: torch.Tensor | None = None) -> torch.Tensor:
        """Kicks whose item gives a control in units get the numbers that move it corrected until they measure so
        (fit.adjust, on the finished kick: played at max_length where `long` [n] bool says so, else at the model's
        length; a pitch as a tuner reads the settled body); the others are left as the prior made them."""
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

        seeds = seeds_of(items)
        for synth, take in ((self.codec.synth, False), (self.long_synth, True)):
            part = [i for i in rows if (long is not None and bool(long[i])) == take]
            if part:
                u[part] = adjust(_InRenderShape(synth), u[part], targets[part], finish,
                                 check=lambda: hook({"stage": "units"}), seeds=seeds[part], settled=True)
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
        settled, _ = self.settle(self.numbers(z[:1]), items[:1], hook)
        u = settled[0]
        top = clamped(dict(zip((p.name for p in params), to_params(u[None], version)[0].tolist(), strict=True)))

        def render(numbers: list[dict[str, float]]) -> list[np.ndarray]:
            rows = torch.stack([u if n == top else from_params(torch.tensor([[n[p.name] for p in params]],
                                                                             dtype=u.dtype, device=u.device),
                                                               version)[0]
                                for n in numbers])
            seeds = seeds_of(items[:1]).expand(len(numbers)).clone()
            out = self._finish(self.play(rows, seeds, hook), sample_rate)
            # each hit as long as it was played (a batch with a long hit pads the others with zeros)
            return [out[i] for i in range(len(numbers))]

        return synth_kit(top, render, sample_rate, layers, robins, int(items[0].seed))

    def describe(self) -> dict:
        return super().describe() | {"synth_numbers": self.latent_dim, "synth_version": self.synth_version,
                                     "max_length": self.max_length,
                                     "unit_controls": list(self.unit_controls),
                                     "synth_inverse": self.inverse is not None,
                                     "synth_transient": self.transient is not None}
