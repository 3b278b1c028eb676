"""A kit as the files samplers load: one folder, written as a whole or not at all.

Given layers x robins finished kicks (velocity layer 0 = softest, robin 0..), the note they are tuned to and play
on, and a name, write_kit makes FOLDER/NAME/ holding:

    NAME_v1_rr1.wav ...        every hit, 24-bit mono through kickmodel.wavfile.encode_wav, with a `smpl` chunk at
                               the kit's pitch (a sampler maps each file to it) and tags naming its layer and robin
    NAME.sfz                   SFZ: a <group> per layer with lovel/hivel (1..127 split evenly, velocity_ranges),
                               a <region> per robin with seq_length/seq_position, key and pitch_keycenter = the
                               note, loop_mode=one_shot
    NAME_drumgizmo.xml         DrumGizmo drumkit (version 2.0): one channel, one instrument
    NAME_drumgizmo_kick.xml    its instrument: one <sample> per hit with its `power` (below)
    NAME_drumgizmo_midimap.xml the note -> the instrument
    drumkit.xml                Hydrogen drumkit (the folder is the kit): one instrument whose layers split velocity
                               0..1 by min/max as the SFZ does, robins as layers of one range taken ROUND_ROBIN

Levels: the layers carry the dynamics (kickmodel.kitrules), so with more than one layer the SFZ turns velocity's
own gain off (amp_veltrack=0) and Hydrogen does not apply velocity; a one-layer kit leaves both to the sampler.

DrumGizmo picks, for a hit at velocity v, the sample whose `power` is nearest min + v/127 * (max - min) over the
instrument's powers, and among equals the one played least recently. Each sample's power is therefore its layer's
velocity centre on the MIDI scale (16.5, 48.5, 80, 111.5 for four layers): robins of a layer share it, so they take
turns, and the steps between layers (16 or more) outweigh DrumGizmo's recency term (a fraction at a hit a second),
so a harder hit always takes a louder layer. DrumGizmo's outer layers then cover a narrower velocity band than the
SFZ's (for four layers its boundaries fall at 21, 64, 106).

Hydrogen keeps at most 16 layers per instrument (its preference maxLayers): where layers x robins exceed 16 its
kit takes the first 16 // layers robins of each layer; KitFiles.hydrogen_robins says how many.

Atomicity: everything is encoded in memory first, then written into a hidden temp folder beside the target
(`.NAME.<random>.kitpart`), each file fsynced, the folder fsynced, and renamed onto the target by the writer's
publish (refusing one that exists: atomically where the filesystem has renameat2's RENAME_NOREPLACE, else a check
then rename), then the parent fsynced. On any error
the temp folder is removed and KitWriteError says what failed; the target never holds half a kit. A writer killed
mid-way leaves only a `.*.kitpart` folder, which clean_stale_kit_temps removes (the daemon's writer calls it at
start: kickserver.writer.KickWriter.clean_stray_temps; a kit its retention prunes goes the same way, renamed to such
a folder first).

No file names a path of the machine that wrote it: every reference inside the kit is a bare file name.
"""

from __future__ import annotations

import errno
import math
import os
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kickmodel.dsp import trim_tail
from kickmodel.fsutil import fsync_dir
from kickmodel.kitrules import MAX_LAYERS, MAX_ROBINS, check_counts
from kickmodel.notes import midi_to_hz, midi_to_name, note_to_midi, parse_key
from kickmodel.wavfile import encode_wav

from .publish import publish

INSTRUMENT = "Kick"
HYDROGEN_MAX_LAYERS = 16
MAX_NAME = 64
MAX_SECONDS = 10.0
MAX_INFO = 200
TEMP_SUFFIX = ".kitpart"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


class KitWriteError(OSError):
    """A kit could not be written; nothing is left at the target. errno is the underlying error's, where one."""


@dataclass(frozen=True)
class KitHit:
    """One sample of a kit: a finished kick (mono float audio), its velocity layer (0 = softest) and robin."""

    audio: np.ndarray
    layer: int
    robin: int


@dataclass(frozen=True)
class Kit:
    """What a kit folder is made of. note: the MIDI note it plays on and is tuned to (a name like `A1` or a number);
    pitch_hz: the exact pitch its hits are tuned to, for their smpl chunk (default: the note's); key: the song key it
    was asked for (`F#m`), said in its descriptions; info: a line saying how it was made (model, seed), no paths."""

    name: str
    note: int | str
    sample_rate: int
    hits: Sequence[KitHit]
    pitch_hz: float | None = None
    key: str | None = None
    info: str = ""


