"""The atomic write itself: a reader sees the old file or the whole new one, never a mix, a truncated
file or a temp file left behind, whatever fails on the way (checkpoints, the ledger, artifacts and unit
files all rely on it)."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time

import pytest
from inotify_util import InotifyWatch

from kickmodel import fsutil
from kickmodel.fsutil import atomic_write, atomic_write_bytes, clean_stale_temp_files

OLD = b"old:" + b"o" * 4096
CHUNK = b"n" * 65536


def _fail(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_new_file_whole_with_its_mode_and_no_temp(tmp_path):
    target = tmp_path / "a.bin"
    atomic_write_bytes(target, b"hello")
    assert target.read_bytes() == b"hello"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # readable by others, not mkstemp's 0600
    atomic_write_bytes(target, b"again", mode=0o600)
    assert target.read_bytes() == b"again" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["a.bin"]


def test_a_write_that_fails_midway_leaves_the_old_file(tmp_path):
    """The writer callback dies after half the new content: the final name still holds the old bytes."""
    target = tmp_path / "ckpt.pt"
    target.write_bytes(OLD)

    def half_then_crash(f):
        f.write(CHUNK)
        f.flush()
        raise RuntimeError("killed midway")

    with pytest.raises(RuntimeError, match="killed midway"):
        atomic_write(target, half_then_crash)
    assert target.read_bytes() == OLD
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # the temp file is gone


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_a_failing_fsync_or_rename_leaves_the_old_file(tmp_path, monkeypatch, where):
    target = tmp_path / "ledger.json"
    target.write_bytes(OLD)
    monkeypatch.setattr(fsutil.os, where, _fail)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(target, CHUNK * 4)
    monkeypatch.undo()
    assert target.read_bytes() == OLD
    assert os.listdir(tmp_path) == ["ledger.json"]


def test_interrupt_leaves_no_temp_file(tmp_path):
    """KeyboardInterrupt (Ctrl-C during a checkpoint) is not an Exception: the temp file still goes."""
    target = tmp_path / "x"

    def interrupted(f):
        f.write(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)
    assert os.listdir(tmp_path) == []


def test_data_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    """Durability: the file's data reaches the disk before its name does, then the folder is synced."""
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        return real_fsync(fd)

    def replace(src, dst):
        calls.append("replace")
        return real_replace(src, dst)

    monkeypatch.setattr(fsutil.os, "fsync", fsync)
    monkeypatch.setattr(fsutil.os, "replace", replace)
    atomic_write_bytes(tmp_path / "a", b"data")
    monkeypatch.undo()
    assert calls == ["fsync-file", "replace", "fsync-dir"], calls


def test_a_reader_polling_during_a_slow_write_sees_old_or_new_only(tmp_path):
    """A reader (a DAW, the daemon's model watcher, a resumed run) reads the final name over and over
    while a 2 MB write goes on in small pieces: every read is the complete old or the complete new file."""
    target = tmp_path / "model.safetensors"
    target.write_bytes(OLD)
    new = CHUNK * 32
    done = threading.Event()
    seen: dict[str, int] = {}

    def reader():
        while not done.is_set():
            try:
                data = target.read_bytes()
            except FileNotFoundError:
                data = None
            kind = "old" if data == OLD else "new" if data == new else "missing" if data is None else \
                f"other ({len(data)} bytes)"
            seen[kind] = seen.get(kind, 0) + 1

    def slow(f):
        for i in range(0, len(new), len(CHUNK)):
            f.write(new[i:i + len(CHUNK)])
            f.flush()
            time.sleep(0.003)

    t = threading.Thread(target=reader)
    t.start()
    try:
        time.sleep(0.02)
        atomic_write(target, slow)
        time.sleep(0.02)
    finally:
        done.set()
        t.join(10)
    assert set(seen) == {"old", "new"}, seen
    assert seen["old"] >= 5  # the reader did read while the write went on
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_watcher_sees_the_final_name_only_as_a_move(tmp_path):
    """inotify, read by an independent tool: the final name never shows as created or written."""
    target = tmp_path / "unit.service"
    target.write_bytes(OLD)
    with InotifyWatch(tmp_path) as w:
        atomic_write_bytes(target, CHUNK)
    assert w.of("unit.service") == ["MOVED_TO"], w.events
    others = {n for _, n in w.events if n != "unit.service"}
    assert others and all(n.startswith(".unit.service.") and n.endswith(".part") for n in others), w.events
    assert target.read_bytes() == CHUNK


def test_stale_temp_sweep_removes_only_part_files_with_the_prefix(tmp_path):
    for name in (".a.safetensors.x1.part", ".b.pt.y.part", "keep.part", ".keep", "model.safetensors"):
        (tmp_path / name).write_bytes(b"x")
    removed = clean_stale_temp_files(tmp_path, prefix=".a.")
    assert [p.name for p in removed] == [".a.safetensors.x1.part"]
    removed = clean_stale_temp_files(tmp_path)
    assert [p.name for p in removed] == [".b.pt.y.part"]
    assert sorted(os.listdir(tmp_path)) == [".keep", "keep.part", "model.safetensors"]
    assert clean_stale_temp_files(tmp_path / "missing") == []
