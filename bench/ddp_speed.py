"""Training throughput with DistributedDataParallel: the same run on 1 and on N processes, side by side.

    python -m bench.ddp_speed [--families waveform-diffusion,mel-vae,latent-diffusion] [--preset small]
                              [--steps 40] [--procs 1,2] [--device cpu] [--data kickserver/data/kicks]
                              [the families' options, e.g. --vae VAE]

For each family, each world size is a fresh `torchrun --standalone --nproc-per-node N -m trainer fit` on the same data,
preset and effective batch (train.batch_size is split across the processes), one torch thread per
process on a CPU (gloo) or one GPU per process (NCCL). Throughput is the median of the samples/s the
trainer logs every `log_every` steps, after the first interval (warm-up); wall time is the whole fit.
Each family gets the options it declares for benchmarks (trainer.cli.add_family_flags(..., "bench")) as
given; one whose value is an artifact and is not given is a random one of the preset, made on the spot
(latent diffusion trains over --vae, or a random mel-VAE: speed does not depend on the weights). Writes
<out>/ddp-<cpu|cuda>.json with the machine. On a CPU, N processes can only be faster when the machine has
N idle cores: the load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common
from trainer.cli import add_family_flags, given_options


def one(family: str, n: int, args: argparse.Namespace, tmp: Path, steps: int, options: dict) -> dict:
    run = tmp / f"run-{family}-{n}"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), "-m", "trainer",
           "fit", str(args.data), "--family", family, "--preset", args.preset, "--run-dir", str(run),
           "--device", args.device, "--max-steps", str(steps), "--no-progress", "--no-tensorboard",
           "--set", "train.log_every=10", "--set", "train.val_every=100000", "--set", "train.ckpt_every=100000",
           "--set", "train.sample_every=0"] + common.option_args(options)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=str(common.REPO))
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=common.REPO)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{family}, {n} processes: fit failed:\n{proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rates = [r["samples_per_s"] for r in rows if "samples_per_s" in r and "loss" in r][1:]
    said = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if "world size" in line]
    return {"family": family, "processes": n, "steps": steps,
            "samples_per_s": statistics.median(rates) if rates else None, "fit_wall_s": round(wall, 1),
            "log_line": said[0].strip() if said else None, "load_before": [round(v, 2) for v in load],
            "load_after": [round(v, 2) for v in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="waveform-diffusion,mel-vae,latent-diffusion")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=40, help="steps per run (waveform diffusion: three quarters)")
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--data", type=Path, default=common.STARTER_KIT)
    add_family_flags(ap, "bench")
    common.add_out_option(ap)
    args = ap.parse_args(argv)
    procs = [int(p) for p in args.procs.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families.split(","):
            steps = args.steps * 3 // 4 if family == "waveform-diffusion" else args.steps
            options = common.family_options(family, given_options(args), Path(tmp), args.preset)
            fam_rows = [one(family, n, args, Path(tmp), steps, options) for n in procs]
            base = fam_rows[0]["samples_per_s"]
            for r in fam_rows:
                r["speed_up"] = r["samples_per_s"] / base if base and r["samples_per_s"] else None
            rows += fam_rows
    print(common.table(rows, [("family", "family", "s"), ("processes", "processes", "d"),
                              ("samples_per_s", "samples/s", ".1f"), ("speed_up", "x of 1 process", ".2f"),
                              ("fit_wall_s", "fit wall s", ".0f")]))
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    payload = {"suite": common.SCHEMA, "benchmark": "ddp", "date": common.now(), "machine": common.machine(kind),
               "preset": args.preset, "threads_per_process": args.threads, "rows": rows}
    print(f"wrote {common.write_result(args.out, 'ddp', kind, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
