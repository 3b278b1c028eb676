"""A request, once accepted, as one typed value: one dataclass per kind, each carrying its resolved settings and
controls, and what the worker emits for it (the outcomes the front end encodes as OSC).

    Fresh      /kick/generate: kicks from seeds
    Variation  /kick/variation: kicks made from a source file (SDEdit)
    Morph      /kick/interpolate: kicks between two ends (seeds or files), one per t
    Near       /kick/near: kicks from a point of the kit map
    Locate     /kick/locate: no kick, the map point of a source file
    Kit        /kick/kit: one kick made layers x robins hits, written as one folder (one reply: KitDone)

The front end (kickserver.frontend) makes a job from a parsed request and resolves it once against the serving model
(`resolve`: steps and sampler through the generator's `settings`, the one call of it in kickserver); nothing
downstream re-derives what kind of request it is or resolves its steps again. The worker resolves the jobs still
queued again only when what they were resolved against changes (a model swapped in, a new --steps/--max-steps on
SIGHUP), so a queued kick is made with the settings of the model that makes it, as before.

Every call from kickserver into the generator (settings, prepare_source, render, locate) sits in this module, in the
kinds' methods (and `warm_up`, a throw-away fresh kick, and `measure_prices`, what a model takes: an encoding's
estimate and a throw-away kick): the worker asks a job to render its batch and never names a mode.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kickmodel.clips import BadAudio
from kickmodel.generator import Endpoint, Hook, Item, Settings, SettingsError, StepPolicy, cancel_hook
from kickmodel.wavfile import made_on_map

from .pricing import FLOOR_S, Prices
from .sources import Source, SourceError

log = logging.getLogger("kickserver.worker")


# ------------------------------------------------------------------ outcomes (the worker emits, the front end encodes)


@dataclass(frozen=True)
class Done:
    """A kick written: its request's id, its path and the seed /kick/generate turns into it (None: no seed does)."""

    id: int
    path: str
    seed: int | None


@dataclass(frozen=True)
class Refused:
    """A kick (or a model load) that failed, and why; id None: no request's id."""

    id: int | None
    reason: str


@dataclass(frozen=True)
class Located:
    """Where a file's kick lies on the map; `source` as the client named it."""

    x: float
    y: float
    source: str


@dataclass(frozen=True)
class Serving:
    """A model that serves now (the answer to /kick/model)."""

    name: str


@dataclass(frozen=True)
class KitDone:
    """A kit written: its request's id, its folder, its layers and robins, and the seed /kick/kit makes it from again
    (None: a kit from a source file)."""

    id: int
    folder: str
    layers: int
    robins: int
    seed: int | None


Outcome = Done | Refused | Located | Serving | KitDone
Answer = Callable[[Outcome], None]


# ------------------------------------------------------------------ files a job reads


class Opened:
    """A file the receive loop opened and checked (kickserver.sources), decoded once, by the worker, from that
    descriptor; a failure to decode fails every later use alike."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._audio: tuple[np.ndarray, int] | None = None
        self._error: Exception | None = None

    @property
    def name(self) -> str:
        return self.source.name

    def __str__(self) -> str:
        return str(self.source)

    @property
    def comment(self) -> str | None:
        """The file's RIFF comment as its source read it when decoded (bounded there), or None."""
        return self.source.comment

    def decoded(self) -> tuple[np.ndarray, int]:
        if self._error is not None:
            raise self._error
        if self._audio is None:
            try:
                self._audio = self.source.decode()
            except Exception as e:
                self._error = e
                raise
        return self._audio

    def clip(self, gen: Any, whole: bool = False) -> np.ndarray:
        """The file as the serving model's input clip, prepared like a training clip (GeneratorBase.prepare_source);
        whole: as a variation at strength 0 gives it back, up to the longest kick the model renders."""
        audio, rate = self.decoded()
        return gen.prepare_source(audio, rate, whole=whole)

    def close(self) -> None:
        self.source.close()


@dataclass
class End:
    """One end of a morph: a seed, or an opened file."""

    seed: int | None = None
    file: Opened | None = None

    @property
    def tag(self) -> int | str:
        """What the kick's tags record: the seed, or the file's path."""
        return self.seed if self.file is None else str(self.file)


# ------------------------------------------------------------------ jobs


