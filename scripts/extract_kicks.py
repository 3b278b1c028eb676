"""Grow the starter kit (kickserver/data/kicks) with the kick drums of four more Debian packages.

    apt-get install -y --no-install-recommends avldrums.lv2-soundfont fluid-soundfont-gm chuck-data \
        musescore-general-soundfont-lossless
    python scripts/extract_kicks.py                  # add / refresh their kicks in kickserver/data/kicks
    python scripts/extract_kicks.py --dry-run        # show what it would keep and why it skips the rest

Sources (SOURCES below), each with its license as its debian/copyright states it:
- avldrums.lv2-soundfont (CC-BY-SA-3.0, sf2/* by Glen MacArthur): the Black Pearl (Pearl 22") and Red
  Zeppelin (Ludwig 26") kits, five velocity layers of each kick.
- fluid-soundfont-gm (MIT, Frank Wen): FluidR3_GM.sf2's drum kits (bank 128).
- chuck-data (GPL-2.0-or-later): the kick samples among ChucK's examples.
- musescore-general-soundfont-lossless (MIT; its copyright file: "MIT, parts PD or CC0", the drum kits'
  samples are Fluid (R3) Mono GM's, MIT): MuseScore_General_Full.sf2's drum kits (bank 128). The 19 kicks
  of Fluid (R3) Mono's kits (0.2.1-1) are FluidR3's, bit for bit: the left channel of each stereo kick and
  the two mono 808 kicks, so it adds no kick today (see Duplicates); it is read so that a later version
  with new kit samples adds them.
The kit's other sources (hydrogen-drumkits, hydrogen-data, sonic-pi-samples, lmms-common) are never
read here: their remaining kicks are an outside test set (scripts/outside_test_set.py). Nor are
RESERVED_PACKAGES (timgm6mb-soundfont, csound-soundfont, exadrums): they are reserved for an outside
evaluation, so nothing of them may enter the kit; a source naming one, or a path that leads to a file one
of them installs (its dpkg file list, ROOT/var/lib/dpkg/info/PACKAGE.list, says so; default-GM.sf2 is an
alternative that may point at TimGM6mb.sf2), is an error before anything is read.

Which samples are kicks: in a SoundFont, the samples that a drum preset plays on General MIDI keys 35
(Acoustic Bass Drum) and 36 (Bass Drum 1): preset zone -> instrument -> instrument zone covering the
key -> sample header (scripts/sf2reader.py), and whose sample name also says kick or bass drum; the
two halves of a stereo pair (FluidR3 names them "X(L)" / "X(R)") are mixed to mono. In a folder,
files whose name says kick. Every candidate must then measure like one kick hit (`why_not_a_kick`):
at least 30 ms long and at most 4 s before trimming (no loops), one hit (no second attack after the
first), most of its energy below 200 Hz, and its strongest tone 30..130 ms after the onset below
150 Hz (snares, toms of the upper range and cymbals fail one of these).

Duplicates, within and across packages and against the kit's existing files: a candidate is
skipped when its mono 44.1 kHz audio is bit-identical to an earlier one or to one channel of an earlier
stereo pair (exact: ChucK ships kick_01.wav four times; MuseScore_General's "Std Kick" is FluidR3's
"Std Kick(L)"), or when its prepared clip (kickmodel.clips.prepare_audio: onset-aligned, peak-
normalised, 1.02 s, as training sees it) has a normalised cross-correlation of at least
NEAR_DUPLICATE_NCC with an earlier one at a lag within +-5 ms (trainer.xcorr.pairwise_max_ncc: the
same recording at another level, rate or in another kit; FluidR3's Std Kick 5 is its Room Kick).
Earlier means: the kit's files that this script does not own, then candidates in SOURCES order, kits
and samples in file order, so the choice is deterministic. Velocity layers that are distinct hits
(correlation below the threshold) are kept: trainer.split keeps them on one side of the split.

Output: for each kept kick, `<prefix>_<kit or folder>_<sample name>.flac` (mono, 44.1 kHz, 24-bit;
trailing silence below -80 dB re. the peak dropped; longer than MAX_SECONDS cut there with a
20 ms fade; otherwise unchanged), and one MANIFEST.csv row (file, seconds, debian_package,
original_path, license; original_path is relative to /usr/share, `file.sf2#sample name`, or
`#left+right` for a stereo pair). The script owns the rows of its four packages: a rerun rewrites
those rows and files (only where the bytes differ) and removes the ones it no longer selects; every
other row is kept as it is. Files and the manifest are written atomically (kickmodel.fsutil). A
missing package is an error before anything is written.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from sf2reader import SF2Error, SoundFont, sample_span  # noqa: E402

from kickmodel.config import DataConfig  # noqa: E402
from kickmodel.fsutil import atomic_write_bytes  # noqa: E402

SAMPLE_RATE = 44100
MAX_SECONDS = 2.0
END_FADE_MS = 20.0
TRAIL_DB = -80.0
GM_KICK_KEYS = (35, 36)
KICK_NAME = re.compile(r"kick|bass ?drum|bassdrum|(^|[^a-z])bd([^a-z]|$)", re.IGNORECASE)
NEAR_DUPLICATE_NCC = 0.98
NCC_LAG_MS = 5.0
MANIFEST_FIELDS = ("file", "seconds", "debian_package", "original_path", "license")
# how a kick must measure (see why_not_a_kick)
MIN_MS = 30.0
MAX_SOURCE_SECONDS = 4.0
LOW_HZ = 200.0
MIN_LOW_SHARE = 0.5
MAX_BODY_HZ = 150.0
SECOND_HIT_DB = 10.0  # a rise of the envelope this far above its lowest point since the peak is a new hit


@dataclass(frozen=True)
class Source:
    package: str
    license: str
    prefix: str
    kind: str  # "sf2" | "files"
    paths: tuple[tuple[str, str], ...]  # (path relative to ROOT/usr/share, label in the output names)
    drum_banks: tuple[int, ...] | None = None  # sf2: banks whose presets are drum kits (None: every preset)
    pattern: str = r"kick.*\.(wav|aiff?|flac)$"  # files: which file names under the folders are kicks


SOURCES = (
    Source("avldrums.lv2-soundfont", "CC-BY-SA-3.0", "avldrums", "sf2",
           (("sounds/sf2/Black_Pearl_4_LV2.sf2", "Black_Pearl"),
            ("sounds/sf2/Red_Zeppelin_4_LV2.sf2", "Red_Zeppelin"))),
    Source("fluid-soundfont-gm", "MIT", "FluidR3", "sf2", (("sounds/sf2/FluidR3_GM.sf2", "GM"),), drum_banks=(128,)),
    Source("chuck-data", "GPL-2.0-or-later", "chuck", "files", (("doc/chuck-data/examples", ""),)),
    Source("musescore-general-soundfont-lossless", "MIT", "MuseScore", "sf2",
           (("sounds/sf2/MuseScore_General_Full.sf2", "General"),), drum_banks=(128,)),
)
# the kit's other packages: never read here (their remaining kicks are the outside test set)
KIT_PACKAGES = ("hydrogen-drumkits", "hydrogen-data", "sonic-pi-samples", "lmms-common")
# never read, not even to look: an outside evaluation uses their sounds, so no kit file may come from them
RESERVED_PACKAGES = ("timgm6mb-soundfont", "csound-soundfont", "exadrums")
RESERVED_REASON = ("reserved for an outside evaluation: a model trained on the kit must never have heard its "
                   "sounds, so this script never reads it")
MAX_DPKG_LIST_BYTES = 16 << 20  # a package's file list (var/lib/dpkg/info/PACKAGE.list); these are a few kB


class ExtractError(Exception):
    """A one-line reason the extraction cannot go on (a missing package, a damaged manifest)."""


@dataclass
class Candidate:
    source: Source
    name: str  # output file name
    original: str  # original path (relative to /usr/share) and sample name
    audio: np.ndarray  # mono float32 at SAMPLE_RATE, before trimming
    note: str = ""
    channels: tuple[tuple[str, np.ndarray], ...] = ()  # a stereo pair's ("left"/"right", audio as `audio`)


# ----------------------------------------------------------------------------------------------
# audio helpers


def to_mono_44k(x: np.ndarray, sr: int) -> np.ndarray:
    """Mix [n] or [n, ch] to mono float32 and resample to SAMPLE_RATE (torchaudio's windowed sinc)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float64).astype(np.float32)
    if sr != SAMPLE_RATE:
        import torch
        import torchaudio.functional as AF

        x = AF.resample(torch.from_numpy(np.ascontiguousarray(x)), sr, SAMPLE_RATE).numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def trim(x: np.ndarray, sr: int = SAMPLE_RATE) -> np.ndarray:
    """Drop trailing samples below TRAIL_DB re. the peak; cut at MAX_SECONDS with an END_FADE_MS fade."""
    peak = float(np.abs(x).max()) if len(x) else 0.0
    if peak <= 0:
        return x
    loud = np.flatnonzero(np.abs(x) >= peak * 10 ** (TRAIL_DB / 20))
    x = x[: int(loud[-1]) + 1].copy()
    n_max = int(round(MAX_SECONDS * sr))
    if len(x) > n_max:
        x = x[:n_max].copy()
        n = int(round(END_FADE_MS * sr / 1000))
        x[-n:] *= (0.5 * (1 + np.cos(np.linspace(0, np.pi, n)))).astype(np.float32)
    if np.abs(x).max() > 0.999:  # resampling can overshoot a full-scale source a little
        x *= np.float32(0.999 / np.abs(x).max())
    return x


def _onset(x: np.ndarray, threshold: float = 0.1) -> int:
    a = np.abs(x)
    return int(np.argmax(a >= threshold * a.max()))


def measure_hit(x: np.ndarray, sr: int = SAMPLE_RATE) -> dict[str, float]:
    """What why_not_a_kick looks at: seconds, low_share, body_hz, second_hit_db."""
    x = np.asarray(x, dtype=np.float64)
    on = _onset(x)
    # energy share below LOW_HZ over the first 300 ms after the onset (Hann-windowed periodogram)
    seg = x[on: on + int(0.3 * sr)]
    p = np.abs(np.fft.rfft(seg * np.hanning(len(seg)), n=max(len(seg), sr // 4))) ** 2
    f = np.fft.rfftfreq(max(len(seg), sr // 4), 1 / sr)
    low_share = float(p[f < LOW_HZ].sum() / max(p.sum(), 1e-300))
    # strongest tone below 1 kHz in 30..130 ms after the onset (1 Hz bins)
    body = x[on + int(0.03 * sr): on + int(0.13 * sr)]
    body_hz = 0.0
    if len(body) > 16:
        pb = np.abs(np.fft.rfft(body * np.hanning(len(body)), n=sr)) ** 2
        fb = np.fft.rfftfreq(sr, 1 / sr)
        band = (fb >= 20) & (fb <= 1000)
        body_hz = float(fb[band][np.argmax(pb[band])])
    # a second hit: the envelope (RMS over 50 ms, long enough to smooth a 20 Hz body, every 10 ms)
    # rising by SECOND_HIT_DB or more above its lowest point since the first hit's peak, to within 20 dB of the
    # loudest point
    hop, win = int(0.01 * sr), int(0.05 * sr)
    c = np.concatenate([[0.0], np.cumsum(x * x)])
    starts = np.arange(0, max(len(x) - win, 0) + 1, hop)
    env = np.sqrt((c[np.minimum(starts + win, len(x))] - c[starts]) / win + 1e-30)
    env_db = 20 * np.log10(env / env.max())
    k0 = int(np.argmax(env_db >= -12))  # the first hit's peak (a later one may be louder: a flam, a loop)
    k = k0 + int(np.argmax(env_db[k0:k0 + 10]))
    rise = 0.0
    low = env_db[k]
    for v in env_db[k + 1:]:
        low = min(low, v)
        if v > -20:
            rise = max(rise, v - low)
    return {"seconds": len(x) / sr, "low_share": low_share, "body_hz": body_hz, "second_hit_db": float(rise)}


def why_not_a_kick(m: dict[str, float]) -> str | None:
    """None when the measures look like one kick hit, else the reason."""
    if m["seconds"] * 1000 < MIN_MS:
        return f"shorter than {MIN_MS:g} ms"
    if m["seconds"] > MAX_SOURCE_SECONDS:
        return f"longer than {MAX_SOURCE_SECONDS:g} s ({m['seconds']:.1f} s): a loop, not one hit"
    if m["second_hit_db"] >= SECOND_HIT_DB:
        return f"a second hit (the envelope rises {m['second_hit_db']:.0f} dB after decaying)"
    if m["low_share"] < MIN_LOW_SHARE:
        return f"only {100 * m['low_share']:.0f} % of its energy below {LOW_HZ:g} Hz"
    if m["body_hz"] >= MAX_BODY_HZ:
        return f"its body tone is at {m['body_hz']:.0f} Hz (a kick's is below {MAX_BODY_HZ:g} Hz)"
    return None


# ----------------------------------------------------------------------------------------------
# finding the candidates


def _clean_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _strip_lr(name: str) -> str:
    """"Std Kick 7(L)" -> "Std Kick 7"; "Power Bass Drum 1(R" -> "Power Bass Drum 1" (shdr names are cut at 20)."""
    return re.sub(r"\s*\(?[LR]\)?$", "", name).strip()


def _stereo_partner(font: SoundFont, index: int) -> int | None:
    """The other half of a left/right pair: the header's link when it is one, else a neighbour or any
    sample of the opposite side with the same name but for its L/R mark and the same length."""
    h = font.samples[index]
    want = {"left": "right", "right": "left"}.get(h.channel)
    if want is None:
        return None
    order = [h.link, index - 1, index + 1] + list(range(len(font.samples)))
    for j in order:
        if 0 <= j < len(font.samples) and j != index:
            o = font.samples[j]
            if o.channel == want and _strip_lr(o.name) == _strip_lr(h.name) and o.end - o.start == h.end - h.start:
                return j
    return None


NOT_KICK_NAME = re.compile(r"tom|snare|hat|cymbal|crash|ride|clap|stick|perc|conga|bongo|timbal|cowbell",
                           re.IGNORECASE)


def sf2_candidates(path: Path, rel: str, label: str, source: Source) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """Kick samples of one SoundFont: those its drum presets play on GM_KICK_KEYS (see the module
    docstring), stereo pairs mixed to mono. Returns (candidates, [(what, why skipped)])."""
    font = SoundFont.open(path)
    zones: dict[int, object] = {}  # sample index -> the first instrument zone that plays it on a kick key
    for preset in font.presets:
        if source.drum_banks is not None and preset.bank not in source.drum_banks:
            continue
        for pz in preset.zones:
            for key in GM_KICK_KEYS:
                if not pz.key_range[0] <= key <= pz.key_range[1]:
                    continue
                for iz in font.instruments[pz.target].zones:
                    if iz.key_range[0] <= key <= iz.key_range[1]:
                        zones.setdefault(iz.target, iz)
    out: list[Candidate] = []
    skipped: list[tuple[str, str]] = []
    done: set[int] = set()
    for idx in sorted(zones):
        if idx in done:
            continue
        h = font.samples[idx]
        what = f"{rel}#{h.name}"
        if not KICK_NAME.search(h.name) or NOT_KICK_NAME.search(h.name):
            skipped.append((what, "played on a kick key, but its name does not say kick"))
            continue
        if h.is_rom:
            skipped.append((what, "a ROM sample (no data in the file)"))
            continue
        if (h.end - h.start) / h.sample_rate > MAX_SOURCE_SECONDS:
            skipped.append((what, f"longer than {MAX_SOURCE_SECONDS:g} s: a loop, not one hit"))
            continue
        parts = [idx]
        other = _stereo_partner(font, idx)
        if other is not None:
            parts = sorted([idx, other], key=lambda j: font.samples[j].channel != "left")  # left first
            done.add(other)
        lo, hi = sample_span(h, zones[idx])
        chans = [font.sample_data(j)[0][lo:hi] for j in parts]
        n = min(len(c) for c in chans)
        x = np.mean([c[:n] for c in chans], axis=0).astype(np.float32)
        name = _strip_lr(h.name) if other is not None else h.name
        original = f"{rel}#" + "+".join(font.samples[j].name for j in parts)
        channels = tuple((font.samples[j].channel, to_mono_44k(c[:n], h.sample_rate)) for j, c in zip(parts, chans)
                         ) if other is not None else ()
        out.append(Candidate(source, _clean_name(f"{source.prefix}_{label}_{name}"), original,
                             to_mono_44k(x, h.sample_rate), channels=channels))
    return out, skipped


def file_candidates(folder: Path, rel: str, label: str, source: Source) -> tuple[list[Candidate],
                                                                                list[tuple[str, str]]]:
    """Files under folder whose name matches source.pattern (hidden files and AppleDouble "._x" skipped)."""
    pattern = re.compile(source.pattern, re.IGNORECASE)
    out: list[Candidate] = []
    skipped: list[tuple[str, str]] = []
    files = sorted(p for p in folder.rglob("*") if p.is_file() and pattern.search(p.name)
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    for p in files:
        what = f"{rel}/{p.relative_to(folder).as_posix()}"
        try:
            info = sf.info(str(p))
            if info.frames / info.samplerate > MAX_SOURCE_SECONDS:
                skipped.append((what, f"longer than {MAX_SOURCE_SECONDS:g} s: a loop, not one hit"))
                continue
            x, sr = sf.read(str(p), dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError, OSError) as e:
            skipped.append((what, f"unreadable: {e}"))
            continue
        stem = f"{source.prefix}_{label}_{p.stem}" if label else f"{source.prefix}_{p.stem}"
        out.append(Candidate(source, _clean_name(stem), what, to_mono_44k(x, sr)))
    return out, skipped


def _dpkg_files(root: Path, package: str) -> set[str]:
    """The paths (as dpkg records them: absolute, from /) that package installs under root; empty when it
    is not installed there."""
    info = root / "var" / "lib" / "dpkg" / "info"
    out: set[str] = set()
    for lst in sorted(info.glob(f"{package}.list")) + sorted(info.glob(f"{package}:*.list")):
        try:
            with open(lst, "rb") as f:
                data = f.read(MAX_DPKG_LIST_BYTES + 1)
        except OSError as e:
            raise ExtractError(f"{lst}: cannot read: {e.strerror or e} (needed to keep {package} out)") from None
        if len(data) > MAX_DPKG_LIST_BYTES:
            raise ExtractError(f"{lst}: larger than {MAX_DPKG_LIST_BYTES} bytes; cannot check that no source "
                               f"path leads into {package}")
        out.update(line.rstrip("/") or "/" for line in data.decode("utf-8", "replace").splitlines() if line)
    return out


def check_not_reserved(root: Path, sources) -> None:
    """ExtractError when a source is a RESERVED_PACKAGES package, or one of its paths leads (through links
    such as the default-GM.sf2 alternative) to a file or into a folder that such a package installs."""
    for s in sources:
        if s.package in RESERVED_PACKAGES:
            raise ExtractError(f"{s.package} is {RESERVED_REASON}; take it out of the sources")
    share = root / "usr" / "share"
    base = Path(os.path.realpath(root))
    owned = {p: _dpkg_files(root, p) for p in RESERVED_PACKAGES}
    for s in sources:
        for rel, _label in s.paths:
            real = Path(os.path.realpath(share / rel))
            try:
                as_dpkg = "/" + real.relative_to(base).as_posix()
            except ValueError:  # a link out of root: its own absolute path
                as_dpkg = real.as_posix()
            as_dpkg = as_dpkg.rstrip("/") or "/"
            for package, files in owned.items():
                if as_dpkg in files or any(f.startswith(as_dpkg + "/") for f in files):
                    raise ExtractError(f"{share / rel} leads to {real}, which {package} installs: {package} is "
                                       f"{RESERVED_REASON}; point {s.package} at its own files")


def gather(root: Path, sources=SOURCES) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """Every candidate of every source, in SOURCES order. A reserved package or a missing source path is an
    ExtractError."""
    check_not_reserved(root, sources)
    share = root / "usr" / "share"
    for s in sources:
        for rel, _label in s.paths:
            if not (share / rel).exists():
                raise ExtractError(f"{share / rel} is missing: install {s.package} "
                                   f"(apt-get install -y --no-install-recommends {s.package})")
    cands: list[Candidate] = []
    skipped: list[tuple[str, str]] = []
    for s in sources:
        for rel, label in s.paths:
            try:
                c, k = (sf2_candidates if s.kind == "sf2" else file_candidates)(share / rel, rel, label, s)
            except SF2Error as e:
                raise ExtractError(str(e)) from None
            cands += c
            skipped += k
    return cands, skipped


# ----------------------------------------------------------------------------------------------
# choosing: one kick hit each, no duplicates


@dataclass
class Choice:
    kept: list[tuple[Candidate, np.ndarray]]  # (candidate, trimmed audio to write)
    skipped: list[tuple[str, str]]  # (original, reason)


def choose(cands: list[Candidate], kit: list[tuple[str, np.ndarray]], cfg: DataConfig | None = None) -> Choice:
    """Keep the candidates that measure like one kick hit and are neither identical nor near-copies
    (NEAR_DUPLICATE_NCC on prepared clips) of a kit file or of a candidate kept before them.
    kit: (file name, prepared clip) of the kit's files that this script does not own."""
    from kickmodel.clips import BadAudio, prepare_audio
    from trainer.xcorr import pairwise_max_ncc

    cfg = cfg or DataConfig()
    skipped: list[tuple[str, str]] = []
    passing: list[tuple[Candidate, np.ndarray, np.ndarray]] = []
    seen: dict[str, str] = {}
    for c in cands:
        reason = why_not_a_kick(measure_hit(c.audio))
        if reason is None:
            x = trim(c.audio)
            digest = hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
            if digest in seen:
                reason = f"identical to {seen[digest]}"
            else:
                seen[digest] = c.original
                for side, ch in c.channels:  # a mono fork of a stereo font ships one channel of the pair
                    seen.setdefault(hashlib.sha256(np.ascontiguousarray(trim(ch)).tobytes()).hexdigest(),
                                    f"the {side} channel of {c.original}")
                try:
                    prepared, _ = prepare_audio(x, SAMPLE_RATE, cfg)
                except BadAudio as e:
                    reason = str(e)
        if reason:
            skipped.append((c.original, reason))
        else:
            passing.append((c, x, prepared))
    if not passing:
        return Choice([], skipped)
    refs = [clip for _, clip in kit] + [p for _, _, p in passing]
    names = [name for name, _ in kit] + [c.original for c, _, _ in passing]
    ncc = pairwise_max_ncc(np.stack(refs), int(round(NCC_LAG_MS * cfg.sample_rate / 1000)))
    accepted = list(range(len(kit)))
    kept: list[tuple[Candidate, np.ndarray]] = []
    for k, (c, x, _) in enumerate(passing):
        i = len(kit) + k
        if accepted:
            j = max(accepted, key=lambda a: ncc[i, a])
            if ncc[i, j] >= NEAR_DUPLICATE_NCC:
                skipped.append((c.original, f"a near-copy of {names[j]} (correlation {ncc[i, j]:.3f})"))
                continue
        accepted.append(i)
        kept.append((c, x))
    return Choice(kept, skipped)


# ----------------------------------------------------------------------------------------------
# the kit folder and its manifest


def read_manifest(kit: Path) -> list[dict[str, str]]:
    path = kit / "MANIFEST.csv"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ExtractError(f"{path}: cannot read: {e.strerror or e}") from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != MANIFEST_FIELDS:
        raise ExtractError(f"{path}: expected the columns {','.join(MANIFEST_FIELDS)}, found {reader.fieldnames}")
    rows = list(reader)
    for n, r in enumerate(rows, start=2):
        if None in r or any(v is None for v in r.values()) or not r["file"] or "/" in r["file"]:
            raise ExtractError(f"{path}: line {n} is malformed")
    return rows


def manifest_bytes(rows: list[dict[str, str]]) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=MANIFEST_FIELDS)  # "\r\n" line ends, as the csv module (and the kit) has them
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def flac_bytes(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, SAMPLE_RATE, format="FLAC", subtype="PCM_24")
    return buf.getvalue()


def _unique(name: str, used: set[str]) -> str:
    out, k = name, 2
    while out.lower() in used:
        out, k = f"{name}_{k}", k + 1
    used.add(out.lower())
    return out


def run(root: Path, kit: Path, dry_run: bool = False, sources=SOURCES, log=print) -> dict[str, int]:
    """Gather, choose, write (see the module docstring). Returns {package: kicks kept}."""
    from kickmodel.clips import BadAudio, load_clip

    check_not_reserved(root, sources)
    rows = read_manifest(kit)
    owned = {s.package for s in sources}
    others = [r for r in rows if r["debian_package"] not in owned]
    cands, skipped = gather(root, sources)
    cfg = DataConfig()
    ref = []
    for r in others:
        try:
            ref.append((r["file"], load_clip(kit / r["file"], cfg)[0]))
        except (BadAudio, OSError) as e:
            raise ExtractError(f"{kit / r['file']} (listed in MANIFEST.csv): {e}") from None
    choice = choose(cands, ref, cfg)
    skipped += choice.skipped
    for what, why in skipped:
        log(f"skip {what}: {why}")

    used = {r["file"].lower() for r in others}
    new_rows: list[dict[str, str]] = []
    payloads: list[tuple[Path, bytes]] = []
    for c, x in choice.kept:
        name = _unique(c.name, {u.removesuffix(".flac") for u in used}) + ".flac"
        used.add(name.lower())
        new_rows.append({"file": name, "seconds": f"{len(x) / SAMPLE_RATE:.3f}", "debian_package": c.source.package,
                         "original_path": c.original, "license": c.source.license})
        payloads.append((kit / name, flac_bytes(x)))
        log(f"keep {name} <- {c.source.package}: {c.original} ({len(x) / SAMPLE_RATE:.2f} s)")
    counts = {s.package: sum(r["debian_package"] == s.package for r in new_rows) for s in sources}
    log("kept " + ", ".join(f"{n} from {p}" for p, n in counts.items()) + f"; {len(skipped)} skipped")
    if dry_run:
        return counts

    written = 0
    for path, data in payloads:
        if not path.exists() or path.read_bytes() != data:
            atomic_write_bytes(path, data)
            written += 1
    manifest = manifest_bytes(others + new_rows)
    if (kit / "MANIFEST.csv").read_bytes() != manifest:
        atomic_write_bytes(kit / "MANIFEST.csv", manifest)  # after the files: it never names a missing one
        written += 1
    keep = {r["file"] for r in others + new_rows}
    for r in rows:
        if r["debian_package"] in owned and r["file"] not in keep:
            (kit / r["file"]).unlink(missing_ok=True)
            log(f"removed {r['file']} (no longer selected)")
    log(f"{written} file(s) written in {kit}")
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/", help="where the Debian packages are installed (default /)")
    ap.add_argument("--kit", default=str(REPO / "kickserver" / "data" / "kicks"), help="the kit folder")
    ap.add_argument("--dry-run", action="store_true", help="report what would be kept and skipped; write nothing")
    args = ap.parse_args(argv)
    try:
        run(Path(args.root), Path(args.kit), dry_run=args.dry_run)
    except ExtractError as e:
        print(f"extract_kicks: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
