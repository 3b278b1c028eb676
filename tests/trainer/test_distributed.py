"""torchrun --nproc-per-node 2 on the CPU (gloo): one consistent checkpoint, identical weights on both
ranks, a kill and a resume, a change of world size; and `kicktrain profile`'s trace and summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from trainer.checkpoint import file_is_complete, list_checkpoints, load_latest

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
FIT = ["fit", "--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]


def _descendants(pid: int) -> list[int]:
    """Every process below pid (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_tree(proc: subprocess.Popen) -> list[int]:
    """SIGKILL torchrun and every worker at once, as a crash or `kill -9` of the job would."""
    pids = [*_descendants(proc.pid), proc.pid]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
    return pids


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def kicks(synth_kicks) -> Path:
    return synth_kicks


def test_two_ranks_train_the_same_weights_and_rank_0_alone_writes(kicks, tmp_path):
    """Each rank saves what it holds after the run (test code, beside the product's own check); the
    run writes exactly one checkpoint, which is what both ranks hold."""
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, torch
        from pathlib import Path
        from kickmodel.families import preset
        from trainer.train import FitOptions, Trainer
        opts = FitOptions(data=[{str(kicks)!r}], run_dir=Path({str(tmp_path / 'run')!r}), cfg=preset("tiny"),
                          device="cpu", max_steps=3, progress=False, tensorboard=False)
        tr = Trainer(opts, log=lambda m: print(m, file=sys.stderr))
        tr.run()
        torch.save(tr.module.state_dict(), {str(tmp_path)!r} + f"/rank{{os.environ['RANK']}}.pt")
        tr.dist.close()
    """))
    out = subprocess.run([*TORCHRUN, str(script)], env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "world size 2, per-rank batch 2 (1 x 2), effective batch 4; backend gloo" in out.stderr
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert all(torch.equal(r0[k], r1[k]) for k in r0)
    ckpts = list_checkpoints(tmp_path / "run")
    assert [p.name for p in ckpts] == ["step-00000003.pt"] and file_is_complete(ckpts[0])
    state, _ = load_latest(tmp_path / "run")
    assert all(torch.equal(state["model"][k], r0[k]) for k in r0) and state["world_size"] == 2
    assert not [p for p in (tmp_path / "run").rglob("*") if p.name.startswith(".")]
    assert out.stderr.count("checkpoint step-00000003.pt") == 1  # rank 0 alone speaks and writes
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len([m for m in metrics if "loss" in m]) == 1  # log_every 5: the last step, once


def test_kill_and_resume_under_torchrun_then_a_change_of_world_size(kicks, tmp_path):
    run = tmp_path / "run"
    args = [*FIT, str(kicks), "--run-dir", str(run), "--set", "train.ckpt_every=2", "--set", "train.val_every=0"]
    proc = subprocess.Popen([*TORCHRUN, "-m", "trainer", *args, "--max-steps", "100000"], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed: list[int] = []
    try:
        deadline = time.time() + 180
        while time.time() < deadline and len(list_checkpoints(run)) < 2:
            time.sleep(0.05)
        assert len(list_checkpoints(run)) >= 2, "no checkpoints appeared"
    finally:
        killed = _kill_tree(proc)
    time.sleep(0.5)
    assert len(killed) >= 3 and not [p for p in killed if _running(p)]  # torchrun and both workers
    ckpts = list_checkpoints(run)
    assert all(file_is_complete(p) for p in ckpts)
    last = max(int(p.stem.split("-")[1]) for p in ckpts)
    out = subprocess.run([*TORCHRUN, "-m", "trainer", *args, "--max-steps", str(last + 2)], env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and f"resumed from step {last}" in out.stderr, out.stderr[-3000:]
    assert f"step {last + 2}: weights identical on 2 processes" in out.stderr
    # the same run, now on one process: the effective batch stays, and the log says what changed
    out = subprocess.run([sys.executable, "-m", "trainer", *args, "--max-steps", str(last + 3)], env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "resuming with world size 1 (checkpointed with 2): the effective batch stays 4" in out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["step"] == last + 3


def test_a_batch_that_cannot_be_split_is_a_clear_error(kicks, tmp_path):
    out = subprocess.run([*TORCHRUN, "-m", "trainer", *FIT, str(kicks), "--run-dir", str(tmp_path / "r"),
                          "--set", "train.batch_size=3", "--set", "train.micro_batch=3"], env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "train.batch_size 3 cannot be split evenly over 2 processes" in out.stderr


def test_kicktrain_profile_writes_a_trace_and_a_summary(kicks, tmp_path, capsys):
    from trainer.cli import main as kicktrain

    out = tmp_path / "prof"
    assert kicktrain(["profile", str(kicks), "--preset", "tiny", "--steps", "4", "--out", str(out),
                      "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "convolution" in printed and "matrix multiplication" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conv_share"] > 0.05 and 0 <= summary["matmul_share"] < 1
    assert summary["active_steps"] == 2 and summary["family"] == "waveform_diffusion"
    assert set(summary["phases_ms_per_step"]) >= {"augment", "forward", "backward", "optimizer"}
    assert summary["top_ops"] and summary["peak_memory_mb"] > 0
    (trace,) = out.glob("*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "forward" for e in events)
    assert not (out / ".run").exists()  # the scratch run is gone