@dataclass
class Kick:
    """One kick of a job, queued: its seed (-1 for a morph's inner kick), its t (a morph's), answered once."""

    job: Job
    seed: int
    t: float | None = None
    answered: bool = False
    settings: Settings | None = None  # what it was rendered with (its job's may be resolved again meanwhile)
    price: int = 1  # its share of its job's price, in kicks (Job.priced_kicks): what the queue counts it as

    def answer(self, outcome: Outcome) -> None:
        """Send this kick's one outcome; marks it answered first."""
        self.answered = True
        self.job.answer(outcome)


@dataclass
class Job:
    """An accepted request: `count` kicks (`seeds`), each answered exactly once through `answer`. `client` is whose
    queue the kicks join (the daemon: the source address and port; see `host`)."""

    id: int
    seeds: list[int]
    answer: Answer
    client: Any = None
    refused: str | None = None  # a reason every later batch of this job gets (a morph the model refused)
    # what the queue counts it as, in kicks (kickserver.pricing.price; None: one per kick), and why, in a few words
    price: int | None = None
    price_note: str = ""
    # how many of the model's renders each of its kicks is (resolve: a kick-synth kick asked for a long decay_s is
    # played, and adjusted, at up to 3 s, about three of its ordinary kicks' length): pricing counts its renders so
    length_factor: int = 1
    length_s: float = 0.0  # that kick's render, in seconds (0: the model's own length), for the price's note

    @property
    def count(self) -> int:
        return len(self.seeds)

    @property
    def cost(self) -> int:
        """Its price in kicks: what it counts against the queue's limits and its host's turns."""
        return self.count if self.price is None else self.price

    def work(self, max_batch: int) -> tuple[int, int]:
        """(kick-sized renders, source files encoded) its kicks take when batched up to max_batch at a time: one
        render per kick and no encoding by default (kickserver.pricing prices it from these)."""
        return self.count, 0

    def priced_kicks(self) -> list[Kick]:
        """Its kicks, their prices (Kick.price) summing to its own: split as evenly as whole kicks allow."""
        kicks = self.kicks()
        each, extra = divmod(self.cost, len(kicks))
        for i, k in enumerate(kicks):
            k.price = each + (i < extra)
        return kicks

    @property
    def host(self) -> Any:
        """Whose share the kicks count against: the source address of an (address, port) client, else the client."""
        return self.client[0] if isinstance(self.client, tuple) and self.client else self.client

    def kicks(self) -> list[Kick]:
        return [Kick(self, s) for s in self.seeds]

    def batch_key(self) -> tuple:
        """Kicks with the same key may be made in one batch: by default only this job's."""
        return (type(self).__name__, id(self))

    def resolve(self, gen: Any, policy: StepPolicy) -> None:
        """Fix the settings against the model that will make the kicks (no settings by default)."""

    def files(self) -> list[Opened]:
        """Every file this job holds open (to close when it is refused, dropped or done)."""
        return []

    def close(self) -> None:
        for f in self.files():
            f.close()


