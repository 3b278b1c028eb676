"""Notes, MIDI numbers and hertz: how a producer names a kick's pitch, and how a kit is tuned to a song's key.

- A note name is a letter A-G, an optional accidental (`#`, `b`, or the signs U+266F / U+266D) and an octave
  number (negative allowed): `A1`, `C#2`, `Db-1`. Octaves follow the MIDI convention where middle C, MIDI 60, is
  `C4`; so `C-1` is MIDI 0, `A1` MIDI 33 (55 Hz), `A4` MIDI 69 (440 Hz, the tuning reference), `G9` MIDI 127.
- A MIDI number is an int 0..127, a float holding a whole number (OSC carries `33.0` from Pure Data), or a
  string of digits (`"33"`).
- Hertz follow equal temperament from A4 = 440 Hz: f = 440 * 2 ** ((midi - 69) / 12).
- A kit's `key` is the key of the song it is for, written as its tonic with an optional mode: `A`, `F#m`,
  `Bb minor`, `E major`. The kit's kicks are tuned to the tonic, in the one octave where it falls between
  KEY_LOW_HZ (40 Hz, inclusive) and twice that (80 Hz, exclusive): where a kick's body sits. So `A` and `Am` tune
  to A1 (55 Hz), `C` to C2 (65.4 Hz), `E` to E1 (41.2 Hz). The mode does not change the pitch; it is kept so the
  kit can say which key it was made for. A kit asked for by `note` instead is tuned to that exact note.

Every parser raises ValueError naming what was given, why it is refused and what is accepted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

A4_HZ = 440.0
A4_MIDI = 69
MIDI_LOW, MIDI_HIGH = 0, 127
MAX_TEXT = 16  # longest note or key text read: longer input is refused before any parsing
KEY_LOW_HZ = 40.0  # a key's tonic is placed in [KEY_LOW_HZ, 2 * KEY_LOW_HZ)

SHARP_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
FLAT_NAMES = ("C", "Db", "D", "Eb", "E", "F", "Gb", "G", "Ab", "A", "Bb", "B")
_LETTER = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
_ACCIDENTAL = {"": 0, "#": 1, "\u266f": 1, "b": -1, "\u266d": -1}
_NOTE_RE = re.compile(r"([A-Ga-g])(#|b|\u266f|\u266d)?(-?\d{1,2})")
_PITCH_CLASS_RE = re.compile(r"([A-Ga-g])(#|b|\u266f|\u266d)?")
_MODES = {"": "major", "maj": "major", "major": "major", "m": "minor", "min": "minor", "minor": "minor"}
_NOTE_FORMS = "a note name like A1, C#2 or Db-1 (middle C is C4), or a MIDI number 0..127"


_KEY_FORMS = "a key like A, F#m or Bb minor"


def _bounded(text: str, what: str, forms: str) -> str:
    if len(text) > MAX_TEXT:
        raise ValueError(f"{what} {text[:MAX_TEXT]!r}...: longer than {MAX_TEXT} characters; give {forms}")
    return text.strip()


def _midi_in_range(m: int, given: object) -> int:
    if not MIDI_LOW <= m <= MIDI_HIGH:
        raise ValueError(f"note {given!r}: MIDI {m} is outside {MIDI_LOW}..{MIDI_HIGH} (C-1..G9); "
                         f"give {_NOTE_FORMS}")
    return m


def note_to_midi(note: str | int | float) -> int:
    """The MIDI number (0..127) of a note name (`A1`), a MIDI number (33, 33.0) or a string of digits ("33")."""
    if isinstance(note, bool):
        raise ValueError(f"note {note!r}: a bool is not a note; give {_NOTE_FORMS}")
    if isinstance(note, int):
        return _midi_in_range(int(note), note)
    if isinstance(note, float):
        if not math.isfinite(note) or note != math.floor(note):
            raise ValueError(f"note {note!r}: a MIDI number must be whole (no cents: use pitch_hz for a detuned "
                             f"pitch); give {_NOTE_FORMS}")
        return _midi_in_range(int(note), note)
    if not isinstance(note, str):
        raise ValueError(f"note {note!r}: a {type(note).__name__} is not a note; give {_NOTE_FORMS}")
    text = _bounded(note, "note", _NOTE_FORMS)
    if re.fullmatch(r"\d{1,3}", text):
        return _midi_in_range(int(text), note)
    m = _NOTE_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"note {note!r}: not a note name or MIDI number; give {_NOTE_FORMS}")
    letter, acc, octave = m.group(1).upper(), m.group(2) or "", int(m.group(3))
    return _midi_in_range((octave + 1) * 12 + _LETTER[letter] + _ACCIDENTAL[acc], note)


def midi_to_hz(midi: float) -> float:
    """Equal-tempered frequency of a (possibly fractional) MIDI number, A4 = MIDI 69 = 440 Hz."""
    return A4_HZ * 2.0 ** ((float(midi) - A4_MIDI) / 12.0)


def hz_to_midi(hz: float) -> float:
    """The fractional MIDI number of a frequency (69.0 at 440 Hz)."""
    hz = float(hz)
    if not math.isfinite(hz) or hz <= 0:
        raise ValueError(f"frequency {hz!r} Hz: not a positive finite number; give a pitch in hertz, e.g. 55.0")
    return A4_MIDI + 12.0 * math.log2(hz / A4_HZ)


def note_to_hz(note: str | int | float) -> float:
    """The frequency of a note name or MIDI number (`A1` -> 55.0)."""
    return midi_to_hz(note_to_midi(note))


def midi_to_name(midi: int, flats: bool = False) -> str:
    """The name of a MIDI number, sharps by default: 33 -> `A1`, 61 -> `C#4` (`Db4` with flats)."""
    if float(midi) != int(midi):
        raise ValueError(f"note {midi!r}: a MIDI number must be whole; round it first (see nearest_note)")
    m = _midi_in_range(int(midi), midi)
    return f"{(FLAT_NAMES if flats else SHARP_NAMES)[m % 12]}{m // 12 - 1}"


def nearest_note(hz: float) -> tuple[int, float]:
    """The nearest MIDI note to a frequency and the frequency's offset from it in cents (-50..+50):
    55.0 -> (33, 0.0); 56.0 -> (33, +31.2). A frequency beyond MIDI 0..127 is refused."""
    f = hz_to_midi(hz)
    m = int(math.floor(f + 0.5))
    _midi_in_range(m, hz)
    return m, (f - m) * 100.0


def describe_pitch(hz: float) -> str:
    """A tuner's reading of a frequency: `A1 +3c` (nearest note, then cents rounded to whole)."""
    m, cents = nearest_note(hz)
    c = int(round(cents))
    return f"{midi_to_name(m)} {c:+d}c"