@dataclass(frozen=True)
class KitFiles:
    """What write_kit wrote: the folder and each file's name in it."""

    folder: Path
    wavs: tuple[str, ...]
    sfz: str
    drumgizmo_kit: str
    drumgizmo_instrument: str
    drumgizmo_midimap: str
    hydrogen: str
    layers: int
    robins: int
    hydrogen_robins: int
    files: tuple[str, ...] = field(default=())


def velocity_ranges(layers: int) -> list[tuple[int, int]]:
    """MIDI velocity 1..127 split evenly over the layers, softest first: 4 -> (1, 32), (33, 64), (65, 95), (96, 127)."""
    layers, _ = check_counts(layers, 1)
    b = [round(i * 127 / layers) for i in range(layers + 1)]
    return [(b[i] + 1, b[i + 1]) for i in range(layers)]


def hydrogen_ranges(layers: int) -> list[tuple[float, float]]:
    """Hydrogen's velocity (MIDI velocity / 127, 0..1) split as velocity_ranges splits MIDI velocity, without overlap
    at a whole MIDI velocity: layer i from (lovel - 0.5) / 127 (0 for the softest) to hivel / 127."""
    return [(0.0 if i == 0 else (lo - 0.5) / 127, hi / 127) for i, (lo, hi) in enumerate(velocity_ranges(layers))]


def drumgizmo_powers(layers: int) -> list[float]:
    """Each layer's DrumGizmo power: the centre of its velocity range (see the module docstring)."""
    return [(lo + hi) / 2 for lo, hi in velocity_ranges(layers)]


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or len(name) > MAX_NAME:
        raise ValueError(f"kit name {str(name)[:MAX_NAME]!r}: give 1..{MAX_NAME} letters, digits and ._+- starting "
                         "with a letter or digit (it names the folder and its files)")
    return name


def _grid(kit: Kit) -> tuple[int, int, dict[tuple[int, int], np.ndarray]]:
    """(layers, robins, {(layer, robin): audio}) of a kit whose hits fill a layers x robins grid exactly once."""
    if not kit.hits:
        raise ValueError("kit has no hits; give layers x robins finished kicks")
    grid: dict[tuple[int, int], np.ndarray] = {}
    for h in kit.hits:
        if not (isinstance(h.layer, int) and isinstance(h.robin, int)) or h.layer < 0 or h.robin < 0:
            raise ValueError(f"kit hit at layer {h.layer!r}, robin {h.robin!r}: give whole numbers from 0")
        if (h.layer, h.robin) in grid:
            raise ValueError(f"kit hit at layer {h.layer}, robin {h.robin}: given twice")
        a = np.asarray(h.audio)
        if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"kit hit at layer {h.layer}, robin {h.robin}: give mono float audio (1-D, non-empty), "
                             f"got {a.dtype} of shape {a.shape}")
        if a.size > MAX_SECONDS * kit.sample_rate:
            raise ValueError(f"kit hit at layer {h.layer}, robin {h.robin}: {a.size / kit.sample_rate:.1f} s is "
                             f"longer than {MAX_SECONDS:g} s")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"kit hit at layer {h.layer}, robin {h.robin}: audio has NaN or infinite samples")
        grid[(h.layer, h.robin)] = a
    layers = max(k[0] for k in grid) + 1
    robins = max(k[1] for k in grid) + 1
    check_counts(layers, robins)
    missing = [(lay, r) for lay in range(layers) for r in range(robins) if (lay, r) not in grid]
    if missing:
        raise ValueError(f"kit hits: layer {missing[0][0]}, robin {missing[0][1]} is missing; give every one of "
                         f"{layers} layers x {robins} robins")
    return layers, robins, grid


def _wav_name(name: str, layer: int, robin: int) -> str:
    return f"{name}_v{layer + 1}_rr{robin + 1}.wav"


def _xml(root: ET.Element) -> bytes:
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="UTF-8", xml_declaration=True) + b"\n"


def _sub(parent: ET.Element, tag: str, text: object | None = None, **attrs: str) -> ET.Element:
    e = ET.SubElement(parent, tag, attrs)
    if text is not None:
        e.text = str(text)
    return e


