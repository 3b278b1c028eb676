"""A small reader for SoundFont 2 files: sample headers, instrument and preset zones, sample data.

    sf = SoundFont.open("/usr/share/sounds/sf2/FluidR3_GM.sf2")
    for p in sf.presets:                       # name, bank, program, zones -> instruments
        ...
    x, sr = sf.sample_data(i)                  # float32 in -1..1, the sample's own rate

Why not a library: sf2utils (PyPI, the one maintained-looking pure-Python parser) imports `audioop`,
which Python 3.13 removed, and its 24-bit merge is wrong (`result[idx * 3: idx * + 1]`); the others
(pyfluidsynth, tinysoundfont, sf2-loader) render MIDI through a synthesiser and do not expose the raw
samples. The format is small (SoundFont 2.04 specification, E-mu/Creative, 2006), so it is read here:

    RIFF 'sfbk'
      LIST 'INFO'  ifil, INAM, ICOP, ...       (only the strings are kept)
      LIST 'sdta'  smpl: 16-bit signed little-endian samples; sm24 (optional): the low 8 bits of 24-bit ones
      LIST 'pdta'  phdr (38 B): name[20] program u16 bank u16 bag u16 library genre morphology (u32 x 3)
                   pbag (4 B):  first generator u16, first modulator u16     (one per zone; a sentinel last)
                   pmod (10 B), pgen (4 B): operator u16, amount (u16 / s16 / two bytes lo, hi)
                   inst (22 B): name[20] bag u16; ibag, imod, igen as for presets
                   shdr (46 B): name[20] start end loop_start loop_end sample_rate (u32 x 5)
                                original_pitch u8, pitch_correction s8, link u16, type u16

Every record list ends with a sentinel ("EOP", "EOI", "EOS"), whose bag index closes the last real
record's zone range. A zone whose generators do not end in `instrument` (presets) / `sampleID`
(instruments) is a global zone: if it is the first one, its generators are the defaults of the
other zones; anywhere else it is ignored (as the specification says). Only the generators this
project needs are interpreted (key range, velocity range, instrument, sample ID, the sample offset
generators); the rest are kept as raw amounts. Everything read from the file is bounds-checked
before use: a damaged file raises SF2Error with the reason, never an IndexError or a huge read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# generator operators (SoundFont 2.04, section 8.1.2)
GEN_START_OFFSET = 0
GEN_END_OFFSET = 1
GEN_START_COARSE = 4
GEN_END_COARSE = 12
GEN_INSTRUMENT = 41
GEN_KEY_RANGE = 43
GEN_VEL_RANGE = 44
GEN_SAMPLE_ID = 53
GEN_ROOT_KEY = 58

SAMPLE_MONO, SAMPLE_RIGHT, SAMPLE_LEFT, SAMPLE_LINKED = 1, 2, 4, 8
SAMPLE_ROM = 0x8000

MAX_PDTA_BYTES = 64 << 20  # the hydra of the biggest General MIDI banks is a few MB
_RECORD = {"phdr": 38, "pbag": 4, "pmod": 10, "pgen": 4, "inst": 22, "ibag": 4, "imod": 10, "igen": 4, "shdr": 46}


class SF2Error(ValueError):
    """The file is not a SoundFont 2 file this reader can use; the message says why."""


@dataclass(frozen=True)
class SampleHeader:
    name: str
    start: int  # in sample points from the start of smpl
    end: int  # one past the last point
    loop_start: int
    loop_end: int
    sample_rate: int
    original_pitch: int
    pitch_correction: int
    link: int
    type: int

    @property
    def is_rom(self) -> bool:
        return bool(self.type & SAMPLE_ROM)

    @property
    def channel(self) -> str:
        t = self.type & 0x7
        return {SAMPLE_MONO: "mono", SAMPLE_RIGHT: "right", SAMPLE_LEFT: "left"}.get(t, "mono")


@dataclass(frozen=True)
class Zone:
    """One zone of a preset (target: an instrument index) or an instrument (target: a sample index)."""

    target: int
    key_range: tuple[int, int] = (0, 127)
    vel_range: tuple[int, int] = (0, 127)
    generators: dict[int, int] = field(default_factory=dict)  # operator -> raw u16 amount


@dataclass(frozen=True)
class Instrument:
    name: str
    zones: tuple[Zone, ...]


@dataclass(frozen=True)
class Preset:
    name: str
    program: int
    bank: int
    zones: tuple[Zone, ...]


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1").strip()


def _s16(v: int) -> int:
    return v - 0x10000 if v >= 0x8000 else v


def _chunks(data: memoryview | bytes, where: str) -> list[tuple[str, int, int]]:
    """(id, offset of the data, size) of each chunk in data (sizes checked, pad bytes skipped)."""
    out = []
    pos = 0
    while pos + 8 <= len(data):
        cid = bytes(data[pos:pos + 4]).decode("latin-1")
        (size,) = struct.unpack_from("<I", data, pos + 4)
        if pos + 8 + size > len(data):
            raise SF2Error(f"chunk {cid!r} in {where} runs past its end ({size} bytes at offset {pos})")
        out.append((cid, pos + 8, size))
        pos += 8 + size + (size & 1)
    return out


@dataclass
class SoundFont:
    path: Path
    info: dict[str, str]
    samples: list[SampleHeader]  # without the EOS sentinel
    instruments: list[Instrument]
    presets: list[Preset]
    smpl: tuple[int, int]  # (file offset, size in bytes) of the 16-bit sample data
    sm24: tuple[int, int] | None

    @classmethod
    def open(cls, path: str | Path) -> SoundFont:
        """Read the headers and zones of a SoundFont 2 file (sample data is read on demand)."""
        path = Path(path)
        try:
            f = open(path, "rb")
        except OSError as e:
            raise SF2Error(f"{path}: cannot open: {e.strerror or e}") from None
        with f:
            size = path.stat().st_size
            head = f.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"sfbk":
                raise SF2Error(f"{path}: not a SoundFont 2 file (no RIFF 'sfbk' header)")
            (riff_size,) = struct.unpack_from("<I", head, 4)
            end = min(size, 8 + riff_size)
            lists: dict[str, tuple[int, int]] = {}
            pos = 12
            while pos + 12 <= end:  # top-level LIST chunks: read only their headers
                f.seek(pos)
                h = f.read(12)
                (csize,) = struct.unpack_from("<I", h, 4)
                if pos + 8 + csize > size:
                    raise SF2Error(f"{path}: chunk {h[:4].decode('latin-1')!r} at offset {pos} runs past the end "
                                   f"of the file ({size} bytes; truncated?)")
                if h[:4] == b"LIST":
                    lists[h[8:12].decode("latin-1")] = (pos + 12, csize - 4)
                pos += 8 + csize + (csize & 1)
            for need in ("sdta", "pdta"):
                if need not in lists:
                    raise SF2Error(f"{path}: no LIST '{need}' chunk")
            for name, (_off, n) in lists.items():
                if n < 0:
                    raise SF2Error(f"{path}: LIST '{name}' has a negative size")

            info: dict[str, str] = {}
            if "INFO" in lists:
                off, n = lists["INFO"]
                if n <= MAX_PDTA_BYTES:
                    f.seek(off)
                    raw = f.read(n)
                    info = {cid: _cstr(raw[o:o + s]) for cid, o, s in _chunks(raw, "INFO") if cid != "ifil"}

            off, n = lists["sdta"]
            smpl = sm24 = None
            pos = 0
            while pos + 8 <= n:
                f.seek(off + pos)
                h = f.read(8)
                cid = h[:4].decode("latin-1")
                (csize,) = struct.unpack_from("<I", h, 4)
                if pos + 8 + csize > n:
                    raise SF2Error(f"{path}: chunk {cid!r} in sdta runs past its end")
                if cid == "smpl":
                    smpl = (off + pos + 8, csize)
                elif cid == "sm24":
                    sm24 = (off + pos + 8, csize)
                pos += 8 + csize + (csize & 1)
            if smpl is None:
                raise SF2Error(f"{path}: no 'smpl' chunk (sample data) in sdta")
            n_points = smpl[1] // 2
            if sm24 is not None and sm24[1] < n_points:  # the spec: ignore an sm24 of the wrong size
                sm24 = None

            off, n = lists["pdta"]
            if n > MAX_PDTA_BYTES:
                raise SF2Error(f"{path}: pdta of {n} bytes is larger than {MAX_PDTA_BYTES}")
            f.seek(off)
            pdta = f.read(n)
        sub = {cid: pdta[o:o + s] for cid, o, s in _chunks(pdta, "pdta")}
        for cid, rec in _RECORD.items():
            if cid not in sub:
                raise SF2Error(f"{path}: no '{cid}' chunk in pdta")
            if len(sub[cid]) % rec:
                raise SF2Error(f"{path}: '{cid}' is {len(sub[cid])} bytes, not a multiple of {rec}")

        samples = []
        for (name, start, end_, ls, le, rate, pitch, corr, link, typ) in struct.iter_unpack(
                "<20s5IBbHH", sub["shdr"]):
            samples.append(SampleHeader(_cstr(name), start, end_, ls, le, rate, pitch, corr, link, typ))
        if not samples:
            raise SF2Error(f"{path}: no sample headers")
        samples = samples[:-1]  # the EOS sentinel
        for i, s in enumerate(samples):
            if not s.is_rom and not (0 <= s.start < s.end <= n_points):
                raise SF2Error(f"{path}: sample {i} ({s.name!r}) spans {s.start}..{s.end}, "
                               f"outside the {n_points} sample points of smpl")
            if not 400 <= s.sample_rate <= 384000:
                raise SF2Error(f"{path}: sample {i} ({s.name!r}) has sample rate {s.sample_rate}")

        inst_recs = [(_cstr(nm), bag) for nm, bag in struct.iter_unpack("<20sH", sub["inst"])]
        instruments = [Instrument(nm, zones) for nm, zones in
                       _zoned(path, inst_recs, sub["ibag"], sub["igen"], GEN_SAMPLE_ID, len(samples), "instrument")]
        phdr = [(_cstr(nm), prog, bank, bag) for nm, prog, bank, bag, *_ in struct.iter_unpack("<20sHHH3I",
                                                                                               sub["phdr"])]
        zoned = _zoned(path, [(nm, bag) for nm, _, _, bag in phdr], sub["pbag"], sub["pgen"], GEN_INSTRUMENT,
                       len(instruments), "preset")
        presets = [Preset(nm, prog, bank, zones) for (nm, prog, bank, _), (_, zones) in zip(phdr, zoned)]
        return cls(path=path, info=info, samples=samples, instruments=instruments, presets=presets, smpl=smpl,
                   sm24=sm24)

    def sample_data(self, index: int) -> tuple[np.ndarray, int]:
        """(float32 samples in -1..1 of sample `index`, its sample rate); 24-bit where sm24 is present."""
        if not 0 <= index < len(self.samples):
            raise SF2Error(f"{self.path}: no sample {index} (it has {len(self.samples)})")
        s = self.samples[index]
        if s.is_rom:
            raise SF2Error(f"{self.path}: sample {s.name!r} lives in a ROM, not in the file")
        n = s.end - s.start
        with open(self.path, "rb") as f:
            f.seek(self.smpl[0] + 2 * s.start)
            hi = np.frombuffer(f.read(2 * n), dtype="<i2")
            if len(hi) != n:
                raise SF2Error(f"{self.path}: sample {s.name!r} is cut short")
            if self.sm24 is None:
                return (hi.astype(np.float32) / 32768.0), s.sample_rate
            f.seek(self.sm24[0] + s.start)
            lo = np.frombuffer(f.read(n), dtype=np.uint8)
            if len(lo) != n:
                raise SF2Error(f"{self.path}: the 24-bit part of sample {s.name!r} is cut short")
        x = hi.astype(np.int32) * 256 + lo.astype(np.int32)
        return (x.astype(np.float32) / 8388608.0), s.sample_rate


def _zoned(path: Path, records: list[tuple[str, int]], bag: bytes, gen: bytes, terminal: int, n_targets: int,
           what: str) -> list[tuple[str, tuple[Zone, ...]]]:
    """Zones of each record but the sentinel: records are (name, first bag); bag/gen the raw chunks."""
    bags = [g for g, _m in struct.iter_unpack("<HH", bag)]
    gens = list(struct.iter_unpack("<HH", gen))
    if len(records) < 1:
        raise SF2Error(f"{path}: no {what} headers")
    out = []
    for r in range(len(records) - 1):
        name, b0 = records[r]
        b1 = records[r + 1][1]
        if not b0 <= b1 < len(bags):
            raise SF2Error(f"{path}: {what} {name!r} has zones {b0}..{b1}, outside the {len(bags)} bags")
        zones: list[Zone] = []
        defaults: dict[int, int] = {}
        for z in range(b0, b1):
            g0, g1 = bags[z], (bags[z + 1] if z + 1 < len(bags) else len(gens))
            if not g0 <= g1 <= len(gens):
                raise SF2Error(f"{path}: {what} {name!r} zone {z - b0} has generators {g0}..{g1}, "
                               f"outside the {len(gens)} generators")
            g = dict(defaults)
            local = {op: amount for op, amount in gens[g0:g1]}
            g.update(local)
            if terminal not in local:
                if z == b0:  # a global zone: defaults for the others
                    defaults = local
                continue
            target = local[terminal]
            if target >= n_targets:
                raise SF2Error(f"{path}: {what} {name!r} points at {target}, but there are only {n_targets}")
            kr = g.get(GEN_KEY_RANGE, 0x7F00)
            vr = g.get(GEN_VEL_RANGE, 0x7F00)
            zones.append(Zone(target=target, key_range=(kr & 0xFF, kr >> 8), vel_range=(vr & 0xFF, vr >> 8),
                              generators=g))
        out.append((name, tuple(zones)))
    return out


def sample_span(header: SampleHeader, zone: Zone) -> tuple[int, int]:
    """(start, end) offsets within the sample after the zone's start/end offset generators."""
    g = zone.generators
    start = _s16(g.get(GEN_START_OFFSET, 0)) + 32768 * _s16(g.get(GEN_START_COARSE, 0))
    end = _s16(g.get(GEN_END_OFFSET, 0)) + 32768 * _s16(g.get(GEN_END_COARSE, 0))
    n = header.end - header.start
    return max(0, min(n, start)), max(0, min(n, n + end))
