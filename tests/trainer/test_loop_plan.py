"""The training loop chosen per device and memory budget (trainer/loop_plan.py): the candidates'
order, the CPU's peak measurement, and `kicktrain fit --vram-budget` choosing, explaining and refusing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kickmodel.families import preset
from trainer import loop_plan
from trainer.cli import main as kicktrain
from trainer.loop_plan import Candidate, StepProbe, candidates, choose_loop, explicit_settings
from trainer.train import TrainingError

KICKS = Path(__file__).parents[1] / "fixtures" / "kicks"
FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard", "--max-steps", "2"]
CPU, GPU = torch.device("cpu"), torch.device("cuda")


# ---------------------------------------------------------------------------------------------- the order

def test_gpu_order_prefers_the_big_micro_batch_then_fp32_then_checkpointing(monkeypatch):
    monkeypatch.setattr(loop_plan, "autocast_precision", lambda device: "bf16")
    got = [(c.micro_batch, c.precision, c.grad_checkpointing) for c in candidates(4, GPU)]
    assert got == [(4, "fp32", False), (4, "bf16", False), (4, "fp32", True), (4, "bf16", True),
                   (2, "fp32", False), (2, "bf16", False), (2, "fp32", True), (2, "bf16", True),
                   (1, "fp32", False), (1, "bf16", False), (1, "fp32", True), (1, "bf16", True)]


def test_cpu_order_splits_the_batch_before_checkpointing_and_stays_fp32():
    got = [(c.micro_batch, c.precision, c.grad_checkpointing) for c in candidates(6, CPU)]
    assert got == [(6, "fp32", False), (3, "fp32", False), (2, "fp32", False), (1, "fp32", False),
                   (6, "fp32", True), (3, "fp32", True), (2, "fp32", True), (1, "fp32", True)]


def test_settings_the_user_set_are_kept_and_preset_values_are_not():
    cfg = preset("base", "waveform_diffusion")  # micro 16 of 32, checkpointing on, precision auto
    assert explicit_settings(cfg) == {}
    cfg = cfg.replace("train", micro_batch=8, mixed_precision="off")
    assert explicit_settings(cfg) == {"micro_batch": 8, "mixed_precision": "off"}
    assert [(c.micro_batch, c.precision) for c in candidates(32, CPU, explicit_settings(cfg))] == [(8, "fp32")] * 2
    assert explicit_settings(preset("tiny", "waveform_diffusion").replace("train", grad_checkpointing=True)) == \
        {"grad_checkpointing": True}


def _fake(peaks: dict[tuple[int, bool], float], asked: list[Candidate]):
    def measure(c: Candidate) -> float:
        asked.append(c)
        return peaks[(c.micro_batch, c.grad_checkpointing)]
    return measure


PEAKS = {(4, False): 400.0, (2, False): 200.0, (1, False): 100.0, (4, True): 90.0, (2, True): 50.0, (1, True): 30.0}


def test_the_first_candidate_under_nine_tenths_of_the_budget_is_taken():
    cfg, asked = preset("tiny", "waveform_diffusion"), []
    plan = choose_loop(cfg, CPU, 250 / 1024, None, lambda m: None, measure_peak=_fake(PEAKS, asked))
    assert (plan.micro_batch, plan.grad_checkpointing, plan.precision) == (2, False, "fp32")
    assert plan.peak_mb == 200.0 and plan.budget_mb == 250.0 and len(asked) == 2
    plan = choose_loop(cfg, CPU, 105 / 1024, None, lambda m: None, measure_peak=_fake(PEAKS, []))
    assert (plan.micro_batch, plan.grad_checkpointing) == (4, True)  # 100 MB > 0.9 x 105: checkpointing
    assert "fits the 0.102539 GB budget at 90.0 MB peak" in plan.line(4)


def test_no_budget_on_the_cpu_is_the_naive_loop_unprobed():
    cfg = preset("base", "waveform_diffusion")
    plan = choose_loop(cfg, CPU, None, None, lambda m: None, measure_peak=lambda c: pytest.fail("probed"))
    assert (plan.micro_batch, plan.grad_checkpointing, plan.precision, plan.peak_mb) == (32, False, "fp32", None)
    assert plan.apply(cfg).train.mixed_precision == "auto"  # what auto means on a CPU: fp32
    assert choose_loop(cfg.replace("train", mixed_precision="off"), CPU, None, None, lambda m: None
                       ).apply(cfg).train.mixed_precision == "off"


def test_no_budget_on_a_gpu_is_its_free_memory(monkeypatch):
    monkeypatch.setattr(loop_plan, "autocast_precision", lambda device: "bf16")
    monkeypatch.setattr(loop_plan, "gpu_budget_mb", lambda device: (420.0, "the GPU's free memory"))
    plan = choose_loop(preset("tiny", "waveform_diffusion"), GPU, None, None, lambda m: None,
                       measure_peak=lambda c: 400.0 if c.micro_batch == 4 and c.precision == "fp32" else 1.0)
    assert (plan.micro_batch, plan.precision) == (4, "bf16")  # 400 > 0.9 x 420
    cfg = preset("tiny", "waveform_diffusion")
    plan = choose_loop(cfg, GPU, None, None, lambda m: None, measure_peak=lambda c: 1.0)
    assert plan.precision == "fp32" and plan.apply(cfg).train.mixed_precision == "off"  # auto is bf16 there


def test_an_impossible_budget_names_it_the_smallest_peak_and_the_fix():
    with pytest.raises(TrainingError) as e:
        choose_loop(preset("tiny", "waveform_diffusion"), CPU, 20 / 1024, None, lambda m: None,
                    measure_peak=_fake(PEAKS, []))
    msg = str(e.value)
    assert "0.0195312 GB budget" in msg and "30.0 MB (micro-batch 1, fp32, checkpointing on)" in msg
    assert "--preset" in msg and "train.batch_size" in msg
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(TrainingError, match="positive number of GB"):
            choose_loop(preset("tiny", "waveform_diffusion"), CPU, bad, None, lambda m: None)


def test_a_resumed_run_keeps_its_loop():
    cfg = preset("tiny", "waveform_diffusion").replace("train", batch_size=8, micro_batch=2)
    plan = choose_loop(cfg, CPU, 1e-6, None, lambda m: None, measure_peak=lambda c: pytest.fail("probed"),
                       resumed=True)
    assert (plan.micro_batch, plan.grad_checkpointing) == (2, False)


# ---------------------------------------------------------------------------------------------- the tracker

@pytest.fixture(scope="module")
def peaks() -> dict[tuple[int, bool], float]:
    """MB at the tiny waveform preset's step, by (micro-batch, checkpointing), as the CLI runs will measure."""
    probe = StepProbe(preset("tiny", "waveform_diffusion"), CPU)
    return {(m, ck): probe(Candidate(m, ck, "fp32")) for m in (1, 4) for ck in (False, True)}


