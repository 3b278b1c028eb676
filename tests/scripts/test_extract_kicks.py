"""scripts/sf2reader.py and scripts/extract_kicks.py on SoundFonts and folders built here (no Debian package)."""

from __future__ import annotations

import csv
import importlib.util
import io
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from sf2_build import LEFT, RIGHT, DrumKit, Sample, Zones, build_kits, build_sf2, key_range

from trainer.synth import synth_kick

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "kicks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


E = _load("extract_kicks")
R = sys.modules["sf2reader"]


def kick(seed: int, seconds: float = 0.4, sr: int = 44100, **kw) -> np.ndarray:
    kw.setdefault("drive", 0.0)
    kw.setdefault("click", 0.0)
    return 0.8 * synth_kick(np.random.default_rng(seed), sample_rate=sr, length=int(seconds * sr), **kw)


def snare(seed: int, seconds: float = 0.3, sr: int = 44100) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    rng = np.random.default_rng(seed)
    return (0.5 * rng.standard_normal(len(t)) * np.exp(-t / 0.05) + 0.3 * np.sin(2 * np.pi * 220 * t)
            * np.exp(-t / 0.08)).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# the reader


def test_reader_headers_zones_and_sample_data(tmp_path):
    a = kick(1)
    b = kick(2, sr=22050)
    path = build_sf2(tmp_path / "t.sf2", [Sample("Kick A", a), Sample("Kick B", b, rate=22050)],
                     instruments=[Zones("drums", [[(43, key_range(30, 40))],  # a global zone: the default key range
                                                  [(44, key_range(0, 63)), (53, 0)],
                                                  [(43, key_range(36, 36)), (53, 1)]])],
                     presets=[Zones("Kit", [[(41, 0)]], program=3, bank=128)])
    font = R.SoundFont.open(path)
    assert [s.name for s in font.samples] == ["Kick A", "Kick B"]
    assert [s.sample_rate for s in font.samples] == [44100, 22050]
    assert font.info["INAM"] == "test bank"
    (p,) = font.presets
    assert (p.name, p.program, p.bank) == ("Kit", 3, 128)
    z0, z1 = font.instruments[0].zones
    assert z0.target == 0 and z0.key_range == (30, 40) and z0.vel_range == (0, 63)  # key range from the global zone
    assert z1.target == 1 and z1.key_range == (36, 36)
    x, sr = font.sample_data(0)
    assert sr == 44100 and len(x) == len(a)
    assert np.max(np.abs(x - a)) <= 0.5 / 32768 + 1e-7  # 16-bit


def test_reader_24_bit_samples_use_sm24(tmp_path):
    a = kick(3) * 0.001  # quiet: 16 bits would lose most of it
    font = R.SoundFont.open(build_sf2(tmp_path / "t.sf2", [Sample("Kick", a)], [Zones("i", [[(53, 0)]])],
                                     [Zones("p", [[(41, 0)]])], bits24=True))
    assert font.sm24 is not None
    x, _ = font.sample_data(0)
    assert np.max(np.abs(x - a)) <= 0.5 / 8388608 + 1e-9


@pytest.mark.parametrize("damage,reason", [
    (lambda b: b"RIFX" + b[4:], "not a SoundFont 2"),
    (lambda b: b[:200], "runs past"),
    (lambda b: b.replace(b"sdta", b"xdta", 1), "no LIST 'sdta'"),
    (lambda b: b.replace(b"shdr", b"shdX", 1), "no 'shdr'"),
])
def test_reader_damaged_files_raise_one_line_reason(tmp_path, damage, reason):
    path = build_sf2(tmp_path / "t.sf2", [Sample("Kick", kick(1))], [Zones("i", [[(53, 0)]])],
                     [Zones("p", [[(41, 0)]])])
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(R.SF2Error, match=reason):
        R.SoundFont.open(path)


def test_reader_rejects_out_of_range_sample_and_zone(tmp_path):
    path = build_sf2(tmp_path / "t.sf2", [Sample("Kick", kick(1))], [Zones("i", [[(53, 0)]])],
                     [Zones("p", [[(41, 0)]])])
    raw = bytearray(path.read_bytes())
    i = raw.index(b"Kick\0")
    struct.pack_into("<I", raw, i + 24, 10**8)  # the sample's end, far past smpl
    (tmp_path / "bad_sample.sf2").write_bytes(bytes(raw))
    with pytest.raises(R.SF2Error, match="outside the .* sample points"):
        R.SoundFont.open(tmp_path / "bad_sample.sf2")
    path2 = build_sf2(tmp_path / "t2.sf2", [Sample("Kick", kick(1))], [Zones("i", [[(53, 7)]])],
                      [Zones("p", [[(41, 0)]])])
    with pytest.raises(R.SF2Error, match="points at 7, but there are only 1"):
        R.SoundFont.open(path2)


