"""Kick files named by their sound, through a running daemon (the shipped kick-synth model): the note asked, else
the one measured, the character word of what the kick measures (kickmodel.naming), then the label that makes it
again, `-2` when the same sound and label come again; `name_pattern` (flag or config file) brings back the old
time-based names, and a bad pattern is refused at start with the field, the reason and the fix."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
from daemon_util import REPO, daemon_env, models_folder, start_daemon

from kickmodel.naming import character_word
from kickmodel.notes import midi_to_name, nearest_note

SYNTH = REPO / "kickserver" / "models" / "kick-synth.safetensors"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    with start_daemon(d, models_folder(d / "models", SYNTH), model="kick-synth") as daemon:
        yield daemon


def _done(daemon, *args, expect: int = 1) -> list[Path]:
    replies = daemon.send(*args, expect=expect, timeout=120)
    assert [a for a, _ in replies] == ["/kick/done"] * expect, replies
    return [Path(p[1]) for _, p in replies]


def _measured(path: Path) -> tuple[float, float, float]:
    """(pitch Hz, decay s, click dB) as the writer measured the kick (its tags)."""
    tags = dict(w.split("=", 1) for w in sf.SoundFile(path).comment.split() if "=" in w)
    return (float(tags["measured_pitch_hz"]), float(tags["measured_decay_s"]), float(tags["measured_click_db"]))


def _note(hz: float) -> str:
    return midi_to_name(nearest_note(hz)[0], flats=True)


def test_a_kick_is_named_by_the_note_asked_and_its_measured_character(daemon):
    first, again = _done(daemon, "/kick/generate", "seed", 5, "note", "Eb1", "id", 1), \
        _done(daemon, "/kick/generate", "seed", 5, "note", "Eb1", "id", 2)
    pitch, decay, click = _measured(first[0])
    word = character_word(decay, pitch, click)
    assert first[0].name == f"kick_Eb1_{word}_5.wav", first  # the note asked (the kick measures near it)
    assert again[0].name == f"kick_Eb1_{word}_5-2.wav", again  # the same sound and seed: the next free name
    assert first[0].parent == daemon.out_dir and first[0].is_file() and again[0].is_file()
    assert sf.SoundFile(first[0]).title == first[0].stem  # the title tag is the name


def test_a_kick_asked_no_pitch_is_named_by_the_note_it_measures(daemon):
    (path,) = _done(daemon, "/kick/generate", "seed", 6, "id", 3)
    pitch, decay, click = _measured(path)
    assert path.name == f"kick_{_note(pitch)}_{character_word(decay, pitch, click)}_6.wav", (path, pitch)


def test_variations_and_morphs_keep_their_labels(daemon):
    (source,) = _done(daemon, "/kick/generate", "seed", 7, "id", 4)
    (v,) = _done(daemon, "/kick/variation", source.name, "strength", 0.3, "seed", 41, "id", 5)
    assert re.fullmatch(r"kick_[A-G]b?\d_[a-z]+_v41\.wav", v.name), v
    morph = _done(daemon, "/kick/interpolate", "a", 7, "b", 8, "t", 0.5, "id", 6)
    assert re.fullmatch(r"kick_[A-G]b?\d_[a-z]+_t500\.wav", morph[0].name), morph


def test_name_pattern_brings_back_the_time_based_names(tmp_path):
    with start_daemon(tmp_path, models_folder(tmp_path / "models", SYNTH), model="kick-synth",
                      extra_args=["--name-pattern", "kick_{time}_{label}", "--max-files", "2"]) as d:
        paths = [p for seed in (5, 6, 7) for p in _done(d, "/kick/generate", "seed", seed)]
        assert all(re.fullmatch(rf"kick_\d{{8}}-\d{{6}}_{s}(-\d+)?\.wav", p.name) for p, s in zip(paths, (5, 6, 7))), \
            paths
        assert d.wait_for_log("retention removed 1 old kick(s)", timeout=10), d.stderr_text()  # it knows them
        assert not paths[0].exists() and paths[1].exists() and paths[2].exists()


def _serve(tmp_path: Path, *args: str, config: str = "") -> subprocess.CompletedProcess:
    cfg = tmp_path / "c.toml"
    cfg.write_text(config)
    return subprocess.run([sys.executable, "-m", "kickserver", "serve", "--config", str(cfg), "--device", "cpu",
                           "--models", str(tmp_path / "models"), "--out", str(tmp_path / "out"), "--port", "9",
                           *args], cwd=REPO, env=daemon_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,config,why", [
    (["--name-pattern", "kick_{foo}_{label}"], "", "unknown field 'foo'"),
    ([], 'name_pattern = "kick_{note}_{word}"\n', "it needs {label}"),
    (["--name-pattern", "kicks/{label}"], "", "a file name, not a path"),
])
def test_a_bad_name_pattern_is_refused_at_start_naming_the_field_the_reason_and_the_fix(tmp_path, args, config, why):
    r = _serve(tmp_path, *args, config=config)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "name_pattern: name pattern" in line and why in line, line
    assert "{note}, {word}, {label}, {cents}, {time}" in line, line  # the fields to use
    assert "default 'kick_{note}_{word}_{label}'" in line and "'kick_{time}_{label}'" in line, line  # the fix
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()  # refused before anything started
