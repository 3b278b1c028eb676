"""Variation sources: the path rules, one open, checks on the descriptor, decoding from that descriptor."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kickserver import sources
from kickserver.sources import SourceRefused, SourceTooBig, open_source, resolve_source


def _wav(path: Path, seconds: float = 0.2, rate: int = 8000, freq: float = 60.0) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32), rate, subtype="PCM_16")
    return path


@pytest.fixture
def tree(tmp_path):
    out, root, elsewhere = tmp_path / "out", tmp_path / "root", tmp_path / "elsewhere"
    for d in (out, root, elsewhere):
        d.mkdir()
    return out, root, elsewhere


def test_resolve_source(tree):
    out, root, elsewhere = tree
    (out / "a.wav").write_bytes(b"x")
    (root / "b.wav").write_bytes(b"x")
    (elsewhere / "c.wav").write_bytes(b"x")
    (out / "in.wav").symlink_to(out / "a.wav")
    (out / "escape.wav").symlink_to(elsewhere / "c.wav")
    (root / "sub").mkdir()
    (root / "sub" / "d.wav").write_bytes(b"x")
    assert resolve_source("a.wav", out, [root]) == (out / "a.wav").resolve()
    assert resolve_source("in.wav", out, [root]) == (out / "a.wav").resolve()
    assert resolve_source(str(out / "a.wav"), out, [root]) == (out / "a.wav").resolve()
    assert resolve_source(str(root / "sub" / "d.wav"), out, [root]) == (root / "sub" / "d.wav").resolve()
    for bad in ["escape.wav", "../elsewhere/c.wav", str(elsewhere / "c.wav"), str(root / ".." / "elsewhere" / "c.wav"),
                "sub/d.wav", "", ".", "..", "missing.wav", "b.wav", "a.wav\0"]:
        with pytest.raises(SourceRefused):
            resolve_source(bad, out, [root])


def test_a_sibling_folder_sharing_the_prefix_is_not_under_the_root(tmp_path):
    """`out-evil` starts with the string `out` but is not inside it: a string-prefix check would let it in."""
    out, evil = tmp_path / "out", tmp_path / "out-evil"
    out.mkdir()
    evil.mkdir()
    secret = _wav(evil / "secret.wav")
    _wav(out / "mine.wav")
    for source in (str(secret), str(out) + "-evil/secret.wav"):
        with pytest.raises(SourceRefused, match="file name in the output folder or a path under a read root"):
            open_source(source, out, [])
    (out / "hop.wav").symlink_to(secret)  # a link from out to out-evil: the real path is the sibling
    with pytest.raises(SourceRefused, match="links out of the output folder"):
        open_source("hop.wav", out, [])
    src = open_source("mine.wav", out, [])  # the folder itself still works
    src.close()
    assert not sources.within(evil / "secret.wav", out) and sources.within(out / "x" / "y.wav", out)


def test_decode_reads_the_descriptor_opened_at_the_check_not_the_path(tree):
    """After the check, the file is replaced by a link to an outside file: the worker still gets the original."""
    out, _, elsewhere = tree
    mine = _wav(out / "mine.wav", freq=50.0)
    outside = _wav(elsewhere / "outside.wav", freq=440.0)
    src = open_source("mine.wav", out, [])
    os.unlink(mine)
    mine.symlink_to(outside)  # the swap
    audio, rate = src.decode()
    assert src.closed
    want, _ = sf.read(outside, dtype="float32")
    orig = (0.5 * np.sin(2 * np.pi * 50.0 * np.arange(len(want)) / 8000)).astype(np.float32)
    assert rate == 8000 and audio.shape == want.shape
    assert np.abs(audio - orig).max() < 1e-3  # the original content (PCM_16 quantisation only)
    assert np.corrcoef(audio, want)[0, 1] < 0.5  # not the outside file
    with pytest.raises(SourceRefused, match="links out"):  # and a new request names the link: refused
        open_source("mine.wav", out, [])


def test_a_link_swapped_in_as_the_last_component_is_not_followed(tree, monkeypatch):
    """resolve, then swap before the open: O_NOFOLLOW refuses the link instead of reading through it."""
    out, _, elsewhere = tree
    mine = _wav(out / "mine.wav")
    outside = _wav(elsewhere / "outside.wav")
    real_resolve = sources.resolve_source

    def resolve_then_swap(*a, **k):
        p = real_resolve(*a, **k)
        os.unlink(mine)
        mine.symlink_to(outside)
        return p

    monkeypatch.setattr(sources, "resolve_source", resolve_then_swap)
    with pytest.raises(SourceRefused, match="cannot be opened"):
        open_source("mine.wav", out, [])


def test_a_folder_swapped_for_a_link_after_resolving_is_caught_on_the_descriptor(tree, monkeypatch):
    out, root, elsewhere = tree
    (root / "kit").mkdir()
    _wav(root / "kit" / "k.wav")
    (elsewhere / "kit").mkdir()
    _wav(elsewhere / "kit" / "k.wav")
    real_resolve = sources.resolve_source

    def resolve_then_swap(*a, **k):
        p = real_resolve(*a, **k)
        os.rename(root / "kit", root / "kit-old")
        (root / "kit").symlink_to(elsewhere / "kit")  # an intermediate component now leads out
        return p

    monkeypatch.setattr(sources, "resolve_source", resolve_then_swap)
    with pytest.raises(SourceRefused, match="links out"):
        open_source(str(root / "kit" / "k.wav"), out, [root])


def _opens_quickly(fn, seconds=30.0):
    """Run fn in a thread; fail (instead of hanging the run) if it does not return within `seconds`: an open that
    blocks (a FIFO with no writer) never returns, so a generous bound tells it apart whatever the machine's load."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"blocked for more than {seconds} s"
    return box, time.monotonic() - t0


