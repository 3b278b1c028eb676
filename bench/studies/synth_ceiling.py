"""The resynthesis ceiling: how close each route back to audio can get to a real kick it is given whole.

    python bench/studies/synth_ceiling.py                                   # the starter kit, both routes
    python bench/studies/synth_ceiling.py --fits runs/synth-small/synth_fits.safetensors   # reuse a run's fits

- kick-synth: every kick fitted by analysis by synthesis (kickmodel/families/kick_synth/fit.py) and played
  back: the best a kick-synth model can sound, whatever its prior.
- griffin-lim: every kick's log-mel (the bundled model's front end) turned back into audio by its inverter
  (Griffin-Lim with the NNLS mel inversion): the best the bundled latent-diffusion model's route can sound,
  whatever its VAE and denoiser.

Both finished as the daemon finishes a kick (kickmodel.generator.finish_kick). Prints, per route, the medians
of bench/sound_check.py's measures beside the real kicks', the per-kick error against its own original
(pitch in cents, decay ratio, attack ms), and the diversity against real; writes --out (default
~/.cache/kickserver/bench/synth_ceiling.json).
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
from bench.sound_check import _shown, diversity_ratios, measure, summarise  # noqa: E402

COLS = ("start_pct", "attack_ms", "pitch_start_hz", "pitch_end_hz", "pitch_drop", "body_hf_db")


def synth_route(clips: np.ndarray, sr: int, fits: Path | None, log) -> np.ndarray:
    from kickmodel.families import preset
    from kickmodel.families.kick_synth.synth import synth_for
    from trainer.recipes.kick_synth import FitCache

    cfg = preset("small", "kick_synth").replace("data", sample_rate=sr, length=clips.shape[1])
    u = FitCache(fits, log, read_only=True).numbers(torch.from_numpy(clips), cfg)  # a run's file is left as it is
    synth = synth_for(cfg.synth.version, sr, clips.shape[1])
    with torch.inference_mode():
        return torch.cat([synth(u[i:i + 1]) for i in range(len(u))]).numpy()


def griffin_lim_route(clips: np.ndarray, artifact: Path) -> np.ndarray:
    from kickmodel.families.mel_vae.generator import build_parts
    from kickmodel.loading import load_artifact

    front, _, inverter = build_parts(load_artifact(artifact), torch.device("cpu"))
    with torch.inference_mode():
        return torch.cat([inverter(front(torch.from_numpy(clips[i:i + 1]))) for i in range(len(clips))]).numpy()


KID_SPLITS, KID_SIZE = 50, 20


def ceiling_kid(real: np.ndarray, routes: dict[str, np.ndarray], sr: int) -> dict[str, tuple[float, float]]:
    """{name: (mean, spread)} of the KID between KID_SIZE real kicks (half the kit when smaller) and as many kicks of a
    route made from other real kicks (disjoint draws, KID_SPLITS of them), in the mfcc-stats embedding standardised by
    the real kicks; "real vs real" is the floor."""
    from trainer.embeddings import get_embedding
    from trainer.evaluation.distances import kid, standardiser

    emb = get_embedding("mfcc-stats")
    e_real = np.asarray(emb(real, sr), dtype=np.float64)
    mu, scale = standardiser(e_real)
    z = {"real vs real": (e_real - mu) / scale}
    z |= {k: (np.asarray(emb(v, sr), dtype=np.float64) - mu) / scale for k, v in routes.items()}
    size = min(KID_SIZE, len(real) // 2)  # a smaller kit: halves of it
    if size < 2:
        raise ValueError(f"a KID needs at least 4 real kicks, got {len(real)}")
    rng = np.random.default_rng(0)
    out = {}
    for name, zz in z.items():
        vals = []
        for _ in range(KID_SPLITS):
            p = rng.permutation(len(real))
            vals.append(kid(z["real vs real"][p[:size]], zz[p[size:2 * size]]))
        out[name] = (float(np.mean(vals)), float(np.std(vals)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", default=str(REPO / "kickserver" / "data" / "kicks"))
    ap.add_argument("--fits", type=Path, default=None, help="a kick-synth run's synth_fits.safetensors (else fit now)")
    ap.add_argument("--artifact", type=Path, default=REPO / "kickserver" / "models" / "default.safetensors",
                    help="a mel-vae or latent-diffusion model whose front end and inverter the griffin-lim route uses")
    ap.add_argument("--out", type=Path, default=user_results() / "synth_ceiling.json")
    args = ap.parse_args(argv)

    from kickmodel.config import DataConfig
    from kickmodel.dsp import finish_kick
    from trainer.evaluation.sets import load_folder

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    cfg = DataConfig()
    real, _, _, _ = load_folder([args.real], cfg, log)
    sr = cfg.sample_rate
    routes, seconds = {}, {}
    t = time.perf_counter()
    routes["kick-synth fit"] = finish_kick(synth_route(real, sr, args.fits, log), sr)
    seconds["kick-synth fit"] = time.perf_counter() - t
    t = time.perf_counter()
    routes["griffin-lim"] = finish_kick(griffin_lim_route(real, args.artifact), sr)
    seconds["griffin-lim"] = time.perf_counter() - t

    kids = ceiling_kid(real, routes, sr)
    rows = {"real": summarise(measure(real, sr))} | {k: summarise(measure(v, sr)) for k, v in routes.items()}
    div = diversity_ratios({"real": real} | routes, real, None, sr)
    m_real = measure(real, sr)
    per_kick = {}
    for name, clips in routes.items():
        m = measure(clips, sr)
        cents = 1200 * np.log2(np.maximum(m["pitch_end_hz"], 1) / np.maximum(m_real["pitch_end_hz"], 1))
        from kickmodel.descriptors import measure as descriptors

        d_real = descriptors(torch.from_numpy(real), sr).numpy()
        d_gen = descriptors(torch.from_numpy(clips), sr).numpy()
        per_kick[name] = {
            "pitch_end_cents_median_abs": float(np.median(np.abs(cents))),
            "descriptor_pitch_cents_median_abs": float(np.median(np.abs(1200 * np.log2(d_gen[:, 1] / d_real[:, 1])))),
            "decay_ratio_median": float(np.median(d_gen[:, 0] / np.maximum(d_real[:, 0], 1e-3))),
            "click_db_median_abs": float(np.median(np.abs(d_gen[:, 2] - d_real[:, 2]))),
            "attack_ms_median_abs": float(np.median(np.abs(m["attack_ms"] - m_real["attack_ms"]))),
        }
    print(f"{'':>16} " + " ".join(f"{c:>15}" for c in COLS) + f" {'div/real':>9}")
    for name, r in rows.items():
        cells = [f"{r[c]['share' if c == 'pitch_drop' else 'median']:>15.3g}" for c in COLS]
        print(f"{name:>16} " + " ".join(cells) + f" {div[name]:>9.2f}")
    print("KID against the real kicks (mfcc-stats, standardised by the real kicks; mean and spread over "
          f"{KID_SPLITS} splits of {KID_SIZE} against {KID_SIZE} others):")
    for name, (mean, spread) in kids.items():
        print(f"  {name}: {mean:.2f} +- {spread:.2f}")
    print("per kick, against its own original:")
    for name, e in per_kick.items():
        print(f"  {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in e.items()))
    out = {"date": datetime.date.today().isoformat(), "machine": machine("cpu"), "kicks": len(real),
           "real": _shown(Path(args.real)), "rows": rows,
           "diversity": div,
           "per_kick": per_kick, "kid": {k: {"mean": m, "spread": s} for k, (m, s) in kids.items()},
           "seconds": seconds}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
