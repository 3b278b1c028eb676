"""The one interface through which the daemon (and evaluation) talk to a model, whatever its family.

    gen = kickmodel.loading.load_generator(path, device)   # any family; refuses bad artifacts (ArtifactError)
    gen.controls                               # ("decay", "pitch", "click"): dials, each 0..1
    gen.samplers, gen.max_steps                # what it takes: () and 0 for a one-pass family
    s = gen.settings(steps=10, sampler=None, policy=MODEL_DEFAULTS)   # resolved and checked, once per request
    gen.generate([Item(seed=7, controls={"decay": 0.8})], s, sample_rate=48000, hook=cancel_hook(flag.is_set))
        -> [n, samples] float32: finished kicks (DC-free, high-passed, faded, peak -1 dBFS) at sample_rate
    gen.vary(gen.prepare_source(audio, sr), 0.3, items, s)        # VARIATION: variations of a file's kick
    gen.morph(Endpoint(seed=1), Endpoint(seed=2), [0, 0.5, 1], items, s)   # INTERPOLATION: one kick per t
    gen.from_map(0.3, 0.7, 0.2, items)         # kicks from the kit map's point: one latent per item,
                                               # kit_map.near(x, y, spread, item.seed), decoded
    gen.locate(gen.prepare_source(audio, sr))  # (x, y): where a file's kick lies on the map
    gen.kit([Item(seed=5)], 8, 4, s)           # a kit of one kick: [layer][robin] finished kicks, by the family's
                                               # own number rules (KIT_NUMBERS) or kickmodel.kitrules' audio rules
    ENCODE in gen.capabilities                 # what it can do, declared by its class (never probed for):
                                               # then gen.encode(clips) -> latents (kicktrain map)
    gen.kit_map                                # its kit's map (kickmodel.kitmap.KitMap) or None, and then
                                               # gen.kit_map_missing says why

One small method per mode (audiocraft's `generate`, `generate_continuation`), each over one private core, `_finish`,
that resamples and finishes the raw kicks (kickmodel.dsp.finish_kick). A mode a model cannot do is refused with a
ValueError naming the model and what it can do. Settings are resolved and checked once (`settings`); the modes take
the resolved value and never resolve again. Cancel and progress go through one `hook` callable, called between
network passes with a dict ({"stage": "denoise", "i": 3}, k-diffusion's callback): it stops the render by raising
(cancel_hook raises Cancelled when its cancel() says so). Families implement `_sample`, `_vary`, `_morph` (and,
with ENCODE, `encode` / `decode_latents`) returning raw audio at the model's own rate, calling the hook they are
given between network passes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch

from .artifact import Artifact
from .batching import one_thread_if, side_by_side
from .dsp import SUBSONIC_HZ, finish_kick, resample, trim_tail  # the core every mode ends in (_finish)

if TYPE_CHECKING:
    from .config import Config
    from .kitmap import KitMap
    from .wavfile import MapMade

# a file whose tags say it is a kick from this model's map is that kick when it matches the kick made again within
# this much of its peak, sample for sample (a 24-bit file's rounding is ~-138 dB; a device's float differences
# ~-120 dB; a gain change of 0.01 dB, a resampling or a dither is far above it) and is at least MIN_MADE_S long
MADE_MATCH_DB = -90.0
MIN_MADE_S = 0.05
Hook = Callable[[dict[str, Any]], None]  # called between network passes with {"stage": ..., "i": ...}; may raise


@dataclass
class Item:
    """One kick to make: its seed and its control values (0..1; absent controls are left free)."""

    seed: int
    controls: dict[str, float] = field(default_factory=dict)


@dataclass
class Ragged:
    """Raw kicks of their own lengths, as a family whose kick is as long as it sounds returns them (kick-synth: a
    long decay renders up to its max_length): audio [n, L] with row i's kick in its first lengths[i] samples and
    zeros after. `_finish` finishes each kick over its own length (its fade-out at its own end), so a kick's samples
    are the same alone or beside longer ones; the finished rows are padded with zeros to the batch's longest."""

    audio: np.ndarray
    lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.lengths) != self.audio.shape[0] or any(not 0 < n <= self.audio.shape[1] for n in self.lengths):
            raise ValueError("Ragged: one length within 1..L per row")


@dataclass
class Endpoint:
    """One end of an interpolation: a seed (the model's own kick for it, no controls) or a prepared clip."""

    seed: int | None = None
    source: np.ndarray | None = None

    def __post_init__(self) -> None:
        if (self.seed is None) == (self.source is None):
            raise ValueError("an interpolation endpoint is a seed or a source clip")