def _description(kit: Kit, layers: int, robins: int, midi: int) -> str:
    parts = [f"{layers} velocity layer{'s' * (layers > 1)} x {robins} round robin{'s' * (robins > 1)}",
             f"on {midi_to_name(midi)} (MIDI {midi})"]
    if kit.key:
        parts.append(f"for a song in {kit.key}")
    text = ", ".join(parts) + ", made by kickserver"
    return text + (f" ({kit.info})" if kit.info else "")


def sfz_text(kit: Kit, layers: int, robins: int, midi: int) -> str:
    """The kit's SFZ file."""
    lines = [f"// {kit.name}: {_description(kit, layers, robins, midi)}",
             "<global>", f"key={midi} pitch_keycenter={midi} loop_mode=one_shot"
             + (" amp_veltrack=0" if layers > 1 else "")]
    for lay, (lo, hi) in enumerate(velocity_ranges(layers)):
        lines.append(f"<group> lovel={lo} hivel={hi}" + (f" seq_length={robins}" if robins > 1 else ""))
        for r in range(robins):
            lines.append(f"<region> sample={_wav_name(kit.name, lay, r)}"
                         + (f" seq_position={r + 1}" if robins > 1 else ""))
    return "\n".join(lines) + "\n"


def drumgizmo_files(kit: Kit, layers: int, robins: int, midi: int) -> tuple[bytes, bytes, bytes]:
    """(drumkit, instrument, midimap) XML of the kit for DrumGizmo (drumkit format version 2.0)."""
    kit_el = ET.Element("drumkit", {"version": "2.0", "samplerate": str(int(kit.sample_rate))})
    meta = _sub(kit_el, "metadata")
    _sub(meta, "version", "1.0")
    _sub(meta, "title", kit.name)
    _sub(meta, "description", _description(kit, layers, robins, midi))
    _sub(meta, "license", "unspecified")  # the kicks are their user's: kickserver states no license for them
    _sub(meta, "author", "kickserver")
    channels = _sub(kit_el, "channels")
    _sub(channels, "channel", name=INSTRUMENT)
    instruments = _sub(kit_el, "instruments")
    inst_ref = _sub(instruments, "instrument", name=INSTRUMENT, file=f"{kit.name}_drumgizmo_kick.xml")
    _sub(inst_ref, "channelmap", **{"in": INSTRUMENT, "out": INSTRUMENT, "main": "true"})

    inst = ET.Element("instrument", {"version": "2.0", "name": INSTRUMENT})
    ich = _sub(inst, "channels")
    _sub(ich, "channel", name=INSTRUMENT, main="true")
    samples = _sub(inst, "samples")
    for lay, power in enumerate(drumgizmo_powers(layers)):
        for r in range(robins):
            s = _sub(samples, "sample", name=f"v{lay + 1}_rr{r + 1}", power=f"{power:g}")
            _sub(s, "audiofile", channel=INSTRUMENT, file=_wav_name(kit.name, lay, r), filechannel="1")

    midimap = ET.Element("midimap")
    _sub(midimap, "map", note=str(midi), instr=INSTRUMENT)
    return _xml(kit_el), _xml(inst), _xml(midimap)


