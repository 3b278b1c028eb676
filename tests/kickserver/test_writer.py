"""The WAV drop: format, tags, naming (by the sound, or by the time-based pattern), atomic rename, failed writes,
retention (kicks and kit folders), stray temp files and kit temp folders."""

from __future__ import annotations

import errno
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from inotify_util import InotifyWatch

from kickmodel.dsp import finish_kick
from kickmodel.naming import TIME_PATTERN, name_regex
from kickserver.writer import LEDGER, KickInfo, KickWriter, WriteError

NAME_RE = name_regex(TIME_PATTERN)  # the time-based names these tests ask for where they freeze the clock

SR = 48000


def kick(n: int = 4800, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    x = np.sin(2 * np.pi * 55 * t) * np.exp(-t * 30) + 0.01 * rng.standard_normal(n) + 0.2  # with DC
    return finish_kick(x, SR)


def info(seed: int = 7, **kw) -> KickInfo:
    return KickInfo(model="tiny", seed=seed, steps=5, sampler="ddim", controls={"decay": 0.25}, **kw)


def asked(comment: str) -> str:
    """A kick's comment without what the writer measured (measured_pitch_hz=... after what was asked)."""
    return re.sub(r" measured_\S+", "", comment)


def test_format_tags_and_levels(tmp_path):
    w = KickWriter(tmp_path, SR)
    path = w.write(kick(), info())
    assert path.is_absolute() and path.name == "kick_A1_short_7.wav"  # a 55 Hz sine, 0.1 s, no click
    i = sf.info(path)
    assert (i.samplerate, i.channels, i.subtype, i.format, i.frames) == (SR, 1, "PCM_24", "WAV", 4800)
    x, _ = sf.read(path, dtype="float64")
    assert np.isfinite(x).all()
    assert abs(20 * np.log10(np.abs(x).max()) + 1.0) < 0.01
    assert abs(x.mean()) < 0.01  # DC removed by finish_kick (0.2 before; the fade leaves a trace)
    assert x[-1] == 0.0
    meta = sf.SoundFile(path).copy_metadata()
    assert meta["software"].startswith("kickserver")
    # what was asked, then what the kick measures; a smpl chunk at the measured pitch (no pitch_hz was asked)
    asked, measured = meta["comment"].split(" measured_pitch_hz=")
    assert asked == "model=tiny seed=7 steps=5 sampler=ddim decay=0.2500"
    assert re.fullmatch(r"[\d.]+ measured_note=[A-G]b?-?\d[+-]\d+c measured_decay_s=[\d.]+ measured_click_db=-?[\d.]+",
                        measured), measured
    raw = path.read_bytes()
    assert 0 < raw.find(b"smpl") < raw.find(b"data")
    assert os.listdir(tmp_path) == [path.name]  # no temp file or ledger left


class FrozenClock:
    """Stands in for the writer's `time` module: the wall clock stops at `now` (local time), the rest is real."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def localtime(self, secs: float | None = None) -> time.struct_time:
        return time.localtime(self.now if secs is None else secs)

    def strftime(self, fmt: str, t: time.struct_time | None = None) -> str:
        return time.strftime(fmt, self.localtime() if t is None else t)

    def __getattr__(self, name: str):
        return getattr(time, name)


FROZEN = time.mktime((2024, 1, 2, 3, 4, 5, 0, 0, -1))  # 2024-01-02 03:04:05 local time


@pytest.fixture
def frozen(monkeypatch):
    import kickserver.writer as wmod

    monkeypatch.setattr(wmod, "time", FrozenClock(FROZEN))
    return "kick_20240102-030405"


def test_never_overwrites_counter_on_collision(tmp_path, frozen):
    """Twelve kicks with one seed in one second: the name, then -2, -3, ... -12 in order, each file its own."""
    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    clips = [kick(seed=i) for i in range(12)]
    paths = [w.write(c, info(seed=3)) for c in clips]
    assert [p.name for p in paths] == [f"{frozen}_3.wav"] + [f"{frozen}_3-{n}.wav" for n in range(2, 13)]
    for p, c in zip(paths, clips):  # nothing was overwritten: each name holds the kick written to it
        x, _ = sf.read(p, dtype="float32")
        assert np.abs(x - c).max() < 1e-5, p.name
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in paths)


def test_counter_skips_names_taken_by_others(tmp_path, frozen):
    """Names already in the folder (the user's, another server's, a link) are never reused or replaced."""
    for name in (f"{frozen}_9.wav", f"{frozen}_9-2.wav", f"{frozen}_9-4.wav"):
        (tmp_path / name).write_bytes(b"theirs")
    (tmp_path / f"{frozen}_9-3.wav").symlink_to(tmp_path / "nowhere")  # a dangling link is taken too
    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    assert w.write(kick(), info(seed=9)).name == f"{frozen}_9-5.wav"
    assert w.write(kick(), info(seed=9)).name == f"{frozen}_9-6.wav"
    assert all((tmp_path / n).read_bytes() == b"theirs" for n in (f"{frozen}_9.wav", f"{frozen}_9-2.wav"))


def test_riff_info_tags_as_documented(tmp_path, frozen):
    """docs/daemon.md: software (kickserver <version>), artist (kickserver), title (the file name without
    .wav), date, comment (model, seed, steps, sampler, controls; a variation adds source and strength)."""
    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    p = w.write(kick(), KickInfo(model="tiny", seed=3, steps=5, sampler="ddim", controls={"pitch": 0.2, "decay": 1},
                                 software="kickserver 9.9"))
    meta = sf.SoundFile(p).copy_metadata()
    assert meta["software"].split(" (libsndfile")[0] == "kickserver 9.9"  # libsndfile appends its own name
    assert meta["artist"] == "kickserver"
    assert meta["title"] == p.name.removesuffix(".wav") == f"{frozen}_3"
    assert meta["date"] == "2024-01-02"
    assert asked(meta["comment"]) == "model=tiny seed=3 steps=5 sampler=ddim decay=1.0000 pitch=0.2000"
    v = w.write(kick(), KickInfo(model="tiny", seed=4, steps=5, sampler="ddim", controls={},
                                 source=str(tmp_path / "src.wav"), strength=0.3))
    meta = sf.SoundFile(v).copy_metadata()
    assert asked(meta["comment"]) == "model=tiny seed=4 steps=5 sampler=ddim source=src.wav strength=0.3000"
    assert meta["title"] == v.name.removesuffix(".wav")


def test_interpolated_kicks_are_named_and_tagged_by_their_place_and_ends(tmp_path, frozen):
    """An inner kick (no seed regenerates it) is named by t in thousandths; an end that is a seed by that seed.
    Tags record a, b (a seed, or a file's name) and t. Retention and the stray-temp cleanup know the names."""
    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN, max_files=2)
    mid = w.write(kick(), KickInfo(model="tiny", seed=-1, steps=5, sampler="ddim", controls={}, a=7,
                                   b=str(tmp_path / "src.wav"), t=0.25))
    assert mid.name == f"{frozen}_t250.wav" and NAME_RE.match(mid.name)
    assert asked(sf.SoundFile(mid).copy_metadata()["comment"]) == (
        "model=tiny steps=5 sampler=ddim a=7 b=src.wav t=0.2500")
    end = w.write(kick(), KickInfo(model="tiny", seed=-1, steps=None, sampler=None, controls={}, a="x.wav", b=3,
                                   t=1.0))
    assert end.name == f"{frozen}_t1000.wav" and NAME_RE.match(end.name)
    first = w.write(kick(), KickInfo(model="tiny", seed=7, steps=5, sampler="ddim", controls={}, a=7, b=9, t=0.0))
    assert first.name == f"{frozen}_7.wav"
    assert asked(sf.SoundFile(first).copy_metadata()["comment"]) == (
        "model=tiny seed=7 steps=5 sampler=ddim a=7 b=9 t=0.0000")
    w.prune()
    assert not mid.exists() and end.exists() and first.exists()  # the oldest of three went
    (tmp_path / f".{frozen}_t500.wav.123.part").write_bytes(b"RIFF")
    KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    assert not (tmp_path / f".{frozen}_t500.wav.123.part").exists()


def test_a_variation_is_named_by_v_and_its_seed_and_retention_knows_the_name(tmp_path, frozen):
    """A variation's seed is its noise, not one /kick/generate turns into it: its name says `v<seed>`,
    its tags the seed, source and strength that make it again. Retention and the stray-temp cleanup know it."""
    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN, max_files=1)
    v = w.write(kick(), info(seed=41, source=str(tmp_path / "src.wav"), strength=0.4))
    assert v.name == f"{frozen}_v41.wav" and NAME_RE.match(v.name)
    assert asked(sf.SoundFile(v).copy_metadata()["comment"]) == (
        "model=tiny seed=41 steps=5 sampler=ddim decay=0.2500 source=src.wav strength=0.4000")
    later = w.write(kick(), info(seed=41))
    assert later.name == f"{frozen}_41.wav"
    w.prune()
    assert not v.exists() and later.exists()  # in the ledger like any kick: the oldest went
    (tmp_path / f".{frozen}_v42.wav.123.part").write_bytes(b"RIFF")
    KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    assert not (tmp_path / f".{frozen}_v42.wav.123.part").exists()