def test_a_fifo_is_refused_without_blocking(tree):
    out, _, _ = tree
    os.mkfifo(out / "pipe.wav")
    box, _ = _opens_quickly(lambda: open_source("pipe.wav", out, []))
    assert isinstance(box.get("error"), SourceRefused), box
    assert "is a FIFO, not a regular file" in str(box["error"])


def test_a_fifo_swapped_in_after_the_check_is_never_read(tree):
    out, _, _ = tree
    mine = _wav(out / "mine.wav")
    src = open_source("mine.wav", out, [])
    os.unlink(mine)
    os.mkfifo(mine)
    box, _ = _opens_quickly(src.decode)
    assert "error" not in box and box["value"][1] == 8000  # decoded from the file opened before the swap


def test_devices_sockets_and_folders_are_refused(tree):
    out, _, _ = tree
    box, _ = _opens_quickly(lambda: open_source("/dev/zero", out, [Path("/dev")]))
    assert isinstance(box.get("error"), SourceRefused) and "is a device, not a regular file" in str(box["error"])
    (out / "dir.wav").mkdir()
    with pytest.raises(SourceRefused, match="is a folder, not a regular file"):
        open_source("dir.wav", out, [])
    path = out / "sock.wav"
    if len(os.fsencode(str(path))) < 100:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.bind(str(path))
            with pytest.raises(SourceRefused, match="cannot be opened"):
                open_source("sock.wav", out, [])
        finally:
            s.close()


def test_long_or_large_sources_are_refused_from_the_descriptor(tree, monkeypatch):
    out, _, _ = tree
    open_source(str(_wav(out / "limit.wav", 30.0)), out, []).close()
    _wav(out / "long.wav", 31.0)
    with pytest.raises(SourceTooBig, match=r"source long.wav is 31.0 s long; at most 30 s"):
        open_source("long.wav", out, [])
    (out / "junk.wav").write_bytes(b"RIFF....WAVEjunk")
    with pytest.raises(SourceRefused, match="cannot use source junk.wav"):
        open_source("junk.wav", out, [])
    (out / "empty.wav").write_bytes(b"")
    with pytest.raises(SourceRefused, match="empty file"):
        open_source("empty.wav", out, [])
    monkeypatch.setattr(sources, "MAX_SOURCE_BYTES", 1 << 10)
    with pytest.raises(SourceTooBig, match=r"source limit.wav is 0 MB on disk; at most 0 MB"):
        open_source("limit.wav", out, [])


def test_bounds_are_checked_again_when_decoding(tree):
    """The same file (same inode) grows in place between the check and the decode: the decode refuses it."""
    out, _, _ = tree
    short = _wav(out / "grows.wav", 1.0)
    src = open_source("grows.wav", out, [])
    data = _wav(out / "tmp-long.wav", 40.0).read_bytes()
    with open(short, "r+b") as f:  # rewritten in place: the descriptor sees the new content
        f.write(data)
    with pytest.raises(SourceTooBig, match="40.0 s long"):
        src.decode()
    assert src.closed


def test_decode_mixes_to_mono_and_closes(tree):
    out, _, _ = tree
    t = np.arange(800) / 8000
    stereo = np.stack([np.sin(2 * np.pi * 60 * t), np.zeros_like(t)], axis=1).astype(np.float32) * 0.5
    sf.write(out / "st.wav", stereo, 8000, subtype="FLOAT")
    src = open_source("st.wav", out, [])
    fd = src._fd
    audio, rate = src.decode()
    assert audio.dtype == np.float32 and audio.ndim == 1 and rate == 8000
    assert np.allclose(audio, stereo.mean(axis=1), atol=1e-6)
    with pytest.raises(OSError):
        os.fstat(fd)  # the descriptor is closed
    with pytest.raises(sources.SourceError, match="already read"):
        src.decode()
