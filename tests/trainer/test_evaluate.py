"""trainer.evaluate (trainer/evaluation/, trainer/xcorr.py) and trainer.embeddings: the distances' closed
forms, the embedding, copy detection, and `kicktrain eval` end to end on a tiny model and a few synth kicks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from kickmodel.dsp import finish_kick
from trainer.embeddings import Embedding, MfccStats, get_embedding
from trainer.evaluation.distances import diversity, frechet_distance, kid, mmd2_unbiased, novelty, standardiser
from trainer.evaluation.measures import end_level_db, tail_hiss_db
from trainer.evaluation.scoring import recommend_steps, split_plan
from trainer.synth import synth_batch
from trainer.xcorr import max_xcorr

SR = 44100
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kicks() -> np.ndarray:
    return synth_batch(24, seed=3)


def gaussian(n: int, d: int, seed: int, shift: float = 0.0, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)) * scale + shift


# ------------------------------------------------------------------ FAD and KID


def test_fad_of_a_set_with_itself_is_zero_and_grows_with_a_mean_shift():
    a = gaussian(40, 6, seed=0)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-9)
    shifts = [0.0, 0.5, 1.0, 2.0]
    fads = [frechet_distance(a, a + s) for s in shifts]
    np.testing.assert_allclose(fads, [6 * s * s for s in shifts], rtol=1e-9, atol=1e-9)  # |mu_a - mu_b|^2
    b = gaussian(40, 6, seed=1)
    assert frechet_distance(a, b + 1.0) > frechet_distance(a, b) > 0


def test_fad_matches_the_closed_form_and_both_paths_agree():
    # diagonal Gaussians: FD = |dmu|^2 + sum (sa - sb)^2 for the fitted stds
    a, b = gaussian(4000, 3, seed=2), gaussian(4000, 3, seed=3, shift=0.3, scale=2.0)
    sa, sb = a.std(0, ddof=1), b.std(0, ddof=1)
    closed = ((a.mean(0) - b.mean(0)) ** 2).sum() + ((sa - sb) ** 2).sum()
    assert frechet_distance(a, b) == pytest.approx(closed, rel=0.02)
    # fewer clips than features: the n x m nuclear-norm path equals the d x d eigen path
    a, b = gaussian(5, 30, seed=4), gaussian(7, 30, seed=5, shift=0.2)
    assert frechet_distance(a, b) == pytest.approx(frechet_distance(a, b, eps=1e-300), rel=1e-7)
    with pytest.raises(ValueError):
        frechet_distance(a[:1], b)


def test_kid_is_unbiased_and_separates_distributions():
    same = [kid(gaussian(30, 8, seed=s), gaussian(30, 8, seed=100 + s)) for s in range(30)]
    shifted = [kid(gaussian(30, 8, seed=s), gaussian(30, 8, seed=100 + s, shift=0.7)) for s in range(30)]
    assert abs(np.mean(same)) < 3 * np.std(same) / np.sqrt(len(same)) + 1e-3  # zero in expectation
    assert min(same) < 0 < max(same)  # unbiased: it does go negative
    assert np.mean(shifted) > 10 * np.std(same)
    a, b = gaussian(60, 8, seed=7), gaussian(60, 8, seed=8, shift=0.7)
    assert kid(a, b, subset_size=20, n_subsets=10) == pytest.approx(mmd2_unbiased(a, b), rel=0.5)


def test_standardiser_floors_the_scale():
    r = gaussian(20, 4, seed=0)
    r[:, 3] = 5.0  # a feature the real set never moves
    mu, scale = standardiser(r)
    assert mu[3] == 5.0 and scale[3] == pytest.approx(0.1 * np.median(r.std(0)))
    assert (scale[:3] == r[:, :3].std(0)).all()


# ------------------------------------------------------------------ the embedding


def test_embedding_is_deterministic_and_documented(kicks):
    emb = get_embedding("mfcc-stats")
    assert isinstance(emb, Embedding) and emb.name == "mfcc-stats"
    z = emb(kicks[:6], SR)
    assert z.shape == (6, emb.dim) and z.dtype == np.float64 and np.isfinite(z).all()
    np.testing.assert_array_equal(z, get_embedding("mfcc-stats")(kicks[:6], SR))
    np.testing.assert_allclose(z[2], emb(kicks[2:3], SR)[0], rtol=1e-5, atol=1e-4)  # nor on the batch (float32)
    assert len(MfccStats.feature_names()) == emb.dim == len(set(MfccStats.feature_names()))
    with pytest.raises(ValueError):
        emb(np.full((2, 1000), np.nan, np.float32), SR)


def test_embedding_separates_kicks_from_noise_bursts_and_hears_hiss(kicks):
    emb = get_embedding("mfcc-stats")
    rng = np.random.default_rng(0)
    t = np.arange(kicks.shape[1]) / SR
    noise = finish_kick(rng.standard_normal(kicks[:12].shape) * np.exp(-t / 0.15), SR)
    zk, zn = emb(kicks[:12], SR), emb(noise, SR)
    mu, scale = standardiser(np.concatenate([zk, zn]))
    zk, zn = (zk - mu) / scale, (zn - mu) / scale
    within = max(diversity(zk), diversity(zn))
    between = float(np.sqrt(((zk[:, None] - zn[None]) ** 2).mean(-1)).mean())
    assert between > 1.5 * within
    assert frechet_distance(zk[:6], zk[6:]) < 0.5 * frechet_distance(zk[:6], zn[:6])

    # a hiss floor 40 dB under the peak lifts the late-tail high bands by tens of dB
    names = MfccStats.feature_names()
    hissy = finish_kick(kicks[:4] + 10 ** (-40 / 20) * rng.standard_normal(kicks[:4].shape), SR)
    lift = emb(hissy, SR) - emb(kicks[:4], SR)
    assert (lift[:, names.index("level_500ms-end_8kHz-")] > 30).all()
    assert (lift[:, names.index("decay60_ms")] > 0).all()


def test_user_embedding_from_a_file(tmp_path, kicks):
    mod = tmp_path / "my_embed.py"
    mod.write_text("import numpy as np\n"
                   "def embed(clips, sample_rate):\n"
                   "    return np.stack([clips.std(1), np.abs(clips).max(1)], 1)\n"
                   "def bad(clips, sample_rate):\n"
                   "    return np.zeros(3)\n")
    emb = get_embedding(f"{mod}:embed")
    assert emb(kicks[:3], SR).shape == (3, 2) and emb.dim == 2
    with pytest.raises(ValueError, match="shape"):
        get_embedding(f"{mod}:bad")(kicks[:3], SR)
    for spec in ("nope", f"{mod}:missing", "no_such_module_xyz:embed"):
        with pytest.raises(ValueError):
            get_embedding(spec)


# ------------------------------------------------------------------ novelty, copies, product measures


def test_novelty_flags_a_copier(kicks):
    train, heldout = kicks[:16], kicks[16:]
    emb = get_embedding("mfcc-stats")
    zt, zh = emb(train, SR), emb(heldout, SR)
    copies = train[[3, 7, 11, 0]]  # a "model" that returns training clips
    zc = emb(copies, SR)
    mu, scale = standardiser(np.concatenate([zh, zt]))
    nov_copy = novelty((zc - mu) / scale, (zt - mu) / scale)
    nov_real = novelty((zh - mu) / scale, (zt - mu) / scale)
    assert nov_copy.max() < 1e-6 and np.median(nov_real) > 0.1
    lag = int(0.005 * SR)
    np.testing.assert_allclose(max_xcorr(copies, train, lag), 1.0, atol=1e-4)
    shifted = np.roll(copies, 40, axis=1) * -0.5  # moved by 40 samples, inverted, quieter: still a copy
    np.testing.assert_allclose(max_xcorr(shifted, train, lag), 1.0, atol=0.02)
    assert max_xcorr(heldout, train, lag).max() < 0.99


def test_tail_hiss_and_end_level(kicks):
    clean = kicks[:4]
    rng = np.random.default_rng(1)
    hissy = clean + 10 ** (-30 / 20) * rng.standard_normal(clean.shape).astype(np.float32)
    h_clean, h_hissy = tail_hiss_db(clean, SR), tail_hiss_db(hissy, SR)
    # white noise at -30 dB re. a peak of ~0.9: the part above 4 kHz is ~82 % of it
    np.testing.assert_allclose(h_hissy, -30 + 10 * np.log10((SR / 2 - 4000) / (SR / 2))
                               - 20 * np.log10(np.abs(hissy).max(1)), atol=1.5)
    assert (h_clean < -90).all()
    assert (end_level_db(hissy, SR) > -35).all() and (end_level_db(clean, SR) < -60).all()


def test_split_plan_and_step_rule():
    plan = split_plan(6, 50, seed=0)
    assert len(plan) == 20  # all C(6, 3) splits
    for a, b in plan:
        assert len(a) == 3 and len(b) == 3 and not set(a) & set(b)
    plan = split_plan(40, 10, seed=0)
    assert len(plan) == 10 and all(len(a) == 20 and len(b) == 20 for a, b in plan)
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, 30)
    assert recommend_steps({10: 5.0 + noise, 25: 1.05 + noise, 50: 1.0 + noise}) == 25  # within 10 % of the best
    assert recommend_steps({10: 5.0 + noise, 25: 2.0 + noise, 50: 1.0 + noise}) == 50
    wobbly = 1.15 + np.resize([1.0, -1.0], 30)  # 15 % worse on average, but not significantly
    assert recommend_steps({10: wobbly, 50: np.full(30, 1.0)}) == 10


# ------------------------------------------------------------------ kicktrain eval end to end


def _write_kicks(folder, clips):
    folder.mkdir()
    for i, c in enumerate(clips):
        sf.write(str(folder / f"kick_{i:02d}.wav"), c, SR, subtype="PCM_24")


def test_kicktrain_eval_end_to_end(tmp_path, tiny_artifact, capsys):
    from trainer.cli import main

    clips = synth_batch(12, seed=11, length=6000)
    flam = clips[0].copy()
    flam[int(0.06 * SR):] += 0.8 * clips[0][: len(flam) - int(0.06 * SR)]  # a second stroke 60 ms after the first
    _write_kicks(tmp_path / "real", [flam / np.abs(flam).max(), *clips[1:6]])
    _write_kicks(tmp_path / "train", clips[6:])
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in range(1, 20)))
    out = tmp_path / "eval"
    rc = main(["eval", str(tiny_artifact), "--real", str(tmp_path / "real"), "--train", str(tmp_path / "train"),
               "--out", str(out), "--n", "6", "--steps", "3,2", "--device", "cpu", "--run", str(run)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "real vs real" in printed and "tiny @ 2" in printed and "procedural baseline" in printed
    # under the table, one short line per column saying what it is
    from trainer.evaluation.report import TABLE_COLUMNS

    legend = printed.split("\n\n", 1)[1].splitlines() if "\n\n" in printed else []
    for column in TABLE_COLUMNS:
        line = next((s for s in legend if s.lstrip().startswith(f"{column}:")), None)
        assert line is not None and len(line) <= 110 and len(line.split(":", 1)[1].split()) >= 2, (column, legend)

    report = json.loads((out / "report.json").read_text())
    names = [r["name"] for r in report["rows"]]
    assert names == ["real vs real", "tiny @ 2", "tiny @ 3", "procedural baseline"]
    assert report["steps"] == [2, 3] and report["recommended_steps"]["tiny"] in (2, 3)
    assert report["embedding"]["name"] == "mfcc-stats" and report["n_real"] == 6 and report["n_train"] == 6
    assert report["splits"] == 20 and report["reference_size"] == 3 and report["compared_size"] == 3
    for r in report["rows"]:
        for key in ("fad", "kid", "kid_train", "novelty", "diversity", "tail_hiss_db", "ncc_max", "haze_vs_real_db"):
            assert isinstance(r[key], float), (r["name"], key)
        if r["kind"] == "model":
            assert r["seconds_per_kick"] > 0 and r["n"] == 6 and "kid_at_most_tenth_of_synth" in r["targets"]
            assert 0 < r["latency_s"] and r["family"] == "waveform_diffusion"
    assert report["rows"][0]["haze_vs_real_db"] == 0.0
    # the kicks that hit twice: the real flam counted, with the share's interval; no kick a model wrote hits twice
    real_hits = report["rows"][0]["second_hit"]
    assert (real_hits["kicks"], real_hits["n"]) == (1, 6) and real_hits["lo"] < 1 / 6 < real_hits["hi"], real_hits
    assert all(r["second_hit"]["kicks"] == 0 for r in report["rows"] if r["kind"] == "model"), report["rows"]
    assert "1/6 [" in printed.splitlines()[2] and "2nd hit" in printed.splitlines()[0], printed
    for r in report["rows"]:  # the 1-NN two-sample test: held-out (the real row: its halves) and training
        for key in ("nn1", "nn1_train"):
            t = r[key]
            assert 0.0 <= t["lo"] <= t["accuracy"] <= t["hi"] <= 1.0 and t["draws"] >= 1, (r["name"], key, t)
        assert (r["nn1"]["gen_nn_gen"] is None) == (r["kind"] == "real")
    assert report["rows"][0]["nn1"]["n_per_set"] == 3  # halves of 6 held-out kicks
    for name in ("spectrograms.png", "envelopes.png", "loss.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC, name
    assert sorted(report["pictures"]) == ["envelopes.png", "loss.png", "spectrograms.png"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_kicktrain_eval_same_folder_uses_the_heldout_split(tmp_path, tiny_artifact, capsys):
    from trainer.cli import main

    _write_kicks(tmp_path / "kicks", synth_batch(40, seed=12, length=5000))
    out = tmp_path / "eval"
    args = ["eval", str(tiny_artifact), "--real", str(tmp_path / "kicks"), "--train", str(tmp_path / "kicks"),
            "--out", str(out), "--n", "4", "--steps", "1", "--device", "cpu"]
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["n_real"] == 4 and report["n_train"] == 36  # val_fraction 0.1, as `fit` splits
    assert any("held-out split" in note for note in report["notes"])
    # without --train: the whole folder is the real set, and there is no novelty
    assert main(args[:4] + args[6:]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["n_real"] == 40 and report["n_train"] == 0
    assert all(r["novelty"] is None and r["kid_train"] is None for r in report["rows"])
    capsys.readouterr()
    # errors a user can fix: one line, exit 2
    assert main(args[:-4] + ["--steps", "x", "--device", "cpu"]) == 2
    assert main(["eval", str(tiny_artifact), "--real", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert main(args + ["--embedding", "nope"]) == 2
    assert "kicktrain eval:" in capsys.readouterr().err


def test_kicktrain_eval_compares_families_side_by_side(tmp_path, tiny_artifact, capsys):
    """Several artifacts of different families: one table, a row per step count for diffusion models and one
    row for a one-pass model, each with its family, latency and haze."""
    from daemon_util import make_artifact

    from trainer.cli import main

    vae = make_artifact(tmp_path / "vae.safetensors", family="mel_vae")
    clips = synth_batch(12, seed=13, length=4096)
    _write_kicks(tmp_path / "real", clips[:6])
    _write_kicks(tmp_path / "train", clips[6:])
    out = tmp_path / "eval"
    assert main(["eval", str(tiny_artifact), str(vae), "--real", str(tmp_path / "real"), "--train",
                 str(tmp_path / "train"), "--out", str(out), "--n", "4", "--steps", "2,3", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "waveform" in printed and "mel-vae" in printed and "haze dB" in printed
    report = json.loads((out / "report.json").read_text())
    rows = {r["name"]: r for r in report["rows"]}
    assert list(rows) == ["real vs real", "tiny @ 2", "tiny @ 3", "vae", "procedural baseline"]
    assert rows["vae"]["family"] == "mel_vae" and rows["vae"]["steps"] is None and rows["vae"]["latency_s"] > 0
    assert list(report["recommended_steps"]) == ["tiny"]
    assert [m["family"] for m in report["models"]] == ["waveform_diffusion", "mel_vae"]


def test_kicktrain_eval_notes_real_files_the_model_learned_from(tmp_path, capsys):
    """Artifacts name no folder; the recorded split's content hashes say the real set was trained on."""
    import hashlib

    from daemon_util import root_conftest

    from kickmodel.loading import load_artifact
    from trainer.cli import main

    _write_kicks(tmp_path / "real", synth_batch(6, seed=3, length=6000))
    learned = sorted(tmp_path.joinpath("real").iterdir())[:4]
    (tmp_path / "m").mkdir()
    art = load_artifact(root_conftest().make_tiny_artifact(tmp_path / "m" / "seen.safetensors"))
    art.training = {"split": {"train": [{"name": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                                        for p in learned], "heldout": []}}
    art.save(tmp_path / "m" / "seen.safetensors")
    assert main(["eval", str(tmp_path / "m" / "seen.safetensors"), "--real", str(tmp_path / "real"), "--out",
                 str(tmp_path / "eval"), "--n", "4", "--steps", "2", "--device", "cpu"]) == 0
    assert "note: 4 of the 6 real clips are files seen was trained on" in capsys.readouterr().err


def test_one_nn_two_sample_test_tells_alike_clustered_and_copied_sets_apart():
    """The 1-NN accuracy (Xu et al. 2018) is 0.5 for a set drawn like the real one, near 1 for a set that clusters
    (every generated clip's nearest neighbour generated) and near 0 for copies; its interval spans its draws."""
    from trainer.evaluation.distances import one_nn_accuracy, real_halves_1nn, two_sample_1nn

    rng = np.random.default_rng(0)
    real = rng.normal(size=(60, 8))
    alike = two_sample_1nn(rng.normal(size=(240, 8)), real)
    clustered = two_sample_1nn(0.3 * rng.normal(size=(240, 8)), real)
    copies = two_sample_1nn(real + 1e-3 * rng.normal(size=real.shape), real)
    halves = real_halves_1nn(real)
    assert 0.4 < alike["accuracy"] < 0.6 and alike["lo"] < 0.5 < alike["hi"] and alike["draws"] == 50
    assert clustered["accuracy"] > 0.75 and clustered["gen_nn_gen"] > 0.95 and clustered["lo"] > alike["hi"]
    assert copies["accuracy"] == 0.0 and copies["draws"] == 1  # equal sizes: one balanced draw is the whole test
    assert halves["lo"] < 0.5 < halves["hi"] and halves["n_per_set"] == 30
    # leave one out: a clip is never its own neighbour (two identical sets would otherwise score 1)
    assert one_nn_accuracy(real, real.copy())[0] == 0.0
    same = np.zeros((2, 3))  # a tie counts for the other set: identical sets never look told apart
    assert one_nn_accuracy(same, same.copy())[0] == 0.0
    with pytest.raises(ValueError, match="same size"):
        one_nn_accuracy(real, real[:5])


def test_wilson_interval_of_a_share():
    from trainer.evaluation.distances import wilson_interval

    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)  # the textbook case
    assert wilson_interval(0, 512) == (0.0, pytest.approx(1.959964 ** 2 / (512 + 1.959964 ** 2)))  # not [0, 0]
    lo, hi = wilson_interval(512, 512)
    assert hi == pytest.approx(1.0) and 0.99 < lo < 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
