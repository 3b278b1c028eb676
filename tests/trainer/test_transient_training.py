"""Training the kick synth's learned transient (trainer/transient.py, trainer/recipes/kick_synth.py): a few steps bring
the synth's attack nearer its clips', and a run with `transient.enabled` trains it through the real CLI, logs its
validation figures, keeps it across a resume and exports an artifact whose generator plays it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from kickmodel import descriptors
from kickmodel.families import preset
from kickmodel.families.kick_synth.fit import fit
from kickmodel.families.kick_synth.transient import transient_net
from kickmodel.generator import Item
from kickmodel.loading import load_artifact, load_generator
from trainer.cli import main as kicktrain
from trainer.synth import synth_batch
from trainer.transient import Pairs, figures, train_transient, window_loss

SR = 44100
ROOT = Path(__file__).resolve().parents[2]
FAST = ["--family", "kick-synth", "--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard",
        "--set", "fit.iters=3", "--set", "fit.restart_iters=2", "--set", "fit.serve_iters=2", "--set", "fit.batch=4",
        "--set", "transient.enabled=true", "--set", "transient.steps=5"]


def test_a_few_steps_bring_the_synths_attack_nearer_its_clips():
    """Four starter kicks, each roughly fitted: 20 steps bring the window loss down."""
    from kickmodel.config import DataConfig
    from trainer.evaluation.sets import load_folder

    files = sorted((ROOT / "kickserver" / "data" / "kicks").iterdir())[:40:10]
    clips = torch.from_numpy(load_folder(files, DataConfig(length=8192), lambda m: None)[0])
    u, _ = fit(clips, SR, iters=4, restart_iters=2, version=2)
    cfg = preset("tiny", "kick_synth").replace("transient", enabled=True)
    torch.manual_seed(0)
    net = transient_net(cfg, u.shape[1])
    pairs = Pairs.of(clips, u, net, 2, SR)
    got = train_transient(net, pairs, SR, steps=20, lr=1e-2, log=lambda m: None)
    assert got["before"] == pytest.approx(got["synth_alone"])  # untrained, it adds nothing
    assert got["after"] < got["before"] - 0.05, got
    after = figures(net, pairs, SR)
    assert after["transient"] == pytest.approx(got["after"]) and not net.training
    assert not any(p.requires_grad for p in net.parameters())


def test_the_window_loss_is_zero_for_the_clip_itself_and_sees_the_attack():
    x = torch.from_numpy(synth_batch(2, seed=4)[:, :1323].astype(np.float32))
    assert float(window_loss(x, x, SR).abs().max()) < 1e-5
    late = torch.nn.functional.pad(x[:, :-22], (22, 0))  # the same attack half a millisecond late
    assert bool((window_loss(late, x, SR) > 0.1).all())


@pytest.fixture(scope="module")
def kicks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("transient_kicks")
    for i, clip in enumerate(synth_batch(8, seed=11)):
        sf.write(folder / f"k{i}.wav", clip, SR, subtype="PCM_16")
    return folder


def test_a_run_trains_exports_and_plays_its_transient(kicks, tmp_path, capsys):
    run = tmp_path / "run"
    assert kicktrain(["fit", str(kicks), "--run-dir", str(run), "--train-steps", "2", *FAST,
                      "--set", "train.val_every=1"]) == 0
    err = capsys.readouterr().err
    assert "transient: training on 7 clips" in err and "transient: window loss" in err, err
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if "val_transient" in r]
    assert val and all(np.isfinite(r["val_transient"]) and np.isfinite(r["val_transient_off"]) for r in val)
    first = tmp_path / "first.safetensors"
    assert kicktrain(["export", str(run), "--out", str(first)]) == 0
    # a resume keeps the transient it trained (its phase is not run again) and the prior goes on
    assert kicktrain(["fit", str(kicks), "--run-dir", str(run), "--train-steps", "4", *FAST]) == 0
    assert "transient: training" not in capsys.readouterr().err
    out = tmp_path / "model.safetensors"
    assert kicktrain(["export", str(run), "--out", str(out)]) == 0
    art, before = load_artifact(out), load_artifact(first)
    assert {k.split(".")[0] for k in art.tensors} == {"denoiser", "transient"}
    assert art.config.transient.enabled
    for k in art.part_tensors("transient"):
        assert torch.equal(art.tensors["transient." + k], before.tensors["transient." + k]), k
    trained = art.part_tensors("transient")
    assert float(trained["out.weight"].abs().max()) > 0  # trained: no longer the zero it starts at
    gen = load_generator(out)
    assert gen.transient is not None and gen.describe()["synth_transient"]
    for k, v in gen.transient.state_dict().items():
        assert torch.equal(v, trained[k])
    kicks_made = gen.generate([Item(seed=s) for s in range(2)], gen.settings())
    assert kicks_made.shape[0] == 2 and np.isfinite(kicks_made).all() and np.abs(kicks_made).max() > 0.1
    # a fine-tune of it keeps its transient (fit_config takes the artifact's section, load_init its weights)
    tuned = tmp_path / "tuned.safetensors"
    assert kicktrain(["fit", str(kicks), "--run-dir", str(tmp_path / "tune"), "--init", str(out), "--train-steps", "1",
                      *FAST[:-4]]) == 0
    assert kicktrain(["export", str(tmp_path / "tune"), "--out", str(tuned)]) == 0
    assert load_artifact(tuned).part_tensors("transient").keys() == trained.keys()
    assert all(torch.equal(v, trained[k]) for k, v in load_artifact(tuned).part_tensors("transient").items())
    # and a running daemon serves it: a kick asked for its click in dB measures so, transient and all
    from daemon_util import models_folder, start_daemon

    (tmp_path / "daemon").mkdir()
    with start_daemon(tmp_path / "daemon", models_folder(tmp_path / "models", out), model="model") as d:
        replies = d.send("/kick/generate", 1, "seed", 4, "click_db", -20.0, expect=1, timeout=60)
        assert [a for a, _ in replies] == ["/kick/done"], (replies, d.stderr_text()[-2000:])
        audio, rate = sf.read(replies[0][1][1], dtype="float32")
    assert audio[0] == 0.0
    click = float(descriptors.measure(torch.from_numpy(np.ascontiguousarray(audio))[None], rate)[0, 2])
    assert abs(click + 20.0) <= 1.5, click