def hydrogen_drumkit(kit: Kit, layers: int, robins: int, midi: int) -> tuple[bytes, int]:
    """(drumkit.xml for Hydrogen, robins it holds per layer): the elements in the order Hydrogen's drumkit.xsd wants."""
    h_robins = min(robins, HYDROGEN_MAX_LAYERS // layers)
    root = ET.Element("drumkit_info", {"xmlns": "http://www.hydrogen-music.org/drumkit"})
    _sub(root, "name", kit.name)
    _sub(root, "author", "kickserver")
    _sub(root, "info", _description(kit, layers, robins, midi)
         + ("" if h_robins == robins else f"; Hydrogen keeps {h_robins} robins per layer (16 layers at most)"))
    _sub(root, "license", "")
    _sub(root, "image", "")
    _sub(root, "imageLicense", "")
    comp = _sub(_sub(root, "componentList"), "drumkitComponent")
    _sub(comp, "id", 0)
    _sub(comp, "name", "Main")
    _sub(comp, "volume", 1)
    inst = _sub(_sub(root, "instrumentList"), "instrument")
    for tag, value in (("id", 0), ("name", INSTRUMENT), ("volume", 1), ("isMuted", "false"), ("isSoloed", "false"),
                       ("pan", 0), ("pitchOffset", 0), ("randomPitchFactor", 0), ("gain", 1),
                       ("applyVelocity", "true" if layers == 1 else "false"), ("filterActive", "false"),
                       ("filterCutoff", 1), ("filterResonance", 0), ("Attack", 0), ("Decay", 0), ("Sustain", 1),
                       ("Release", 1000), ("muteGroup", -1), ("midiOutChannel", -1), ("midiOutNote", midi),
                       ("isStopNote", "false"), ("sampleSelectionAlgo", "ROUND_ROBIN" if h_robins > 1 else "VELOCITY"),
                       ("isHihat", -1), ("lower_cc", 0), ("higher_cc", 127), ("FX1Level", 0), ("FX2Level", 0),
                       ("FX3Level", 0), ("FX4Level", 0)):
        _sub(inst, tag, value)
    ic = _sub(inst, "instrumentComponent")
    _sub(ic, "component_id", 0)
    _sub(ic, "gain", 1)
    for lay, (lo, hi) in enumerate(hydrogen_ranges(layers)):
        for r in range(h_robins):
            layer = _sub(ic, "layer")
            _sub(layer, "filename", _wav_name(kit.name, lay, r))
            _sub(layer, "min", f"{lo:.6f}")
            _sub(layer, "max", f"{hi:.6f}")
            _sub(layer, "gain", 1)
            _sub(layer, "pitch", 0)
    return _xml(root), h_robins


def kit_contents(kit: Kit) -> tuple[dict[str, bytes], KitFiles]:
    """Every file of the kit, encoded in memory ({name: bytes}), and the KitFiles naming them (folder unset)."""
    _check_name(kit.name)
    if not isinstance(kit.sample_rate, int) or not 8000 <= kit.sample_rate <= 192000:
        raise ValueError(f"kit sample rate {kit.sample_rate!r}: give a whole number of Hz in 8000..192000")
    midi = note_to_midi(kit.note)
    if kit.key is not None:
        kit = replace(kit, key=parse_key(kit.key).name)  # bounded and spelled one way: "F#m"
    if not isinstance(kit.info, str) or len(kit.info) > MAX_INFO or "/" in kit.info or "\\" in kit.info:
        raise ValueError(f"kit info {str(kit.info)[:MAX_INFO]!r}: give one line of at most {MAX_INFO} characters "
                         "with no path (a file's name, not where it lies)")
    pitch = midi_to_hz(midi) if kit.pitch_hz is None else float(kit.pitch_hz)
    if not math.isfinite(pitch) or pitch <= 0:
        raise ValueError(f"kit pitch_hz {kit.pitch_hz!r}: give a positive pitch in Hz")
    layers, robins, grid = _grid(kit)
    ranges = velocity_ranges(layers)
    files: dict[str, bytes] = {}
    wavs = []
    for (lay, r), audio in sorted(grid.items()):
        name = _wav_name(kit.name, lay, r)
        lo, hi = ranges[lay]
        tags = {"title": name[:-4], "software": "kickserver", "artist": "kickserver",
                "comment": f"kit={kit.name} layer={lay + 1}/{layers} velocity={lo}-{hi} robin={r + 1}/{robins} "
                           f"note={midi_to_name(midi)}" + (f" key={kit.key}" if kit.key else "")
                           + (f" {kit.info}" if kit.info else "")}
        # each hit as long as it sounds (kickmodel.dsp.trim_tail): a soft layer's tail may end before the loud one's
        files[name] = encode_wav(trim_tail(audio, kit.sample_rate), kit.sample_rate, tags, pitch_hz=pitch)
        wavs.append(name)
    sfz = f"{kit.name}.sfz"
    files[sfz] = sfz_text(kit, layers, robins, midi).encode("utf-8")
    dg_kit, dg_inst, dg_map = (f"{kit.name}_drumgizmo.xml", f"{kit.name}_drumgizmo_kick.xml",
                               f"{kit.name}_drumgizmo_midimap.xml")
    files[dg_kit], files[dg_inst], files[dg_map] = drumgizmo_files(kit, layers, robins, midi)
    files["drumkit.xml"], h_robins = hydrogen_drumkit(kit, layers, robins, midi)
    return files, KitFiles(folder=Path(), wavs=tuple(wavs), sfz=sfz, drumgizmo_kit=dg_kit,
                           drumgizmo_instrument=dg_inst, drumgizmo_midimap=dg_map, hydrogen="drumkit.xml",
                           layers=layers, robins=robins, hydrogen_robins=h_robins, files=tuple(sorted(files)))


def _vlq(n: int) -> bytes:
    out = [n & 0x7F]
    while n > 0x7F:
        n >>= 7
        out.append(0x80 | (n & 0x7F))
    return bytes(reversed(out))


def midi_hits(note: int | str, hits: Sequence[tuple[float, int]], channel: int = 9, length_s: float = 0.1) -> bytes:
    """A Standard MIDI File (format 0, 480 ticks a quarter at 120 bpm) playing note at each (time s, velocity 1..127)
    of hits, each held length_s, on channel (0-based: 9 is General MIDI's drum channel 10): what a sampler is tested
    with. Written by hand: a header chunk and one track of note-on/off events, a tempo and an end."""
    midi = note_to_midi(note)
    ticks_per_s = 480 * 2  # 120 bpm: a quarter is 0.5 s
    events: list[tuple[int, bytes]] = []
    for t, vel in hits:
        if not (isinstance(vel, int) and 1 <= vel <= 127) or not (math.isfinite(t) and t >= 0):
            raise ValueError(f"MIDI hit at {t!r} s, velocity {vel!r}: give a time >= 0 and a velocity 1..127")
        on = int(round(t * ticks_per_s))
        events.append((on, bytes([0x90 | channel, midi, vel])))
        events.append((on + max(1, int(round(length_s * ticks_per_s))), bytes([0x80 | channel, midi, 0])))
    events.sort(key=lambda e: (e[0], e[1][0] & 0xF0 == 0x90))  # at one tick, note-offs first
    track = bytearray(b"\x00\xff\x51\x03\x07\xa1\x20")  # tempo 500000 us a quarter
    now = 0
    for tick, data in events:
        track += _vlq(tick - now) + data
        now = tick
    track += b"\x00\xff\x2f\x00"
    header = (6).to_bytes(4, "big") + (0).to_bytes(2, "big") + (1).to_bytes(2, "big") + (480).to_bytes(2, "big")
    return b"MThd" + header + b"MTrk" + len(track).to_bytes(4, "big") + bytes(track)


def _write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_kit(kit: Kit, folder: Path | str) -> KitFiles:
    """Write kit as FOLDER/NAME/ (module docstring), atomically as a whole. ValueError for a bad kit (nothing
    written); KitWriteError (an OSError) when the target exists, the folder is missing or unwritable, the disk fills
    up...: the target is then absent and no temp folder is left."""
    files, made = kit_contents(kit)
    parent = Path(folder)
    target = parent / kit.name
    if os.path.lexists(target):
        raise KitWriteError(errno.EEXIST, f"kit folder {kit.name!r} exists already in the output folder; give the "
                                          "kit another name, or move the old one away")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{kit.name}.", suffix=TEMP_SUFFIX, dir=parent))
    except OSError as e:
        raise KitWriteError(e.errno, f"kit {kit.name!r}: cannot make a folder in the output folder "
                                     f"({e.strerror or e})") from e
    try:
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 is too private for a DAW reading over a share
        for name, data in files.items():
            _write_file(tmp / name, data)
        fsync_dir(tmp)
        if not publish(tmp, target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), kit.name)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, FileExistsError):
            raise KitWriteError(errno.EEXIST, f"kit folder {kit.name!r} appeared in the output folder while the kit "
                                              "was written; give the kit another name") from e
        if isinstance(e, OSError):
            raise KitWriteError(e.errno, f"kit {kit.name!r} could not be written ({e.strerror or e}); nothing was "
                                         "left in the output folder") from e
        raise
    fsync_dir(parent)
    return replace(made, folder=target)


def clean_stale_kit_temps(folder: Path | str) -> list[Path]:
    """Remove the temp folders (`.*.kitpart`) a killed kit writer left in folder; the ones removed."""
    removed = []
    folder = Path(folder)
    if folder.is_dir():
        for p in folder.iterdir():
            if p.name.startswith(".") and p.name.endswith(TEMP_SUFFIX) and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
                if not p.exists():
                    removed.append(p)
    return removed


__all__ = ["HYDROGEN_MAX_LAYERS", "MAX_LAYERS", "MAX_ROBINS", "Kit", "KitFiles", "KitHit", "KitWriteError",
           "clean_stale_kit_temps", "drumgizmo_powers", "hydrogen_ranges", "kit_contents", "midi_hits",
           "velocity_ranges", "write_kit"]
