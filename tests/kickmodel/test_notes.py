"""Notes, MIDI numbers and hertz (kickmodel.notes) against the standard tables: A4 = MIDI 69 = 440 Hz, middle C =
C4 = MIDI 60 = 261.626 Hz, MIDI 0 = C-1 = 8.176 Hz, MIDI 127 = G9 = 12543.854 Hz."""

from __future__ import annotations

import math

import pytest

from kickmodel import notes


@pytest.mark.parametrize("given, midi", [
    ("A1", 33), ("a1", 33), ("C#2", 37), ("Db2", 37), ("C\u266f2", 37), ("D\u266d2", 37), ("Db-1", 1), ("C-1", 0),
    ("G9", 127), ("C4", 60), ("A4", 69), ("B#3", 60), ("Cb4", 59), (" A1 ", 33),
    (33, 33), (33.0, 33), ("33", 33), (0, 0), (127, 127),
])
def test_note_to_midi(given, midi):
    assert notes.note_to_midi(given) == midi


@pytest.mark.parametrize("midi, hz", [(69, 440.0), (33, 55.0), (60, 261.6255653), (0, 8.1757989), (127, 12543.8539514),
                                      (21, 27.5)])
def test_hz_table(midi, hz):
    assert notes.midi_to_hz(midi) == pytest.approx(hz, rel=1e-8)
    assert notes.hz_to_midi(hz) == pytest.approx(midi, abs=1e-7)
    assert notes.note_to_hz(notes.midi_to_name(midi)) == pytest.approx(hz, rel=1e-8)


def test_names_round_trip_every_midi_number():
    for m in range(128):
        assert notes.note_to_midi(notes.midi_to_name(m)) == m
        assert notes.note_to_midi(notes.midi_to_name(m, flats=True)) == m
    assert notes.midi_to_name(61) == "C#4" and notes.midi_to_name(61, flats=True) == "Db4"


def test_nearest_note_and_cents():
    assert notes.nearest_note(55.0) == (33, pytest.approx(0.0, abs=1e-9))
    m, cents = notes.nearest_note(56.0)
    assert m == 33 and cents == pytest.approx(1200 * math.log2(56 / 55))
    m, cents = notes.nearest_note(notes.midi_to_hz(33.6))  # past the half-way point: the next note, -40 cents
    assert m == 34 and cents == pytest.approx(-40.0)
    assert notes.describe_pitch(56.0) == "A1 +31c"
    assert notes.describe_pitch(54.0) == "A1 -32c"


@pytest.mark.parametrize("given, why", [
    ("H1", "not a note name"), ("A10", "outside 0..127"), ("G#9", "outside 0..127"), ("C-2", "outside 0..127"),
    (128, "outside 0..127"), (-1, "outside 0..127"), (33.5, "must be whole"), (float("nan"), "must be whole"),
    (True, "bool"), (None, "NoneType"), ("", "not a note name"), ("A", "not a note name"), ("A1x", "not a note name"),
    ("1" * 17, "longer than 16"), ("A" * 10_000, "longer than 16"),
])
def test_bad_notes_say_what_why_and_fix(given, why):
    with pytest.raises(ValueError) as e:
        notes.note_to_midi(given)
    text = str(e.value)
    assert text.startswith("note ") and why in text and "A1" in text  # the thing, the reason, the forms accepted


def test_bad_frequencies():
    for hz in (0.0, -55.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive finite"):
            notes.hz_to_midi(hz)
    with pytest.raises(ValueError, match="outside"):
        notes.nearest_note(30000.0)
    with pytest.raises(ValueError, match="whole"):
        notes.midi_to_name(33.5)


@pytest.mark.parametrize("key, name, mode, root", [
    ("A", "A", "major", "A1"), ("Am", "Am", "minor", "A1"), ("A minor", "Am", "minor", "A1"),
    ("a min", "Am", "minor", "A1"), ("F#m", "F#m", "minor", "F#1"), ("Bb minor", "Bbm", "minor", "A#1"),
    ("C", "C", "major", "C2"), ("E", "E", "major", "E1"), ("Eb maj", "Eb", "major", "D#2"),
    ("D#", "D#", "major", "D#2"), ("B", "B", "major", "B1"),
])
def test_keys(key, name, mode, root):
    k = notes.parse_key(key)
    assert (k.name, k.mode, notes.midi_to_name(k.root_midi)) == (name, mode, root)


def test_every_key_root_lies_in_one_octave_from_40_hz():
    roots = [notes.parse_key(t).root_hz for t in notes.SHARP_NAMES]
    assert all(notes.KEY_LOW_HZ <= f < 2 * notes.KEY_LOW_HZ for f in roots)
    assert len({round(f, 6) for f in roots}) == 12


@pytest.mark.parametrize("key", ["H", "A1", "Amaj7", "", "x" * 17, 5, None])
def test_bad_keys(key):
    with pytest.raises(ValueError, match=r"^key .*(F#m|longer than 16)"):
        notes.parse_key(key)


def test_resolve_pitch():
    assert notes.resolve_pitch() is None
    assert notes.resolve_pitch(note="A1") == pytest.approx(55.0)
    assert notes.resolve_pitch(note=45) == pytest.approx(110.0)
    assert notes.resolve_pitch(pitch_hz=57.5) == 57.5
    assert notes.resolve_pitch(key="Am") == pytest.approx(55.0)
    assert notes.resolve_pitch(key="Am", note="A2") == pytest.approx(110.0)
    assert notes.resolve_pitch(key="Bb minor", note="A#1") == pytest.approx(notes.note_to_hz("Bb1"))
    with pytest.raises(ValueError, match="give one of them"):
        notes.resolve_pitch(note="A1", pitch_hz=55.0)
    with pytest.raises(ValueError, match="a key tunes the kit"):
        notes.resolve_pitch(key="A", pitch_hz=55.0)
    with pytest.raises(ValueError, match=r"not the tonic of key 'Am' \(A\); give A .*A1"):
        notes.resolve_pitch(key="Am", note="C2")
    with pytest.raises(ValueError, match="Eb"):
        notes.resolve_pitch(key="Eb", note="E1")
    with pytest.raises(ValueError, match="positive finite"):
        notes.resolve_pitch(pitch_hz=-3.0)