def test_clipping_and_nan_are_refused_or_clamped(tmp_path):
    w = KickWriter(tmp_path, SR)
    with pytest.raises(WriteError):
        w.write(np.array([0.0, np.nan, 0.1], dtype=np.float32), info())
    p = w.write(np.array([0.0, 1.5, -2.0, 0.0], dtype=np.float32), info())
    x, _ = sf.read(p)
    assert np.abs(x).max() <= 1.0
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []


@pytest.mark.parametrize("where", ["os.write", "os.fsync", "publish"])
def test_failed_write_leaves_no_temp_file(tmp_path, monkeypatch, where):
    w = KickWriter(tmp_path, SR)

    def fail(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(f"kickserver.writer.{where}", fail)
    with pytest.raises(WriteError, match=f"no space left in {tmp_path}$"):
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


def test_kicks_are_named_by_their_sound_the_note_asked_first(tmp_path):
    """The default pattern: the note of the pitch asked (a pitch_hz control, which a note also becomes), else of the
    pitch measured, the character word of what the kick measures, the label; the same sound and seed again: -2.
    A ledger that names a file no pattern of the writer makes is not followed (the user's file stays)."""
    w = KickWriter(tmp_path, SR, max_files=2)
    asked = KickInfo(model="tiny", seed=7, steps=5, sampler="ddim", controls={"pitch_hz": 41.2034})
    names = [w.write(kick(), info()).name, w.write(kick(), info()).name, w.write(kick(), asked).name]
    assert names == ["kick_A1_short_7.wav", "kick_A1_short_7-2.wav", "kick_E1_short_7.wav"]
    w.prune()
    assert not (tmp_path / names[0]).exists() and w.written == names[1:]
    user = tmp_path / "kick_my_best.wav"
    user.write_bytes(b"x")
    (tmp_path / LEDGER).write_text('{"version": 1, "files": [{"name": "kick_my_best.wav", "size": 1, "time": 0}]}')
    w2 = KickWriter(tmp_path, SR, max_files=1)
    assert w2.written == []
    w2.write(kick(), info(seed=8))
    w2.prune()
    assert user.exists()


def test_a_kick_is_named_as_its_tags_read_at_a_threshold(tmp_path):
    """A click measured -45.04 dB is tagged -45.0 and named as that reads (`punchy`: not under SOFT_DB, -45), and one
    of -25.02 (tagged -25.0) `clicky`: a name and its tags never disagree (version 2's kick-synth made both)."""
    from kickmodel.wavfile import Measured

    w = KickWriter(tmp_path, SR)
    for click, word in ((-45.0429, "punchy"), (-25.015, "clicky"), (-45.06, "soft")):
        got = w.final_name(info(seed=5, measured=Measured(38.72, 0.3647, click)), 38.72)
        assert got == f"kick_Eb1_{word}_5.wav", (click, got)
    # boomy is under BOOMY_HZ (50): a pitch measured 49.996 is tagged 50.00, so the kick is long, not boomy
    for pitch, word in ((49.996, "long"), (49.994, "boomy")):
        got = w.final_name(info(seed=5, measured=Measured(pitch, 0.7, -30.0)), pitch)
        assert got == f"kick_G1_{word}_5.wav", (pitch, got)


def _kit(name: str = "kit_A1_punchy_5", hits: int = 2):
    from kickserver.kitfiles import Kit, KitHit

    return Kit(name=name, note=33, sample_rate=SR, hits=[KitHit(kick(seed=i) * 0.5 ** i, i, 0) for i in range(hits)])


def test_a_kit_folder_is_one_ledger_entry_of_its_whole_size_and_goes_as_a_whole(tmp_path, caplog):
    """write_kit: one folder (-2 when the name is taken), one ledger entry of every file's size; pruned oldest first
    with the kicks, by renaming it out of sight first (no visible name loses a file while others stay), logged in the
    kick pruning's line; a kit's name in the ledger that is a file, not a folder, is not followed."""
    w = KickWriter(tmp_path, SR, max_files=2)
    first = w.write_kit(_kit())
    again = w.write_kit(_kit())
    assert (first.name, again.name) == ("kit_A1_punchy_5", "kit_A1_punchy_5-2")
    entry = w._ledger[0]
    assert entry["kit"] is True and entry["size"] == sum(f.stat().st_size for f in first.iterdir())
    k = w.write(kick(), info())
    caplog.set_level("INFO", logger="kickserver.writer")
    assert w.prune() == ["kit_A1_punchy_5/"]
    assert not first.exists() and again.is_dir() and k.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([LEDGER, again.name, k.name])
    line = next(r.getMessage() for r in caplog.records if "retention removed" in r.getMessage())
    assert "retention removed 1 old kit folder(s) from" in line and "(kit_A1_punchy_5/)" in line, line
    assert "a kit folder counts as one" in line
    w.max_files = None
    w.max_mb = 0.000001  # under anything: every entry but the newest goes
    assert w.prune() == ["kit_A1_punchy_5-2/"]


def test_stale_kit_temp_folders_are_removed_at_start(tmp_path, caplog):
    stale = tmp_path / ".kit_A1_punchy_5.x1y2z3.kitpart"
    stale.mkdir()
    (stale / "kit_A1_punchy_5_v1_rr1.wav").write_bytes(b"RIFF")
    keep = tmp_path / ".not-a-kit"
    keep.mkdir()
    caplog.set_level("INFO", logger="kickserver.writer")
    KickWriter(tmp_path, SR)
    assert not stale.exists() and keep.is_dir()
    assert any("removed 1 stale kit temp folder(s)" in r.getMessage() and stale.name in r.getMessage()
               for r in caplog.records), caplog.text


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


def _racer(real, theirs: bytes, raced: list):
    """Wrap a publishing call: the first time, another writer creates the final name just before it."""

    def call(src, dst, *a, **k):
        if not raced:  # dst is a name in the writer's opened folder (its descriptor: a[0], or dst_dir_fd)
            fd = a[0] if a else k.get("dst_dir_fd")
            (Path(f"/proc/self/fd/{fd}") / dst if fd is not None else Path(dst)).write_bytes(theirs)
            raced.append(Path(dst).name)
        return real(src, dst, *a, **k)

    return call


@pytest.mark.parametrize("way", ["renameat2", "link"])
def test_a_name_taken_in_the_last_moment_is_never_overwritten(tmp_path, monkeypatch, way):
    """Another daemon or `kickserver render` on the same folder creates our chosen final name after
    we checked it: we take the next name and their file stays as it is (atomic where the system can)."""
    import kickserver.publish as pmod
    import kickserver.writer as wmod

    raced: list[str] = []
    theirs = b"RIFF their kick"
    if way == "renameat2" and not pmod._libc_renameat2():
        pytest.skip("no renameat2 in this libc (the writer uses hard links)")
    if way == "link":  # as on a filesystem without RENAME_NOREPLACE
        monkeypatch.setattr(pmod, "_rename_noreplace", lambda src, dst, dir_fd=None: None)
    monkeypatch.setattr(pmod.os, "replace", _racer(os.replace, theirs, raced))
    monkeypatch.setattr(pmod.os, "link", _racer(os.link, theirs, raced))
    monkeypatch.setattr(pmod, "_rename_noreplace", _racer(pmod._rename_noreplace, theirs, raced))
    # the clock stands still: with a real one the retry could fall in the next second, whose stamp makes another
    # name than "-2" (no overwrite either, but not the case this test is about; it failed so once in six runs)
    monkeypatch.setattr(wmod, "time", FrozenClock(FROZEN))
    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    p = w.write(kick(), info(seed=5))
    monkeypatch.undo()
    assert raced, "the race was not simulated"
    assert (tmp_path / raced[0]).read_bytes() == theirs  # never overwritten
    assert p.name != raced[0] and p.name.endswith("-2.wav")
    assert sf.info(p).frames == 4800
    assert sorted(os.listdir(tmp_path)) == sorted([raced[0], p.name])  # no temp file left


@pytest.mark.parametrize("way", ["renameat2", "link", "check-then-replace"])
def test_publish_never_replaces(tmp_path, monkeypatch, way):
    import kickserver.publish as wmod

    if way != "renameat2":
        monkeypatch.setattr(wmod, "_rename_noreplace", lambda src, dst, dir_fd=None: None)
    if way == "check-then-replace":  # no hard links either (FAT, exFAT): best effort, documented
        monkeypatch.setattr(wmod, "_link_noreplace", lambda src, dst, dir_fd=None: None)
    src, dst = tmp_path / ".a.part", tmp_path / "a.wav"
    src.write_bytes(b"ours")
    dst.write_bytes(b"theirs")
    assert wmod.publish(src, dst) is False
    assert dst.read_bytes() == b"theirs" and src.read_bytes() == b"ours"
    assert wmod.publish(src, tmp_path / "b.wav") is True
    assert (tmp_path / "b.wav").read_bytes() == b"ours" and not src.exists()


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
    obs.start()  # the inotify watch is in place once start() returns
    try:
        w = KickWriter(tmp_path, SR)
        p = w.write(kick(), info())
        deadline = time.monotonic() + 5  # the events arrive on the observer's thread: wait, bounded
        while not any(e[0] == "moved" for e in events) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # anything after the move would show up by now
    finally:
        obs.stop()
        obs.join(5)
    moved = [e for e in events if e[0] == "moved"]
    assert len(moved) == 1 and moved[0][2] == p.name and moved[0][1].startswith("."), events
    assert all(e[1].startswith(".") for e in events), events


def test_inotifywait_sees_the_final_name_only_as_one_move(tmp_path):
    """The same property as above, seen by an independent watcher (inotifywait, not watchdog): the final
    name appears by one move and is never created or written under its own name."""
    w = KickWriter(tmp_path, SR)
    with InotifyWatch(tmp_path) as watch:
        p = w.write(kick(), info())
    assert watch.of(p.name) == ["MOVED_TO"], watch.events
    others = [(e, n) for e, n in watch.events if n != p.name]
    assert others and all(n.startswith(f".{p.name}.") and n.endswith(".part") for _, n in others), watch.events
    assert sf.info(p).frames == 4800


def test_kicks_from_the_map_are_named_m_seed_and_tagged_with_their_point(tmp_path, frozen):
    """A kick from /kick/near is `_m<seed>` (its seed makes it again only with the same point and spread,
    as a variation's `_v`), and its tags record the point and the spread, each as the shortest decimal that reads back
    as the very float asked (a float32 from OSC: map_x=0.3, not 0.30000001192092896)."""
    import numpy as np

    w = KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN, max_files=1)
    p = w.write(kick(), KickInfo(model="tiny", seed=12, steps=None, sampler=None, controls={"pitch_hz": 43.65},
                                 map_x=float(np.float32(0.3)), map_y=1.0, spread=0.0))
    assert p.name == f"{frozen}_m12.wav" and NAME_RE.match(p.name)
    comment = asked(sf.SoundFile(p).copy_metadata()["comment"])
    assert comment == "model=tiny seed=12 pitch_hz=43.6500 map_x=0.3 map_y=1 spread=0"
    q = w.write(kick(), KickInfo(model="tiny", seed=3, steps=None, sampler=None, controls={}, map_x=1 / 3,
                                 map_y=0.125, spread=0.2))
    comment = asked(sf.SoundFile(q).copy_metadata()["comment"]).split()
    assert float(comment[2].removeprefix("map_x=")) == 1 / 3 and comment[3:] == ["map_y=0.125", "spread=0.2"]
    w.prune()
    assert not p.exists() and q.exists()  # retention knows the name
    (tmp_path / f".{frozen}_m5.wav.123.part").write_bytes(b"RIFF")
    KickWriter(tmp_path, SR, name_pattern=TIME_PATTERN)
    assert not (tmp_path / f".{frozen}_m5.wav.123.part").exists()


def test_the_folder_is_opened_once_made_again_when_removed_and_never_written_through_a_swap(tmp_path):
    """Every write is relative to the folder opened; a removed folder is made again (writing goes
    on), a folder swapped for a link to another one is refused with a reason and nothing lands in the link's target."""
    import shutil

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    w = KickWriter(out, SR, max_files=10)
    assert w.write(kick(), info(seed=1)).parent == out
    shutil.rmtree(out)
    p = w.write(kick(), info(seed=2))  # removed meanwhile: made again, written
    assert p.parent == out and p.is_file()
    os.rename(out, tmp_path / "moved")
    out.symlink_to(elsewhere)
    with pytest.raises(WriteError, match="was replaced since it was opened"):
        w.write(kick(), info(seed=3))
    w.prune()
    assert os.listdir(elsewhere) == []  # neither the kick nor the ledger went through the link
    assert sorted(os.listdir(tmp_path / "moved")) == sorted([p.name, LEDGER])
