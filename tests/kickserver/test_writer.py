"""The WAV drop: format, tags, naming, atomic rename, failed writes, retention, stray temp files."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kickserver.writer import LEDGER, NAME_RE, KickInfo, KickWriter, WriteError
from trainer.generator import finish_kick

SR = 48000


def kick(n: int = 4800, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    x = np.sin(2 * np.pi * 55 * t) * np.exp(-t * 30) + 0.01 * rng.standard_normal(n) + 0.2  # with DC
    return finish_kick(x, SR)


def info(seed: int = 7, **kw) -> KickInfo:
    return KickInfo(model="tiny", seed=seed, steps=5, sampler="ddim", controls={"decay": 0.25}, **kw)


def test_format_tags_and_levels(tmp_path):
    w = KickWriter(tmp_path, SR)
    path = w.write(kick(), info())
    assert path.is_absolute() and NAME_RE.match(path.name) and path.name.endswith("_7.wav")
    i = sf.info(path)
    assert (i.samplerate, i.channels, i.subtype, i.format, i.frames) == (SR, 1, "PCM_24", "WAV", 4800)
    x, _ = sf.read(path, dtype="float64")
    assert np.isfinite(x).all()
    assert abs(20 * np.log10(np.abs(x).max()) + 1.0) < 0.01
    assert abs(x.mean()) < 0.01  # DC removed by finish_kick (0.2 before; the fade leaves a trace)
    assert x[-1] == 0.0
    meta = sf.SoundFile(path).copy_metadata()
    assert meta["software"].startswith("kickserver")
    assert meta["comment"] == "model=tiny seed=7 steps=5 sampler=ddim decay=0.2500"
    assert os.listdir(tmp_path) == [path.name]  # no temp file or ledger left


def test_never_overwrites_counter_on_collision(tmp_path):
    w = KickWriter(tmp_path, SR)
    paths = [w.write(kick(seed=i), info(seed=3)) for i in range(3)]
    assert len({p.name for p in paths}) == 3
    stems = sorted(p.name for p in paths)
    base = stems[0].removesuffix(".wav")
    if all(p.name.startswith(base) for p in paths):  # written within the same second
        assert {p.name for p in paths} == {f"{base}.wav", f"{base}-2.wav", f"{base}-3.wav"}


def test_clipping_and_nan_are_refused_or_clamped(tmp_path):
    w = KickWriter(tmp_path, SR)
    with pytest.raises(WriteError):
        w.write(np.array([0.0, np.nan, 0.1], dtype=np.float32), info())
    p = w.write(np.array([0.0, 1.5, -2.0, 0.0], dtype=np.float32), info())
    x, _ = sf.read(p)
    assert np.abs(x).max() <= 1.0
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_failed_write_leaves_no_temp_file(tmp_path, monkeypatch, where):
    w = KickWriter(tmp_path, SR)

    def fail(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(f"kickserver.writer.os.{where}", fail)
    with pytest.raises(WriteError, match="No space left"):
        w.write(kick(), info())
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_stray_temp_files_are_removed_at_start_only_ours(tmp_path):
    (tmp_path / ".kick_20240101-000000_5.wav.123.part").write_bytes(b"RIFF")
    (tmp_path / ".kickserver-ledger.json.abc_12.part").write_bytes(b"{")
    keep = [".other.part", "mine.wav", ".kick_notes.txt"]
    for k in keep:
        (tmp_path / k).write_bytes(b"x")
    KickWriter(tmp_path, SR)
    assert sorted(os.listdir(tmp_path)) == sorted(keep)


def test_retention_removes_oldest_of_ours_only(tmp_path):
    foreign = tmp_path / "kick_20200101-000000_1.wav"  # looks like ours, but the server did not write it
    sf.write(foreign, kick(), SR, subtype="PCM_24")
    user = tmp_path / "my-favourite.wav"
    user.write_bytes(b"x")
    w = KickWriter(tmp_path, SR, max_files=3)
    written = []
    for i in range(5):
        written.append(w.write(kick(seed=i), info(seed=100 + i)))
        w.prune()
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert foreign.exists() and user.exists()
    assert [p.exists() for p in written] == [False, False, True, True, True]
    assert len(left) == 5
    assert (tmp_path / LEDGER).is_file()
    # the ledger survives a restart: the next writer keeps pruning the same files
    w2 = KickWriter(tmp_path, SR, max_files=2)
    w2.write(kick(), info(seed=200))
    w2.prune()
    assert [p.exists() for p in written[2:]] == [False, False, True]
    assert foreign.exists() and user.exists()


def test_retention_by_size(tmp_path):
    w = KickWriter(tmp_path, SR, max_mb=0.03)  # each file is about 14.4 kB
    paths = []
    for i in range(4):
        paths.append(w.write(kick(seed=i), info(seed=i)))
        w.prune()
    assert [p.exists() for p in paths] == [False, False, True, True]


def test_no_ledger_without_retention(tmp_path):
    w = KickWriter(tmp_path, SR)
    w.write(kick(), info())
    w.prune()
    assert not (tmp_path / LEDGER).exists()


def test_rename_is_the_only_visible_event(tmp_path):
    """inotify via watchdog: the final name shows up as a move destination, never created/modified."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    events = []

    class H(FileSystemEventHandler):
        def on_any_event(self, event):
            if not event.is_directory:
                events.append((event.event_type, Path(event.src_path).name,
                               Path(getattr(event, "dest_path", "") or "x").name))

    obs = Observer()
    obs.schedule(H(), str(tmp_path), recursive=False)
    obs.start()
    try:
        time.sleep(0.1)
        w = KickWriter(tmp_path, SR)
        p = w.write(kick(), info())
        time.sleep(0.3)
    finally:
        obs.stop()
        obs.join(5)
    assert ("moved", next(e[1] for e in events if e[0] == "moved"), p.name) in events
    assert all(e[1].startswith(".") for e in events), events