# ----------------------------------------------------------------------------------------------
# choosing kicks in a SoundFont


def test_sf2_candidates_take_gm_kick_keys_of_drum_kits_and_mix_stereo_pairs(tmp_path):
    left, right = kick(4), kick(4) * 0.5
    path = build_kits(tmp_path / "GM.sf2", [
        DrumKit("Standard", {35: [Sample("Std Kick(L)", left), Sample("Std Kick(R)", right)],
                             36: [Sample("808 Kick", kick(5))],
                             38: [Sample("Std Snare", snare(1))],
                             41: [Sample("Low Tom Kick", kick(6))]}),  # a kick name on a tom key: not taken
        DrumKit("Odd", {36: [Sample("Std Snare 2", snare(2))]}),  # a kick key, but a snare's name: not taken
    ], extra_presets=[("Kick Bass", 0, 36, Sample("Kick Bass", kick(7)))])  # melodic bank: not a drum kit
    src = E.Source("fluid-soundfont-gm", "MIT", "FluidR3", "sf2", (("sounds/sf2/GM.sf2", "GM"),), drum_banks=(128,))
    cands, skipped = E.sf2_candidates(path, "sounds/sf2/GM.sf2", "GM", src)
    assert [c.name for c in cands] == ["FluidR3_GM_Std_Kick", "FluidR3_GM_808_Kick"]
    assert cands[0].original == "sounds/sf2/GM.sf2#Std Kick(L)+Std Kick(R)"
    np.testing.assert_allclose(cands[0].audio, (left + right) / 2, atol=2e-4)
    assert [w for w, _ in skipped] == ["sounds/sf2/GM.sf2#Std Snare 2"]


def test_why_not_a_kick_on_measured_sounds():
    assert E.why_not_a_kick(E.measure_hit(kick(1))) is None
    assert "below 200 Hz" in E.why_not_a_kick(E.measure_hit(snare(1)))
    two = np.concatenate([kick(1, 0.3, decay=0.15), kick(2, 0.3, decay=0.15)])
    assert "second hit" in E.why_not_a_kick(E.measure_hit(two))
    tom = 0.8 * np.sin(2 * np.pi * 180 * np.arange(22050) / 44100) * np.exp(-np.arange(22050) / 6000)
    assert "body tone" in E.why_not_a_kick(E.measure_hit(tom.astype(np.float32)))
    assert "longer than" in E.why_not_a_kick(E.measure_hit(np.tile(kick(1, 0.5), 10)))


# ----------------------------------------------------------------------------------------------
# the whole run on a fake /usr/share and a copy of the test kit


def _fake_root(root: Path, fixture_copy: np.ndarray) -> None:
    share = root / "usr" / "share"
    build_kits(share / "sounds/sf2/Black_Pearl_4_LV2.sf2",
               [DrumKit("Black_Pearl_4pc", {36: [Sample("36-Pearl22Kick-1", kick(11)),
                                                 Sample("36-Pearl22Kick-2", kick(12))],
                                            38: [Sample("38-PearlSnare-1", snare(3))]}, bank=0)])
    build_kits(share / "sounds/sf2/Red_Zeppelin_4_LV2.sf2",
               [DrumKit("Red_Zeppelin_4pc", {36: [Sample("36-Ludwig26Kick-1", kick(13, 2.6, decay=3.0))]}, bank=0)])
    build_kits(share / "sounds/sf2/FluidR3_GM.sf2", [
        # a stereo pair whose channels differ (two microphones): mixed to mono, neither channel alone
        DrumKit("Standard", {35: [Sample("Std Kick(L)", kick(14)), Sample("Std Kick(R)", kick(21, decay=0.2))],
                             36: [Sample("Elec Kick", kick(15, sr=22050), rate=22050)]}),
        # the kit's fixture again, quieter and with a little noise: a near-copy of a kit file
        DrumKit("Room", {36: [Sample("Room Kick", fixture_copy)]}),
        DrumKit("Power", {36: [Sample("Power Kick", snare(4))]}),  # named kick, measures like a snare
    ])
    # a mono fork of FluidR3 (as MuseScore_General is): its "Std Kick" is FluidR3's left channel, bit for bit
    build_kits(share / "sounds/sf2/MuseScore_General_Full.sf2", [
        DrumKit("Standard", {35: [Sample("Std Kick", kick(14))], 36: [Sample("Power Kick", kick(19))]}),
        DrumKit("Room", {36: [Sample("Std Kick", kick(14))]}),  # the same sample again, another kit
    ])
    ex = share / "doc/chuck-data/examples"
    for rel, x in [("data/kick.wav", kick(16)), ("book/audio/kick_01.wav", kick(17)),
                   ("book/ch4/audio/kick_01.wav", kick(17)),  # an identical copy
                   ("data/snare.wav", snare(5)), ("data/kick_loop.wav", np.tile(kick(18, 0.5), 10))]:
        (ex / rel).parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(ex / rel), x, 44100, subtype="PCM_16")
    (ex / "data/._kick.wav").write_bytes(b"\0\5\26\7 AppleDouble")  # a macOS resource fork: skipped


