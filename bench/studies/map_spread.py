"""How far a kick's spread alone moves it on the kit map: for each shipped model with a map, the latents /kick/near
draws at a 3x3 grid of points (0.2, 0.5, 0.8) with the given spread and seeds 0..N-1, located with no audio at all
(KitMap.locate of the latent itself). The distance from the point asked is what no locate can undo: a kick made with
spread is not the point's kick, and /kick/locate of its file (by its tags or its sound) at best lands where its latent
lies. The floor under the `/kick/near` -> `/kick/locate` round trip at that spread.

    python bench/studies/map_spread.py [--spread 0.2] [--seeds 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench.common, as a script too

from kickmodel.loading import load_artifact  # noqa: E402

MODELS = sorted(Path("kickserver/models").glob("*.safetensors"))
GRID = (0.2, 0.5, 0.8)


def spread_drift(km, spread: float, seeds: int) -> np.ndarray:
    return np.array([math.hypot(*(np.asarray(km.locate(km.near(x, y, spread, s))) - (x, y)))
                     for x in GRID for y in GRID for s in range(seeds)])


def main() -> None:
    from bench.common import portable

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spread", type=float, default=0.2)
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out = {}
    for path in MODELS:
        km = load_artifact(path).kit_map
        if km is None:
            continue
        d = spread_drift(km, args.spread, args.seeds)
        out[path.stem] = row = {"n": int(d.size), "median": float(np.median(d)), "p90": float(np.quantile(d, 0.9)),
                                "worst": float(d.max()), "beyond_0.05": float((d > 0.05).mean())}
        print(f"{path.stem:12s} spread {args.spread:g}: {row['n']} latents, median {row['median']:.4f}, p90 "
              f"{row['p90']:.4f}, worst {row['worst']:.4f}, beyond 0.05 {100 * row['beyond_0.05']:.1f} %")
    if args.json:
        payload = {"spread": args.spread, "seeds": args.seeds, "models": out}
        args.json.write_text(json.dumps(portable(payload), indent=1))


if __name__ == "__main__":
    main()