@dataclass(frozen=True)
class StepPolicy:
    """A server's word on steps: `default` when a request names none (0: the model's own default) and `cap`
    (0: none), which neither a request nor an artifact's own default passes (an artifact is not trusted to
    say 1000 steps on a server started with --max-steps 50)."""

    default: int = 0
    cap: int = 0


MODEL_DEFAULTS = StepPolicy()  # no server in between: the request's settings, else the model's, uncapped


@dataclass(frozen=True)
class Settings:
    """How a kick is made, resolved and checked once (GeneratorBase.settings): the worker's batch key, the render and
    the WAV's tags all read this one object. (None, None) for a one-pass family, which takes neither."""

    steps: int | None = None
    sampler: str | None = None


class SettingsError(ValueError):
    """Settings a model cannot make kicks with (steps out of range, an unknown sampler); `settings` holds what was
    resolved, for a caller that refuses the request later (the daemon answers in the order requests were queued)."""

    def __init__(self, reason: str, settings: Settings) -> None:
        super().__init__(reason)
        self.settings = settings


class Cancelled(Exception):
    """Raised between network calls when the caller's cancel() says stop (cancel_hook)."""


def cancel_hook(cancel: Callable[[], bool] | None) -> Hook | None:
    """A render hook that raises Cancelled when cancel() says stop (None: no hook)."""
    if cancel is None:
        return None

    def hook(info: dict[str, Any]) -> None:
        if cancel():
            raise Cancelled()

    return hook


def _no_hook(info: dict[str, Any]) -> None:
    pass


# What a generator can do, declared by its class in `capabilities` (GeneratorBase drops CONTROLS for a model
# trained without controls), so callers ask `X in gen.capabilities` instead of probing for methods. Each name
# promises the members beside it.
CONTROLS = "controls"  # items' controls condition the kick (gen.controls is not empty)
SAMPLERS = "samplers"  # several network passes: steps and sampler apply (gen.samplers, max_steps, defaults)
GUIDANCE = "guidance"  # gen.guidance: the classifier-free guidance scale over the controls, may be set (Guided)
VARIATION = "variation"  # gen.vary(source, strength, ...): variations of a prepared source
INTERPOLATION = "interpolation"  # gen.morph(a, b, ts, ...); gen.interpolation_samplers say which samplers
INVERT = "invert"  # gen.invert(source, steps): the noise the deterministic sampler turns into source (Inverts)
# gen.encode(clips): prepared clips -> latents [n, gen.latent_dim] (Encodes; kicktrain map), and back:
# gen.decode_latents(latents, items) -> raw kicks; a model with it may hold a kit map (gen.kit_map, gen.from_map)
ENCODE = "encode"
# items' controls may also be given in units (descriptors.UNIT_CONTROLS: decay_s, pitch_hz, click_db), and each
# kick then measures as asked (gen.unit_controls lists those the model takes)
UNITS = "units"
# gen.kit makes a kit's layers and robins from the family's own numbers (the family's `_kit_numbers`: kick-synth's
# click, drive and sweep fall with a softer hit, its robins are seeded moves of its numbers), not from the audio
# rules every finished kick takes (kickmodel.kitrules); gen.kit_rules says which a kit gets
KIT_NUMBERS = "kit_numbers"
CAPABILITIES = frozenset({CONTROLS, SAMPLERS, GUIDANCE, VARIATION, INTERPOLATION, INVERT, ENCODE, UNITS,
                          KIT_NUMBERS})


