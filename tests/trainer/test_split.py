"""trainer.split: velocity layers and near-copies stay on one side; the held-out side is never empty when
there are enough groups; the split depends on contents only; evaluate rebuilds the split fit makes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kickmodel.config import DataConfig
from trainer import split as S
from trainer.data import PreparedSet, prepare
from trainer.evaluation.sets import _heldout_split, load_folder
from trainer.synth import synth_kick

CFG = DataConfig()
LENGTH = 8192
KIT = Path(__file__).resolve().parents[2] / "kickserver" / "data" / "kicks"


def kick(seed: int, length: int = LENGTH) -> np.ndarray:
    return synth_kick(np.random.default_rng(seed), length=length, drive=0.0)


def make_set(named: list[tuple[str, np.ndarray]]) -> PreparedSet:
    audio = np.stack([x for _, x in named]).astype(np.float32)
    manifest = [{"source": s, "sha256": hashlib.sha256(x.tobytes()).hexdigest(), "duration": 0.2}
                for s, x in named]
    return PreparedSet(audio=audio, manifest=manifest, skipped=[], config=CFG, cache_dir=Path("/nonexistent"))


def sides(ds: PreparedSet, frac: float) -> tuple[set[str], set[str]]:
    train, val = ds.split(frac)
    names = [m["source"] for m in ds.manifest]
    return {names[i] for i in train}, {names[i] for i in val}


def together(names: set[str], train: set[str], val: set[str]) -> bool:
    return names <= train or names <= val


def filler(n: int, start: int = 100) -> list[tuple[str, np.ndarray]]:
    return [(f"/lib/other/{w}.wav", kick(start + i)) for i, w in enumerate(
        ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"][:n])]


def test_layer_key_velocity_words_and_numbers():
    k = S.layer_key
    assert k("/a/BD_Soft.wav") == k("/a/BD_Hard.wav") == k("/a/BD.wav") == k("/a/bd-mf.flac") == k("/a/BD_v3.wav")
    assert k("/a/Kick-Softest.wav") == k("/a/Kick-Hardest.wav") == k("/a/Kick-Med.wav") == k("/a/Kick_Loud.wav")
    assert k("/a/kick_soft01.ogg") == k("/a/kick01.ogg") == k("/a/kick 7.ogg")
    assert k("/a/bassdrum-4mics-br-stereo-soft4.flac") == k("/a/bassdrum-4mics-br-stereo-soft2.flac")
    assert k("/a/36-Pearl22Kick-1.flac") == k("/a/36-Pearl22Kick-5.flac")
    assert k("/a/BD_Soft.wav") != k("/b/BD_Hard.wav")  # another folder: another kit
    assert k("/a/Kit2_bd_01.wav") != k("/a/Kit3_bd_01.wav")  # a number inside a kit's name stays
    assert k("/a/kick_hardcore01.wav") != k("/a/kick01.wav")  # "hardcore" is not a velocity word
    assert k("/a/snare_soft.wav") != k("/a/kick_soft.wav")


@pytest.mark.parametrize("frac", [0.1, 0.2, 0.3, 0.5])
def test_layers_and_near_copies_stay_on_one_side(frac):
    rng = np.random.default_rng(1)
    a = kick(7)
    named = filler(16) + [
        # a kick and a scaled, slightly noisy copy under unrelated names in other folders
        ("/lib/x/boom.wav", a), ("/lib/y/thud.wav", (0.4 * a + 0.002 * rng.standard_normal(LENGTH)).astype(np.float32)),
        # velocity words: different sounds, one name
        ("/lib/kit/BD_Soft.wav", kick(20)), ("/lib/kit/BD_Hard.wav", kick(21)), ("/lib/kit/BD_Med.wav", kick(22)),
        # numbered names
        ("/lib/kit/Kick_1.wav", kick(30)), ("/lib/kit/Kick_2.wav", kick(31)), ("/lib/kit/Kick_3.wav", kick(32)),
    ]
    groups = [{named[i][0] for i in g} for g in S.group_clips(make_set(named).audio, make_set(named).manifest, 44100)]
    assert {"/lib/x/boom.wav", "/lib/y/thud.wav"} in groups  # joined by their correlation alone
    assert {"/lib/kit/BD_Soft.wav", "/lib/kit/BD_Hard.wav", "/lib/kit/BD_Med.wav"} in groups
    assert {"/lib/kit/Kick_1.wav", "/lib/kit/Kick_2.wav", "/lib/kit/Kick_3.wav"} in groups
    assert sum(len(g) == 1 for g in groups) == 16  # the other kicks stay apart
    for seed in range(4):  # several orders of the same files
        perm = np.random.default_rng(seed).permutation(len(named))
        train, val = sides(make_set([named[i] for i in perm]), frac)
        assert val, "the held-out side is empty"
        assert together({"/lib/x/boom.wav", "/lib/y/thud.wav"}, train, val)
        assert together({"/lib/kit/BD_Soft.wav", "/lib/kit/BD_Hard.wav", "/lib/kit/BD_Med.wav"}, train, val)
        assert together({"/lib/kit/Kick_1.wav", "/lib/kit/Kick_2.wav", "/lib/kit/Kick_3.wav"}, train, val)


def test_split_depends_on_contents_not_on_order_or_paths():
    named = filler(20)
    ds = make_set(named)
    _, v1 = ds.split(0.3)
    held = {ds.manifest[i]["sha256"] for i in v1}
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(named))
        other = make_set([(f"/elsewhere/{seed}/{Path(named[i][0]).name}", named[i][1]) for i in perm])
        _, v2 = other.split(0.3)
        assert {other.manifest[i]["sha256"] for i in v2} == held


def test_heldout_never_empty_with_five_groups_or_more():
    # five groups of three numbered layers each; 5 % of 15 is one clip, and no group fits in one clip
    named = [(f"/lib/k{g}/Kick_{i}.wav", kick(10 * g + i)) for g in range(5) for i in range(3)]
    train, val = make_set(named).split(0.05)
    assert len(val) == 3 and len(train) == 12
    val_dirs = {Path(named[i][0]).parent for i in val}
    assert len(val_dirs) == 1  # one whole group
    # with four groups it may stay empty (too few groups to give one away)
    train, val = make_set(named[:12]).split(0.05)
    assert len(val) == 0 and len(train) == 12


def test_describe_split_names_and_hashes():
    ds = make_set(filler(10))
    train, val = ds.split(0.3)
    d = ds.describe_split(train, val)
    assert set(d) == {"train", "heldout"}
    assert [r["name"] for r in d["heldout"]] == [Path(ds.manifest[i]["source"]).name for i in val]
    assert [r["sha256"] for r in d["train"]] == [ds.manifest[i]["sha256"] for i in train]
    assert len(d["train"]) + len(d["heldout"]) == 10


def test_evaluate_rebuilds_the_split_fit_makes(tmp_path):
    folder = tmp_path / "kicks"
    folder.mkdir()
    for i in range(12):
        sf.write(str(folder / f"kick_{'abcdefghijkl'[i]}.wav"), kick(200 + i, 20000), 44100, subtype="PCM_24")
    for w in ("Soft", "Hard"):
        sf.write(str(folder / f"BD_{w}.wav"), kick(300 if w == "Soft" else 301, 20000), 44100, subtype="PCM_24")
    cfg = DataConfig(val_fraction=0.3)
    prepared = prepare([folder], cfg, tmp_path / "cache", log=lambda s: None)
    t_fit, v_fit = prepared.split(cfg.val_fraction)
    clips, sources, shas, _ = load_folder([folder], cfg, log=lambda s: None)
    t_ev, v_ev = _heldout_split(clips, sources, shas, cfg)
    assert [sources[i] for i in v_ev] == [prepared.manifest[i]["source"] for i in v_fit]
    assert [sources[i] for i in t_ev] == [prepared.manifest[i]["source"] for i in t_fit]


def test_the_kits_gmrockkit_layers_are_on_one_side():
    cfg = DataConfig(val_fraction=0.3)  # as the bundled model was trained
    clips, sources, shas, _ = load_folder([KIT], cfg, log=lambda s: None)
    train, val = _heldout_split(clips, sources, shas, cfg)
    names = [Path(s).name for s in sources]
    gm = {f"GMRockKit_Kick_{w}.flac" for w in ("Softest", "Soft", "Med", "Hard", "Hardest")}
    assert gm <= set(names)
    assert together(gm, {names[i] for i in train}, {names[i] for i in val})
    assert len(val) == round(0.3 * len(names))


def test_groups_of_a_subset_are_index_arrays_into_the_set():
    named = filler(3) + [("/lib/kit/BD_Soft.wav", kick(20)), ("/lib/kit/BD_Hard.wav", kick(21)),
                         ("/lib/kit/BD_Med.wav", kick(22))]
    ds = make_set(named)
    names = [m["source"] for m in ds.manifest]
    got = ds.groups(np.array([1, 3, 4, 5]))
    assert all(g.dtype == np.int64 for g in got)
    assert {frozenset(names[i] for i in g) for g in got} == {
        frozenset({"/lib/other/bravo.wav"}),
        frozenset({"/lib/kit/BD_Soft.wav", "/lib/kit/BD_Hard.wav", "/lib/kit/BD_Med.wav"})}
