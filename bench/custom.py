"""Time to a custom model: from a folder of a user's kicks to a fine-tuned model served by a running daemon.

    python -m bench custom [--kicks DIR] [--init A.safetensors] [--budget-min 45] [--quick]

1. A user's folder: POOL kicks spread evenly over --kicks (sorted by name; default the starter kit),
   split by `trainer.split.split_indices` (velocity layers and near-copies on one side) into about
   TRAIN kicks for the user's folder and the rest held out for the evaluation (`fit` never sees them).
2. A daemon is running already (the bundled model, pinned), as on the user's machine.
3. The clock starts: `kicktrain fit <folder> --init <model> --export-dir <daemon's models>` (the
   model's own family and preset) trains until the budget (--budget-min of training wall time) is
   spent, then gets SIGTERM: it finishes its step, checkpoints, exports and exits 0.
4. `/kick/model custom`, then one `/kick/generate`: the clock stops at its `/kick/done`.
5. Quality: `trainer.evaluate.evaluate` of the starting model and the fine-tuned one against the
   held-out kicks (--train: the user's folder). The starting model may have been trained on those
   kicks (the bundled model saw the whole starter kit): its figures are then optimistic.
Target: <= 60 minutes on 2 CPU cores, <= 2 on a GPU. --quick: 12 kicks, 2 training steps.
--family kick-synth: a new model of that family (preset small) instead of a fine-tune: fitted, trained, exported
and served in at most 5 minutes on 2 CPU cores; the evaluation still shows --init beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common

NAME = "custom"
POOL = 28
HELDOUT = 8
BUDGET_S = 45 * 60
TARGET_S = {"cpu": 3600, "cuda": 120}  # 20 kicks -> served: within an hour on 2 CPU cores, 2 minutes on a GPU
NEW_MODEL_TARGET_S = 300  # --family: a new model from the user's kicks (a kick-synth model in 5 minutes)
EVAL_N = 32


def pick(files: list[Path], n: int) -> list[Path]:
    """n files spread evenly over the sorted list (all of them when there are fewer)."""
    files = sorted(files)
    if n >= len(files):
        return files
    step = len(files) / n
    return [files[int(i * step)] for i in range(n)]


def user_folder(kicks: Path, work: Path, pool: int, heldout: int) -> tuple[Path, Path, int, int]:
    """(training folder, held-out folder, their sizes): copies of pool kicks, split with trainer.split."""
    from kickmodel.config import DataConfig
    from trainer.data import scan_audio
    from trainer.evaluation.sets import load_folder
    from trainer.split import split_indices

    chosen = pick(scan_audio([kicks]), pool)
    cfg = DataConfig()
    clips, sources, shas, _ = load_folder(chosen, cfg, log=lambda m: None)
    manifest = [{"source": s, "sha256": h} for s, h in zip(sources, shas)]
    tr, va = split_indices(clips, manifest, heldout / len(sources), cfg.sample_rate)
    folders = (work / "my-kicks", work / "held-out")
    for folder, idx in zip(folders, (tr, va)):
        folder.mkdir()
        for i in idx:
            shutil.copy2(sources[i], folder / Path(sources[i]).name)
    return folders[0], folders[1], len(tr), len(va)


def _fit(folder: Path, init: Path | None, models: Path, run_dir: Path, device: str, budget_s: float | None,
         max_steps: int | None, log: Path, family: str | None = None) -> tuple[int, float, bool]:
    """Run `kicktrain fit` as the README says: fine-tuning init (the model's family, preset and, for latent
    diffusion, VAE all come from --init), or a new model of `family` (its small preset); SIGTERM after budget_s.
    (exit code, seconds, stopped by the budget)."""
    start = ["--family", family, "--preset", "small"] if family else ["--init", str(init)]
    cmd = [sys.executable, "-m", "trainer", "fit", str(folder), "--run-dir", str(run_dir), *start,
           "--device", device, "--export-dir", str(models), "--export-name", "custom", "--no-progress",
           "--no-tensorboard"]
    if max_steps is not None:
        cmd += ["--max-steps", str(max_steps)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(common.REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t0 = time.perf_counter()
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=common.REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    stopped = False
    try:
        proc.wait(timeout=budget_s)
    except subprocess.TimeoutExpired:
        stopped = True
        proc.send_signal(signal.SIGTERM)  # the trainer saves and exports at the next step boundary
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, time.perf_counter() - t0, stopped


def run(opts: common.Options) -> dict:
    from bench import latency
    from kickmodel.loading import load_artifact
    from trainer.evaluate import evaluate

    init = Path(opts.init or opts.models[0])
    pool, heldout = (12, 4) if opts.quick else (POOL, HELDOUT)
    budget = None if opts.quick else (opts.budget_s or BUDGET_S)
    with tempfile.TemporaryDirectory(prefix="kickbench-custom-") as tmp:
        work = Path(tmp)
        mine, held, n_train, n_held = user_folder(opts.kicks, work, pool, heldout)
        models = work / "models"
        models.mkdir()
        ns = argparse.Namespace(device=opts.device, models=str(models), model="default", threads=opts.threads,
                                extra=[])
        proc, port, _ = latency.start(ns, work)
        conv = latency.connect(port)
        try:
            t0 = time.perf_counter()
            rc, fit_s, stopped = _fit(mine, init, models, work / "run", opts.device, budget,
                                      2 if opts.quick else None, work / "fit.log", family=opts.family)
            if rc != 0 or not (models / "custom.safetensors").is_file():
                tail = (work / "fit.log").read_text(errors="replace").strip().splitlines()[-3:]
                raise RuntimeError(f"kicktrain fit exited with {rc}: {' | '.join(tail)}")
            replies, _ = latency.timed(conv, "/kick/model", "custom", timeout=120)
            if replies[0] != ("/kick/model", ["custom"]):
                raise RuntimeError(f"/kick/model custom was answered {replies[0]}")
            replies, _ = latency.timed(conv, "/kick/generate", 1, "seed", 1, timeout=600)
            if replies[0][0] != "/kick/done":
                raise RuntimeError(f"/kick/generate was answered {replies[0]}")
            total_s = time.perf_counter() - t0
        finally:
            latency.stop_daemon(proc)
            conv.close()
        custom = load_artifact(models / "custom.safetensors")
        kept = work / "custom.safetensors"
        shutil.copy2(models / "custom.safetensors", kept)
        n = 4 if opts.quick else EVAL_N
        report, _ = evaluate([init, kept], [held], [mine], n=n, steps=[custom.config.sampling.steps]
                             if hasattr(custom.config, "sampling") else [10], seed=opts.seed, device=opts.device,
                             splits=5 if opts.quick else 50, log=lambda m: None)
    kind = common.device_kind(report["device"])
    target = NEW_MODEL_TARGET_S if opts.family else TARGET_S[kind]
    rows = [{k: r.get(k) for k in ("name", "kind", "steps", "kid", "kid_std", "fad", "haze_vs_real_db",
                                   "diversity_ratio", "latency_s")} for r in report["rows"]]
    tr = custom.training
    return {"init": str(init), "family": opts.family, "kicks": str(opts.kicks), "user_kicks": n_train,
            "held_out_kicks": n_held,
            "budget_s": budget, "stopped_by_budget": stopped, "fit_s": fit_s, "train_seconds": tr.get("train_seconds"),
            "train_steps": custom.step, "run_steps": tr.get("steps"), "exported_because": tr.get("exported_because"),
            "samples_per_s": tr.get("samples_per_s"), "time_to_model_s": total_s,
            "target_s": target, "met_target": bool(total_s <= target), "eval_n": n,
            "rows": rows}


def table(payload: dict) -> str:
    p = payload
    how = f"a new {p['family']} model" if p.get("family") else f"fine-tuned from {Path(p['init']).name}"
    ran = p.get("run_steps")
    kept = f" (of the run's {ran}: {p['exported_because']})" if ran not in (None, p["train_steps"]) else ""
    head = (f"{p['user_kicks']} kicks -> {how}: {p['train_steps']} steps{kept} in "
            f"{p['fit_s']:.0f} s of fit; served after {p['time_to_model_s'] / 60:.1f} min (target "
            f"{p['target_s'] / 60:.0f} min: {'met' if p['met_target'] else 'MISSED'})\n"
            f"quality against {p['held_out_kicks']} held-out kicks of the same pool:\n")
    return head + common.table(p["rows"], [("name", "set", ""), ("kid", "KID", ".3g"), ("kid_std", "±", ".2g"),
                                           ("fad", "FAD", ".3g"), ("haze_vs_real_db", "haze dB", "+.1f"),
                                           ("diversity_ratio", "div/real", ".2f")])