class KickGenerator(Protocol):
    """What every generator exposes (GeneratorBase gives it); what only some can do is in `capabilities`,
    with the members each promises (Encodes, Inverts, Guided)."""

    name: str
    family: str
    capabilities: frozenset[str]  # a subset of CAPABILITIES
    artifact: Artifact  # what it was loaded from (its step, training record, part configs)
    config: Config  # the model's config (artifact.config)
    control_quantiles: list[list[float]]  # per control: the training kicks' quantiles its 0..1 values map to
    sample_rate: int  # the model's own rate
    length: int  # samples per kick at that rate (the render; a kick-synth kick with a long decay renders longer)
    max_length: int  # the most samples a kick renders at that rate (length, but for a family whose kick is as
    # long as its decay: kick-synth's MAX_KICK_S)
    controls: tuple[str, ...]
    unit_controls: tuple[str, ...]  # controls it also takes in units (UNITS: decay_s, pitch_hz, click_db), else ()
    samplers: tuple[str, ...]  # () for a one-pass family: steps and sampler do not apply
    interpolation_samplers: tuple[str, ...]  # the samplers an interpolation may use (() for a one-pass family)
    max_steps: int  # 0 for a one-pass family
    default_steps: int | None
    default_sampler: str | None
    device: torch.device

    def settings(self, steps: int | None = None, sampler: str | None = None,
                 policy: StepPolicy = MODEL_DEFAULTS) -> Settings: ...

    kit_map: KitMap | None  # its kit's map (kickmodel.kitmap) or None
    kit_map_missing: str  # why it has none ("" when it has one)

    def generate(self, items: Sequence[Item], settings: Settings, *, sample_rate: int | None = None,
                 hook: Hook | None = None) -> np.ndarray: ...

    def vary(self, source: np.ndarray, strength: float, items: Sequence[Item], settings: Settings, *,
             sample_rate: int | None = None, hook: Hook | None = None) -> np.ndarray: ...

    def morph(self, a: Endpoint, b: Endpoint, ts: Sequence[float], items: Sequence[Item], settings: Settings, *,
              sample_rate: int | None = None, hook: Hook | None = None) -> np.ndarray: ...

    def from_map(self, x: float, y: float, spread: float, items: Sequence[Item], *, sample_rate: int | None = None,
                 hook: Hook | None = None) -> np.ndarray: ...

    def locate(self, clip: np.ndarray) -> tuple[float, float]: ...

    def kit(self, items: Sequence[Item], layers: int, robins: int, settings: Settings, *,
            source: np.ndarray | None = None, strength: float = 0.0, sample_rate: int | None = None,
            hook: Hook | None = None) -> list[list[np.ndarray]]: ...

    def kit_rules(self, source: bool = False, strength: float = 0.0) -> str: ...

    def prepare_source(self, audio: np.ndarray, sample_rate: int, *, whole: bool = False) -> np.ndarray: ...

    def describe(self) -> dict: ...


@runtime_checkable
class Encodes(Protocol):
    """ENCODE: a latent encoder. Prepared clips [n, length] at the model's rate -> latents [n, latent_dim]; and the
    way back, latents [n, latent_dim] (items: one per row, their controls) -> raw kicks [n, length] at the model's
    rate, or Ragged where a kick renders longer (kick-synth's long decays), finished by the mode that asked
    (from_map; a kit map's latents are these)."""

    latent_dim: int

    def encode(self, clips: np.ndarray, hook: Hook | None = None) -> np.ndarray: ...

    def decode_latents(self, latents: np.ndarray, items: Sequence[Item], hook: Hook | None = None) -> np.ndarray: ...


@runtime_checkable
class Inverts(Protocol):
    """INVERT: a prepared clip [length] -> the unit noise its deterministic sampler turns (about) into it."""

    def invert(self, source: np.ndarray, steps: int, hook: Hook | None = None) -> torch.Tensor: ...


@runtime_checkable
class Guided(Protocol):
    """GUIDANCE: the classifier-free guidance scale over the controls; set it between renders to change it."""

    guidance: float


