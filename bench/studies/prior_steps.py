"""Each checkpoint of a training run exported and measured: how a prior's dials and variety move as it trains.

    python bench/studies/prior_steps.py runs/kick-synth/run                     # every step-*.pt it kept
    python bench/studies/prior_steps.py runs/kick-synth/run --steps 500 1500 --n 128

`kicktrain export` exports the weights of the best validation loss wherever a run has them, so the other checkpoints
cannot be heard through it. For each checkpoint this makes a scratch copy of the run folder holding only that
checkpoint, with its best-validation weights left out, exports it (its own step's EMA weights), then runs
`python -m bench controls` on it (each dial's Spearman r and the targets it meets) and `bench/sound_check.py --n N
--steps S` (variety, the 1-NN test, the share of kicks whose pitch falls, onset to peak, haze) against the real
kicks the run's split records (--real, default the starter kit). One row per step; OUT/prior_steps.json (default
~/.cache/kickserver/bench). The scratch copies are removed; the run folder is only read.

The kick-synth table of MODEL_CARD.md ("The default, decided on 512 kicks") is this on the version-2 run of
scripts/train_kick_synth.sh, --n 512.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

RUN_FILES = ("config.json", "synth_fits.safetensors")  # what an export reads besides the checkpoint (where present)
MAX_CHECKPOINTS = 64


def checkpoint_steps(run: Path) -> list[int]:
    """The steps of the checkpoints a run folder kept (RUN/checkpoints/step-NNNNNNNN.pt), ascending."""
    found = []
    for p in sorted((run / "checkpoints").glob("step-*.pt"))[:MAX_CHECKPOINTS]:
        m = re.fullmatch(r"step-(\d{1,9})\.pt", p.name)
        if m:
            found.append(int(m.group(1)))
    return sorted(found)


def export_step(run: Path, step: int, out: Path, scratch: Path) -> None:
    """out: the run's checkpoint of `step` exported with its own EMA weights (not the best validation's)."""
    import torch

    from trainer.checkpoint import save_checkpoint

    copy = scratch / f"run-{step}"
    copy.mkdir(parents=True)
    for name in RUN_FILES:
        if (run / name).is_file():
            shutil.copy2(run / name, copy / name)
    # tensors and plain containers only, as trainer.checkpoint reads a checkpoint
    state = torch.load(run / "checkpoints" / f"step-{step:08d}.pt", map_location="cpu", weights_only=True)
    state["best_ema"], state["best_step"] = None, None
    save_checkpoint(copy, state, step)
    subprocess.run([sys.executable, "-m", "trainer.cli", "export", str(copy), "--out", str(out)], cwd=REPO,
                   check=True, capture_output=True, text=True)


def measure_step(model: Path, real: str, n: int, steps: int, scratch: Path) -> dict:
    """The dials (bench controls) and the sound (sound_check) of one exported model."""
    controls_dir, sound_dir = scratch / f"controls-{model.stem}", scratch / f"sound-{model.stem}"
    subprocess.run([sys.executable, "-m", "bench", "controls", "--models", str(model), "--out", str(controls_dir),
                    "--img", str(controls_dir)], cwd=REPO, check=True, capture_output=True, text=True)
    subprocess.run([sys.executable, str(REPO / "bench" / "sound_check.py"), "--artifact", str(model), "--real", real,
                    "--train", real, "--n", str(n), "--steps", str(steps), "--tag", "step", "--out", str(sound_dir)],
                   cwd=REPO, check=True, capture_output=True, text=True)
    controls = json.loads((controls_dir / "controls-cpu.json").read_text())["rows"]
    sets = json.loads((sound_dir / "sound_check-step.json").read_text())["sets"]
    (name, s), = [(k, v) for k, v in sets.items() if k.startswith(model.stem)]
    return {"set": name,
            "dials_r": {r["control"]: r["r"] for r in controls},
            "dial_targets_met": sum(int(r["met"]) for r in controls),
            "dial_targets": 4 * len(controls),
            "diversity": s["diversity_ratio"],
            "nn1_heldout": s["nn1"]["accuracy"], "nn1_train": s["nn1_train"]["accuracy"],
            "gen_nn_gen": s["nn1_train"].get("gen_nn_gen"),
            "pitch_drop": s["pitch_drop"]["share"],
            "attack_ms": s["attack_ms"]["median"], "body_hf_db": s["body_hf_db"]["median"]}


def main(argv: list[str] | None = None) -> int:
    from bench.common import machine, user_results, write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a kicktrain run folder (RUN/checkpoints/step-*.pt)")
    ap.add_argument("--steps", type=int, nargs="+", help="which checkpoints (default: every one the run kept)")
    ap.add_argument("--n", type=int, default=512, help="kicks per sound_check set")
    ap.add_argument("--sampler-steps", type=int, default=6)
    ap.add_argument("--real", default=str(REPO / "kickserver" / "data" / "kicks"))
    ap.add_argument("--out", type=Path, default=user_results() / "prior_steps.json")
    args = ap.parse_args(argv)

    kept = checkpoint_steps(args.run)
    steps = args.steps or kept
    missing = [s for s in steps if s not in kept]
    if not steps or missing:
        print(f"{args.run}: no checkpoint of step {missing or 'any'} (it kept {kept or 'none'})", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="prior_steps-") as tmp:
        scratch = Path(tmp)
        for step in steps:
            model = scratch / f"step{step}.safetensors"
            export_step(args.run, step, model, scratch)
            row = {"step": step, **measure_step(model, args.real, args.n, args.sampler_steps, scratch)}
            rows.append(row)
            r = row["dials_r"]
            print(f"step {step}: dials r {' / '.join(f'{r[k]:.2f}' for k in r)} ({row['dial_targets_met']} of "
                  f"{row['dial_targets']}), diversity {row['diversity']:.2f}, 1-NN {row['nn1_heldout']:.2f} / "
                  f"{row['nn1_train']:.2f}, pitch falls {row['pitch_drop']:.2f}, attack {row['attack_ms']:.1f} ms, "
                  f"haze {row['body_hf_db']:.1f} dB", flush=True)
    write_json(args.out, {"run": args.run.resolve().name, "n": args.n, "sampler_steps": args.sampler_steps,
                          "machine": machine("cpu"), "rows": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
