"""Issue 32, the trainer's items, each through the CLI a user calls (`kicktrain ...` / `python -m trainer ...`):
10 a folder that links back to its parent, 11 a poisoned fit cache and a huge file hashed before its header,
12 a fine-tune's length, time budget, rising validation and best export, 14 the kick-synth route's progress and
kit maps, 15 `kicktrain eval` on a small folder, its s/kick and its baseline's name."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

from trainer.cli import main as kicktrain
from trainer.synth import synth_batch

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]


def _kicks(folder: Path, n: int, seed: int = 5) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, clip in enumerate(synth_batch(n, seed=seed)):
        sf.write(folder / f"k{i}.wav", clip, 44100, subtype="PCM_16")
    return folder


@pytest.fixture(scope="module")
def kicks(tmp_path_factory) -> Path:
    return _kicks(tmp_path_factory.mktemp("kicks"), 8)


# ------------------------------------------------------------------------------------------ 10: links to a parent


def test_prepare_on_a_folder_linking_twice_to_its_parent_ends(tmp_path):
    """Issue 32 item 10: two links to the parent inside the training folder: prepare walked 893,594 folders in 30 s
    and never ended (each level doubles the paths). Each real folder is walked once: it ends at once with the 3
    kicks, and says what it left out."""
    data = _kicks(tmp_path / "kicks", 3)
    sub = data / "sub"
    sub.mkdir()
    os.symlink("..", sub / "up1")
    os.symlink("..", sub / "up2")
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "trainer", "prepare", str(data), "--preset", "tiny",
                               "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=90,
                              cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail("kicktrain prepare did not end in 90 s on a folder with two links to its parent")
    assert done.returncode == 0, done.stderr
    assert "3 clips" in done.stdout
    assert "already walked" in done.stdout + done.stderr, done.stdout  # the links are named, not silently dropped
    assert time.monotonic() - t0 < 90


def test_scan_bounds_depth_and_folder_count(tmp_path, monkeypatch):
    """Issue 32 item 10: a real folder tree deeper than the bound is cut there with a log line; more folders than the
    bound is a one-line error (exit 2) naming the bound, not an endless walk."""
    from trainer import data as D

    deep = _kicks(tmp_path / "deep", 1)
    d = deep
    for i in range(6):
        d = d / f"d{i}"
        d.mkdir()
    _kicks(d, 1, seed=9)  # 6 levels down
    monkeypatch.setattr(D, "MAX_SCAN_DEPTH", 3)
    lines: list[str] = []
    found = D.scan_audio([deep], log=lines.append)
    assert len(found) == 1 and any("deeper than 3" in m for m in lines), lines
    monkeypatch.setattr(D, "MAX_SCAN_DEPTH", 64)
    monkeypatch.setattr(D, "MAX_SCAN_FOLDERS", 4)
    rc = kicktrain(["prepare", str(deep), "--preset", "tiny", "--cache", str(tmp_path / "c")])
    assert rc == 2


# ------------------------------------------------------------------------------------------ 11: header before hash


def test_a_huge_file_is_refused_from_its_size_and_header_before_it_is_hashed(kicks, tmp_path, monkeypatch, capsys):
    """Issue 32 item 11: training hashed every file in full before checking its header (a 10.6 GB sparse file: 47 s).
    A 3 GB sparse file (a valid WAV header, then holes) and a WAV whose header gives 100 Hz are skipped with one line
    each, and neither is read past its header: sha256_file is never called on them."""
    from trainer import data as D

    folder = tmp_path / "kicks"
    folder.mkdir()
    for f in kicks.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    big = folder / "big.wav"
    big.write_bytes((kicks / "k0.wav").read_bytes())
    with open(big, "r+b") as fh:
        fh.truncate(3 << 30)  # sparse: no disk used
    hour = folder / "hour.wav"
    with sf.SoundFile(str(hour), "w", samplerate=44100, channels=1, subtype="PCM_16") as snd:
        snd.write(synth_batch(1, seed=1)[0])
    raw = bytearray(hour.read_bytes())
    raw[24:28] = (100).to_bytes(4, "little")  # a sample rate outside 1000..384000 Hz
    hour.write_bytes(bytes(raw))
    hashed: list[str] = []
    real = D.sha256_file
    monkeypatch.setattr(D, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    assert kicktrain(["prepare", str(folder), "--preset", "tiny", "--cache", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "big.wav" not in hashed and "hour.wav" not in hashed, hashed
    assert f"skipped {big}" in out and f"skipped {hour}" in out and "8 clips" in out, out
