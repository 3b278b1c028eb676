"""The one WAV encoder: a finished kick as 24-bit mono WAV bytes with RIFF INFO tags that say how it was made.

The daemon's drops (kickserver/writer.py), `kickserver render`, `kicktrain sample` and a training run's
preview samples all encode here, so a file's tags read the same whoever wrote it.
"""

from __future__ import annotations

import io
import math
import os
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import soundfile as sf


@dataclass(frozen=True)
class Measured:
    """A finished kick's measured descriptors (kickmodel.descriptors.measure), as its tags carry them: each is
    optional, and the comment says only what was measured, after what was asked:
    `measured_pitch_hz=55.02 measured_note=A1+1c measured_decay_s=0.412 measured_click_db=-21.3`."""

    pitch_hz: float | None = None
    decay_s: float | None = None
    click_db: float | None = None

    def as_tagged(self) -> Measured:
        """The figures as the comment prints them (rounded): what a kick's name is made from (naming_figures)."""
        return Measured(None if self.pitch_hz is None else round(float(self.pitch_hz), 2),
                        None if self.decay_s is None else round(float(self.decay_s), 3),
                        None if self.click_db is None else round(float(self.click_db), 1))

    def comment_parts(self) -> list[str]:
        from kickmodel.notes import describe_pitch

        parts = []
        if self.pitch_hz is not None:
            parts += [f"measured_pitch_hz={float(self.pitch_hz):.2f}",
                      f"measured_note={describe_pitch(self.pitch_hz).replace(' ', '')}"]
        if self.decay_s is not None:
            parts.append(f"measured_decay_s={float(self.decay_s):.3f}")
        if self.click_db is not None:
            parts.append(f"measured_click_db={float(self.click_db):.1f}")
        return parts


@dataclass
class KickInfo:
    """What a kick's file says about how it was made (its RIFF INFO comment and the label in its name)."""

    model: str
    seed: int
    steps: int | None  # None for a one-pass model (no sampler)
    sampler: str | None
    controls: Mapping[str, float]
    software: str = "kickserver"
    source: str | None = None
    strength: float | None = None
    # an interpolated kick: its ends (a seed, or a file's path) and its place t between them (0: a, 1: b)
    a: int | str | None = None
    b: int | str | None = None
    t: float | None = None
    # a kick from a model's kit map (/kick/near): the point (0..1 each) and the spread around it
    map_x: float | None = None
    map_y: float | None = None
    spread: float | None = None
    # what the finished kick measures (kickmodel.descriptors.measure: Hz, s, dB), when the writer measured it
    measured: Measured | None = None

    @property
    def label(self) -> str:
        """What the file name carries after the time stamp: the seed that `/kick/generate` turns into this kick;
        for a variation `v` and its seed (its noise: `/kick/variation SOURCE seed S` makes it again, a generate
        with S another kick); for a kick that no seed regenerates (seed < 0: an interpolation's inner kick, or an
        end that is a file) `t` and t in thousandths; for a kick from the kit map `m` and its seed (its noise around
        the point: `/kick/near X Y seed S` with the same spread makes it again)."""
        if self.source is not None:
            return f"v{int(self.seed)}"
        if self.map_x is not None:
            return f"m{int(self.seed)}"
        if self.seed >= 0 or self.t is None:
            return str(int(self.seed))
        return f"t{round(float(self.t) * 1000):03d}"

    def comment(self) -> str:
        parts = [f"model={self.model}"] + ([f"seed={self.seed}"] if self.seed >= 0 else [])
        if self.steps is not None:
            parts += [f"steps={self.steps}", f"sampler={self.sampler}"]
        parts += [f"{k}={float(v):.4f}" for k, v in sorted(self.controls.items())]
        if self.source is not None:
            parts += [f"source={os.path.basename(self.source)}", f"strength={float(self.strength or 0):.4f}"]
        if self.t is not None:
            ends = [e if isinstance(e, int) else os.path.basename(str(e)) for e in (self.a, self.b)]
            parts += [f"a={ends[0]}", f"b={ends[1]}", f"t={float(self.t):.4f}"]
        if self.map_x is not None:
            parts += [f"map_x={exact(self.map_x)}", f"map_y={exact(self.map_y)}", f"spread={exact(self.spread or 0.0)}"]
        if self.measured is not None:
            parts += self.measured.comment_parts()
        return " ".join(parts)

    def tags(self, title: str, date: str | None = None) -> dict[str, str]:
        """The RIFF INFO tags of a file named `title` (without .wav), dated `date` (default today, local time)."""
        return {"title": title, "software": self.software, "artist": "kickserver", "comment": self.comment(),
                "date": date or time.strftime("%Y-%m-%d")}