def test_the_cpu_peak_grows_with_the_micro_batch_and_shrinks_with_checkpointing(peaks):
    peak = peaks
    assert peak[(4, False)] > 2 * peak[(1, False)] > 0
    assert peak[(4, True)] < 0.8 * peak[(4, False)]
    assert peak[(1, True)] < peak[(1, False)]


# ---------------------------------------------------------------------------------------------- the CLI

def _fit(run: Path, budget_mb: float, capsys) -> tuple[int, str]:
    rc = kicktrain(["fit", str(KICKS), "--run-dir", str(run), *FAST, "--vram-budget", f"{budget_mb / 1024:.9f}"])
    return rc, capsys.readouterr().err


def test_a_small_budget_turns_checkpointing_on_and_says_so(peaks, tmp_path, capsys):
    budget = (peaks[(1, True)] + min(peaks[(1, False)], peaks[(4, True)])) / 2 / 0.9
    rc, err = _fit(tmp_path / "run", budget, capsys)
    assert rc == 0, err
    train = json.loads((tmp_path / "run" / "config.json").read_text())["train"]
    assert (train["micro_batch"], train["grad_checkpointing"], train["mixed_precision"]) == (1, True, "auto")
    line = next(ln for ln in err.splitlines() if ln.startswith("loop: "))
    assert line.startswith("loop: micro-batch 1 x 4, fp32, checkpointing on: fits the ") and " GB budget at " in line


def test_a_budget_with_room_keeps_the_naive_loop(peaks, tmp_path, capsys):
    rc, err = _fit(tmp_path / "run", peaks[(4, False)] / 0.9 * 1.05, capsys)
    assert rc == 0, err
    train = json.loads((tmp_path / "run" / "config.json").read_text())["train"]
    assert (train["micro_batch"], train["grad_checkpointing"]) == (4, False)
    assert "loop: micro-batch 4 x 1, fp32, checkpointing off: fits the " in err


def test_an_impossible_budget_is_a_clear_error_and_leaves_no_run_folder(peaks, tmp_path, capsys):
    rc, err = _fit(tmp_path / "run", peaks[(1, True)] / 2, capsys)
    assert rc == 2
    assert "no training loop fits the " in err and "GB budget" in err and "smallest peak measured was" in err
    assert "--preset" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_live_bytes_counts_each_storage_once_and_forgets_freed_ones():
    from trainer.loop_plan import LiveBytes

    resident = torch.zeros(1000)  # 4,000 B before the context
    with LiveBytes("cpu", [resident]) as tracker:
        a = torch.ones(2000)  # +8,000
        view = a[:10].view(2, 5)  # a view: no new storage
        b = a * 2  # +8,000: the peak, 20,000
        del a, view, b  # back to 4,000
        c = torch.ones(500)  # +2,000
        assert tracker.now == 6000
    assert tracker.peak == 20000
    del c


def test_a_resumed_run_keeps_the_loop_its_first_session_chose(peaks, tmp_path, capsys):
    budget = (peaks[(1, True)] + min(peaks[(1, False)], peaks[(4, True)])) / 2 / 0.9
    assert _fit(tmp_path / "run", budget, capsys)[0] == 0
    rc = kicktrain(["fit", str(KICKS), "--run-dir", str(tmp_path / "run"), *FAST[:-1], "3"])  # no budget now
    err = capsys.readouterr().err
    assert rc == 0, err
    train = json.loads((tmp_path / "run" / "config.json").read_text())["train"]
    assert (train["micro_batch"], train["grad_checkpointing"], train["batch_size"]) == (1, True, 4)
    assert "loop: micro-batch 1 x 4, fp32, checkpointing on: a resumed run keeps the loop" in err
    assert "resumed from step 2" in err
    assert "asked otherwise" not in err  # the loop was the plan's choice, not something the command line asked
