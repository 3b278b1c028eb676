"""Write tiny SoundFont 2 files for tests (the layout scripts/sf2reader.py documents), so no test needs
a Debian SoundFont package."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KEY_RANGE, VEL_RANGE, INSTRUMENT, SAMPLE_ID = 43, 44, 41, 53
MONO, RIGHT, LEFT = 1, 2, 4


@dataclass
class Sample:
    name: str
    data: np.ndarray  # float in -1..1
    rate: int = 44100
    type: int = MONO
    link: int = 0


@dataclass
class Zones:
    name: str
    zones: list[list[tuple[int, int]]]  # each zone: [(generator, amount)], the terminal generator last
    program: int = 0
    bank: int = 0


def key_range(lo: int, hi: int) -> int:
    return lo | (hi << 8)


def _chunk(cid: bytes, data: bytes) -> bytes:
    return cid + struct.pack("<I", len(data)) + data + (b"\0" if len(data) & 1 else b"")


def _list(kind: bytes, body: bytes) -> bytes:
    return _chunk(b"LIST", kind + body)


def _name(s: str) -> bytes:
    return s.encode("latin-1")[:20].ljust(20, b"\0")


def _hydra(records: list[Zones], kind: str) -> tuple[bytes, bytes, bytes, bytes]:
    """(headers, bags, modulators, generators) chunks' data, sentinels included."""
    heads, bags, gens = b"", b"", b""
    n_bag = n_gen = 0
    for r in records:
        if kind == "p":
            heads += struct.pack("<20sHHH3I", _name(r.name), r.program, r.bank, n_bag, 0, 0, 0)
        else:
            heads += struct.pack("<20sH", _name(r.name), n_bag)
        for z in r.zones:
            bags += struct.pack("<HH", n_gen, 0)
            n_bag += 1
            for op, amount in z:
                gens += struct.pack("<HH", op, amount & 0xFFFF)
                n_gen += 1
    if kind == "p":
        heads += struct.pack("<20sHHH3I", _name("EOP"), 0, 0, n_bag, 0, 0, 0)
    else:
        heads += struct.pack("<20sH", _name("EOI"), n_bag)
    bags += struct.pack("<HH", n_gen, 0)
    gens += struct.pack("<HH", 0, 0)
    return heads, bags, b"\0" * 10, gens


def build_sf2(path: Path, samples: list[Sample], instruments: list[Zones], presets: list[Zones],
              bits24: bool = False) -> Path:
    """A SoundFont with these samples (46 zero points after each, as the specification asks)."""
    hi, lo, shdr = b"", b"", b""
    pos = 0
    for s in samples:
        x = np.concatenate([np.asarray(s.data, np.float64), np.zeros(46)])
        if bits24:
            v = np.clip(np.round(x * 8388608.0), -8388608, 8388607).astype(np.int64)
            hi += (v >> 8).astype("<i2").tobytes()
            lo += (v & 0xFF).astype(np.uint8).tobytes()
        else:
            hi += np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2").tobytes()
        n = len(s.data)
        shdr += struct.pack("<20s5IBbHH", _name(s.name), pos, pos + n, pos + 8, pos + n - 8, s.rate, 60, 0, s.link,
                            s.type)
        pos += n + 46
    shdr += struct.pack("<20s5IBbHH", _name("EOS"), 0, 0, 0, 0, 0, 0, 0, 0, 0)
    sdta = _chunk(b"smpl", hi) + (_chunk(b"sm24", lo) if bits24 else b"")
    ph, pb, pm, pg = _hydra(presets, "p")
    ih, ib, im, ig = _hydra(instruments, "i")
    pdta = (_chunk(b"phdr", ph) + _chunk(b"pbag", pb) + _chunk(b"pmod", pm) + _chunk(b"pgen", pg)
            + _chunk(b"inst", ih) + _chunk(b"ibag", ib) + _chunk(b"imod", im) + _chunk(b"igen", ig)
            + _chunk(b"shdr", shdr))
    info = _chunk(b"ifil", struct.pack("<HH", 2, 4)) + _chunk(b"INAM", b"test bank\0")
    body = b"sfbk" + _list(b"INFO", info) + _list(b"sdta", sdta) + _list(b"pdta", pdta)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


@dataclass
class DrumKit:
    """A GM-style drum kit: one preset (bank 128 unless told), one instrument, a zone per key."""

    name: str
    keys: dict[int, list[Sample]] = field(default_factory=dict)  # key -> samples (a stereo pair: [L, R])
    bank: int = 128


def build_kits(path: Path, kits: list[DrumKit], extra_presets: list[tuple[str, int, int, Sample]] = (),
               bits24: bool = False) -> Path:
    """One preset per kit; extra_presets: (name, bank, key, sample) melodic presets playing one sample."""
    samples: list[Sample] = []
    instruments: list[Zones] = []
    presets: list[Zones] = []
    for kit in kits:
        zones = []
        for key, ss in sorted(kit.keys.items()):
            first = len(samples)
            for k, s in enumerate(ss):
                if len(ss) == 2:  # a stereo pair, linked to each other
                    s = Sample(s.name, s.data, s.rate, LEFT if k == 0 else RIGHT, first + 1 - k)
                samples.append(s)
                zones.append([(KEY_RANGE, key_range(key, key)), (SAMPLE_ID, first + k)])
        instruments.append(Zones(kit.name, [[(KEY_RANGE, key_range(0, 127))]] + zones))  # a global zone first
        presets.append(Zones(kit.name, [[(KEY_RANGE, key_range(0, 127)), (INSTRUMENT, len(instruments) - 1)]],
                             program=len(presets), bank=kit.bank))
    for name, bank, key, s in extra_presets:
        samples.append(s)
        instruments.append(Zones(name, [[(KEY_RANGE, key_range(key, key)), (SAMPLE_ID, len(samples) - 1)]]))
        presets.append(Zones(name, [[(INSTRUMENT, len(instruments) - 1)]], program=len(presets), bank=bank))
    return build_sf2(path, samples, instruments, presets, bits24=bits24)