MAX_COMMENT_CHARS = 4096  # a kick's comment is a few hundred characters; a longer one is not a kick's
# what KickInfo.comment writes beside a kick's controls (each control is `name=value`, a measure `measured_...=`)
_MADE_FIELDS = frozenset({"model", "seed", "steps", "sampler", "source", "strength", "a", "b", "t", "map_x", "map_y",
                          "spread"})


@dataclass(frozen=True)
class MapMade:
    """What a kick's comment says of a kick made from a model's kit map (`/kick/near`): the model's name, the point,
    the spread, the seed of its noise and its controls -- all a generator needs to make that kick again."""

    model: str
    x: float
    y: float
    spread: float
    seed: int
    controls: Mapping[str, float]


def made_on_map(comment: object) -> MapMade | None:
    """The map kick a file's RIFF INFO comment describes (the inverse of KickInfo.comment for a kick from the map),
    or None when it describes none: no comment, longer than MAX_COMMENT_CHARS, a token that is not `name=value`, a
    name given twice, a number that does not read or is not finite, a variation's or morph's fields (their kick
    depends on another file). Read from a file anyone may have handed over: a hint to check, never trusted as is
    (GeneratorBase.locate_made makes the kick again and compares)."""
    if not isinstance(comment, str) or not comment or len(comment) > MAX_COMMENT_CHARS:
        return None
    fields: dict[str, str] = {}
    for token in comment.split():
        name, eq, value = token.partition("=")
        if not eq or not name or name in fields:
            return None
        fields[name] = value
    if not {"model", "seed", "map_x", "map_y", "spread"} <= fields.keys() or fields.keys() & {"source", "t"}:
        return None
    try:
        seed = int(fields["seed"])
        # held at float32 where they were made (what an OSC float carries; kickserver.jobs.MapPoint), and written as
        # the shortest decimal that reads back as that float32 (exact): read back the same way
        x, y, spread = (float(np.float32(fields[k])) for k in ("map_x", "map_y", "spread"))
        controls = {k: float(v) for k, v in fields.items() if k not in _MADE_FIELDS and not k.startswith("measured_")}
    except ValueError:
        return None
    if not 0 <= seed < 2 ** 63 or not all(math.isfinite(v) for v in (x, y, spread, *controls.values())):
        return None
    return MapMade(fields["model"], x, y, spread, seed, controls)


def exact(v: float) -> str:
    """The shortest decimal that reads back as v: as a float32 when v is one (what an OSC float carries: 0.3, not
    0.30000001192092896), else as a float64. A kick's tags can then ask for it again exactly."""
    v = float(v)
    if np.isfinite(v) and float(np.float32(v)) == v:
        text = np.format_float_positional(np.float32(v), unique=True, trim="-")
    else:
        text = repr(v)
    return text


def encode_wav(x: np.ndarray, sample_rate: int, tags: Mapping[str, str] | None = None,
               pitch_hz: float | None = None) -> bytes:
    """A 24-bit mono WAV with RIFF INFO tags, encoded in memory: libsndfile's writes go to a BytesIO, which
    cannot fail, so a full disk shows up later as a plain OSError from os.write (not as exceptions inside
    soundfile's cffi callbacks, which print tracebacks and end in an AssertionError).

    With pitch_hz, the file also carries a `smpl` chunk (smpl_chunk) before its data, so a sampler maps the kick
    to its pitch; without it the bytes are exactly what they were before the chunk existed."""
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=int(sample_rate), channels=1, subtype="PCM_24", format="WAV") as snd:
        for k, v in (tags or {}).items():
            setattr(snd, k, v)
        snd.write(np.asarray(x, dtype=np.float32).reshape(-1))
    data = buf.getvalue()
    if pitch_hz is not None:
        data = insert_chunk_before_data(data, smpl_chunk(pitch_hz, sample_rate))
    return data


SMPL_FRACTION_SCALE = 2 ** 32  # dwMIDIPitchFraction: the fraction of a semitone upwards, 0x80000000 = 50 cents


def smpl_pitch(pitch_hz: float) -> tuple[int, int]:
    """(dwMIDIUnityNote, dwMIDIPitchFraction) of a pitch: the RIFF `smpl` chunk gives the note at or below the
    pitch and the fraction of a semitone upwards from it, scaled to 2^32 (the field is unsigned: 55 Hz -> (33, 0),
    A1 + 30 cents -> (33, 0x4CCCCCCD), A1 - 30 cents -> (32, 70 % of 2^32)). A pitch whose note is outside
    0..127 is refused (ValueError)."""
    from kickmodel.notes import MIDI_HIGH, hz_to_midi

    m = hz_to_midi(pitch_hz)
    note = math.floor(m + 1e-9)  # a pitch a hair under a note (float error) is that note, fraction 0
    frac = min(max(m - note, 0.0), 1.0)
    fraction = min(int(round(frac * SMPL_FRACTION_SCALE)), SMPL_FRACTION_SCALE - 1)
    if not 0 <= note <= MIDI_HIGH:
        raise ValueError(f"pitch_hz {pitch_hz!r}: its note ({note}) is outside MIDI 0..127 (8.2 Hz..12.5 kHz); "
                         "give a pitch in that range for the smpl chunk, or none")
    return note, fraction


