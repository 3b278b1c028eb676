"""What a kick from the kit map says of its making in its comment, read back (kickmodel.wavfile.made_on_map): what
`/kick/locate` makes the kick again from before it believes it (tests/kickserver/test_locate_snap.py). A comment comes
from a file anyone may hand over: whatever is not a map kick's comment reads as nothing."""

from __future__ import annotations

import numpy as np
import pytest

from kickmodel.wavfile import KickInfo, MapMade, Measured, made_on_map


def map_info(**kw) -> KickInfo:
    fields = {"model": "kick-synth", "seed": 77, "steps": None, "sampler": None, "controls": {"pitch_hz": 55.0},
              "map_x": np.float32(0.3), "map_y": np.float32(0.7), "spread": np.float32(0.2)} | kw
    return KickInfo(**fields)


def test_a_map_kicks_comment_reads_back_as_what_makes_it_again():
    info = map_info(measured=Measured(pitch_hz=55.02, decay_s=0.41, click_db=-21.3))
    made = made_on_map(info.comment())
    assert made == MapMade("kick-synth", float(np.float32(0.3)), float(np.float32(0.7)), float(np.float32(0.2)), 77,
                           {"pitch_hz": 55.0})


@pytest.mark.parametrize("comment", [
    None, "", 42,
    "model=kick-synth seed=77",  # not a map kick
    map_info().comment() + " source=a.wav strength=0.5000",  # a variation's: depends on another file
    map_info().comment() + " t=0.5000",
    map_info().comment() + " seed=78",  # a name twice
    map_info().comment() + " junk",  # not name=value
    map_info().comment().replace("map_x=0.3", "map_x=nan"),
    map_info().comment().replace("pitch_hz=55.0000", "pitch_hz=inf"),
    map_info().comment().replace("seed=77", "seed=-1"),
    map_info().comment().replace("seed=77", "seed=7.5"),
    map_info().comment() + " x=" + "9" * 5000,  # longer than any kick's comment
])
def test_a_comment_that_is_not_a_map_kicks_reads_as_none(comment):
    assert made_on_map(comment) is None
