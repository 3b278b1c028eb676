"""The one WAV encoder: a finished kick as 24-bit mono WAV bytes with RIFF INFO tags that say how it was made.

The daemon's drops (kickserver/writer.py), `kickserver render`, `kicktrain sample` and a training run's
preview samples all encode here, so a file's tags read the same whoever wrote it.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import soundfile as sf


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
        return " ".join(parts)

    def tags(self, title: str, date: str | None = None) -> dict[str, str]:
        """The RIFF INFO tags of a file named `title` (without .wav), dated `date` (default today, local time)."""
        return {"title": title, "software": self.software, "artist": "kickserver", "comment": self.comment(),
                "date": date or time.strftime("%Y-%m-%d")}


def exact(v: float) -> str:
    """The shortest decimal that reads back as v: as a float32 when v is one (what an OSC float carries: 0.3, not
    0.30000001192092896), else as a float64. A kick's tags can then ask for it again exactly."""
    v = float(v)
    if np.isfinite(v) and float(np.float32(v)) == v:
        text = np.format_float_positional(np.float32(v), unique=True, trim="-")
    else:
        text = repr(v)
    return text


def encode_wav(x: np.ndarray, sample_rate: int, tags: Mapping[str, str] | None = None) -> bytes:
    """A 24-bit mono WAV with RIFF INFO tags, encoded in memory: libsndfile's writes go to a BytesIO, which
    cannot fail, so a full disk shows up later as a plain OSError from os.write (not as exceptions inside
    soundfile's cffi callbacks, which print tracebacks and end in an AssertionError)."""
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=int(sample_rate), channels=1, subtype="PCM_24", format="WAV") as snd:
        for k, v in (tags or {}).items():
            setattr(snd, k, v)
        snd.write(np.asarray(x, dtype=np.float32).reshape(-1))
    return buf.getvalue()