@dataclass
class KickJob(Job):
    """A job whose kicks are rendered and written. `steps` and `sampler` are what the request asked (None: the
    server's or the model's default); `settings` what the kicks are made with (`resolve`)."""

    controls: dict[str, float] = field(default_factory=dict)
    steps: int | None = None
    sampler: str | None = None
    settings: Settings = field(default_factory=Settings)
    unusable: str = ""  # why the serving model cannot make it with its settings (resolve), else ""

    def resolve(self, gen: Any, policy: StepPolicy) -> None:
        try:
            self.settings = gen.settings(self.steps, self.sampler, policy)  # the one resolver call in kickserver
            self.unusable = ""
        except SettingsError as e:  # refused when its kicks' turn comes (render), so replies keep the queue's order
            self.settings, self.unusable = e.settings, str(e)
        render_length = getattr(gen, "render_length", None)  # a model longer than its length for these controls
        samples = int(render_length(self.controls)) if render_length is not None else 0
        length = int(getattr(gen, "length", 0) or 0)
        if samples > length > 0:
            self.length_factor, self.length_s = -(-samples // length), samples / float(gen.sample_rate)
        else:
            self.length_factor, self.length_s = 1, 0.0

    def reply_seed(self, seed: int) -> int | None:
        """The seed a kick's /kick/done carries: the seed /kick/generate turns into this very kick, else None."""
        return seed

    def items(self, kicks: Sequence[Kick], pad: int) -> list[Item]:
        """The kicks as the generator's items (an inner morph kick's seed -1 as 0), then `pad` copies of the first
        (a batch padded up to a captured size; their rows are dropped after the render)."""
        items = [Item(seed=max(0, k.seed), controls=dict(self.controls)) for k in kicks]
        return items + [Item(seed=items[0].seed, controls=dict(items[0].controls)) for _ in range(pad)]

    def render(self, gen: Any, kicks: Sequence[Kick], pad: int, sample_rate: int,
               cancel: Callable[[], bool]) -> np.ndarray:
        """The batch's kicks [len(kicks), L] at sample_rate; each kick records the settings it is made with."""
        s = self.settings
        for k in kicks:
            k.settings = s
        if self.unusable:
            raise ValueError(self.unusable)
        return self.make(gen, kicks, self.items(kicks, pad), sample_rate, cancel_hook(cancel))[:len(kicks)]

    def make(self, gen: Any, kicks: Sequence[Kick], items: list[Item], sample_rate: int, hook: Hook) -> np.ndarray:
        """The generator's mode for this kind, called with the batch's items (a fresh kick: gen.generate)."""
        return gen.generate(items, self.settings, sample_rate=sample_rate, hook=hook)

    def tags(self, kick: Kick) -> dict[str, Any]:
        """What the kick's WAV records (kickmodel.wavfile.KickInfo's fields) beside model, seed and software."""
        s = kick.settings or self.settings
        return {"steps": s.steps, "sampler": s.sampler, "controls": self.controls}

    def refusal(self, e: Exception) -> str:
        """The reason every kick of the batch gets when the model refused to make it."""
        if isinstance(e, BadAudio):
            return f"cannot use source {getattr(self, 'source', None) and self.source.name or ''}: {e}"
        return str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"


@dataclass
class Fresh(KickJob):
    """/kick/generate: kicks from seeds; batched with any queued kicks made with the same settings."""

    def batch_key(self) -> tuple:
        return ("generate", self.settings.steps, self.settings.sampler)


@dataclass
class Variation(KickJob):
    """/kick/variation: the source noised to `strength` and denoised (its seed is the noise drawn)."""

    source: Opened | None = None
    strength: float = 0.5

    def reply_seed(self, seed: int) -> int | None:
        return None  # its seed is its noise: /kick/generate would turn it into another kick

    def work(self, max_batch: int) -> tuple[int, int]:
        """Its source encoded once per batch (strength 0 gives the file back: nothing encoded)."""
        return self.count, (-(-self.count // max(1, max_batch)) if self.strength > 0 else 0)

    def make(self, gen: Any, kicks: Sequence[Kick], items: list[Item], sample_rate: int, hook: Hook) -> np.ndarray:
        return gen.vary(self.source.clip(gen, whole=self.strength == 0.0), self.strength, items, self.settings,
                        sample_rate=sample_rate, hook=hook)

    def tags(self, kick: Kick) -> dict[str, Any]:
        return {**super().tags(kick), "source": str(self.source), "strength": self.strength}

    def files(self) -> list[Opened]:
        return [self.source] if self.source is not None else []


@dataclass
class Morph(KickJob):
    """/kick/interpolate: one kick per t between two ends; a file end is decoded once and prepared per batch."""

    ends: tuple[End, End] = field(default_factory=lambda: (End(), End()))
    ts: list[float] = field(default_factory=list)

    def kicks(self) -> list[Kick]:
        return [Kick(self, s, t) for s, t in zip(self.seeds, self.ts, strict=True)]

    def work(self, max_batch: int) -> tuple[int, int]:
        """Each file end encoded, then inverted (about a kick's steps on one row), once per batch."""
        per = sum(e.file is not None for e in self.ends) * -(-self.count // max(1, max_batch))
        return self.count + per, per

    def make(self, gen: Any, kicks: Sequence[Kick], items: list[Item], sample_rate: int, hook: Hook) -> np.ndarray:
        """Its ends as the model's endpoints and one t per kick (and per padding row); a file the model cannot use
        raises ValueError naming its end."""
        ends = []
        for key, end in zip(("a", "b"), self.ends, strict=True):
            if end.file is None:
                ends.append(Endpoint(seed=end.seed))
                continue
            try:
                ends.append(Endpoint(source=end.file.clip(gen)))
            except BadAudio as e:
                raise ValueError(f"{key}: cannot use source {end.file.name}: {e}") from None
            except SourceError as e:
                raise ValueError(f"{key}: {e}") from None
        ts = [k.t for k in kicks]
        ts += [ts[0]] * (len(items) - len(ts))
        return gen.morph(ends[0], ends[1], ts, items, self.settings, sample_rate=sample_rate, hook=hook)

    def tags(self, kick: Kick) -> dict[str, Any]:
        return {**super().tags(kick), "a": self.ends[0].tag, "b": self.ends[1].tag, "t": kick.t}

    def refusal(self, e: Exception) -> str:
        self.refused = super().refusal(e)  # its later batches get the same reason
        self.close()
        return self.refused

    def files(self) -> list[Opened]:
        return [e.file for e in self.ends if e.file is not None]


@dataclass(frozen=True)
class MapPoint:
    """A point of the kit map (x, y: 0..1 each) and how far its kicks spread around it (0..1), each held at float32
    precision, what an OSC float carries and what the kick's tags print (kickmodel.wavfile.exact): so the default
    spread 0.2 (a float64) makes the kick that `spread 0.2` asked again makes, and the tags reproduce it (it made
    another file, up to -38 dB apart)."""

    x: float
    y: float
    spread: float = 0.0

    def __post_init__(self) -> None:
        for k in ("x", "y", "spread"):
            object.__setattr__(self, k, float(np.float32(getattr(self, k))))


@dataclass
class Near(KickJob):
    """/kick/near: kicks from the kit map's point, each its seed's noise scaled by the spread; the map's latent is
    decoded at once (no steps, no sampler), and only controls in units apply (the front end drops the dials)."""

    point: MapPoint = field(default_factory=lambda: MapPoint(0.5, 0.5))

    def resolve(self, gen: Any, policy: StepPolicy) -> None:
        pass  # a map kick is decoded as it is: steps and sampler do not apply

    def make(self, gen: Any, kicks: Sequence[Kick], items: list[Item], sample_rate: int, hook: Hook) -> np.ndarray:
        p = self.point
        return gen.from_map(p.x, p.y, p.spread, items, sample_rate=sample_rate, hook=hook)

    def tags(self, kick: Kick) -> dict[str, Any]:
        p = self.point
        return {**super().tags(kick), "map_x": p.x, "map_y": p.y, "spread": p.spread}


@dataclass
class KitKick(Kick):
    """One hit of a kit: `index` 0.. in the order the queue gives them, the top layer's robins first (jobs.Kit.hit)."""

    index: int = 0


@dataclass
class Kit(KickJob):
    """/kick/kit: one kick (a seed's, or a source file varied at `strength`: 0 gives the file as the model finishes
    it) made into `layers` x `robins` hits by the generator's kit mode (gen.kit: the family's own number rules where
    it has them, kick-synth's; else kickmodel.kitrules' audio rules, which every model's kick takes; `rules` says
    which).

    Its `seeds` hold one entry per hit, so the queue prices it as layers x robins kicks (fair_queue: queue_limit,
    client_limit) and takes its hits in batches of at most max_batch under its own batch key: another client's kick
    waits at most one batch. The first batch renders the kick once (the model's only call for the kit) and derives
    every hit; each batch returns its hits. The writer thread hands each hit to `deliver` (not to a WAV of its own);
    the last one writes the folder (kickserver.kitfiles.write_kit, atomic) and sends the one KitDone. Every other
    answer of the kit's hits is swallowed: one refusal (the first: a model error, a write error, shutting down) is
    the kit's one reply, and later batches are answered by it without rendering (`refused`)."""

    source: Opened | None = None
    strength: float = 0.0
    layers: int = 4
    robins: int = 2
    pitch_hz: float | None = None  # the pitch asked (note, key or pitch_hz), else the top kick's measured pitch
    key: str | None = None
    rules: str = ""  # which rules made its hits (gen.kit_rules: "numbers" or "audio"), once rendered
    _made: tuple | None = field(default=None, repr=False)  # (sample_rate, the hits [layer][robin])
    _hits: dict = field(default_factory=dict, repr=False)  # index -> audio, held by the writer thread
    _sent: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        send = self.answer

        def once(outcome: Outcome) -> None:
            if self._sent:
                return
            self._sent = True
            if isinstance(outcome, Refused):
                self.refused = self.refused or outcome.reason
                self._hits, self._made = {}, None
                self.close()
            send(outcome)

        self.answer = once

    def kicks(self) -> list[Kick]:
        return [KitKick(self, self.seeds[0], index=i) for i in range(len(self.seeds))]

    def work(self, max_batch: int) -> tuple[int, int]:
        """Priced as its hits (the kick is made once); a source varied at strength > 0 is encoded once, in the first
        batch."""
        return self.count, int(self.source is not None and self.strength > 0)

    def hit(self, index: int) -> tuple[int, int]:
        """(layer, robin) of hit `index`: the top layer (layers - 1) first, its robin 0 first."""
        return self.layers - 1 - index // self.robins, index % self.robins

    def reply_seed(self, seed: int) -> int | None:
        return None if self.source is not None else seed

    def make(self, gen: Any, kicks: Sequence[Kick], items: list[Item], sample_rate: int, hook: Hook) -> np.ndarray:
        if self._made is None or self._made[0] != sample_rate:
            source = self.source.clip(gen, whole=self.strength == 0.0) if self.source is not None else None
            self.rules = gen.kit_rules(source is not None, self.strength)
            self._made = (sample_rate, gen.kit(items, self.layers, self.robins, self.settings, source=source,
                                               strength=self.strength, sample_rate=sample_rate, hook=hook))
        grid = self._made[1]
        return np.stack([grid[lay][r] for lay, r in (self.hit(k.index) for k in kicks)])

    def files(self) -> list[Opened]:
        return [self.source] if self.source is not None else []

    def deliver(self, kick: Kick, audio: np.ndarray, writer: Any, sample_rate: int, model_name: str) -> None:
        """The writer thread's hook (kickserver.writer.WriterThread): hold the hit; with the last one, write the kit's
        folder with writer (a kickserver.writer.KickWriter: into its folder, in its ledger) and answer KitDone, or
        Refused with why (nothing left behind)."""
        kick.answered = True
        if self._sent:
            return
        self._hits[kick.index] = np.asarray(audio, dtype=np.float32)
        if len(self._hits) < self.count:
            return
        hits, self._hits, self._made = self._hits, {}, None
        try:
            folder = self.write(hits, writer, sample_rate, model_name)
        except (OSError, ValueError) as e:
            log.error("request %d: %s", self.id, e)
            self.answer(Refused(self.id, getattr(e, "strerror", None) or str(e)))
            return
        finally:
            self.close()
        self.answer(KitDone(self.id, str(folder), self.layers, self.robins, self.reply_seed(self.seeds[0])))

    def write(self, hits: dict[int, np.ndarray], writer: Any, sample_rate: int, model_name: str) -> Any:
        """The folder written (KickWriter.write_kit: kickserver.kitfiles.write_kit, and the ledger), named after its
        top kick as measured (kickmodel.naming.KIT_PATTERN: kit_A1_punchy_5513; -2, -3... when taken)."""
        import os

        from kickmodel.naming import KIT_PATTERN, kick_name
        from kickmodel.notes import nearest_note
        from kickmodel.wavfile import measured_of, naming_figures

        from . import kitfiles

        # the top hit measured and named as its kick file is (the settled body's pitch as a tuner reads it, not the
        # spectral peak of 40..250 ms, which a sweep, partials or a glide pull off it; the figures as tags print them)
        measured = measured_of(hits[0], sample_rate)
        want = self.pitch_hz if self.pitch_hz is not None else measured.pitch_hz
        note = nearest_note(want)[0] if want is not None else 36  # General MIDI's kick
        label = str(self.seeds[0]) if self.source is None else f"v{self.seeds[0]}"
        decay, named_hz, click = naming_figures(measured, want, self.pitch_hz)
        name = kick_name(label, decay, named_hz, click, pattern=KIT_PATTERN, suffix="")
        info = f"model={model_name} seed={self.seeds[0]}" + (
            f" source={os.path.basename(str(self.source))} strength={self.strength:g}" if self.source else "") + (
            f" rules={self.rules}" if self.rules else "")
        kit = kitfiles.Kit(name=name, note=note, sample_rate=int(sample_rate), pitch_hz=want, key=self.key,
                           info=info[:kitfiles.MAX_INFO].replace("\\", "-"),
                           hits=[kitfiles.KitHit(a, *self.hit(i)) for i, a in sorted(hits.items())])
        return writer.write_kit(kit)


@dataclass
class Locate(Job):
    """/kick/locate: no kick; the source decoded, prepared as a variation's, encoded and placed on the map."""

    source: Opened | None = None
    name: str = ""  # as the client named it

    def work(self, max_batch: int) -> tuple[int, int]:
        """No kick rendered: its source encoded once (at least one kick's worth: kickserver.pricing)."""
        return 0, 1

    def place(self, gen: Any, model_name: str) -> Outcome:
        """`Located`, or why it cannot be; the file is closed either way. A kick that model_name (the model serving)
        made from its map and nobody changed is placed by its own latent (_made_here), any other file by its sound."""
        try:
            made = self._made_here(gen, model_name)
            x, y = made if made is not None else gen.locate(self.source.clip(gen))
            if not (math.isfinite(x) and math.isfinite(y)):  # never a `nan nan` reply
                return Refused(self.id, f"cannot locate {self.source.name}: the map gives no finite point")
            return Located(x, y, self.name)
        except BadAudio as e:
            return Refused(self.id, f"cannot use source {self.source.name}: {e}")
        except ValueError as e:  # a model without a map (swapped in meanwhile), a file gone bad (SourceError)
            return Refused(self.id, str(e))
        except Exception as e:  # noqa: BLE001 - one request's failure is its reply
            log.error("locating %s failed: %s: %s", self.source.name, type(e).__name__, e,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            return Refused(self.id, f"cannot locate {self.source.name}: {type(e).__name__}: {e}")
        finally:
            self.close()

    def _made_here(self, gen: Any, model_name: str) -> tuple[float, float] | None:
        """(x, y) of a file whose tags say the serving model made it from its kit map, checked against its sound
        (kickmodel.generator.GeneratorBase.locate_made: the kick made again must match the file); None otherwise."""
        audio, rate = self.source.decoded()
        made = made_on_map(self.source.comment)
        if made is None or made.model != model_name:
            return None
        return gen.locate_made(made, audio, rate)

    def files(self) -> list[Opened]:
        return [self.source] if self.source is not None else []


def probe_clip(gen: Any) -> np.ndarray:
    """A clip as long as the model's that sounds over all of it (a 55 Hz tone falling to -60 dB at its end: the most
    of a clip a fit weighs), prepared as a source file is."""
    t = np.arange(int(gen.length), dtype=np.float64) / gen.sample_rate
    tone = np.sin(2 * np.pi * 55.0 * t) * 10.0 ** (-3.0 * t / max(t[-1], 1e-3))
    return gen.prepare_source(tone.astype(np.float32), int(gen.sample_rate))


def measure_prices(gen: Any, policy: StepPolicy, cancel: Callable[[], bool] | None = None,
                   clock: Callable[[], float] = time.perf_counter) -> Prices:
    """What the model takes here now (kickserver.pricing): its estimate of one source file's encoding (probe_clip),
    and, only when that is worth half a kick's floor or more, one throw-away kick at the default settings (a second
    when the first took longer than the floor: it may have paid for lazy initialisation). Raises
    kickmodel.generator.Cancelled when cancel() says stop."""
    from kickmodel.generator import ENCODE

    encoder = getattr(gen, "encoder_name", Prices.encoder)
    if ENCODE not in gen.capabilities:  # a source is used as it is (a waveform model): its kicks are its work
        return Prices(encoder=encoder)
    hook = cancel_hook(cancel)
    encode_s = float(gen.encode_seconds(probe_clip(gen), hook))
    if encode_s < FLOOR_S / 2:  # under one kick whatever a kick takes: not worth timing one
        return Prices(encode_s=encode_s, encoder=encoder)
    settings = gen.settings(policy=policy)
    kick_s = math.inf
    for _ in range(2):
        t0 = clock()
        gen.generate([Item(seed=0)], settings, hook=hook)
        kick_s = min(kick_s, clock() - t0)
        if kick_s <= FLOOR_S:
            break
    return Prices(kick_s=kick_s, encode_s=encode_s, encoder=encoder)


def warm_up(gen: Any, cancel: Callable[[], bool] | None = None) -> float:
    """One throw-away kick (seed 0, at most 2 steps) so the first real request does not pay for lazy initialisation;
    its time in seconds. cancel: as render's (kickmodel.generator.Cancelled when it says stop)."""
    t0 = time.perf_counter()
    gen.generate([Item(seed=0)], gen.settings(policy=StepPolicy(cap=2)), hook=cancel_hook(cancel))  # <= 2 steps
    return time.perf_counter() - t0


__all__ = ["Answer", "Done", "End", "Fresh", "Job", "Kick", "KickJob", "Kit", "KitDone", "KitKick", "Locate", "Located",
           "MapPoint", "Morph", "Near", "Opened", "Outcome", "Refused", "Serving", "Variation", "measure_prices",
           "probe_clip", "warm_up"]
