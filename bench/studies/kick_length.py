"""How long kicks and their files are: a kick-synth kick asked for decay_s, and the models' kicks left free.

    python bench/studies/kick_length.py                  # the shipped models, 16 kicks a row
    python bench/studies/kick_length.py --n 64 --decays 0.1,2.0

For the shipped kick-synth model, each decay_s asked of --n kicks (seeds 0..n-1, nothing else given): the decay
measured on the file (kickmodel.descriptors.measure on the kick cut as the writer cuts it, kickmodel.dsp.trim_tail),
the share within 10 % of the asked, the render's length and the file's, and the seconds one kick takes alone (median,
one thread). Then both shipped models' free kicks (seeds 0..n-1, default settings): the share rendered longer than
the model's length and the files' lengths. Writes --out (default ~/.cache/kickserver/bench/kick_length.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

MODELS = REPO / "kickserver" / "models"


def main(argv: list[str] | None = None) -> int:
    from bench.common import portable
    from kickmodel.descriptors import measure
    from kickmodel.dsp import trim_tail
    from kickmodel.fsutil import atomic_write_bytes
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--decays", default="0.1,0.3,0.9,1.5,2.0,2.5")
    ap.add_argument("--out", type=Path, default=Path.home() / ".cache" / "kickserver" / "bench" / "kick_length.json")
    ns = ap.parse_args(argv)
    torch.set_num_threads(1)
    gen = load_generator(MODELS / "kick-synth.safetensors", "cpu")
    sr, s = gen.sample_rate, gen.settings()
    rows: list[dict] = []
    print(f"kick-synth, {ns.n} kicks a row, {datetime.date.today()}")
    print("| decay_s asked | measured (median) | within 10 % | render s (median) | file s (median, min..max) "
          "| s/kick (median) |")
    print("|---|---|---|---|---|---|")
    for d in (float(v) for v in ns.decays.split(",")):
        got, renders, files, secs = [], [], [], []
        for seed in range(ns.n):
            t0 = time.perf_counter()
            x = gen.generate([Item(seed=seed, controls={"decay_s": d})], s)[0]
            secs.append(time.perf_counter() - t0)
            y = trim_tail(x, sr)
            got.append(float(measure(torch.from_numpy(y)[None], sr)[0, 0]))
            renders.append(len(x) / sr)
            files.append(len(y) / sr)
        got_a = np.array(got)
        ok = float(np.mean(np.abs(got_a / d - 1) < 0.1))
        rows.append({"decay_s": d, "measured": got, "renders_s": renders, "files_s": files, "seconds": secs})
        print(f"| {d:g} | {np.median(got_a):.3f} | {100 * ok:.0f} % | {np.median(renders):.2f} | "
              f"{np.median(files):.2f} ({min(files):.2f}..{max(files):.2f}) | {np.median(secs):.3f} |")
    free = {}
    for name in ("kick-synth", "default"):
        g = gen if name == "kick-synth" else load_generator(MODELS / "default.safetensors", "cpu")
        out = g.generate([Item(seed=i) for i in range(ns.n)], g.settings())
        lengths = [len(trim_tail(row, g.sample_rate)) / g.sample_rate for row in out]
        longer = float(np.mean([np.abs(row[g.length:]).max() > 0 if len(row) > g.length else False for row in out]))
        free[name] = {"files_s": lengths, "longer_than_model": longer, "model_s": g.length / g.sample_rate}
        print(f"{name}: free kicks, files {np.median(lengths):.2f} s median ({min(lengths):.2f}..{max(lengths):.2f}), "
              f"model's render {g.length / g.sample_rate:.3f} s, {100 * longer:.0f} % rendered longer")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(ns.out, (json.dumps(portable({"date": str(datetime.date.today()), "n": ns.n,
                                                     "decays": rows, "free": free}), indent=1) + "\n").encode())
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
