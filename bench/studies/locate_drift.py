"""Where does the kick-synth round trip `/kick/near` -> `/kick/locate` lose its point? The locate_snap protocol's 27
kicks (3x3 grid, spread 0.2, seeds 0..2, through a 24-bit WAV at 44.1 kHz), each located four ways:

- latent:  locate(the latent near() drew) -- the map's own inverse, no audio at all;
- served:  locate(encode(the file)) -- what the daemon answers (the served fit from its measured starts);
- oracle:  the served fit's descent and adjust, started at the kick's true numbers instead of the measured starts;
- guess:   the amortised inverse's guess alone (kickmodel/families/kick_synth/inverse.py), pitch track and adjust;
- refined: the served fit from the inverse's guess (fit.serve_options with the guess: what the daemon now runs);
- audio:   how far the file is from each way's numbers played (fit.distance at the fit's rate), its own numbers too.

Also, per synth number, the median |encoded - true| in kit standard deviations (the map's units): which numbers
drift, and whether the audio could have told them.

    python bench/studies/locate_drift.py [--json OUT] [--weights FILE] [--skip served,oracle]

Each way's median and worst distance in map units from the point asked (the target: median <= 0.02, worst <= 0.05).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kickmodel.families.kick_synth import fit as F  # noqa: E402
from kickmodel.families.kick_synth import inverse as inv  # noqa: E402
from kickmodel.families.kick_synth.synth import params_for, synth_for  # noqa: E402
from kickmodel.generator import Item  # noqa: E402
from kickmodel.loading import load_generator  # noqa: E402
from kickmodel.wavfile import encode_wav  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "kickserver" / "models" / "kick-synth.safetensors"
GRID = (0.2, 0.5, 0.8)
RATE = 44100


def as_file(gen, kick: np.ndarray) -> np.ndarray:
    a, r = sf.read(io.BytesIO(encode_wav(kick, RATE)), dtype="float32")
    return gen.prepare_source(a, r)


def encode_with(gen, clip: np.ndarray, fit_fn) -> np.ndarray:
    gen.codec.fit = fit_fn
    return gen.encode(clip[None])[0]


def refine_from(gen, clip: np.ndarray, u0: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The served fit's second stage (serve_iters of Adam at half rate) and adjust, from u0 instead of the starts."""
    import torchaudio.functional as AF

    f = gen.fit_config
    x = torch.as_tensor(clip).reshape(1, -1)
    sr = gen.sample_rate
    rate = sr // F.FIT_RATE_DIVISOR
    lengths = (F.fit_lengths(x, sr) * rate) // sr
    xf = AF.resample(x, sr, rate)[:, :int(lengths.max())]
    mask = (torch.arange(xf.shape[1])[None] < lengths[:, None]).float()
    with torch.inference_mode(False), torch.enable_grad():
        u, d = F._descend(synth_for(gen.synth_version, rate, xf.shape[1]), u0.reshape(1, -1),
                          F.Target(xf * mask, rate, mask), f.serve_iters, f.lr)
    u = F.adjust(synth_for(gen.synth_version, sr, x.shape[1]), u, F.descriptors.measure(x, sr),
                 finish=F._level_like_a_clip)
    return u, float(d[0])


def audio_distance(gen, clip: np.ndarray, u: torch.Tensor) -> float:
    """fit.distance of numbers u played (at the half rate the fit uses, over the clip's fitted length)."""
    import torchaudio.functional as AF

    x = torch.as_tensor(clip).reshape(1, -1)
    sr = gen.sample_rate
    rate = sr // F.FIT_RATE_DIVISOR
    n = int((F.fit_lengths(x, sr) * rate) // sr)
    xf = AF.resample(x, sr, rate)[:, :n]
    with torch.no_grad():
        return float(F.distance(synth_for(gen.synth_version, rate, n)(u.reshape(1, -1)), F.Target(xf, rate))[0])


def main() -> None:
    from bench.common import portable

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--weights", type=Path)
    ap.add_argument("--skip", default="", help="comma-separated: served, oracle, guess, refined")
    ns = ap.parse_args()
    skip = set(ns.skip.split(","))
    torch.manual_seed(0)
    gen = load_generator(MODEL, "cpu")
    net = inv.load(gen.synth_version, ns.weights)
    f, sr, v = gen.fit_config, gen.sample_rate, gen.synth_version
    fits = {"served": lambda x, check: F.fit(x, sr, **F.serve_options(f, v), check=check)[0],
            "guess": lambda x, check: F.fit(x, sr, **(F.serve_options(f, v, net.guess) | {"guess_iters": 0}))[0],
            "refined": lambda x, check: F.fit(x, sr, **F.serve_options(f, v, net.guess))[0]}
    km = gen.kit_map
    std = km.latent_std.astype(np.float64)
    rows = []
    for x in GRID:
        for y in GRID:
            items = [Item(seed=k) for k in range(3)]
            kicks = gen.from_map(x, y, 0.2, items, sample_rate=RATE)
            for k, kick in zip(range(3), kicks):
                z = km.near(x, y, 0.2, k)
                clip = as_file(gen, kick)
                u_true = gen.numbers(torch.as_tensor(z)[None] * gen.denoiser.data_scale)
                zs = {"latent": z}
                for name in ("served", "guess", "refined"):
                    if name not in skip:
                        zs[name] = encode_with(gen, clip, fits[name])
                if "oracle" not in skip:
                    u_or, _ = refine_from(gen, clip, u_true)
                    with torch.no_grad():
                        zs["oracle"] = gen.net.normalise(u_or)[0].numpy()
                r = {"x": x, "y": y, "seed": k, "audio_true": audio_distance(gen, clip, u_true)}
                for name, zz in zs.items():
                    lx, ly = km.locate(zz)
                    r[name] = float(np.hypot(lx - x, ly - y))
                    r[name + "_norm"] = float(np.linalg.norm((zz - z) / std))
                    r[name + "_dims"] = (np.abs(zz - z) / std).tolist()
                    uu = gen.numbers(torch.as_tensor(zz)[None] * gen.denoiser.data_scale)
                    r["audio_" + name] = audio_distance(gen, clip, uu)
                rows.append(r)
                print(f"({x}, {y}) seed {k}: " + "; ".join(
                    f"{name} off {r[name]:.4f}, moved {r[name + '_norm']:.2f} sd, audio {r['audio_' + name]:.2f}"
                    for name in zs), flush=True)
                if ns.json:
                    ns.json.write_text(json.dumps(portable({"rows": rows}), indent=1) + "\n")
    out = {}
    names = [n for n in ("latent", "served", "oracle", "guess", "refined") if n in rows[0]]
    for name in names:
        t = [r[name] for r in rows]
        out[name] = {"median": float(np.median(t)), "worst": float(np.max(t)),
                     "latent_moved_median": float(np.median([r[name + "_norm"] for r in rows]))}
        dims = np.median(np.array([r[name + "_dims"] for r in rows]), axis=0)
        out[name]["dims_median_sd"] = {p.name: round(float(v), 3)
                                       for p, v in zip(params_for(gen.synth_version), dims, strict=True)}
        out[name]["audio_median"] = float(np.median([r["audio_" + name] for r in rows]))
    print(json.dumps(out, indent=1))
    if ns.json:
        ns.json.write_text(json.dumps(portable({"summary": out, "rows": rows}), indent=1) + "\n")


if __name__ == "__main__":
    main()