@dataclass(frozen=True)
class Key:
    """A song's key as a kit takes it: the tonic's pitch class (0 = C .. 11 = B), its spelling, and the mode."""

    pitch_class: int
    tonic: str  # as spelled: "F#", "Bb"
    mode: str  # "major" or "minor"

    @property
    def name(self) -> str:
        """Short form: `A`, `F#m`."""
        return self.tonic + ("m" if self.mode == "minor" else "")

    @property
    def root_midi(self) -> int:
        """The tonic in the octave where it lies in [KEY_LOW_HZ, 2 * KEY_LOW_HZ): A -> 33 (A1, 55 Hz)."""
        lowest = math.ceil(hz_to_midi(KEY_LOW_HZ) - 1e-9)  # the lowest MIDI note at or above KEY_LOW_HZ
        return lowest + (self.pitch_class - lowest) % 12

    @property
    def root_hz(self) -> float:
        return midi_to_hz(self.root_midi)


def parse_key(key: str) -> Key:
    """A key for a kit: a tonic (`A`, `F#`, `Bb`) and an optional mode (`m`, `min`, `minor`, `maj`, `major`,
    with or without a space): `A`, `F#m`, `Bb minor`. See the module docstring for the octave it tunes to."""
    if not isinstance(key, str):
        raise ValueError(f"key {key!r}: a {type(key).__name__} is not a key; give {_KEY_FORMS}")
    text = _bounded(key, "key", _KEY_FORMS)
    m = _PITCH_CLASS_RE.match(text)
    mode_text = text[m.end():].strip().lower() if m else None
    if m is None or mode_text not in _MODES:
        raise ValueError(f"key {key!r}: not a key; give a tonic A-G with an optional # or b and an optional mode "
                         "(m, min, minor, maj, major), like A, F#m or Bb minor (a key has no octave: for one "
                         "exact pitch give a note such as A1)")
    letter, acc = m.group(1).upper(), m.group(2) or ""
    pc = (_LETTER[letter] + _ACCIDENTAL[acc]) % 12
    spelled = letter + {"\u266f": "#", "\u266d": "b"}.get(acc, acc)
    return Key(pitch_class=pc, tonic=spelled, mode=_MODES[mode_text])


def resolve_pitch(note: str | int | float | None = None, pitch_hz: float | None = None,
                  key: str | None = None) -> float | None:
    """The pitch a request asks for, in Hz, from its `note`, `pitch_hz` and (for a kit) `key`; None when it asks for
    none (the model's own). A note and a pitch_hz together are refused (one pitch, said once); a key tunes to its
    root (Key.root_midi), and a note given with it must be the key's tonic, in any octave (`key Am note A2`: A2)."""
    if note is not None and pitch_hz is not None:
        raise ValueError(f"note {note!r} and pitch_hz {pitch_hz!r}: give one of them, not both")
    if key is not None and pitch_hz is not None:
        raise ValueError(f"key {key!r} and pitch_hz {pitch_hz!r}: a key tunes the kit to its tonic; give a note in "
                         "that key for another octave, or pitch_hz alone")
    if pitch_hz is not None:
        hz = float(pitch_hz)
        hz_to_midi(hz)  # positive and finite, or the error that says so
        return hz
    k = parse_key(key) if key is not None else None
    if note is not None:
        m = note_to_midi(note)
        if k is not None and m % 12 != k.pitch_class:
            raise ValueError(f"note {note!r} is not the tonic of key {key!r} ({k.tonic}); give {k.tonic} in the "
                             f"octave you want (e.g. {midi_to_name(k.root_midi, flats='b' in k.tonic)}), or no note")
        return midi_to_hz(m)
    return k.root_hz if k is not None else None
