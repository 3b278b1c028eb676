"""Measure a model's stored kit map on its kit: for kit kicks picked evenly, whether a kick made at the
kick's point with spread 0 is nearer that kick than the median kit kick is, on the evaluation embedding (mfcc-stats
standardised by the kit's statistics, as `kicktrain eval` standardises by the real clips'); the mean distance of kicks
made at those points to their kit kick for each spread; and how far `locate` puts each picked kick's own clip from its
point.

    .venv/bin/python scripts/kit_map_check.py [ARTIFACT] [KIT] [KICKS]
    (defaults: kickserver/models/default.safetensors kickserver/data/kicks 20)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kickmodel.generator import Item  # noqa: E402
from kickmodel.loading import load_generator  # noqa: E402
from trainer.embeddings import get_embedding  # noqa: E402
from trainer.evaluation.distances import standardiser  # noqa: E402
from trainer.evaluation.sets import load_folder  # noqa: E402

SPREADS = (0.0, 0.3, 0.6, 1.0)
SEEDS = 4


def main(argv: list[str]) -> int:
    artifact = Path(argv[0]) if argv else ROOT / "kickserver/models/default.safetensors"
    kit_dir = Path(argv[1]) if len(argv) > 1 else ROOT / "kickserver/data/kicks"
    n_picked = int(argv[2]) if len(argv) > 2 else 20
    gen = load_generator(artifact)
    km = gen.kit_map
    if km is None:
        print(f"{artifact}: {gen.kit_map_missing}", file=sys.stderr)
        return 2
    clips, sources, _, _ = load_folder([str(kit_dir)], gen.config.data, lambda m: None)
    by_name = {Path(s).stem: (clips[i], s) for i, s in enumerate(sources)}
    kit = np.stack([by_name[n][0] for n in km.names])
    emb = get_embedding("mfcc-stats")
    raw = emb(kit, gen.sample_rate)
    mu, sd = standardiser(raw)
    ek = (raw - mu) / sd
    picked = [int(i) for i in np.linspace(0, km.n - 1, min(n_picked, km.n)).round()]
    t0 = time.perf_counter()
    nearer, own, curve, moved = [], [], {s: [] for s in SPREADS}, []
    for i in picked:
        x, y = (float(v) for v in km.points[i])
        others = np.median(np.delete(np.linalg.norm(ek - ek[i], axis=1), i))
        for s in SPREADS:
            kicks = gen.from_map(x, y, s, [Item(seed=k) for k in range(1 if s == 0 else SEEDS)])
            d = np.linalg.norm((emb(kicks, gen.sample_rate) - mu) / sd - ek[i], axis=1)
            curve[s].append(float(d.mean()))
            if s == 0:
                nearer.append(bool(d[0] < others))
                e = (emb(kicks, gen.sample_rate) - mu) / sd
                to_kit = np.linalg.norm(ek - e[0], axis=1)  # the made kick to every kit kick
                own.append(bool(to_kit[i] < np.median(np.delete(to_kit, i))))
        lx, ly = gen.locate(kit[i])
        moved.append(float(np.hypot(lx - x, ly - y)))
    print(f"{gen.name} ({gen.family}): {km.method} map of {km.n} kicks, bandwidth {km.bandwidth:.3f} (map units), "
          f"locate bandwidth {km.locate_bandwidth:.3f}")
    print(f"nearer its kit kick than the median kit kick (spread 0): {sum(nearer)} of {len(nearer)} "
          f"({np.mean(nearer):.2f})")
    print(f"nearer its kit kick than to the median other kit kick (spread 0): {sum(own)} of {len(own)} "
          f"({np.mean(own):.2f})")
    print("mean embedding distance to the point's kit kick by spread (RMS z-units x sqrt(91)): "
          + ", ".join(f"{s:g}: {np.mean(v):.2f}" for s, v in curve.items()))
    print(f"locate of the kit kick's own clip: median {np.median(moved):.4f}, max {max(moved):.4f} from its point")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
