"""The training loop end to end on tiny data: overfit, checkpoints, kill -9 and resume, export, sample."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from trainer.artifact import ArtifactError, load_artifact
from trainer.checkpoint import file_is_complete, list_checkpoints, load_latest
from trainer.cli import main as kicktrain
from trainer.config import preset
from trainer.diffusion import Denoiser, NoiseSchedule
from trainer.generator import Item, load_generator
from trainer.synth import synth_batch
from trainer.train import FitOptions, fit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kick_dir(tmp_path_factory) -> Path:
    """Twelve procedural kicks as WAV files (tests make their own data; a clone has no starter-kit folder beside it)."""
    folder = tmp_path_factory.mktemp("kicks")
    for i, clip in enumerate(synth_batch(12, seed=3)):
        sf.write(folder / f"kick_{i:02d}.wav", clip, 44100, subtype="PCM_16")
    return folder


def _fit(kick_dir: Path, run: Path, max_steps: int, **kw) -> dict:
    opts = FitOptions(data=[str(kick_dir)], run_dir=run, cfg=preset("tiny"), device="cpu", max_steps=max_steps,
                      progress=False, tensorboard=False, **kw)
    return fit(opts, log=lambda m: None)


def test_overfit_one_batch():
    """The network can drive the loss down on one fixed batch: the model, loss and optimiser are wired."""
    torch.manual_seed(0)
    from trainer.families.waveform_diffusion.network import WaveUNet

    cfg = preset("tiny")
    net = WaveUNet(cfg.model, n_controls=len(cfg.controls))
    den = Denoiser(net, NoiseSchedule("cosine", 1000), "v")
    x = torch.from_numpy(synth_batch(4, seed=0, length=cfg.data.length))[:, None]
    g = torch.Generator().manual_seed(0)
    t = torch.tensor([0.1, 0.3, 0.5, 0.7], dtype=torch.float64)
    noise = torch.randn(x.shape, generator=g)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss = den.loss(x, t, noise).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.3 * first


def test_resume_is_exact(kick_dir, tmp_path):
    """N steps straight equals k steps, stop, resume to N: identical weights, EMA and optimiser."""
    _fit(kick_dir, tmp_path / "straight", 12)
    _fit(kick_dir, tmp_path / "split", 5)
    summary = _fit(kick_dir, tmp_path / "split", 12)
    assert summary["step"] == 12
    a, _ = load_latest(tmp_path / "straight")
    b, _ = load_latest(tmp_path / "split")
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    for k in a["ema"]["model"]:
        assert torch.equal(a["ema"]["model"][k], b["ema"]["model"][k]), k


def test_sigkill_mid_run_then_resume(kick_dir, tmp_path):
    """kill -9 during a fit leaves only complete checkpoints; fit again resumes from the last one and says so."""
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "trainer.cli", "fit", str(kick_dir), "--run-dir", str(run), "--preset", "tiny",
           "--device", "cpu", "--max-steps", "100000", "--no-progress", "--no-tensorboard",
           "--set", "train.ckpt_every=3", "--set", "train.val_every=0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(list_checkpoints(run)) < 2:
            time.sleep(0.05)
        assert len(list_checkpoints(run)) >= 2, "no checkpoints appeared"
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    ckpts = list_checkpoints(run)
    assert ckpts and all(file_is_complete(p) for p in ckpts)
    pointer = (run / "checkpoints" / "latest").read_text().strip()
    assert (run / "checkpoints" / pointer).is_file()
    last_step = max(int(p.stem.split("-")[1]) for p in ckpts)
    out = subprocess.run(cmd[:-6] + ["--max-steps", str(last_step + 3), "--no-progress", "--no-tensorboard",
                                     "--set", "train.val_every=0"],
                         env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert f"resumed from step {last_step}" in out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["step"] == last_step + 3
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.endswith(".part")]


def test_corrupt_latest_checkpoint_falls_back(kick_dir, tmp_path):
    run = tmp_path / "run"
    _fit(kick_dir, run, 20)
    ckpts = list_checkpoints(run)
    assert len(ckpts) >= 2
    ckpts[-1].write_bytes(b"not a checkpoint")
    msgs: list[str] = []
    state, path = load_latest(run, log=msgs.append)
    assert path == ckpts[-2] and state["step"] == int(ckpts[-2].stem.split("-")[1])
    assert any(str(ckpts[-1]) in m and "failed to load" in m for m in msgs)
    assert not ckpts[-1].exists() and ckpts[-1].with_name(ckpts[-1].name + ".bad").exists()


def test_finetune_resume_keeps_its_rate_and_origin(kick_dir, tmp_path):
    _fit(kick_dir, tmp_path / "base", 6, export_dir=tmp_path / "models", export_name="base")
    art = tmp_path / "models" / "base.safetensors"
    msgs: list[str] = []
    opts = FitOptions(data=[str(kick_dir)], run_dir=tmp_path / "ft", cfg=preset("tiny"), device="cpu", max_steps=3,
                      progress=False, tensorboard=False, init=art)
    fit(opts, log=msgs.append)
    assert any("fine-tuning from" in m for m in msgs)
    msgs.clear()
    fit(FitOptions(data=[str(kick_dir)], run_dir=tmp_path / "ft", cfg=preset("tiny"), device="cpu", max_steps=5,
                   progress=False, tensorboard=False), log=msgs.append)
    assert any("resumed from step 3" in m and str(art) in m for m in msgs)
    state, _ = load_latest(tmp_path / "ft")
    assert state["base_lr"] == preset("tiny").train.finetune_lr and state["init_from"] == str(art)


def test_sigterm_saves_and_exits_zero(kick_dir, tmp_path):
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "trainer.cli", "fit", str(kick_dir), "--run-dir", str(run), "--preset", "tiny",
           "--device", "cpu", "--max-steps", "100000", "--no-progress", "--no-tensorboard",
           "--set", "train.ckpt_every=100000", "--set", "train.val_every=0", "--set", "train.log_every=1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "metrics.jsonl").is_file():
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "signal SIGTERM"
    state, _ = load_latest(run)
    assert state["step"] == summary["step"] > 0


def test_export_load_sample_and_determinism(kick_dir, tmp_path):
    run = tmp_path / "run"
    _fit(kick_dir, run, 10, export_dir=tmp_path / "models", export_name="mine")
    live = tmp_path / "models" / "mine.safetensors"
    assert live.is_file()  # --export-dir exported after the checkpoint
    out = tmp_path / "exported.safetensors"
    assert kicktrain(["export", str(run), "--out", str(out)]) == 0
    art = load_artifact(out)
    assert art.family == "waveform_diffusion" and art.step == 10
    tuned = tmp_path / "tuned.safetensors"
    assert kicktrain(["export", str(run), "--out", str(tuned), "--set", "sampling.steps=7",
                      "--set", "sampling.time_power=2.0"]) == 0
    assert load_generator(tuned, "cpu").default_steps == 7
    assert kicktrain(["export", str(run), "--out", str(tuned), "--set", "model.widths=[8]"]) == 2
    assert art.controls == ["decay", "pitch", "click"] and len(art.control_quantiles) == 3
    assert json.loads(art.meta["config"])["preset"] == "tiny"
    gen = load_generator(out, "cpu")
    a = gen.sample([Item(seed=7, controls={"decay": 0.9})], steps=4)
    b = gen.sample([Item(seed=7, controls={"decay": 0.9})], steps=4)
    c = gen.sample([Item(seed=8, controls={"decay": 0.9})], steps=4)
    assert a.shape == (1, gen.length) and np.isfinite(a).all()
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="unknown control"):
        gen.sample([Item(seed=1, controls={"wobble": 0.5})])
    with pytest.raises(ValueError, match="within 0..1"):
        gen.sample([Item(seed=1, controls={"decay": 1.5})])
    # offline sampling through the CLI
    assert kicktrain(["sample", str(out), "--n", "2", "--out", str(tmp_path / "wav"), "--seed", "3",
                      "--steps", "3", "--device", "cpu", "--control", "pitch=0.2"]) == 0
    wavs = sorted((tmp_path / "wav").glob("*.wav"))
    assert len(wavs) == 2
    info = sf.info(wavs[0])
    assert info.samplerate == 44100 and info.subtype == "PCM_24" and info.frames == gen.length


def test_variation_strength_zero_returns_source(tiny_artifact):
    gen = load_generator(tiny_artifact, "cpu")
    src = synth_batch(1, seed=1, length=gen.length)[0]
    same = gen.vary(src, 0.0, [Item(seed=1)])
    assert np.array_equal(same[0], src)
    v = gen.vary(src, 0.5, [Item(seed=1), Item(seed=2)], steps=4)
    assert v.shape == (2, gen.length) and not np.array_equal(v[0], v[1])


def test_artifact_refusals(tmp_path, tiny_artifact):
    pickle_file = tmp_path / "evil.safetensors"
    torch.save({"x": torch.zeros(1)}, pickle_file)
    with pytest.raises(ArtifactError, match="pickle"):
        load_artifact(pickle_file)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(ArtifactError, match="not a readable safetensors"):
        load_artifact(junk)
    from safetensors.torch import load_file, save_file

    tensors = load_file(tiny_artifact)
    meta = load_artifact(tiny_artifact).meta
    save_file(tensors, tmp_path / "v9.safetensors", metadata=dict(meta, kickserver_format="9"))
    with pytest.raises(ArtifactError, match="format version 9"):
        load_artifact(tmp_path / "v9.safetensors")
    bad = dict(tensors)
    key = next(k for k in bad if k.endswith("weight") and bad[k].ndim == 3)
    bad[key] = torch.zeros(1, 1, 1)
    save_file(bad, tmp_path / "shape.safetensors", metadata=meta)
    # the refusal names the whole tensor and both shapes (a log line once cut it off before the name)
    with pytest.raises(ArtifactError, match=rf"tensor {re.escape(key)} has shape \(1, 1, 1\), its config needs \("):
        load_generator(tmp_path / "shape.safetensors", "cpu")


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "silence.wav").write_bytes(b"")
    rc = kicktrain(["fit", str(tmp_path / "empty"), "--run-dir", str(tmp_path / "r"), "--preset", "tiny",
                    "--device", "cpu", "--no-progress", "--no-tensorboard"])
    err = capsys.readouterr().err
    assert rc == 2 and "no usable audio" in err and "Traceback" not in err
    rc = kicktrain(["fit", str(tmp_path), "--run-dir", str(tmp_path / "r"), "--set", "model.wobble=1"])
    assert rc == 2 and "unknown key" in capsys.readouterr().err
    rc = kicktrain(["sample", str(tmp_path / "missing.safetensors"), "--out", str(tmp_path / "o")])
    assert rc == 2 and "no such file" in capsys.readouterr().err


def test_header_length_byte_0x80_is_not_mistaken_for_a_pickle(tmp_path, tiny_artifact):
    """A safetensors header whose length's low byte is 0x80 must load (it once was refused as a pickle)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(tiny_artifact)
    meta = dict(load_artifact(tiny_artifact).meta)
    for pad in range(400):
        path = tmp_path / "a.safetensors"
        save_file(tensors, path, metadata=dict(meta, pad="x" * pad))
        if path.read_bytes()[0] == 0x80:
            break
    else:
        pytest.fail("no padding gave a header length ending in 0x80")
    assert load_artifact(path).family == "waveform_diffusion"
