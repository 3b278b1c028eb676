"""File names that say the sound (kickmodel.naming): the table of character words, the note from the measured
pitch, the pattern's checks, and kicks made to be short, boomy, clicky... named so after the project's own measure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kickmodel import naming
from kickmodel.descriptors import measure
from kickmodel.notes import midi_to_hz

SR = 44100


@pytest.mark.parametrize("decay, pitch, click, word", [
    (0.9, 45.0, -40.0, "boomy"), (0.9, 45.0, -10.0, "boomy"), (0.6, 49.9, -60.0, "boomy"),
    (0.9, 60.0, -40.0, "long"), (0.9, None, -40.0, "long"), (0.6, 50.0, -40.0, "long"),
    (0.4, 55.0, -25.0, "clicky"), (0.1, 55.0, -20.0, "clicky"),
    (0.1, 55.0, -40.0, "short"), (0.1, 55.0, -55.0, "short"), (0.199, 55.0, -25.1, "short"),
    (0.4, 55.0, -50.0, "soft"), (0.2, 55.0, -45.1, "soft"),
    (0.4, 55.0, -35.0, "punchy"), (0.2, 55.0, -45.0, "punchy"), (0.599, 55.0, -25.1, "punchy"),
])
def test_the_table(decay, pitch, click, word):
    assert naming.character_word(decay, pitch, click) == word


def test_names():
    assert naming.kick_name("5513", 0.15, 55.0, -40.0) == "kick_A1_short_5513.wav"
    assert naming.kick_name("5513", 0.15, midi_to_hz(34.3), -40.0) == "kick_Bb1_short_5513.wav"  # flats, nearest
    assert naming.kick_name("5513", 0.15, midi_to_hz(34.6), -40.0) == "kick_B1_short_5513.wav"
    assert naming.kick_name("v12", 0.9, 45.0, -40.0) == "kick_Gb1_boomy_v12.wav"
    assert naming.kick_name("5", 0.9, None, -40.0) == "kick_long_5.wav"  # no pitch, no note, no double underscore
    assert naming.kick_name("5", 0.9, float("nan"), -40.0) == "kick_long_5.wav"
    assert naming.kick_name("7", 0.4, midi_to_hz(35.2), -35.0, pattern="{note}{cents}_{word}_{label}_{time}",
                            time="20261205-083442") == "B1+20_punchy_7_20261205-083442.wav"
    assert naming.kick_name("7", 0.4, 55.0, -35.0, pattern="{word} {label}") == "punchy-7.wav"
    assert naming.kick_name("5513", 0.4, 55.0, -35.0, pattern=naming.KIT_PATTERN, suffix="") == "kit_A1_punchy_5513"
    assert "#" not in "".join(naming.kick_name("1", 0.3, midi_to_hz(m), -35.0) for m in range(24, 60))


@pytest.mark.parametrize("pattern, why", [
    ("", "empty"), ("x" * 101, "longer than 100"), ("a/{label}", "not a path"), ("..{label}", "not a path"),
    ("{label", "expected '}'"), ("{foo}_{label}", "unknown field 'foo'"), ("kick_{note}_{word}", "needs {label}"),
    ("{label!r}", "no conversions"), ("{label:>8}", "no format spec"), (None, "not text"),
])
def test_bad_patterns(pattern, why):
    with pytest.raises(ValueError, match="name pattern") as e:
        naming.check_pattern(pattern)
    assert why in str(e.value)
    with pytest.raises(ValueError):
        naming.kick_name("1", 0.3, 55.0, -30.0, pattern=pattern)


@pytest.mark.parametrize("pattern", [naming.DEFAULT_PATTERN, naming.TIME_PATTERN, naming.KIT_PATTERN,
                                     "{note}{cents}_{word}_{label}_{time}", "{word} {label}", " {label}-",
                                     "-{cents}_{label}", "x.{note}.{label}", "{label}", "{note}_{label}",
                                     "a b{cents} {note}{word}{label}."])
def test_name_regex_matches_every_name_its_pattern_makes(pattern):
    """Whatever a kick measures (a pitch or none, any word) and whatever its label, the name kick_name makes from a
    pattern, and that name with the writer's collision suffix, match name_regex(pattern): retention knows them."""
    rx = naming.name_regex(pattern)
    for pitch in (None, 55.0, 61.7, 30.1, 200.0, float("nan")):
        for label in ("5513", "v12", "t250", "m5", "0"):
            for decay, click in ((0.1, -40.0), (0.9, -10.0), (0.4, -35.0), (0.3, -50.0), (0.9, -40.0)):
                name = naming.kick_name(label, decay, pitch, click, pattern=pattern, time="20261205-083442")
                assert rx.match(name) and rx.match(name.removesuffix(".wav") + "-12.wav"), (pattern, name, rx)


def test_name_regex_matches_no_other_name():
    rx = naming.name_regex(naming.DEFAULT_PATTERN)
    assert rx.match("kick_A1_short_5513.wav") and rx.match("kick_short_5513-2.wav") and rx.match("kick_Db1_long_v7.wav")
    for other in ("kick_best_ever.wav", "kick_20240101-000000_5.wav", "kick_A1_short_5.wav.part", "kick_A1_short_5",
                  "../kick_A1_short_5.wav", "kick_A1_short_5.wav\n", "kick_A1_loud_5.wav", "my_kick_A1_short_5.wav"):
        assert not rx.match(other), other
    assert naming.name_regex(naming.TIME_PATTERN).match("kick_20240101-000000_5-3.wav")
    assert naming.name_regex(naming.KIT_PATTERN, suffix="").match("kit_A1_punchy_5-2")
    assert not naming.name_regex(naming.KIT_PATTERN, suffix="").match("kit_A1_punchy_5.wav")


def _kick(pitch: float, decay: float, click: float) -> np.ndarray:
    """A sine body with an exponential decay reaching -60 dB at `decay` s, plus `click` (linear) of a 3 ms burst of
    noise high-passed by differencing."""
    t = np.arange(int(SR * 1.5)) / SR
    body = np.sin(2 * np.pi * pitch * t) * np.exp(-t * 6.9 / decay)
    noise = np.diff(np.random.default_rng(0).standard_normal(len(t) + 1)) * np.exp(-t / 0.003)
    return (body + click * noise).astype(np.float32)


@pytest.mark.parametrize("pitch, decay, click, word", [
    (45.0, 1.8, 0.0, "boomy"), (70.0, 1.8, 0.0, "long"), (55.0, 0.25, 0.0, "short"), (55.0, 0.6, 0.0, "soft"),
    (55.0, 0.6, 2.0, "clicky"), (55.0, 0.6, 0.05, "punchy"),
])
def test_measured_kicks_get_their_word(pitch, decay, click, word):
    decay_s, pitch_hz, click_db = measure(torch.from_numpy(_kick(pitch, decay, click))[None], SR)[0].tolist()
    assert naming.character_word(decay_s, pitch_hz, click_db) == word, (decay_s, pitch_hz, click_db)
    assert abs(pitch_hz - pitch) < 2.0
