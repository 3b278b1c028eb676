"""What a served fit costs per kick, synth version 1 beside version 2, measured side by side in one run.

    python bench/studies/synth_fit_time.py --kicks 6

A served kick-synth model fits a file when asked for its variation, a morph's end or its place on the map (the small
preset's fit.serve_iters steps from the best of fit.starts_for's shapes, then adjust): one kick at a time, as the daemon
does. Each kick of a fixed draw of the starter kit (synth_ceiling.py's draw) is fitted by both versions, the order
alternating from kick to kick so that a change in the machine's load falls on both alike; prints the median wall and
process CPU seconds per kick of each and their ratio (CPU time counts this process's threads only: on a machine
other work loads, it moves less than the wall clock), and writes --out.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.common import machine, user_results, write_json  # noqa: E402
from bench.studies.synth_ceiling import pick  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", default=str(REPO / "kickserver" / "data" / "kicks"))
    ap.add_argument("--kicks", type=int, default=6)
    ap.add_argument("--versions", default="1,2")
    ap.add_argument("--out", type=Path, default=user_results() / "synth_fit_time.json")
    args = ap.parse_args(argv)

    from kickmodel.config import DataConfig
    from kickmodel.families import preset
    from kickmodel.families.kick_synth.fit import fit, serve_restart_iters
    from trainer.evaluation.sets import load_folder

    cfg = DataConfig()
    every, sources, _, _ = load_folder([args.real], cfg, lambda m: print(m, file=sys.stderr))
    chosen = pick(len(every), 24)[:args.kicks]
    f = preset("small", "kick_synth").fit
    versions = [int(v) for v in args.versions.split(",")]
    wall: dict[int, list[float]] = {v: [] for v in versions}
    cpu: dict[int, list[float]] = {v: [] for v in versions}
    for j, i in enumerate(chosen):
        x = torch.from_numpy(every[i:i + 1])
        for v in (versions if j % 2 == 0 else versions[::-1]):
            t, c = time.perf_counter(), time.process_time()
            fit(x, cfg.sample_rate, iters=f.serve_iters, restart_iters=serve_restart_iters(f), lr=f.lr, batch=1,
                version=v)
            wall[v].append(time.perf_counter() - t)
            cpu[v].append(time.process_time() - c)
            print(f"kick {j + 1}/{len(chosen)} ({Path(sources[i]).name}), version {v}: {wall[v][-1]:.1f} s wall, "
                  f"{cpu[v][-1]:.1f} s CPU", file=sys.stderr)
    base = versions[0]
    for v in versions:
        rw = np.median(np.array(wall[v]) / np.array(wall[base]))
        rc = np.median(np.array(cpu[v]) / np.array(cpu[base]))
        print(f"version {v}: median {np.median(wall[v]):.1f} s wall, {np.median(cpu[v]):.1f} s CPU a kick; "
              f"per kick against version {base}: x{rw:.2f} wall, x{rc:.2f} CPU")
    write_json(args.out, {"date": datetime.date.today().isoformat(), "machine": machine("cpu"),
                          "kicks": [Path(sources[i]).name for i in chosen],
                          "fit": {"serve_iters": f.serve_iters, "restart_iters": serve_restart_iters(f)},
                          "wall_s": {str(v): w for v, w in wall.items()}, "cpu_s": {str(v): c for v, c in cpu.items()}})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
