"""How far a variation at strength 0 lies from its source, a kick the daemon's writer wrote
(24-bit WAV at the output rate), for 16 seeds per shipped model and output rate: the worst sample difference in dB
re the source's peak. Run from the repository root (on another tree: PYTHONPATH=TREE, cd TREE):

    python bench/studies/strength_zero.py [--seeds 16]
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import soundfile as sf

from kickmodel.generator import Item
from kickmodel.loading import load_generator
from kickmodel.wavfile import encode_wav

MODELS = sorted(Path("kickserver/models").glob("*.safetensors"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=16)
    ns = ap.parse_args()
    for path in MODELS:
        gen = load_generator(path, "cpu")
        s = gen.settings(4) if gen.samplers else gen.settings()
        for rate in (44100, 48000):
            worst = -np.inf
            for seed in range(ns.seeds):
                x = gen.generate([Item(seed=seed)], s, sample_rate=rate)[0]
                a, r = sf.read(io.BytesIO(encode_wav(x, rate)), dtype="float32")
                y = gen.vary(gen.prepare_source(a, r), 0.0, [Item(seed=0)], s, sample_rate=rate)[0]
                worst = max(worst, 20 * np.log10(np.abs(y - a).max() / np.abs(a).max()))
            print(f"{path.name} {rate} Hz: worst {worst:.1f} dB re peak over {ns.seeds} seeds")


if __name__ == "__main__":
    main()
