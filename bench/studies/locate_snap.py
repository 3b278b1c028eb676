"""Does `/kick/locate` snap to kit points? For each shipped model with a kit map, through the
generator's own modes and the daemon's 24-bit WAV at 44.1 kHz (what a client's file is):

- round trip: a /kick/near kick at each point of a 3x3 grid (0.2, 0.5, 0.8; default spread 0.2; seeds 0..2)
  located again: distance from the point asked (targets: median <= 0.02, worst <= 0.05);
- 48 fresh kicks (seeds 0..47) located: distance to the nearest kit point, and how many land within 0.001 of one;
- the starter kit's held-out kicks (not in the map) located the same way, as the yardstick: generated kicks should
  land no nearer kit points than unseen real kicks do;
- six kicks asked at (0.3, 0.7) (seeds 0..5): how many distinct points they locate to.

    python bench/studies/locate_snap.py [--json OUT] [--model kick-synth]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench.common, as a script too

from kickmodel.generator import Item  # noqa: E402
from kickmodel.loading import load_generator  # noqa: E402
from kickmodel.wavfile import encode_wav  # noqa: E402

MODELS = sorted(Path("kickserver/models").glob("*.safetensors"))
KIT = Path("kickserver/data/kicks")
GRID = (0.2, 0.5, 0.8)
RATE = 44100


def as_file(gen, kick: np.ndarray) -> np.ndarray:
    """The kick as written (24-bit WAV at RATE), read back and prepared as a locate's source."""
    a, r = sf.read(io.BytesIO(encode_wav(kick, RATE)), dtype="float32")
    return gen.prepare_source(a, r)


def nearest_kit(km, xy) -> float:
    return float(np.sqrt(((km.points.astype(np.float64) - np.asarray(xy)) ** 2).sum(1)).min())


def measure(path: Path) -> dict:
    from kickmodel.kitmap import clean_name

    gen = load_generator(path, "cpu")
    km = gen.kit_map
    s = gen.settings(4) if gen.samplers else gen.settings()
    trip = []
    for x in GRID:
        for y in GRID:
            kicks = gen.from_map(x, y, 0.2, [Item(seed=k) for k in range(3)], sample_rate=RATE)
            for k in kicks:
                lx, ly = gen.locate(as_file(gen, k))
                trip.append(float(np.hypot(lx - x, ly - y)))
    fresh = gen.generate([Item(seed=k) for k in range(48)], s, sample_rate=RATE)
    fresh_nn = [nearest_kit(km, gen.locate(as_file(gen, k))) for k in fresh]
    names = set(km.names)
    held = [p for p in sorted(KIT.glob("*.flac")) if clean_name(p.stem) not in names]
    held_nn = []
    for p in held:
        a, r = sf.read(p, dtype="float32")
        held_nn.append(nearest_kit(km, gen.locate(gen.prepare_source(a, r))))
    six = gen.from_map(0.3, 0.7, 0.2, [Item(seed=k) for k in range(6)], sample_rate=RATE)
    six_pts = {tuple(np.round(gen.locate(as_file(gen, k)), 4)) for k in six}
    return {"round_trip_median": float(np.median(trip)), "round_trip_worst": float(np.max(trip)),
            "fresh_within_0.001": int(sum(d < 0.001 for d in fresh_nn)), "fresh": len(fresh_nn),
            "fresh_nn_median": float(np.median(fresh_nn)),
            "held_out_within_0.001": int(sum(d < 0.001 for d in held_nn)), "held_out": len(held_nn),
            "held_out_nn_median": float(np.median(held_nn)), "six_at_0.3_0.7_distinct": len(six_pts)}


def main() -> None:
    from bench.common import portable

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--model", action="append", help="a shipped model's name (default: all)")
    ns = ap.parse_args()
    out = {}
    for path in MODELS:
        if ns.model and path.stem not in ns.model:
            continue
        out[path.name] = r = measure(path)
        print(f"{path.name}: round trip median {r['round_trip_median']:.3f} worst {r['round_trip_worst']:.3f}; "
              f"fresh kicks within 0.001 of a kit point {r['fresh_within_0.001']}/{r['fresh']} "
              f"(median to the nearest {r['fresh_nn_median']:.4f}); held-out real kicks "
              f"{r['held_out_within_0.001']}/{r['held_out']} (median {r['held_out_nn_median']:.4f}); "
              f"six kicks at (0.3, 0.7) locate to {r['six_at_0.3_0.7_distinct']} point(s)", flush=True)
    if ns.json:
        ns.json.write_text(json.dumps(portable(out), indent=1) + "\n")


if __name__ == "__main__":
    main()