def _fake_kit(kit: Path) -> bytes:
    kit.mkdir(parents=True)
    rows = []
    for f in sorted(FIXTURES.glob("*.flac")):
        shutil.copy(f, kit / f.name)
        rows.append({"file": f.name, "seconds": f"{sf.info(str(f)).duration:.3f}", "debian_package": "sonic-pi-samples",
                     "original_path": f"sonic-pi/samples/{f.name}", "license": "CC0-1.0"})
    data = E.manifest_bytes(rows)
    (kit / "MANIFEST.csv").write_bytes(data)
    return data


@pytest.fixture()
def fake(tmp_path):
    x, sr = sf.read(str(FIXTURES / "samples_bd_fat.flac"), dtype="float32")
    copy = 0.5 * x + 1e-4 * np.random.default_rng(0).standard_normal(len(x)).astype(np.float32)
    _fake_root(tmp_path / "root", copy)
    before = _fake_kit(tmp_path / "kit")
    return tmp_path / "root", tmp_path / "kit", before


def _rows(kit: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((kit / "MANIFEST.csv").read_text())))


def test_run_adds_kicks_with_manifest_rows_and_skips_duplicates(fake):
    root, kit, before = fake
    lines: list[str] = []
    counts = E.run(root, kit, log=lines.append)
    assert counts == {"avldrums.lv2-soundfont": 3, "fluid-soundfont-gm": 2, "chuck-data": 2,
                      "musescore-general-soundfont-lossless": 1}
    rows = _rows(kit)
    assert E.manifest_bytes(rows[:3]) == before  # the kit's own rows, untouched
    new = {r["file"]: r for r in rows[3:]}
    assert sorted(new) == sorted([
        "avldrums_Black_Pearl_36_Pearl22Kick_1.flac", "avldrums_Black_Pearl_36_Pearl22Kick_2.flac",
        "avldrums_Red_Zeppelin_36_Ludwig26Kick_1.flac", "FluidR3_GM_Std_Kick.flac", "FluidR3_GM_Elec_Kick.flac",
        "chuck_kick_01.flac", "chuck_kick.flac", "MuseScore_General_Power_Kick.flac"])
    r = new["FluidR3_GM_Std_Kick.flac"]
    assert (r["debian_package"], r["license"]) == ("fluid-soundfont-gm", "MIT")
    assert r["original_path"] == "sounds/sf2/FluidR3_GM.sf2#Std Kick(L)+Std Kick(R)"
    assert new["chuck_kick_01.flac"]["original_path"] == "doc/chuck-data/examples/book/audio/kick_01.wav"
    assert new["avldrums_Red_Zeppelin_36_Ludwig26Kick_1.flac"]["license"] == "CC-BY-SA-3.0"
    r = new["MuseScore_General_Power_Kick.flac"]
    assert (r["debian_package"], r["license"], r["original_path"]) == (
        "musescore-general-soundfont-lossless", "MIT", "sounds/sf2/MuseScore_General_Full.sf2#Power Kick")
    for name, row in new.items():
        info = sf.info(str(kit / name))
        assert (info.samplerate, info.channels, info.format) == (44100, 1, "FLAC")
        assert info.duration <= E.MAX_SECONDS + 1e-6
        assert row["seconds"] == f"{info.frames / 44100:.3f}"
    assert sf.info(str(kit / "avldrums_Red_Zeppelin_36_Ludwig26Kick_1.flac")).duration == pytest.approx(2.0)
    log = "\n".join(lines)
    assert "book/ch4/audio/kick_01.wav: identical to doc/chuck-data/examples/book/audio/kick_01.wav" in log
    assert "FluidR3_GM.sf2#Room Kick: a near-copy of samples_bd_fat.flac" in log
    assert "FluidR3_GM.sf2#Power Kick: only" in log
    # the fork's copy of a channel of a stereo kick already taken: the same sample data, so not a new kick
    assert log.count("MuseScore_General_Full.sf2#Std Kick: identical to the left channel of "
                     "sounds/sf2/FluidR3_GM.sf2#Std Kick(L)+Std Kick(R)") == 2
    assert "kick_loop.wav: longer than" in log
    assert "snare" not in " ".join(new) and "._kick" not in log