def smpl_chunk(pitch_hz: float, sample_rate: int) -> bytes:
    """A RIFF `smpl` chunk (the Microsoft/IBM multimedia spec's sampler chunk) for a one-shot: manufacturer and
    product 0, the sample period in ns, the MIDI unity note and pitch fraction of pitch_hz (smpl_pitch), no SMPTE
    offset, no loops, no sampler-specific data: 36 bytes of little-endian uint32 after the chunk header."""
    note, fraction = smpl_pitch(pitch_hz)
    period_ns = int(round(1e9 / int(sample_rate)))
    body = struct.pack("<9I", 0, 0, period_ns, note, fraction, 0, 0, 0, 0)
    return b"smpl" + struct.pack("<I", len(body)) + body


def insert_chunk_before_data(wav: bytes, chunk: bytes) -> bytes:
    """wav (a RIFF WAVE file) with chunk (header and body, even length) inserted before its `data` chunk and the
    RIFF size grown to match: readers that stop at the data (streaming parsers) still see it."""
    if wav[:4] != b"RIFF" or wav[8:12] != b"WAVE" or len(chunk) % 2:
        raise ValueError("insert_chunk_before_data: not a RIFF WAVE file, or an odd-sized chunk")
    pos = 12
    while pos + 8 <= len(wav):
        cid, size = wav[pos:pos + 4], struct.unpack("<I", wav[pos + 4:pos + 8])[0]
        if cid == b"data":
            out = wav[:pos] + chunk + wav[pos:]
            return out[:4] + struct.pack("<I", struct.unpack("<I", wav[4:8])[0] + len(chunk)) + out[8:]
        pos += 8 + size + (size & 1)
    raise ValueError("insert_chunk_before_data: the WAVE file has no data chunk")


def measured_of(x: np.ndarray, sample_rate: int) -> Measured:
    """What the finished kick x measures (kickmodel.descriptors.measure: decay s, click dB; the pitch as a tuner reads
    the settled body, descriptors.settled_pitch_hz), each None where it measured none (not finite; a pitch <= 0)."""
    import math

    import torch

    from kickmodel.descriptors import measure, settled_pitch_hz

    clip = torch.from_numpy(np.ascontiguousarray(x))[None]
    got = measure(clip, sample_rate)[0]
    decay, click = float(got[0]), float(got[2])
    pitch = float(settled_pitch_hz(clip, sample_rate, got[1:2])[0])  # the settled body's, as a tuner reads it
    ok = [v if math.isfinite(v) else None for v in (pitch, decay, click)]
    if ok[0] is not None and ok[0] <= 0:
        ok[0] = None
    return Measured(*ok)


def naming_figures(measured: Measured | None, pitch_hz: float | None,
                   asked_hz: float | None) -> tuple[float, float | None, float]:
    """(decay s, pitch Hz, click dB) a kick is named by (kickmodel.naming.kick_name), as its tags print them, so a
    name and its tags agree at a threshold (a click measured -45.04 dB, tagged -45.0, is not named `soft`, under
    -45): the measured figures rounded (Measured.as_tagged; decay 0 and click -60 dB where unmeasured), and pitch_hz,
    the pitch its note names, to 4 decimals where it is the pitch asked (asked_hz, as the comment prints a control),
    else to the measured pitch's 2."""
    m = measured.as_tagged() if measured is not None else Measured()
    decay = m.decay_s if m.decay_s is not None else 0.0
    click = m.click_db if m.click_db is not None else -60.0
    if pitch_hz is not None:
        asked = asked_hz is not None and float(asked_hz) == float(pitch_hz)
        pitch_hz = round(float(pitch_hz), 4 if asked else 2)
    return decay, pitch_hz, click


def with_measures(x: np.ndarray, sample_rate: int, info: KickInfo) -> tuple[KickInfo, float | None]:
    """info with what the finished kick x measures (measured_of; its tags then say them, the pitch as Hz and note),
    and the pitch its `smpl` chunk carries so a sampler maps it: the pitch asked (a pitch_hz control, which a note
    also becomes), else as measured (None: none measured, no chunk)."""
    import dataclasses

    measured = measured_of(x, sample_rate)
    asked = info.controls.get("pitch_hz") if info.controls else None
    return dataclasses.replace(info, measured=measured), (float(asked) if asked is not None else measured.pitch_hz)
