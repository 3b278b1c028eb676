"""bench/sound_check.py's measures on synthetic signals: the grid notch/peak depth, diversity against real
(the same figure `kicktrain eval` reports) and the haze figure."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from kickmodel.codecs.identity import reject_images
from trainer.embeddings import get_embedding
from trainer.evaluation.scoring import score
from trainer.evaluation.sets import EvalSets, ModelRow
from trainer.synth import synth_batch, synth_kick

REPO = Path(__file__).resolve().parents[2]
SR = 44100
N = 45056
T = np.arange(N) / SR


def _load():
    spec = importlib.util.spec_from_file_location("sound_check", REPO / "bench" / "sound_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sound_check"] = mod
    spec.loader.exec_module(mod)
    return mod


SC = _load()


def noise(n: int = 8, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal((n, N))).astype(np.float32)


def depths(clips: np.ndarray) -> list[float | None]:
    return [r["depth_db"] for r in SC.grid_depths(clips, SR)]


def test_grid_is_the_multiples_of_the_sample_rate_over_16_up_to_16_khz():
    assert [round(r["hz"]) for r in SC.grid_depths(noise(2), SR)] == [2756, 5512, 8269, 11025, 13781]


def test_clean_sine_and_a_kick_like_sweep_show_no_notch():
    sine = (0.8 * np.sin(2 * np.pi * 60 * T) * np.exp(-T / 0.3))[None].astype(np.float32)
    w = SC.worst_grid_depth(sine, SR)
    assert abs(w["depth_db"]) < 1.0  # nothing at the multiples to notch: not measured, reads 0
    sweep = synth_kick(np.random.default_rng(5), click=0.0, drive=3.0)[None]  # harmonics reach the kHz range
    w = SC.worst_grid_depth(sweep, SR)
    assert w["hz"] is not None and abs(w["depth_db"]) < 1.0
    assert abs(SC.worst_grid_depth(noise(), SR)["depth_db"]) < 1.0  # a flat spectrum
    brown = np.cumsum(noise(), axis=1)
    brown -= brown.mean(axis=1, keepdims=True)
    assert abs(SC.worst_grid_depth(brown.astype(np.float32), SR)["depth_db"]) < 1.0  # a steep, smooth slope


def test_nothing_there_is_not_measured():
    """Above a low-pass there is only rounding noise: its random dips must not read as notches."""
    spec = np.fft.rfft(noise().astype(np.float64), axis=1)
    spec[:, np.fft.rfftfreq(N, 1 / SR) > 2000] = 0
    x = np.fft.irfft(spec, n=N, axis=1)
    assert depths(x) == [None] * 5
    assert SC.worst_grid_depth(x, SR) == {"depth_db": 0.0, "hz": None, "per_multiple": SC.grid_depths(x, SR)}


def test_notches_at_multiples_of_sr_over_16_are_flagged():
    # the bundled model's own image rejection (30 dB, and a gentler 6 dB) on broadband noise
    for depth in (30.0, 6.0):
        notched = reject_images(noise(), SR, 16, depth)
        d = depths(notched)
        assert all(v is not None and v < -3.0 for v in d), d
        w = SC.worst_grid_depth(notched, SR)
        assert w["depth_db"] < -3.0
    # one notch carved at 2756 Hz only
    x = noise()
    spec = np.fft.rfft(x, axis=1)
    f = np.fft.rfftfreq(N, 1 / SR)
    spec *= 1 - 0.9 * np.exp(-0.5 * ((f - SR / 16) / 80.0) ** 2)
    d = depths(np.fft.irfft(spec, n=N, axis=1).astype(np.float32))
    assert d[0] < -3.0 and all(abs(v) < 1.0 for v in d[1:]), d


def test_a_peak_at_5512_hz_is_flagged_as_a_peak():
    x = noise() + (0.05 * np.sin(2 * np.pi * SR / 8 * T)).astype(np.float32)
    w = SC.worst_grid_depth(x, SR)
    assert w["hz"] == pytest.approx(SR / 8) and w["depth_db"] > 3.0
    d = depths(x)
    assert abs(d[0]) < 1.0 and abs(d[2]) < 1.0


def test_diversity_ratio_is_evals_figure():
    real, train = synth_batch(8, seed=1), synth_batch(12, seed=2)
    narrow = np.repeat(synth_batch(2, seed=3), 4, axis=0)  # four copies of two kicks: little variety
    wide = synth_batch(8, seed=4)
    models = [ModelRow(label=f"model @ {s}", artifact="a", name="m", family="waveform_diffusion", steps=s, clips=c,
                       seconds_per_kick=0.0, latency_s=0.0) for s, c in ((10, narrow), (50, wide))]
    sets = EvalSets(sample_rate=SR, real=real, train=train, models=models, synth=wide)
    rows = {r["name"]: r for r in score(sets, get_embedding("mfcc-stats"), splits=3, log=lambda s: None)["rows"]}
    ours = SC.diversity_ratios({"real": real, "narrow": narrow, "wide": wide}, real, train, SR)
    assert ours["real"] == pytest.approx(1.0)
    assert ours["narrow"] == pytest.approx(rows["model @ 10"]["diversity_ratio"], rel=1e-9)
    assert ours["wide"] == pytest.approx(rows["model @ 50"]["diversity_ratio"], rel=1e-9)
    assert ours["narrow"] < 0.8 * ours["wide"]


def test_haze_figure_rises_with_noise_over_the_body():
    clean = synth_kick(np.random.default_rng(6), click=0.0, drive=0.0, decay=0.5)
    hazy = clean + (0.01 * np.random.default_rng(7).standard_normal(N) * np.exp(-T / 0.1)).astype(np.float32)
    m = SC.measure(np.stack([clean, hazy]), SR)
    assert m["body_hf_db"][1] - m["body_hf_db"][0] > 10.0


def test_bootstrap_interval_holds_the_figure_and_narrows_with_more_clips():
    rng = np.random.default_rng(3)
    few, many = (rng.random(20) < 0.7).astype(float), (rng.random(2000) < 0.7).astype(float)
    for v in (few, many):
        lo, hi = SC.bootstrap_interval(v, np.mean)
        assert lo <= v.mean() <= hi
    (lo_f, hi_f), (lo_m, hi_m) = SC.bootstrap_interval(few, np.mean), SC.bootstrap_interval(many, np.mean)
    assert 0.2 < hi_f - lo_f < 0.6  # 20 clips: +-2 standard errors of a 70 % share is about +-0.2
    assert hi_m - lo_m < 0.06
    assert lo_m < 0.7 < hi_m
    med = SC.summarise({"body_hf_db": rng.normal(-45.0, 6.0, 500), "pitch_drop": many})
    assert med["body_hf_db"]["ci_lo"] < -45.0 < med["body_hf_db"]["ci_hi"] and med["pitch_drop"]["ci_lo"] < 0.7


def test_start_pct_is_the_first_samples_level_in_percent_of_the_peak_and_attack_ms_runs_onset_to_peak():
    """start_pct = |x[0]| / max|x| * 100; attack_ms = (index of max|x| - first index with |x| >= 10 % of it) / sr."""
    x = np.zeros((4, N))
    x[0, :6] = [-0.3, 0.1, 0.05, 0.8, -0.5, 0.2]  # starts at 37.5 % of its peak (the sign does not count)
    x[1, 10:15] = [0.02, 0.05, 0.3, 0.5, 0.1]  # silent start; onset (>= 0.05) at 11, peak at 13
    x[2, 0], x[2, 441] = 0.005, 0.5  # exactly 1 % of its peak: at the line, not a step
    x[3, 0], x[3, 441] = -0.0051, 0.5  # 1.02 %: a step
    m = SC.measure(x, SR)
    assert m["start_pct"] == pytest.approx([37.5, 0.0, 1.0, 1.02])
    assert SC.summarise(m)["step_share"]["share"] == 0.5  # clips 0 and 3
    # a start above 10 % is the onset itself (clip 0: peak 3 samples on); 1 % is below it (clips 2, 3: onset = peak)
    assert m["attack_ms"] == pytest.approx([1000 * 3 / SR, 1000 * 2 / SR, 0.0, 0.0])


def test_step_share_is_the_share_of_kicks_starting_above_1_percent_with_its_bootstrap_interval():
    t = T[None, :]
    phase = np.array([0.0, 0.0, 0.0, 0.2, 0.6, 1.2, 0.0, 0.3])[:, None]  # sin(phase): the level at sample 0
    clips = np.sin(2 * np.pi * 55 * t + phase) * np.exp(-t / 0.1)
    m = SC.measure(clips, SR)
    stepped = (m["start_pct"] > 1.0).astype(float)
    assert stepped.tolist() == [0, 0, 0, 1, 1, 1, 0, 1]
    s = SC.summarise(m)
    assert s["step_share"]["share"] == pytest.approx(0.5)
    assert (s["step_share"]["ci_lo"], s["step_share"]["ci_hi"]) == SC.bootstrap_interval(stepped, np.mean)
    assert s["step_share"]["ci_lo"] < 0.5 < s["step_share"]["ci_hi"]
    assert s["start_pct"]["median"] == pytest.approx(np.median(m["start_pct"]))
    assert {k for k in s if "share" in s[k]} == {"pitch_drop", "second_hit", "step_share"}


def test_the_table_the_intervals_and_the_json_carry_the_start(monkeypatch, tmp_path, capsys):
    import json
    from types import SimpleNamespace

    real = synth_batch(6, seed=1)
    real[:, 0] = 0.0  # real kicks start from silence
    stepped = synth_batch(6, seed=2)
    stepped[:, 0] = 0.4 * np.abs(stepped).max(axis=1)  # every one starts with a step of 40 % of its peak
    sets = EvalSets(sample_rate=SR, real=real, train=None, synth=real, real_sources=["a.wav"],
                    models=[ModelRow(label="m @ 10", artifact="a", name="m", family="waveform_diffusion", steps=10,
                                     clips=stepped, seconds_per_kick=0.0, latency_s=0.0)])
    gens = [SimpleNamespace(name="m", artifact=SimpleNamespace(step=1))]
    monkeypatch.setattr(SC, "collect", lambda *a, **kw: (gens, sets))
    assert SC.main(["--out", str(tmp_path), "--n", "6"]) == 0
    out = capsys.readouterr().out
    header, *lines = out.splitlines()
    assert "start_pct" in header and "step_share" in header
    row = next(line for line in lines if line.startswith("m @ 10"))
    assert "1.00" in row.split()  # step_share of the stepped set
    ci = [line for line in lines if line.startswith("m @ 10") and "step_share 1.00..1.00" in line]
    assert ci, out
    report = json.loads((tmp_path / "sound_check.json").read_text())
    assert report["sets"]["m @ 10"]["step_share"] == {"share": 1.0, "ci_lo": 1.0, "ci_hi": 1.0}
    assert report["sets"]["real held-out"]["step_share"]["share"] == 0.0
    assert report["sets"]["m @ 10"]["start_pct"]["median"] == pytest.approx(40.0, rel=1e-5)


def test_spread_gives_the_1nn_test_beside_diversity():
    """sound_check's 1-NN columns: a set drawn like the real kicks sits near 0.5, a narrow cluster near 1 with
    almost every kick's nearest neighbour its own; the real rows are their halves' baseline."""
    rng = np.random.default_rng(3)
    real, train = rng.normal(size=(40, 24)), rng.normal(size=(60, 24))
    alike, narrow = rng.normal(size=(120, 24)), 0.05 * rng.normal(size=(120, 24)) + rng.normal(size=24)
    fake_emb = {id(a): a for a in (real, train, alike, narrow)}
    import trainer.embeddings as E

    orig = E.get_embedding
    E.get_embedding = lambda name: (lambda clips, sr: fake_emb[id(clips)])
    try:
        out = SC.spread({"real": real, "train": train, "alike": alike, "narrow": narrow}, real, train, SR)
    finally:
        E.get_embedding = orig
    assert out["real"]["nn1"]["n_per_set"] == 20 and out["train"]["nn1_train"]["n_per_set"] == 30  # halves
    assert out["alike"]["nn1"]["lo"] < 0.5 < out["alike"]["nn1"]["hi"]
    assert out["narrow"]["nn1"]["accuracy"] > 0.9 and out["narrow"]["nn1_train"]["gen_nn_gen"] > 0.95
    assert out["narrow"]["diversity_ratio"] < 0.2 < out["alike"]["diversity_ratio"]


def test_second_hit_counts_the_kicks_that_hit_again_with_the_wilson_interval(monkeypatch, tmp_path, capsys):
    """A loop's next beat 330 ms after the first (what the bundled model learned from the starter kit's two loops)
    is counted in the table as kicks/n, with Wilson's interval (0 of n is not [0, 0])."""
    import json
    from types import SimpleNamespace

    from trainer.evaluation.distances import wilson_interval

    one = synth_batch(8, seed=3)
    at = int(0.33 * SR)
    two = one.copy()
    two[:2, at:] += one[:2, : N - at]  # two of the eight hit again
    sets = EvalSets(sample_rate=SR, real=one, train=None, synth=one, real_sources=["a.wav"],
                    models=[ModelRow(label="m @ 10", artifact="a", name="m", family="waveform_diffusion", steps=10,
                                     clips=two, seconds_per_kick=0.0, latency_s=0.0)])
    monkeypatch.setattr(SC, "collect", lambda *a, **kw: ([SimpleNamespace(name="m", artifact=SimpleNamespace(step=1))],
                                                         sets))
    assert SC.main(["--out", str(tmp_path), "--n", "8"]) == 0
    out = capsys.readouterr().out
    assert "2/8" in next(line for line in out.splitlines() if line.startswith("m @ 10")).split(), out
    assert "0/8" in next(line for line in out.splitlines() if line.startswith("real held-out")).split(), out
    got = json.loads((tmp_path / "sound_check.json").read_text())["sets"]
    lo, hi = wilson_interval(2, 8)
    assert got["m @ 10"]["second_hit"] == {"share": 0.25, "kicks": 2, "n": 8, "ci_lo": lo, "ci_hi": hi,
                                           "interval": "wilson"}
    assert got["real held-out"]["second_hit"]["ci_lo"] == 0.0 < got["real held-out"]["second_hit"]["ci_hi"]
    assert f"second_hit {lo:.3f}..{hi:.3f}" in out
