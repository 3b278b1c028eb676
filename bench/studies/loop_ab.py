"""The real training loop of two commits side by side, in one run: did a change slow the loop down?

    python -m bench.studies.loop_ab --before 9707ae3 [--after WORKTREE] [--families waveform_diffusion,mel_vae]
                            [--preset small] [--steps 6] [--rounds 3] [--device cpu] [--threads 0]

`--before` is a commit: its tree is exported (`git archive`) into a temporary folder. `--after` is this working
tree unless given. Each round runs every family once in each tree, in a fresh process (`python -c`, the tree first
on PYTHONPATH), the tree that goes first alternating round by round, so a machine that gets busier slows both
alike. A run is `trainer.train.fit` on the starter kit (augmentation, conditioning and the objective's preparation
included) for --steps steps of the family's preset, nothing validated, sampled or checkpointed; its figure is
samples/s over the loop's wall time (fit's summary `seconds`: the first step included, in both trees alike). The
medians per family and tree, and after / before, go to <out>/loop-ab-<cpu|cuda>.json with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import common

CHILD = """
import json, sys, tempfile
from pathlib import Path
import torch
from bench import common
from kickmodel.families import preset
from trainer.train import FitOptions, fit

fam, name, steps, device, kit, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], \\
    int(sys.argv[6])
if threads:
    torch.set_num_threads(threads)
with tempfile.TemporaryDirectory(prefix="kickbench-ab-") as tmp:
    work = Path(tmp)
    cfg = preset(name, fam).replace("train", max_steps=steps, val_every=0, sample_every=0, ckpt_every=10**9,
                                    log_every=10**9)
    options = common.family_options(fam, {}, work, name)
    s = fit(FitOptions(data=[kit], run_dir=work / "run", cfg=cfg, device=device, progress=False, tensorboard=False,
                       family_options=options, cache_dir=work / "cache"), log=lambda m: None)
print(json.dumps({"seconds": s["seconds"], "steps": s["step"], "batch": cfg.train.batch_size}))
"""


def export_tree(rev: str, folder: Path) -> Path:
    """The tree of commit rev under folder (git archive | tar), as it was committed."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(common.REPO), "archive", "--format=tar", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def one_run(tree: Path, family: str, preset_name: str, steps: int, device: str, threads: int) -> float:
    """samples/s of one fit in a fresh process with tree's code."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    kit = str(common.STARTER_KIT)
    out = subprocess.run([sys.executable, "-c", CHILD, family, preset_name, str(steps), device, kit, str(threads)],
                         cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{tree.name}: {family} failed: {out.stderr.strip().splitlines()[-1:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["steps"] * r["batch"] / r["seconds"]


def compare(before: Path, after: Path, families: list[str], preset_name: str, steps: int, rounds: int, device: str,
            threads: int = 0, log=print) -> list[dict]:
    rows = []
    for fam in families:
        got: dict[str, list[float]] = {"before": [], "after": []}
        for k in range(rounds):
            order = (("before", before), ("after", after)) if k % 2 == 0 else (("after", after), ("before", before))
            for label, tree in order:
                got[label].append(one_run(tree, fam, preset_name, steps, device, threads))
            log(f"{fam} round {k + 1}: before {got['before'][-1]:.2f}, after {got['after'][-1]:.2f} samples/s")
        b, a = statistics.median(got["before"]), statistics.median(got["after"])
        rows.append({"family": fam, "preset": preset_name, "steps": steps, "rounds": rounds,
                     "before_samples_per_s": b, "after_samples_per_s": a, "after_vs_before": a / b,
                     "before_runs": got["before"], "after_runs": got["after"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.studies.loop_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="a commit (its committed tree is measured)")
    ap.add_argument("--after", type=Path, default=common.REPO, help="a tree (default: this working tree)")
    ap.add_argument("--families", default="waveform_diffusion,mel_vae,latent_diffusion")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch threads per run (0: torch's default)")
    common.add_out_option(ap)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kickbench-ab-tree-") as tmp:
        before = export_tree(args.before, Path(tmp) / "before")
        rows = compare(before, args.after, args.families.split(","), args.preset, args.steps, args.rounds,
                       args.device, args.threads)
    print(common.table(rows, [("family", "family", ""), ("before_samples_per_s", "before samples/s", ".2f"),
                              ("after_samples_per_s", "after samples/s", ".2f"),
                              ("after_vs_before", "after / before", ".2f")]))
    payload = {"suite": common.SCHEMA, "benchmark": "loop-ab", "date": common.now(),
               "machine": common.machine(args.device), "before": args.before,
               "after": "working tree" if args.after == common.REPO else str(args.after), "rows": rows}
    print(f"wrote {common.write_result(args.out, 'loop-ab', common.device_kind(args.device), payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
