"""What a field report found in the trainer, each through the CLI a user calls (`kicktrain ...` / `python -m trainer`):
a folder that links back to its parent, a poisoned fit cache and a huge file hashed before its header,
a fine-tune's length, time budget, rising validation and best export, the kick-synth route's progress and
kit maps, `kicktrain eval` on a small folder, its s/kick and its baseline's name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf
import torch

from tests.conftest import StepClock
from trainer.cli import main as kicktrain
from trainer.synth import synth_batch

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]


def _kicks(folder: Path, n: int, seed: int = 5) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, clip in enumerate(synth_batch(n, seed=seed)):
        sf.write(folder / f"k{i}.wav", clip, 44100, subtype="PCM_16")
    return folder


@pytest.fixture(scope="module")
def kicks(tmp_path_factory) -> Path:
    return _kicks(tmp_path_factory.mktemp("kicks"), 8)


# ------------------------------------------------------------------------------------------ 10: links to a parent


def test_prepare_on_a_folder_linking_twice_to_its_parent_ends(tmp_path):
    """Two links to the parent inside the training folder: prepare walked 893,594 folders in 30 s
    and never ended (each level doubles the paths). Each real folder is walked once: it ends at once with the 3
    kicks, and says what it left out."""
    data = _kicks(tmp_path / "kicks", 3)
    sub = data / "sub"
    sub.mkdir()
    os.symlink("..", sub / "up1")
    os.symlink("..", sub / "up2")
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "trainer", "prepare", str(data), "--preset", "tiny",
                               "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=90,
                              cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail("kicktrain prepare did not end in 90 s on a folder with two links to its parent")
    assert done.returncode == 0, done.stderr
    assert "3 clips" in done.stdout
    assert "already walked" in done.stdout + done.stderr, done.stdout  # the links are named, not silently dropped
    assert time.monotonic() - t0 < 90


def test_scan_bounds_depth_and_folder_count(tmp_path, monkeypatch):
    """A real folder tree deeper than the bound is cut there with a log line; more folders than the
    bound is a one-line error (exit 2) naming the bound, not an endless walk."""
    from trainer import data as D

    deep = _kicks(tmp_path / "deep", 1)
    d = deep
    for i in range(6):
        d = d / f"d{i}"
        d.mkdir()
    _kicks(d, 1, seed=9)  # 6 levels down
    monkeypatch.setattr(D, "MAX_SCAN_DEPTH", 3)
    lines: list[str] = []
    found = D.scan_audio([deep], log=lines.append)
    assert len(found) == 1 and any("deeper than 3" in m for m in lines), lines
    monkeypatch.setattr(D, "MAX_SCAN_DEPTH", 64)
    monkeypatch.setattr(D, "MAX_SCAN_FOLDERS", 4)
    rc = kicktrain(["prepare", str(deep), "--preset", "tiny", "--cache", str(tmp_path / "c")])
    assert rc == 2


# ------------------------------------------------------------------------------------------ 11: header before hash


def test_a_huge_file_is_refused_from_its_size_and_header_before_it_is_hashed(kicks, tmp_path, monkeypatch, capsys):
    """Training hashed every file in full before checking its header (a 10.6 GB sparse file: 47 s).
    A 3 GB sparse file (a valid WAV header, then holes) and a WAV whose header gives 100 Hz are skipped with one line
    each, and neither is read past its header: sha256_file is never called on them."""
    from trainer import data as D

    folder = tmp_path / "kicks"
    folder.mkdir()
    for f in kicks.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    big = folder / "big.wav"
    big.write_bytes((kicks / "k0.wav").read_bytes())
    with open(big, "r+b") as fh:
        fh.truncate(3 << 30)  # sparse: no disk used
    hour = folder / "hour.wav"
    with sf.SoundFile(str(hour), "w", samplerate=44100, channels=1, subtype="PCM_16") as snd:
        snd.write(synth_batch(1, seed=1)[0])
    raw = bytearray(hour.read_bytes())
    raw[24:28] = (100).to_bytes(4, "little")  # a sample rate outside 1000..384000 Hz
    hour.write_bytes(bytes(raw))
    hashed: list[str] = []
    real = D.sha256_file
    monkeypatch.setattr(D, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    assert kicktrain(["prepare", str(folder), "--preset", "tiny", "--cache", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "big.wav" not in hashed and "hour.wav" not in hashed, hashed
    assert f"skipped {big}" in out and f"skipped {hour}" in out and "8 clips" in out, out


# ------------------------------------------------------------------------------------------ 12: a fine-tune's length


def test_a_fine_tune_defaults_to_minutes_not_hours_and_stops_at_its_time_budget(kicks, tmp_path, monkeypatch,
                                                                                   capsys):
    """`kicktrain fit FOLDER --init MODEL` took the preset's 20,000 steps (2.5-5.7 h on 2 cores) with
    no time budget. A fine-tune now defaults to trainer.train.FINETUNE_STEPS (400), validated and exported 8 times on
    the way, and --minutes M stops, checkpoints and exports once M minutes have passed (on an injected clock here)."""

    from tests.conftest import make_tiny_artifact
    from trainer import train as T

    init = make_tiny_artifact(tmp_path / "base.safetensors", preset_name="small")
    monkeypatch.setattr(T, "CLOCK", StepClock(20.0))  # 20 s a reading: the budget of 1 min is spent after a few steps
    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(kicks), "--run-dir", str(run), "--init", str(init), "--minutes", "1",
                    "--export-dir", str(models), "--device", "cpu", "--no-progress", "--no-tensorboard",
                    "--set", "train.batch_size=2", "--set", "train.micro_batch=2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "time budget of 1 min" and 0 < summary["step"] <= 4, summary
    saved = json.loads((run / "config.json").read_text())["train"]
    assert saved["max_steps"] == T.FINETUNE_STEPS == 400 and saved["val_every"] == saved["ckpt_every"] == 50, saved
    assert "fine-tune: 400 steps" in err
    assert (models / "run.safetensors").is_file()  # the budget's stop exports, as the last step does


def test_rising_validation_is_said_and_the_best_step_is_what_is_exported(kicks, tmp_path, monkeypatch, capsys):
    """Validation rose (0.414 -> 0.448; a kick-synth run 1.05 -> 2.24 at every check) with no word in
    the log, and the last export, not the best, served. Now three checks without a new best are one log line, and every
    export (and `kicktrain export`) holds the best step's EMA weights, its training summary saying which step."""
    from kickmodel.loading import load_artifact
    from trainer import train as T
    from trainer.checkpoint import load_latest

    losses = iter([0.50, 0.41, 0.45, 0.47, 0.48, 0.49, 0.50, 0.51])
    monkeypatch.setattr(T.Trainer, "validate", lambda self: {"loss": next(losses)})
    run, models = tmp_path / "run", tmp_path / "models"
    rc = kicktrain(["fit", str(kicks), "--run-dir", str(run), "--train-steps", "8", "--export-dir", str(models),
                    *FAST, "--set", "train.val_every=1", "--set", "train.ckpt_every=4"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "validation has risen" in err and "step 2" in err, err
    art = load_artifact(models / "run.safetensors")
    assert art.step == 2
    meta = art.training
    assert meta["exported_step"] == 2 and meta["steps"] == 8, meta
    state, _ = load_latest(run)
    assert state["best_step"] == 2
    for k, v in state["best_ema"].items():  # the best step's EMA weights, not the last step's
        assert any(torch.equal(v.float(), t) for name, t in art.tensors.items() if name.endswith(k)), k
    out = tmp_path / "exported.safetensors"
    assert kicktrain(["export", str(run), "--out", str(out)]) == 0
    assert load_artifact(out).step == 2 and "step 2's weights" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- 11, 14: the kick-synth route

SYNTH_FAST = ["--family", "kick-synth", *FAST, "--set", "fit.iters=3", "--set", "fit.restart_iters=2",
              "--set", "fit.serve_iters=2", "--set", "fit.batch=4"]


@pytest.fixture(scope="module")
def twelve(tmp_path_factory) -> Path:
    return _kicks(tmp_path_factory.mktemp("twelve"), 12, seed=7)


def test_a_poisoned_fit_cache_is_refitted_not_trained_on(twelve, tmp_path, capsys):
    """A synth_fits.safetensors whose numbers are finite but past the synth's ranges (1e30) was kept,
    and training then failed with "lower the learning rate". Fits outside +-U_LIMIT are refitted with a log line."""
    from safetensors.torch import load_file, save_file

    from trainer.recipes.kick_synth import FITS_FILE

    first = tmp_path / "first"
    assert kicktrain(["fit", str(twelve), "--run-dir", str(first), "--train-steps", "1", *SYNTH_FAST]) == 0
    tensors = load_file(first / FITS_FILE)
    meta = __import__("safetensors").safe_open(str(first / FITS_FILE), "pt").metadata()
    poisoned = {k: (v * 1e30 if k.startswith("u.") else v) for k, v in tensors.items()}
    assert all(bool(torch.isfinite(v).all()) for v in poisoned.values())
    second = tmp_path / "second"
    second.mkdir()
    save_file(poisoned, second / FITS_FILE, metadata=meta)
    capsys.readouterr()
    rc = kicktrain(["fit", str(twelve), "--run-dir", str(second), "--train-steps", "2", *SYNTH_FAST])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "outside the synth's ranges" in err and "fitted again" in err, err
    refitted = load_file(second / FITS_FILE)
    assert all(float(v.abs().max()) <= 8.0 for k, v in refitted.items() if k.startswith("u."))


def test_kick_synth_fits_say_how_far_they_are_and_every_export_carries_a_map(twelve, tmp_path, monkeypatch, capsys):
    """The kick-synth route printed nothing for 5.5 minutes while fitting, then "distance median
    3.622" with no meaning given; interim exports carried no kit map (the pad greyed out for the whole run). Now a
    fit logs a progress line at least every PROGRESS_S seconds (an injected clock here), its distance says what it
    means, and every export, interim ones too, carries the kit map."""
    from kickmodel.loading import load_artifact
    from trainer.recipes import kick_synth as KS

    monkeypatch.setattr(KS, "CLOCK", StepClock(KS.PROGRESS_S / 2))  # a progress line every second descent step
    maps: list[int] = []
    from trainer import train as T

    real_save = T.Artifact.save
    monkeypatch.setattr(T.Artifact, "save", lambda self, path: maps.append(
        self.kit_map.n if self.kit_map is not None else 0) or real_save(self, path))
    models = tmp_path / "models"
    rc = kicktrain(["fit", str(twelve), "--run-dir", str(tmp_path / "run"), "--train-steps", "3", *SYNTH_FAST,
                    "--set", "train.ckpt_every=1", "--export-dir", str(models)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "fitting the synth to" in err and "s left" in err, err  # progress while fitting
    assert "0: the kick itself" in err and "lower is closer" in err, err  # what the distance means
    assert len(maps) == 3 and all(n > 0 for n in maps), maps  # steps 1, 2, 3: each export with its map
    assert load_artifact(models / "run.safetensors").kit_map is not None
    assert err.count("kit map: fitting") == 1, err  # the map's fits are made once a run
    assert "kit map: fitted 8 of" in err and "s left" in err, err  # with progress lines of their own


# ------------------------------------------------------------------------------------------ 15: kicktrain eval


def test_eval_on_a_small_folder_says_its_minimum_and_the_fix(tiny_artifact, tmp_path, capsys):
    """`kicktrain eval MODEL --real F --train F` as the README writes it stopped on a 20-kick folder
    with "need at least 4 real held-out clips ... found 2" and no way out. The minimum is in --help, and the error
    names both fixes (a held-out folder, or the val_fraction that holds 4 out)."""
    folder = _kicks(tmp_path / "twenty", 20, seed=13)
    rc = kicktrain(["eval", str(tiny_artifact), "--real", str(folder), "--train", str(folder), "--out",
                    str(tmp_path / "eval"), "--n", "4", "--steps", "2", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "found 2" in err and "--set data.val_fraction=0.20" in err and "never trained on" in err, err
    with pytest.raises(SystemExit):
        kicktrain(["eval", "--help"])
    assert "at least 4 real held-out kicks" in capsys.readouterr().out


def test_eval_times_one_kick_as_the_daemon_does_and_names_its_baseline(tiny_artifact, tmp_path, monkeypatch, capsys):
    """Eval's s/kick read 1.7-2.0 s where the daemon answered in 0.4 s: it timed kicks on torch's
    default thread team (on a loaded 2-core box 8-15 s a kick of the bundled model against 0.9 s on one thread) with
    no warm-up at the row's settings; and its procedural baseline row was named `synth`, the README's example model's
    name. On an injected clock (a first render at new settings costs 5 s, a kick 1.8 s on two threads, 0.4 s on one),
    s/kick is 0.4; the baseline row is `procedural baseline` in the table and the JSON."""
    from kickmodel.loading import load_generator
    from trainer.evaluation import sets as S

    now = [0.0]
    monkeypatch.setattr(S, "CLOCK", lambda: now[0])
    cls = next(c for c in type(load_generator(tiny_artifact, "cpu")).__mro__ if "generate" in c.__dict__)
    real_generate, seen = cls.generate, set()

    def timed(self, items, settings, **kw):
        out = real_generate(self, items, settings, **kw)
        key = (repr(settings), torch.get_num_threads())
        now[0] += (0.0 if key in seen else 5.0) + (0.4 if torch.get_num_threads() == 1 else 1.8) * len(items)
        seen.add(key)
        return out

    monkeypatch.setattr(cls, "generate", timed)
    clips = synth_batch(12, seed=11, length=6000)
    for name, part in (("real", clips[:6]), ("train", clips[6:])):
        (tmp_path / name).mkdir()
        for i, c in enumerate(part):
            sf.write(tmp_path / name / f"{name}{i}.wav", c, 44100, subtype="PCM_16")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # torch's default on a 2-core box
    try:
        rc = kicktrain(["eval", str(tiny_artifact), "--real", str(tmp_path / "real"), "--train",
                        str(tmp_path / "train"), "--out", str(tmp_path / "eval"), "--n", "4", "--steps", "2",
                        "--device", "cpu"])
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert rc == 0
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    rows = {r["name"]: r for r in report["rows"]}
    assert rows["tiny @ 2"]["latency_s"] == pytest.approx(0.4), rows["tiny @ 2"]["latency_s"]
    assert "synth" not in rows and rows["procedural baseline"]["kind"] == "synth"
    assert "procedural baseline" in printed


def test_resuming_a_fine_tune_keeps_its_length_without_a_word(kicks, tmp_path, monkeypatch, capsys):
    """A fine-tune resumed with the command that started it keeps its 400 steps and its checks every 50, and does not
    say the command line asked otherwise (its preset's 20,000 and 500 were never asked for)."""
    from tests.conftest import make_tiny_artifact
    from trainer import train as T

    init = make_tiny_artifact(tmp_path / "base.safetensors", preset_name="small")
    args = ["fit", str(kicks), "--run-dir", str(tmp_path / "run"), "--init", str(init), "--minutes", "1", "--device",
            "cpu", "--no-progress", "--no-tensorboard", "--set", "train.batch_size=2", "--set", "train.micro_batch=2"]
    for _ in range(2):
        monkeypatch.setattr(T, "CLOCK", StepClock(40.0))  # stops after the first step
        assert kicktrain(args) == 0
    err = capsys.readouterr().err
    assert "resumed from step" in err and "asked otherwise" not in err, err
    assert json.loads((tmp_path / "run" / "config.json").read_text())["train"]["max_steps"] == 400
