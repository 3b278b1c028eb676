"""trainer.data: scanning, decoding real and corrupt files, the cache, the split."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from kickmodel.config import DataConfig
from kickmodel.descriptors import measure
from trainer import data as D
from trainer.synth import synth_kick

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kicks"
CFG = DataConfig()


def kick(seed: int = 0, sr: int = 44100, length: int = 30000, **kw) -> np.ndarray:
    kw.setdefault("drive", 0.0)
    return synth_kick(np.random.default_rng(seed), sample_rate=sr, length=length, **kw)


def write(path: Path, x: np.ndarray, sr: int = 44100, subtype: str = "PCM_24") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), x, sr, subtype=subtype)
    return path


def copy_fixtures(dst: Path) -> list[Path]:
    dst.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy(f, dst)) for f in sorted(FIXTURES.glob("*.flac"))]


def make_bad_files(d: Path) -> dict[str, str]:
    """Real corrupt files on disk: {file name: expected substring of the reason}."""
    d.mkdir(parents=True, exist_ok=True)
    x = kick(1, length=4410)
    # a WAV whose fmt chunk has an impossible format tag (what libsndfile calls a malformed fmt chunk)
    write(d / "bad_fmt.wav", x, subtype="PCM_16")
    raw = bytearray((d / "bad_fmt.wav").read_bytes())
    i = raw.index(b"fmt ")
    raw[i + 8:i + 24] = b"\xff" * 16
    (d / "bad_fmt.wav").write_bytes(bytes(raw))
    # the real-world case in the starter kit: a WAV with a malformed fmt chunk named .ogg
    (d / "lmms_kick.ogg").write_bytes(bytes(raw))
    # a FLAC cut in the middle of its header
    write(d / "truncated.flac", x)
    (d / "truncated.flac").write_bytes((d / "truncated.flac").read_bytes()[:20])
    write(d / "silent.wav", np.zeros(22050, np.float32))
    (d / "zero_length.wav").write_bytes(b"")
    write(d / "no_frames.wav", np.zeros(0, np.float32))
    write(d / "short.wav", x[:441])  # 10 ms
    nan = x.copy()
    nan[100] = np.nan
    write(d / "nan.wav", nan, subtype="FLOAT")
    inf = x.copy()
    inf[200] = np.inf
    write(d / "inf.wav", inf, subtype="FLOAT")
    write(d / "phase_cancel.wav", np.stack([x, -x], axis=1))  # stereo that mixes to silence
    return {"bad_fmt.wav": "malformed header", "lmms_kick.ogg": "malformed header",
            "truncated.flac": "malformed header", "silent.wav": "silent", "zero_length.wav": "empty file",
            "no_frames.wav": "empty file", "short.wav": "shorter than 30 ms", "nan.wav": "contains NaN",
            "inf.wav": "contains inf", "phase_cancel.wav": "silent"}


def onset(clip: np.ndarray, db: float = -40.0) -> int:
    a = np.abs(clip)
    return int(np.argmax(a > a.max() * 10 ** (db / 20)))


# ---------------------------------------------------------------------------------------------- scan


def test_audio_extensions():
    assert {".wav", ".flac", ".aif", ".aiff"} <= D.AUDIO_EXTENSIONS
    assert (".ogg" in D.AUDIO_EXTENSIONS) == ("OGG" in sf.available_formats())


def test_scan_recursive_sorted_dedup_skips_hidden_and_sidecars(tmp_path):
    x = kick()
    a = write(tmp_path / "b" / "kick.wav", x)
    b = write(tmp_path / "a" / "deep" / "Kick2.FLAC", x)
    write(tmp_path / "a" / ".hidden.wav", x)
    write(tmp_path / "a" / "._kick.wav", x)  # AppleDouble
    write(tmp_path / ".git" / "x.wav", x)  # hidden folder
    (tmp_path / "b" / "kick.wav.asd").write_bytes(b"ableton")
    (tmp_path / "b" / "kick.wav.reapeaks").write_bytes(b"reaper")
    (tmp_path / "b" / "notes.txt").write_text("hi")
    found = D.scan_audio([tmp_path, tmp_path / "b", a, str(tmp_path / "a")])
    assert found == sorted([a.resolve(), b.resolve()])
    assert D.scan_audio([a]) == D.scan_audio(a) == [a.resolve()]
    with pytest.raises(FileNotFoundError):
        D.scan_audio([tmp_path / "missing"])


# ---------------------------------------------------------------------------------------------- load_clip


def test_bad_files_each_raise_badaudio_with_reason(tmp_path):
    expected = make_bad_files(tmp_path)
    for name, reason in expected.items():
        with pytest.raises(D.BadAudio) as e:
            D.load_clip(tmp_path / name, CFG)
        assert reason in str(e.value), (name, str(e.value))
        assert "\n" not in str(e.value) and str(e.value)


def test_real_fixtures_load(tmp_path):
    for f in sorted(FIXTURES.glob("*.flac")):
        clip, duration = D.load_clip(f, CFG)
        assert clip.dtype == np.float32 and clip.shape == (CFG.length,)
        assert duration == pytest.approx(sf.info(str(f)).duration)
        assert 20 * np.log10(np.abs(clip).max()) == pytest.approx(CFG.peak_db, abs=0.01)
        assert onset(clip) <= 30


def test_output_length_peak_and_transient_at_zero(tmp_path):
    x = kick(2, length=20000)
    padded = np.concatenate([np.zeros(4410, np.float32), x])  # 100 ms of silence first
    for cfg in (CFG, DataConfig(length=8192, peak_db=-3.0)):
        clip, duration = D.load_clip(write(tmp_path / "late.wav", padded), cfg)
        assert clip.shape == (cfg.length,) and clip.dtype == np.float32
        assert duration == pytest.approx(len(padded) / 44100, abs=1e-4)
        assert 20 * np.log10(np.abs(clip).max()) == pytest.approx(cfg.peak_db, abs=0.01)
        assert onset(clip) <= int(0.001 * 44100)  # within 1 ms of sample 0 (0.5 ms pre-roll)
        assert abs(clip[0]) < 1e-3
        assert np.argmax(np.abs(clip)) < 0.02 * 44100  # the peak is in the attack, not 100 ms in


def test_dc_offset_removed(tmp_path):
    x = 0.5 * kick(3, length=30000)
    clean, _ = D.load_clip(write(tmp_path / "clean.wav", x, subtype="FLOAT"), CFG)
    shifted, _ = D.load_clip(write(tmp_path / "dc.wav", x + 0.3, subtype="FLOAT"), CFG)
    assert np.abs(shifted - clean).max() < 2e-3
    assert abs(float(shifted.mean())) < 2e-3


def test_stereo_mixed_to_mono(tmp_path):
    x = kick(4, length=30000)
    mono, _ = D.load_clip(write(tmp_path / "mono.wav", x, subtype="FLOAT"), CFG)
    left_only, _ = D.load_clip(write(tmp_path / "left.wav", np.stack([x, np.zeros_like(x)], 1), subtype="FLOAT"), CFG)
    both, _ = D.load_clip(write(tmp_path / "both.wav", np.stack([x, 0.5 * x], 1), subtype="FLOAT"), CFG)
    assert left_only.shape == both.shape == (CFG.length,)
    assert np.abs(left_only - mono).max() < 1e-4  # mean of L and R, then peak-normalised
    assert np.abs(both - mono).max() < 1e-3


def test_48k_input_resampled(tmp_path):
    sr = 48000
    x = kick(5, sr=sr, length=int(0.5 * sr), pitch_end=55.0, sweep=0.008, decay=0.4, click=0.0)
    clip, duration = D.load_clip(write(tmp_path / "k48.wav", x, sr=sr), CFG)
    assert duration == pytest.approx(0.5, abs=1e-4)
    assert clip.shape == (CFG.length,)
    # the natural end (0.5 s at 48 kHz) lands at ~0.5 s at 44.1 kHz: silence after it
    end = np.nonzero(np.abs(clip) > 1e-6)[0].max()
    assert abs(end - 0.5 * 44100) < 0.002 * 44100
    pitch = float(measure(torch.from_numpy(clip)[None], 44100)[0, 1])
    assert pitch == pytest.approx(55.0, abs=2.0)


def test_fade_out_when_cropped(tmp_path):
    x = kick(6, length=2 * 44100, decay=3.0, click=0.0)  # still loud at 1.02 s
    clip, _ = D.load_clip(write(tmp_path / "long.wav", x), CFG)
    n = int(CFG.fade_ms * 44100 / 1000)
    assert abs(clip[-1]) < 1e-6
    assert np.abs(clip[-n - 500:-n]).max() > 0.1  # loud before the fade
    curve = 0.5 * (1 + np.cos(np.linspace(0, np.pi, n)))  # the raised-cosine fade bounds the last n samples
    assert np.all(np.abs(clip[-n:]) <= curve * np.abs(clip[-n - 500:]).max() + 1e-6)


def test_short_clip_zero_padded_with_natural_end_fade(tmp_path):
    x = kick(7, length=4410, decay=2.0)  # 100 ms, abruptly cut while loud
    x[-200:] = 0.9  # a hard edge at the end
    clip, _ = D.load_clip(write(tmp_path / "cut.wav", x), CFG)
    assert np.all(clip[4500:] == 0)
    nz = np.nonzero(clip)[0].max()
    assert abs(clip[nz]) < 0.01  # faded to ~0 at the natural end, no click


# ---------------------------------------------------------------------------------------------- prepare


def test_prepare_skips_bad_files_with_one_line_each(tmp_path):
    good = copy_fixtures(tmp_path / "in")
    expected = make_bad_files(tmp_path / "in" / "bad")
    lines: list[str] = []
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    n_files = len(good) + len(expected)
    assert len(ps) == len(good) == ps.audio.shape[0]
    assert {m["source"] for m in ps.manifest} == {str(p.resolve()) for p in good}
    assert len(ps.skipped) == len(expected)
    for name, reason in expected.items():
        mine = [ln for ln in lines if ln.startswith("skipped ") and f"/{name}:" in ln]
        assert len(mine) == 1, (name, lines)
        assert reason in mine[0]
        assert "\n" not in mine[0]
    summary = f"prepared {len(good)} clips from {n_files} files ({len(expected)} skipped) -> {tmp_path / 'cache'}"
    assert lines[-1] == summary
    assert dict(ps.skipped)[str((tmp_path / "in" / "bad" / "nan.wav").resolve())] == "contains NaN"


def test_prepare_all_bad_raises(tmp_path):
    make_bad_files(tmp_path / "bad")
    with pytest.raises(D.NoUsableAudio) as e:
        D.prepare([tmp_path / "bad"], CFG, tmp_path / "cache", log=lambda s: None)
    assert str(tmp_path / "bad") in str(e.value) and "10 skipped" in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(D.NoUsableAudio):
        D.prepare([tmp_path / "empty"], CFG, tmp_path / "cache2", log=lambda s: None)


def test_prepare_output_memmap_and_manifest(tmp_path):
    copy_fixtures(tmp_path / "in")
    write(tmp_path / "in" / "synth.wav", kick(8))
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lambda s: None)
    assert isinstance(ps.audio, np.memmap) and ps.audio.dtype == np.float32
    assert ps.audio.shape == (4, CFG.length) and not ps.audio.flags.writeable
    assert (tmp_path / "cache" / "audio.f32").stat().st_size == 4 * CFG.length * 4
    peaks = 20 * np.log10(np.abs(np.asarray(ps.audio)).max(axis=1))
    np.testing.assert_allclose(peaks, CFG.peak_db, atol=0.01)
    for m in ps.manifest:
        src = Path(m["source"])
        assert src.exists() and len(m["sha256"]) == 64
        assert m["duration"] == pytest.approx(sf.info(str(src)).duration)
    on_disk = json.loads((tmp_path / "cache" / "manifest.json").read_text())
    assert on_disk["shape"] == [4, CFG.length] and on_disk["version"] == D.CACHE_VERSION
    assert on_disk["config"]["sample_rate"] == CFG.sample_rate
    assert [c["source"] for c in on_disk["clips"]] == [m["source"] for m in ps.manifest]
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]  # no temp files left
    assert ps.config == CFG and ps.cache_dir == tmp_path / "cache"


def test_cache_reused_without_decoding(tmp_path, monkeypatch):
    copy_fixtures(tmp_path / "in")
    make_bad_files(tmp_path / "in" / "bad")
    first = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lambda s: None)

    def boom(*a, **k):
        raise AssertionError("load_clip called although the cache is valid")

    monkeypatch.setattr(D, "load_clip", boom)
    lines: list[str] = []
    again = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert lines[-1].startswith("using cached 3 clips from 13 files (10 skipped)")
    assert sum(ln.startswith("skipped ") for ln in lines) == 10
    np.testing.assert_array_equal(np.asarray(again.audio), np.asarray(first.audio))
    assert again.manifest == first.manifest and again.skipped == first.skipped
    # val_fraction does not change the clips: still cached
    D.prepare([tmp_path / "in"], DataConfig(val_fraction=0.3), tmp_path / "cache", log=lines.append)
    assert lines[-1].startswith("using cached")


def test_cache_rebuilt_when_files_or_config_change(tmp_path, monkeypatch):
    files = copy_fixtures(tmp_path / "in")
    D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lambda s: None)
    calls: list[Path] = []
    real = D.load_clip

    def counting(path, cfg):
        calls.append(Path(path))
        return real(path, cfg)

    monkeypatch.setattr(D, "load_clip", counting)
    lines: list[str] = []

    st = files[0].stat()  # touched: same bytes, new mtime
    os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert "rebuilding cache: files changed: 1 changed" in lines
    assert calls == []  # same content: its clip is reused from the old cache, nothing decoded

    write(files[1], kick(9, length=8000))  # replaced content
    lines.clear()
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert any(ln.startswith("rebuilding cache: files changed") for ln in lines)
    assert calls == [files[1].resolve()]
    assert ps.manifest[1]["duration"] == pytest.approx(8000 / 44100)

    write(tmp_path / "in" / "new.wav", kick(10))
    lines.clear()
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert "rebuilding cache: files changed: 1 added" in lines and len(ps) == 4

    files[2].unlink()
    lines.clear()
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert "rebuilding cache: files changed: 1 removed" in lines and len(ps) == 3

    calls.clear()
    lines.clear()
    ps = D.prepare([tmp_path / "in"], DataConfig(peak_db=-3.0, length=8192), tmp_path / "cache", log=lines.append)
    assert "rebuilding cache: data config changed (length, peak_db)" in lines
    assert len(calls) == 3 and ps.audio.shape == (3, 8192)
    np.testing.assert_allclose(20 * np.log10(np.abs(np.asarray(ps.audio)).max(1)), -3.0, atol=0.01)


def test_cache_with_damaged_files_is_rebuilt(tmp_path):
    copy_fixtures(tmp_path / "in")
    D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lambda s: None)
    with open(tmp_path / "cache" / "audio.f32", "r+b") as f:
        f.truncate(100)
    lines: list[str] = []
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert "rebuilding cache: audio cache has the wrong size" in lines and len(ps) == 3
    (tmp_path / "cache" / "manifest.json").write_text("{not json")
    lines.clear()
    D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)
    assert "rebuilding cache: manifest unreadable" in lines


# ---------------------------------------------------------------------------------------------- split


def _fake_set(n: int) -> D.PreparedSet:
    import hashlib

    manifest = [{"source": f"/k/{i}.wav", "sha256": hashlib.sha256(str(i).encode()).hexdigest(), "duration": 0.3}
                for i in range(n)]
    return D.PreparedSet(audio=np.zeros((n, 8), np.float32), manifest=manifest, skipped=[], config=CFG,
                         cache_dir=Path("/nonexistent"))


@pytest.mark.parametrize("n,frac,n_val", [(70, 0.1, 7), (10, 0.1, 1), (5, 0.05, 1), (4, 0.1, 0), (5, 0.0, 0),
                                          (20, 0.25, 5), (1, 0.5, 0), (2, 0.5, 1)])
def test_split_sizes(n, frac, n_val):
    train, val = _fake_set(n).split(frac)
    assert len(val) == n_val and len(train) == n - n_val
    assert sorted(np.concatenate([train, val]).tolist()) == list(range(n))
    assert train.dtype == np.int64 and val.dtype == np.int64


def test_split_deterministic_by_content():
    s = _fake_set(40)
    t1, v1 = s.split(0.2)
    t2, v2 = s.split(0.2)
    assert np.array_equal(t1, t2) and np.array_equal(v1, v2)
    # the same files in another order (other paths) land on the same side
    shuffled = _fake_set(40)
    perm = np.random.default_rng(0).permutation(40)
    shuffled.manifest = [dict(s.manifest[i], source=f"/other/{i}.wav") for i in perm]
    _, v3 = shuffled.split(0.2)
    assert {shuffled.manifest[i]["sha256"] for i in v3} == {s.manifest[i]["sha256"] for i in v1}
    # a duplicate of a validation file never lands in train
    dup = _fake_set(40)
    dup.manifest.append(dict(dup.manifest[int(v1[0])], source="/k/copy.wav"))
    tr, va = dup.split(0.2)
    shas_val = {dup.manifest[i]["sha256"] for i in va}
    assert not any(dup.manifest[i]["sha256"] in shas_val for i in tr)


def test_split_keeps_velocity_layers_together():
    """BD_06 and BD_07 of one kit are near-copies: they land on the same side of the split."""
    import hashlib

    names = [f"/kits/BJA/BD_{i:02d}.flac" for i in range(1, 8)] + [f"/kits/x/kick_{c}.wav" for c in "abcdefghijklm"]
    manifest = [{"source": s, "sha256": hashlib.sha256(s.encode()).hexdigest(), "duration": 0.3} for s in names]
    ds = D.PreparedSet(audio=np.zeros((len(names), 8), np.float32), manifest=manifest, skipped=[], config=CFG,
                       cache_dir=Path("/nonexistent"))
    bja = {i for i, s in enumerate(names) if "/BJA/" in s}
    for frac in (0.1, 0.3, 0.5):
        train, val = ds.split(frac)
        t, v = set(train.tolist()), set(val.tolist())
        assert v and t, (frac, sorted(v))  # both sides hold clips: a validation set that is empty checks nothing
        assert not (t & v) and t | v == set(range(len(names))) and len(t) + len(v) == len(names), frac
        assert bja <= v or bja <= t, (frac, sorted(v))  # the layers land on one side together


def test_the_starter_kits_two_loops_train_on_their_first_hit(tmp_path):
    """The kit keeps its two loops as the shipped models recorded them; preparing them (what `kicktrain fit` and
    scripts/train_default_model.sh do with the kit) keeps each to its first hit, with a line naming it."""
    from kickmodel.descriptors import second_hit_ms

    kit = Path(__file__).resolve().parents[2] / "kickserver" / "data" / "kicks"
    folder = tmp_path / "loops"
    folder.mkdir()
    for name in ("beats_rave_kick01.flac", "beats_rave_kick02.flac"):
        shutil.copy(kit / name, folder / name)
    lines: list[str] = []
    ps = D.prepare([folder], CFG, tmp_path / "cache", log=lines.append)
    said = sorted(ln for ln in lines if "hits again" in ln)
    assert len(said) == 2 and "rave_kick01" in said[0] and "rave_kick02" in said[1], lines
    assert all(290 <= float(ln.split("hits again at ")[1].split(" ms")[0]) <= 335 for ln in said), said
    assert np.isnan(second_hit_ms(ps.audio, CFG.sample_rate)).all()
    assert not ps.audio[:, int(0.33 * CFG.sample_rate):].any()


def test_a_file_that_hits_twice_trains_on_its_first_hit_only(tmp_path, capsys):
    """A loop or a flam in a folder of one-shots (the starter kit had two: a second kick 330 ms after the first,
    which the bundled model learned to copy) is kept to its first hit by `kicktrain prepare`, with one line naming
    the file and when it hits again; a one-shot is left as it was."""
    from kickmodel.descriptors import second_hit_ms
    from trainer.cli import main as kicktrain

    sr = 44100
    one = kick(1, length=sr)
    loop = one + np.concatenate([np.zeros(int(0.33 * sr)), kick(2, length=sr)[: sr - int(0.33 * sr)]])
    write(tmp_path / "in" / "one.wav", one)
    write(tmp_path / "in" / "loop.wav", loop / np.abs(loop).max())
    assert kicktrain(["prepare", str(tmp_path / "in"), "--cache", str(tmp_path / "cache")]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = [ln for ln in lines if "hits again" in ln]
    assert len(said) == 1 and str(tmp_path / "in" / "loop.wav") in said[0] and "first hit only" in said[0], lines
    at_ms = float(said[0].split("hits again at ")[1].split(" ms")[0])
    assert 290 <= at_ms <= 335, said  # where the second hit's rise begins, from the clip's start, before 330 ms
    ps = D.prepare([tmp_path / "in"], CFG, tmp_path / "cache", log=lines.append)  # the cache the CLI wrote
    assert "using cached" in lines[-1], lines[-1]
    rows = {Path(m["source"]).name: ps.audio[i] for i, m in enumerate(ps.manifest)}
    assert np.isnan(second_hit_ms(np.stack([rows["one.wav"], rows["loop.wav"]]), CFG.sample_rate)).all()
    second = int(0.33 * CFG.sample_rate)  # the first hit is kept whole up to just before the second
    assert np.abs(rows["loop.wav"][second - int(0.005 * CFG.sample_rate):]).max() == 0.0
    assert np.abs(rows["loop.wav"][: int(0.25 * CFG.sample_rate)]).max() > 0.5
    single, _ = D.load_clip(tmp_path / "in" / "one.wav", CFG)
    np.testing.assert_array_equal(rows["one.wav"], single)