class GeneratorBase:
    """What every family's generator shares: controls, settings, the modes over one finishing core, sources.

    A subclass sets `family`, `capabilities`, `samplers`, `max_steps`, `default_steps`, `default_sampler`
    and implements `_sample(items, settings, hook)` (and, as its capabilities say, `_vary(source, strength, items,
    settings, hook)`, `_morph(a, b, ts, items, settings, hook)`, `encode`, `decode_latents`) returning raw
    [n, length] audio at self.sample_rate, calling `hook` between network passes."""

    family = ""
    capabilities: frozenset[str] = frozenset()  # what its code can do (CAPABILITIES); see the names' comments
    samplers: tuple[str, ...] = ()
    interpolation_samplers: tuple[str, ...] = ()  # the samplers a morph may use (all of them when empty)
    max_steps = 0
    default_steps: int | None = None
    default_sampler: str | None = None

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config
        self.artifact = artifact
        self.config = cfg
        self.name = artifact.name
        self.sample_rate = int(cfg.data.sample_rate)
        self.length = int(cfg.data.length)
        self.max_length = self.length  # a family that renders a long decay longer raises it
        self.controls = tuple(cfg.controls)
        self.control_quantiles = artifact.control_quantiles
        self.device = device
        if not self.controls:  # a model trained without controls takes none, whatever its family can
            self.capabilities = self.capabilities - {CONTROLS, UNITS}
        from .descriptors import UNIT_CONTROLS

        self.unit_controls: tuple[str, ...] = tuple(
            u for u, (dial, _, _) in UNIT_CONTROLS.items() if UNITS in self.capabilities and dial in self.controls)
        self.kit_map: KitMap | None = artifact.kit_map if ENCODE in self.capabilities else None
        if ENCODE not in self.capabilities:
            self.kit_map_missing = f"a {self.family} model has no encoder, so no latent space to map"
        elif self.kit_map is None:
            self.kit_map_missing = (f"model {self.name} stores no kit map; add one with `kicktrain map "
                                    f"{self.name}.safetensors KIT_FOLDER --into {self.name}.safetensors`")
        else:
            self.kit_map_missing = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = sorted(set(cls.capabilities) - CAPABILITIES)
        if unknown:
            raise TypeError(f"{cls.__name__}.capabilities: unknown {', '.join(unknown)} "
                            f"(known: {', '.join(sorted(CAPABILITIES))})")

    # ----------------------------------------------------------- settings, resolved and checked once
    def settings(self, steps: int | None = None, sampler: str | None = None,
                 policy: StepPolicy = MODEL_DEFAULTS) -> Settings:
        """The settings a kick is made with, resolved and checked: the request's steps, else the server's default,
        else the model's; capped at the server's cap; the request's sampler, else the model's. ValueError when the
        steps are out of 1..max_steps or the sampler unknown (SettingsError, holding what was resolved). Settings()
        for a one-pass family, which ignores both (a client may send them to any model). The modes take what this
        returns and never resolve again."""
        if not self.samplers:
            return Settings()
        if steps is None:
            steps = policy.default or self.default_steps
        steps = int(steps)
        if policy.cap:
            steps = min(steps, int(policy.cap))
        resolved = Settings(steps, sampler if sampler is not None else self.default_sampler)
        if not 1 <= steps <= self.max_steps:
            raise SettingsError(f"steps must be within 1..{self.max_steps}, got {steps}", resolved)
        if resolved.sampler not in self.samplers:
            raise SettingsError(f"unknown sampler {resolved.sampler!r}; choose one of {', '.join(self.samplers)}",
                                resolved)
        return resolved

    def conditioning(self, items: Sequence[Item]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(values, presence mask) [n, controls] on the device, or (None, None) for a model without controls."""
        if not self.controls:
            for it in items:
                if it.controls:
                    raise ValueError(f"model {self.name!r} takes no controls (got {', '.join(sorted(it.controls))})")
            return None, None
        vals = torch.zeros(len(items), len(self.controls))
        mask = torch.zeros(len(items), len(self.controls))
        for i, it in enumerate(items):
            unknown = sorted(set(it.controls) - set(self.controls) - set(self.unit_controls))
            if unknown:
                raise ValueError(f"unknown control(s) {', '.join(unknown)}; model {self.name!r} takes "
                                 f"{', '.join(self.controls + self.unit_controls)}")
            dials = self.dials(it.controls)
            for j, name in enumerate(self.controls):
                if name in dials:
                    v = float(dials[name])
                    if not (0.0 <= v <= 1.0):
                        raise ValueError(f"control {name} must be within 0..1, got {v}")
                    vals[i, j], mask[i, j] = v, 1.0
        return vals.to(self.device), mask.to(self.device)

    def unit_range(self, unit: str) -> tuple[str, float, float]:
        """(the dial it stands for, lowest, highest) of a control in units for this model: descriptors.UNIT_CONTROLS,
        with decay_s at most 90 % of the longest kick it renders (max_length: a decay is measured within the kick, a
        longer one cannot be)."""
        from .descriptors import UNIT_CONTROLS

        dial, lo, hi = UNIT_CONTROLS[unit]
        if unit == "decay_s":
            hi = min(hi, round(0.9 * self.max_length / self.sample_rate, 2))
        return dial, lo, hi

    def render_length(self, controls: dict[str, float]) -> int:
        """The samples (at the model's rate) a kick asked with these controls is rendered at, as far as the request
        tells: `length`, but where a family renders a long decay longer (what the daemon prices a kick at)."""
        return self.length

    def dials(self, controls: dict[str, float]) -> dict[str, float]:
        """An item's controls as 0..1 dials: a control given in units (decay_s, pitch_hz, click_db) becomes the dial
        of the training kicks' quantile it falls on (the prior makes the rest of the kick fit it; the family then
        sets the unit exactly). ValueError when a unit is out of its range or given beside its own dial."""
        from .descriptors import UNIT_CONTROLS, to_dial

        out = {k: v for k, v in controls.items() if k not in UNIT_CONTROLS}
        for unit in self.unit_controls:
            if unit not in controls:
                continue
            dial, lo, hi = self.unit_range(unit)
            v = float(controls[unit])
            if not lo <= v <= hi:
                raise ValueError(f"control {unit} must be within {lo:g}..{hi:g}, got {v:g}")
            if dial in controls:
                raise ValueError(f"give {dial} (0..1) or {unit}, not both")
            j = self.controls.index(dial)
            out[dial] = float(to_dial(torch.tensor([[v]], dtype=torch.float64), [self.control_quantiles[j]])[0, 0])
        return out

    # ----------------------------------------------------------- for subclasses: raw kicks at the model's rate
    def _sample(self, items: Sequence[Item], settings: Settings, hook: Hook) -> np.ndarray:
        raise NotImplementedError

    def _vary(self, source: np.ndarray, strength: float, items: Sequence[Item], settings: Settings,
              hook: Hook) -> np.ndarray:
        """Variations of a prepared source at 0 < strength <= 1 (strength 0 never reaches a family: `vary`)."""
        raise NotImplementedError

    def _morph(self, a: Endpoint, b: Endpoint, ts: Sequence[float], items: Sequence[Item], settings: Settings,
               hook: Hook) -> np.ndarray:
        raise NotImplementedError

    def _kit_numbers(self, items: Sequence[Item], layers: int, robins: int, settings: Settings,
                     source: np.ndarray | None, strength: float, sample_rate: int,
                     hook: Hook) -> list[list[np.ndarray]]:
        """KIT_NUMBERS: items[0]'s kick (a fresh one, or source's variation at 0 < strength) made into a kit by the
        family's own rules over its numbers: [layer][robin] finished kicks at sample_rate (see kit)."""
        raise NotImplementedError

    def _source_tensor(self, source: np.ndarray, n: int) -> torch.Tensor:
        src = torch.as_tensor(np.asarray(source, dtype=np.float32)).reshape(1, -1)
        if src.shape[-1] != self.length:
            raise ValueError(f"source has {src.shape[-1]} samples, the model makes {self.length}")
        return src.to(self.device).expand(n, self.length)

    # ----------------------------------------------------------- the interface
    def prepare_source(self, audio: np.ndarray, sample_rate: int, *, whole: bool = False) -> np.ndarray:
        """A decoded file ([frames] or [frames, channels] at sample_rate) made into a clip this model can
        vary: mono, resampled, onset-aligned, cropped or padded, peak-normalised as training clips are
        (kickmodel.clips.prepare_audio), but without their 10 Hz high-pass: a variation at strength 0 gives the
        source back as it is, and a kick the daemon wrote has had its 20 Hz subsonic filter already (filtered
        again on each pass, a variation of a variation lost about 1 dB under 40 Hz a pass). What the model
        makes from it is finished like any kick, 20 Hz filter included. [length] samples; with `whole`,
        [max_length]: the file as a variation at strength 0 gives it back, up to the longest kick this model
        renders (a kick-synth kick the daemon wrote may be 3 s long; cropped to the model's length, it came back
        cut at 1.02 s). Raises kickmodel.clips.BadAudio with the reason."""
        from .clips import prepare_audio

        cfg = self.config.data
        length = self.max_length if whole else self.length
        if cfg.sample_rate != self.sample_rate or cfg.length != length:
            cfg = dataclasses.replace(cfg, sample_rate=self.sample_rate, length=length)
        clip, _ = prepare_audio(audio, sample_rate, cfg, highpass=False)
        return clip

    def locate(self, clip: np.ndarray) -> tuple[float, float]:
        """(x, y) on the kit map of a prepared clip [length] (prepare_source): its encoding placed by
        KitMap.locate. ValueError when this model has no map."""
        if self.kit_map is None:
            raise ValueError(f"no kit map: {self.kit_map_missing}")
        src = np.asarray(self._source_tensor(clip, 1).cpu().numpy(), dtype=np.float32)
        return self.kit_map.locate(self.encode(src)[0])  # type: ignore[attr-defined]  # ENCODE: a map needs it

    def locate_made(self, made: MapMade, audio: np.ndarray, sample_rate: int) -> tuple[float, float] | None:
        """(x, y) of a file this model made from its kit map, placed by the kick's own latent rather than by encoding
        its sound: made is what the file's tags say (kickmodel.wavfile.made_on_map), audio [frames] its samples at
        sample_rate. The tags are a claim, not a fact: the kick is made again from them (from_map, at the file's
        rate, then clipped and cut where it has decayed, as a writer writes it) and must match the file sample for
        sample, within MADE_MATCH_DB of its peak, over the file's length (a file may end early, never late). Then its
        latent, kit_map.near(point, spread, seed), is placed by KitMap.locate: where that latent lies, exactly (a kick
        asked with spread 0 at (x, y) comes back at (x, y)). None when the tags ask what this model cannot make or
        the sound differs (the file was edited, bounced by a DAW, made by another model): the caller locates it by
        its sound. The caller checks that made.model names the model serving (a daemon's name for it may not be its
        artifact's)."""
        if self.kit_map is None:
            return None
        a = np.asarray(audio, dtype=np.float32).reshape(-1)
        try:
            again = self.from_map(made.x, made.y, made.spread, [Item(made.seed, dict(made.controls))],
                                  sample_rate=sample_rate)[0]
        except ValueError:  # a point or spread out of range, a control this model's map kicks do not take
            return None
        again = trim_tail(np.clip(again, -1.0, 1.0), sample_rate)  # as a writer writes it (kickserver.writer)
        n = a.shape[0]
        peak = float(np.abs(again).max()) if again.size else 0.0
        if not (MIN_MADE_S * sample_rate <= n <= again.shape[0]) or not np.isfinite(again).all() or peak <= 0.0:
            return None
        if float(np.abs(again[:n] - a).max()) > peak * 10.0 ** (MADE_MATCH_DB / 20.0):
            return None
        return self.kit_map.locate(self.kit_map.near(made.x, made.y, made.spread, made.seed))

    encoder_name = "an encoder pass"  # what encoding a source file is, in a few words (kickserver.pricing's lines)

    def encode_seconds(self, clip: np.ndarray, hook: Hook | None = None) -> float:
        """About how long encoding one prepared clip (prepare_source) takes here now: what a variation, a morph's file
        end and a locate do first. Timed once through `encode` (a network pass); 0.0 for a model without an encoder
        (a waveform model varies the clip as it is). A family whose encoding is long overrides it with an estimate
        that runs a small part of it (the kick synth's fit: fit.fit_seconds)."""
        if ENCODE not in self.capabilities:
            return 0.0
        t0 = time.perf_counter()
        self.encode(np.asarray(clip, dtype=np.float32).reshape(1, -1), hook)  # type: ignore[attr-defined]  # ENCODE
        return time.perf_counter() - t0

    # ----------------------------------------------------------- the modes, one method each
    def generate(self, items: Sequence[Item], settings: Settings, *, sample_rate: int | None = None,
                 hook: Hook | None = None) -> np.ndarray:
        """Fresh kicks [n, samples] at sample_rate (default: the model's), one per item (its seed and controls)."""
        return self._finish(self._sample(items, settings, hook or _no_hook), sample_rate)

    def vary(self, source: np.ndarray, strength: float, items: Sequence[Item], settings: Settings, *,
             sample_rate: int | None = None, hook: Hook | None = None) -> np.ndarray:
        """Variations of a prepared clip (prepare_source), one per item (its seed is the noise drawn): strength 0
        gives the source back, 1 a fresh kick. ValueError when the model makes none or strength is out of 0..1."""
        self._needs(VARIATION, "make variations")
        strength = float(strength)
        if not 0.0 <= strength <= 1.0:
            raise ValueError(f"strength must be within 0..1, got {strength:g}")
        if strength == 0.0:
            # the source itself, not made again: levelled and faded as any kick but not filtered by the subsonic
            # filter a second time (a finished kick has had it; each pass turned its phase and took its low end down);
            # as prepared (length) or whole (prepare_source(whole=True): up to max_length)
            raw = np.asarray(source, dtype=np.float32).reshape(1, -1)
            if not self.length <= raw.shape[1] <= self.max_length:
                raise ValueError(f"source has {raw.shape[1]} samples, the model makes {self.length}"
                                 + (f" to {self.max_length}" if self.max_length > self.length else ""))
            raw = np.repeat(raw, len(items), axis=0)
            # nor faded again: a kick the daemon wrote has had its rise and its tail fade, and a second 0.5 ms rise
            # took up to -21 dB re peak off a steep attack (kick-synth; -34 dB the bundled model), a little more
            # each pass; a clip that does not start from silence (a file cut at its attack) still gets the rise
            peak = float(np.abs(raw).max()) if raw.size else 0.0
            fade_in = 0.0 if raw.size and abs(float(raw[0, 0])) <= 1e-3 * peak else 0.5
            return self._finish(raw, sample_rate, highpass_hz=0.0, fade_in_ms=fade_in, fade_ms=0.0)
        return self._finish(self._vary(source, strength, items, settings, hook or _no_hook), sample_rate)

    def morph(self, a: Endpoint, b: Endpoint, ts: Sequence[float], items: Sequence[Item], settings: Settings, *,
              sample_rate: int | None = None, hook: Hook | None = None) -> np.ndarray:
        """A morph from a to b (seeds or prepared clips): one kick per t in ts (0: a's kick, 1: b's), items giving each
        kick's controls. ValueError when the model makes none, the ts do not match the items or leave 0..1, or the
        sampler is not one a morph may use (gen.interpolation_samplers)."""
        self._needs(INTERPOLATION, "morph")
        ts = [float(t) for t in ts]
        if len(ts) != len(items) or not all(0.0 <= t <= 1.0 for t in ts):
            raise ValueError("an interpolation needs one t within 0..1 per kick")
        if settings.sampler is not None and settings.sampler not in self.interpolation_samplers:
            raise ValueError(f"interpolation needs a deterministic sampler "
                             f"({' or '.join(self.interpolation_samplers)}), not {settings.sampler}")
        return self._finish(self._morph(a, b, ts, items, settings, hook or _no_hook), sample_rate)

    def from_map(self, x: float, y: float, spread: float, items: Sequence[Item], *, sample_rate: int | None = None,
                 hook: Hook | None = None) -> np.ndarray:
        """Kicks from a point of the model's kit map (kickmodel.kitmap): each item's kick is decoded from
        kit_map.near(x, y, spread, item.seed), the map's latent under (x, y) (0..1 each) plus that item's seeded noise
        scaled by spread (0..1: 0 is the point itself, every seed alike; 1 moves as far as the kit's kicks spread).
        No steps, no sampler. ValueError when this model has no map or an item gives a control a kick from the map
        cannot take (a dial: the latent is decoded as it is; a control in units is set on the decoded kick by a
        family that sets units, kick-synth)."""
        if self.kit_map is None:
            raise ValueError(f"no kit map: {self.kit_map_missing}")
        for it in items:
            dials = sorted(set(it.controls) - set(self.unit_controls))
            if dials:
                units = f" (it takes {', '.join(self.unit_controls)} in units)" if self.unit_controls else ""
                raise ValueError(f"a kick from the map is decoded from the map's latent: control(s) "
                                 f"{', '.join(dials)} do not apply{units}; leave them out")
        z = np.stack([self.kit_map.near(x, y, spread, it.seed) for it in items])
        raw = self.decode_latents(z, items, hook or _no_hook)  # type: ignore[attr-defined]  # ENCODE: a map needs it
        return self._finish(raw, sample_rate)

    def kit_rules(self, source: bool = False, strength: float = 0.0) -> str:
        """Which rules a kit of this model gets (kit): "numbers", the family's own (KIT_NUMBERS), for a fresh kick or
        a variation of a source; "audio", kickmodel.kitrules' rules on the finished kick, for a model without them and
        for a source kept as it is (strength 0: the file has no numbers of this model)."""
        return "numbers" if KIT_NUMBERS in self.capabilities and not (source and strength == 0.0) else "audio"

    def kit(self, items: Sequence[Item], layers: int, robins: int, settings: Settings, *,
            source: np.ndarray | None = None, strength: float = 0.0, sample_rate: int | None = None,
            hook: Hook | None = None) -> list[list[np.ndarray]]:
        """A kit of one kick: its hits [layer][robin] (softest layer first), finished kicks at sample_rate (default:
        the model's), each softer layer quieter and duller, each robin a little different, no hit louder than the
        kick asked for. The kick is items[0]'s: generate's for its seed and controls, or, with a prepared source,
        vary's at strength (0: the file as it is); further items are rendered beside it and dropped (a batch padded
        to a size the render was captured for). By the family's own number rules where it has them (kit_rules),
        else by kickmodel.kitrules.audio_kit; both seeded by items[0].seed. ValueError for layers or robins out of
        range (kickmodel.kitrules.check_counts) or a kit that is not finite."""
        from .kitrules import audio_kit, check_counts

        layers, robins = check_counts(layers, robins)
        hook = hook or _no_hook
        rate = int(sample_rate or self.sample_rate)
        if self.kit_rules(source is not None, strength) == "numbers":
            if source is not None:
                self._needs(VARIATION, "make variations")
                if not 0.0 < float(strength) <= 1.0:
                    raise ValueError(f"strength must be within 0..1, got {float(strength):g}")
            grid = self._kit_numbers(items, layers, robins, settings, source, float(strength), rate, hook)
        else:
            top = (self.vary(source, strength, items, settings, sample_rate=rate, hook=hook) if source is not None
                   else self.generate(items, settings, sample_rate=rate, hook=hook))[0]
            top = np.asarray(top, dtype=np.float32)
            if not np.isfinite(top).all():
                raise ValueError("the model's output for the kit's kick is not finite (NaN or inf): no kit made")
            grid = audio_kit(top, rate, layers, robins, items[0].seed)
        grid = [[np.asarray(h, dtype=np.float32) for h in row] for row in grid]
        if not all(np.isfinite(h).all() for row in grid for h in row):
            raise ValueError("the model's output for the kit's kick is not finite (NaN or inf): no kit made")
        return grid

    def _needs(self, capability: str, what: str) -> None:
        if capability not in self.capabilities:
            raise ValueError(f"model {self.name!r} (a {self.family} model) cannot {what}; what it can do: "
                             f"{', '.join(sorted(self.capabilities)) or 'fresh kicks only'}")

    def _finish(self, raw: np.ndarray | Ragged, sample_rate: int | None, highpass_hz: float = SUBSONIC_HZ,
                fade_in_ms: float = 0.5, fade_ms: float = 20.0) -> np.ndarray:
        """The core every mode ends in: raw kicks at the model's rate, resampled to sample_rate (default: the model's)
        and finished (kickmodel.dsp.finish_kick); Ragged raw kicks each over its own length, padded with zeros to the
        longest. A kick the model made with NaN or inf in it comes back all NaN, never as the silence finish_kick
        would make of it: whoever writes it refuses it (the daemon's writer answers that kick with an error), and the
        batch's other kicks are unchanged."""
        out_rate = int(sample_rate or self.sample_rate)
        if isinstance(raw, Ragged):  # each kick over its own length (side by side), then padded to the longest
            done = side_by_side(lambda i: self._finish(raw.audio[i:i + 1, :raw.lengths[i]], out_rate, highpass_hz,
                                                       fade_in_ms, fade_ms)[0], range(len(raw.lengths)))
            out = np.zeros((len(done), max(len(d) for d in done)), dtype=np.float32)
            for i, d in enumerate(done):
                out[i, :len(d)] = d
            return out
        raw = np.asarray(raw, dtype=np.float32)
        bad = ~np.isfinite(raw.reshape(raw.shape[0], -1)).all(axis=1) if raw.ndim == 2 else None
        if bad is not None and bad.any():  # finish_kick would make those rows silence: they stay NaN (NOT_FINITE)
            raw = np.where(bad[:, None], np.float32(0.0), raw)

        def finish(rows: np.ndarray) -> np.ndarray:
            return finish_kick(resample(rows, self.sample_rate, out_rate), out_rate,
                               highpass_hz=highpass_hz, fade_in_ms=fade_in_ms, fade_ms=fade_ms)

        if raw.ndim == 2 and raw.shape[0] > 1:  # each kick alone, side by side, one thread each: a batch's bits
            out = np.stack(side_by_side(lambda i: finish(raw[i:i + 1])[0], range(raw.shape[0])))
        else:
            with one_thread_if(True):  # as each kick of a batch is finished
                out = finish(raw)
        if bad is not None and bad.any():
            out[bad] = np.nan
        return out

    def describe(self) -> dict:
        return {"name": self.name, "family": self.family, "sample_rate": self.sample_rate, "length": self.length,
                "controls": list(self.controls), "samplers": list(self.samplers), "max_steps": self.max_steps,
                "steps": self.default_steps, "sampler": self.default_sampler, "device": str(self.device),
                "step": self.artifact.step, "capabilities": sorted(self.capabilities)}
