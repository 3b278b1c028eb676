"""What chooses the step a run exports (train.select_by, trainer/selection.py): a kick-synth run by how well its dials
follow (its validation loss rose while its kicks and dials got better: the version-2 run of 2026-12-05 exported step
250, dials r 0.19 / 0.51 / 0.62, where step 1500 had 0.83 / 0.90 / 0.91), every other family by its validation
loss; the dial figure itself, on stand-in generators whose dials are known to work or not."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kickmodel.generator import Item
from tests.conftest import StepClock
from trainer.cli import main as kicktrain
from trainer.evaluation import dials

SR = 44100
SYNTH_FAST = ["--family", "kick-synth", "--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard",
              "--set", "fit.iters=3", "--set", "fit.restart_iters=2", "--set", "fit.serve_iters=2",
              "--set", "fit.batch=4"]


class StandIn:
    """A generator of plain kicks (a decaying sine and a noise click) whose dials either set what they name (pitch
    45..145 Hz, decay time constant 0.05..0.45 s, click -40..-5 dB) or, deaf, are ignored: each kick's every number is
    then drawn from its seed."""

    controls = ("decay", "pitch", "click")
    sample_rate = SR

    def __init__(self, deaf: bool) -> None:
        self.deaf = deaf

    def settings(self):
        return None

    def generate(self, items, settings) -> np.ndarray:
        t = np.arange(int(1.2 * SR)) / SR
        out = []
        for it in items:
            drawn = dict(zip(self.controls, np.random.default_rng(it.seed).uniform(0.1, 0.9, 3)))
            d = drawn if self.deaf else drawn | dict(it.controls)
            kick = np.sin(2 * np.pi * (45 + 100 * d["pitch"]) * t) * np.exp(-t / (0.05 + 0.4 * d["decay"]))
            burst = np.random.default_rng(it.seed + 1).standard_normal(int(0.003 * SR))
            kick[:len(burst)] += 10 ** ((-40 + 35 * d["click"]) / 20) * 8 * burst
            out.append(kick / np.abs(kick).max())
        return np.stack(out).astype(np.float32)


def test_the_dial_miss_is_small_for_dials_that_work_and_near_one_for_dials_that_do_nothing():
    working, deaf = dials.miss(StandIn(deaf=False), 8), dials.miss(StandIn(deaf=True), 8)
    assert working["dial_miss"] < 0.15 and min(working[f"dial_r_{c}"] for c in StandIn.controls) > 0.8, working
    assert deaf["dial_miss"] > 0.7, deaf
    assert dials.miss(StandIn(deaf=False), 8) == working  # the same seeds at every check: the same figure


def test_a_dial_whose_kicks_all_measure_alike_counts_as_r_zero_not_nan():
    class Constant(StandIn):
        def generate(self, items, settings):
            return super().generate([Item(seed=0, controls={}) for _ in items], settings)

    got = dials.miss(Constant(deaf=True), 2)
    assert got["dial_miss"] == pytest.approx(1.0) and all(got[f"dial_r_{c}"] == 0.0 for c in StandIn.controls), got


def _scripted(monkeypatch, means: list[float]) -> list[int]:
    """dials.following answers a scripted mean r at each check (the same r for every dial); returns the calls."""
    calls: list[int] = []
    answers = iter(means)

    def following(gen, n, seed, values=dials.VALUES):
        calls.append(n)
        r = next(answers)
        return {c: r for c in gen.controls}

    monkeypatch.setattr(dials, "following", following)
    return calls


def test_a_kick_synth_run_exports_the_step_whose_dials_follow_best_and_says_so(synth_kicks, tmp_path, monkeypatch,
                                                                               capsys):
    from kickmodel.loading import load_artifact

    calls = _scripted(monkeypatch, [0.2, 0.9, 0.5, 0.4])
    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "4", "--export-dir", str(models),
                    *SYNTH_FAST, "--set", "train.val_every=1", "--set", "train.ckpt_every=4"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert calls == [2] * 4  # the tiny preset's select_kicks, at each of the 4 checks
    assert "step 2: dial miss" in err and "pitch r 0.90" in err and "validation loss" in err, err
    art = load_artifact(models / "run.safetensors")
    assert art.step == 2 and art.training["exported_step"] == 2, art.training
    assert art.training["best_dial_miss"] == pytest.approx(0.1) and "dial miss" in art.training["exported_because"]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["best_step"] == 2 and summary["best_dial_miss"] == pytest.approx(0.1), summary
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    checks = [m for m in metrics if "val_dial_miss" in m]
    assert [round(m["val_dial_miss"], 6) for m in checks] == [0.8, 0.1, 0.5, 0.6]
    assert all("val_loss" in m for m in checks)
    capsys.readouterr()
    again = tmp_path / "again.safetensors"
    assert kicktrain(["export", str(run), "--out", str(again)]) == 0
    assert load_artifact(again).step == 2 and "the best dial miss" in capsys.readouterr().err
    assert load_artifact(again).training["exported_because"] == art.training["exported_because"]


def test_select_by_loss_on_the_command_line_sweeps_no_dials(synth_kicks, tmp_path, monkeypatch, capsys):
    from kickmodel.loading import load_artifact

    calls = _scripted(monkeypatch, [])
    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "2", "--export-dir", str(models),
                    *SYNTH_FAST, "--set", "train.val_every=1", "--set", "train.select_by=loss"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert calls == [] and "dial miss" not in err and "step 1: validation loss" in err, err
    assert "best_val_loss" in load_artifact(models / "run.safetensors").training


def test_the_dials_kicks_leave_the_training_steps_as_they_were(synth_kicks, tmp_path):
    """The check renders kicks between steps: the run's weights after it are those of a run never checked (with
    dropout, which draws from torch's global generator: the check keeps that generator's state around its kicks)."""
    from trainer.checkpoint import load_latest

    weights = []
    for every in ("1", "1000"):
        run = tmp_path / f"every{every}"
        assert kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "3", *SYNTH_FAST,
                          "--set", f"train.val_every={every}", "--set", "train.ckpt_every=3",
                          "--set", "model.dropout=0.1"]) == 0
        weights.append(load_latest(run)[0]["model"])
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_select_by_the_config_does_not_know_is_refused_with_the_choices(synth_kicks, tmp_path, capsys):
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(tmp_path / "r"), "--train-steps", "1", *SYNTH_FAST,
                    "--set", "train.select_by=kid"])
    err = capsys.readouterr().err
    assert rc != 0 and "train.select_by 'kid' is not loss, dials or recon" in err, err
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(tmp_path / "r2"), "--train-steps", "1", *SYNTH_FAST,
                    "--set", "train.select_by=recon"])
    err = capsys.readouterr().err
    assert rc != 0 and "train.select_by=recon needs a mel-VAE run" in err, err


def test_a_codec_vae_exports_its_best_reconstruction_not_its_best_loss(synth_kicks, tmp_path, capsys):
    """A mel-VAE chosen by `recon` exports the step whose held-out reconstruction error is the lowest, which its
    validation loss (with its prior's likelihood in it) need not pick: the run's own metrics say which step that is."""
    from kickmodel.loading import load_artifact

    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "6", "--export-dir", str(models),
                    "--family", "mel-vae", "--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard",
                    "--set", "train.val_every=1", "--set", "train.select_by=recon",
                    "--set", "inverter.kind=griffin-lim"])
    err = capsys.readouterr().err
    assert rc == 0, err
    checks = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"val_recon"' in line]
    assert len(checks) == 6, checks
    best = min(checks, key=lambda c: c["val_recon"])
    art = load_artifact(models / "run.safetensors")
    assert art.step == best["step"] and art.training["best_val_recon"] == pytest.approx(best["val_recon"], rel=1e-4)
    assert "the best validation reconstruction error" in art.training["exported_because"], art.training
    assert f"step {best['step']}: validation reconstruction error {best['val_recon']:.4f}" in err, err


def test_a_run_stopped_by_its_budget_is_judged_at_the_step_it_stops_on(synth_kicks, tmp_path, monkeypatch, capsys):
    """A budgeted kick-synth run (bench custom's 4 minutes) stopped 118 steps after its last check and could not
    export them. Now the step a budget stops on is checked too, and exported where it is the best."""
    from kickmodel.loading import load_artifact
    from trainer import train as T

    calls = _scripted(monkeypatch, [0.5, 0.9])
    monkeypatch.setattr(T, "CLOCK", StepClock(20.0))  # --minutes 1 is spent after a few steps
    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "40", "--minutes", "1",
                    "--export-dir", str(models), *SYNTH_FAST, "--set", "train.val_every=2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    stop = summary["step"]
    assert summary["stop_reason"] == "time budget of 1 min" and stop % 2 == 1, summary  # between two checks
    assert len(calls) == 2 and f"step {stop}: dial miss" in err, err
    assert load_artifact(models / "run.safetensors").step == stop == summary["best_step"]


def test_a_run_whose_length_is_not_a_multiple_of_its_checks_is_judged_at_its_last_step(synth_kicks, tmp_path,
                                                                                      monkeypatch, capsys):
    from kickmodel.loading import load_artifact

    calls = _scripted(monkeypatch, [0.3, 0.8])
    run, models = tmp_path / "run", tmp_path / "models"
    assert kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "3", "--export-dir",
                      str(models), *SYNTH_FAST, "--set", "train.val_every=2"]) == 0
    err = capsys.readouterr().err
    assert len(calls) == 2 and "step 2: dial miss" in err and "step 3: dial miss" in err, err
    assert load_artifact(models / "run.safetensors").step == 3


def test_dials_choose_without_held_out_clips(synth_kicks, tmp_path, monkeypatch, capsys):
    """The dials need no held-out kick: a run with none still chooses its export by them (the loss cannot)."""
    from kickmodel.loading import load_artifact

    calls = _scripted(monkeypatch, [0.9, 0.2])
    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(run), "--train-steps", "2", "--export-dir", str(models),
                    *SYNTH_FAST, "--set", "train.val_every=1", "--set", "data.val_fraction=0"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert len(calls) == 2 and "validation loss" not in err, err
    art = load_artifact(models / "run.safetensors")
    assert art.step == 1 and art.training["val_clips"] == 0 and "dial miss" in art.training["exported_because"]


@pytest.mark.parametrize("setting, said", [("train.select_kicks=0", "train.select_kicks must be within 1..64"),
                                           ("conditioning.controls=[]", "--set train.select_by=loss")])
def test_a_dial_choice_that_cannot_run_is_refused_saying_why(synth_kicks, tmp_path, capsys, setting, said):
    rc = kicktrain(["fit", str(synth_kicks), "--run-dir", str(tmp_path / "r"), "--train-steps", "1", *SYNTH_FAST,
                    "--set", setting])
    err = capsys.readouterr().err
    assert rc != 0 and said in err, err