def test_rerun_is_idempotent_and_drops_what_is_no_longer_chosen(fake):
    root, kit, _ = fake
    E.run(root, kit, log=lambda s: None)
    snapshot = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in kit.iterdir()}
    lines: list[str] = []
    E.run(root, kit, log=lines.append)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in kit.iterdir()} == snapshot
    assert lines[-1].startswith("0 file(s) written")
    # a source gone: its file and row go too, the rest stays
    (root / "usr/share/doc/chuck-data/examples/data/kick.wav").unlink()
    E.run(root, kit, log=lambda s: None)
    assert not (kit / "chuck_kick.flac").exists()
    assert "chuck_kick.flac" not in {r["file"] for r in _rows(kit)}
    assert (kit / "chuck_kick_01.flac").read_bytes() == snapshot["chuck_kick_01.flac"][0]


def test_missing_package_is_an_error_before_anything_is_written(fake, capsys):
    root, kit, before = fake
    (root / "usr/share/sounds/sf2/FluidR3_GM.sf2").unlink()
    assert E.main(["--root", str(root), "--kit", str(kit)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("extract_kicks: ") and "install fluid-soundfont-gm" in err and len(err.splitlines()) == 1
    assert (kit / "MANIFEST.csv").read_bytes() == before and len(list(kit.glob("*.flac"))) == 3


@pytest.mark.parametrize("package", ["timgm6mb-soundfont", "csound-soundfont", "exadrums"])
def test_packages_reserved_for_the_outside_evaluation_are_refused_before_anything_is_read(fake, package):
    root, kit, before = fake
    assert package in E.RESERVED_PACKAGES
    src = E.Source(package, "MIT", "X", "sf2", (("sounds/sf2/not-there.sf2", "X"),))
    with pytest.raises(E.ExtractError) as err:  # refused by name: the missing file is not even looked for
        E.run(root, kit, sources=E.SOURCES + (src,), log=lambda s: None)
    msg = str(err.value)
    assert package in msg and "reserved for an outside evaluation" in msg and "not-there" not in msg
    assert (kit / "MANIFEST.csv").read_bytes() == before and len(list(kit.glob("*.flac"))) == 3


def test_a_path_that_leads_into_a_reserved_package_is_refused(fake):
    """default-GM.sf2 is a Debian alternative: it may point at TimGM6mb.sf2 (timgm6mb-soundfont). The
    package's file list (var/lib/dpkg/info/<package>.list) says whose file the path really is."""
    root, kit, before = fake
    sf2 = root / "usr/share/sounds/sf2"
    build_kits(sf2 / "TimGM6mb.sf2", [DrumKit("Standard", {36: [Sample("Kick", kick(30))]})])
    (sf2 / "default-GM.sf2").symlink_to("TimGM6mb.sf2")
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "timgm6mb-soundfont.list").write_text("/.\n/usr/share/sounds/sf2\n/usr/share/sounds/sf2/TimGM6mb.sf2\n")
    src = E.Source("fluid-soundfont-gm", "MIT", "GM", "sf2", (("sounds/sf2/default-GM.sf2", "GM"),), drum_banks=(128,))
    with pytest.raises(E.ExtractError, match="default-GM.sf2 leads to .*TimGM6mb.sf2, which timgm6mb-soundfont "
                                             "installs: .* reserved for an outside evaluation"):
        E.run(root, kit, sources=(src,), log=lambda s: None)
    assert (kit / "MANIFEST.csv").read_bytes() == before and len(list(kit.glob("*.flac"))) == 3
    (info / "timgm6mb-soundfont.list").write_text("/usr/share/sounds/sf2/Other.sf2\n")  # not its file: read
    assert E.run(root, kit, sources=(src,), dry_run=True, log=lambda s: None) == {"fluid-soundfont-gm": 1}


def test_dry_run_writes_nothing(fake):
    root, kit, before = fake
    E.run(root, kit, dry_run=True, log=lambda s: None)
    assert (kit / "MANIFEST.csv").read_bytes() == before and len(list(kit.glob("*.flac"))) == 3


def test_the_kits_manifest_round_trips():
    """The script rewrites the real manifest byte for byte when it adds nothing (same CSV dialect)."""
    kit = REPO / "kickserver" / "data" / "kicks"
    assert E.manifest_bytes(E.read_manifest(kit)) == (kit / "MANIFEST.csv").read_bytes()


def test_left_right_constants_match_the_reader():
    assert (R.SAMPLE_LEFT, R.SAMPLE_RIGHT) == (LEFT, RIGHT)
