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
(pitch in cents, decay ratio, attack ms, and two paired distances: `mrstft`, the multi-resolution STFT distance
over the whole kick, and `onset`, the same over its first ONSET_MS), and the diversity against real; writes --out
(default ~/.cache/kickserver/bench/synth_ceiling.json).

The ablation (what each addition to the synth bought): the same kicks for every row,

    python bench/studies/synth_ceiling.py --subset 24 --version 1                 # today's synth
    python bench/studies/synth_ceiling.py --subset 24 --version 2 --stage texture # ... one row per stage

The learned transient (kickmodel/families/kick_synth/transient.py) on kicks it never trained on:

    python bench/studies/synth_ceiling.py --fits RUN/synth_fits.safetensors --transient MODEL --no-griffin-lim

--transient takes a model with a transient part (or a run folder that trains one: its newest checkpoint's EMA
weights) and measures the kicks its run held out (the split it recorded, by content hash): each fit played alone
("kick-synth fit"), with the transient after the synth ("fit + transient") and so with its pitch, decay and click set
to the clip's again with the transient on, as a fit ends ("fit + transient, adjusted"); the KID against the kicks it
trained on.

--subset N fits N kicks of the folder (a fixed draw, the same for every row: fits take seconds a kick) and measures
the KID of those N routes' kicks against the folder's other kicks; --stage names how much of version 2's synth and
fit is on (kickmodel/families/kick_synth/synth_v2.py: STAGES). A version that draws its noise per kick plays each fit
back with a draw of its own (seed: the kick's place in the folder), as a generated kick is, not the fit's draw.
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


def synth_route(clips: np.ndarray, sr: int, fits: Path | None, log, version: int | None = None,
                stage: str | None = None, seeds: np.ndarray | None = None,
                transient: torch.nn.Module | None = None, readjust: bool = False) -> np.ndarray:
    """Each clip fitted (the small preset's fit settings, at version, or the preset's) and played back: from a run's
    fits file when given (read only), else fitted now (stage: how much of the synth and its fit is on); with a
    transient, played after the synth as a model plays it; readjust: its fit's pitch, decay and click measured again
    with the transient on and set to the clip's (fit.adjust, as a fit ends: what a fit made with the transient in the
    loop would do)."""
    from kickmodel.families import preset
    from kickmodel.families.kick_synth.fit import fit
    from kickmodel.families.kick_synth.synth import synth_for
    from trainer.recipes.kick_synth import FitCache

    cfg = preset("small", "kick_synth").replace("data", sample_rate=sr, length=clips.shape[1])
    if version is not None:
        cfg = cfg.replace("synth", version=version)
    v = cfg.synth.version
    x = torch.from_numpy(clips)
    if fits is not None:
        u = FitCache(fits, log, read_only=True).numbers(x, cfg)  # a run's file is left as it is
    else:
        f = cfg.fit
        u, _ = fit(x, sr, iters=f.iters, restart_iters=f.restart_iters, lr=f.lr, batch=f.batch, version=v,
                   stage=stage, log=log, progress_s=60.0)
    synth = synth_for(v, sr, clips.shape[1], stage=stage)
    if transient is not None:
        from kickmodel.families.kick_synth.transient import WithTransient

        synth = WithTransient(synth, transient)
        if readjust:
            from kickmodel.descriptors import measure as descriptors
            from kickmodel.families.kick_synth.fit import adjust

            with torch.no_grad():
                u = adjust(synth, u, descriptors(x, sr),
                           finish=lambda y: y / y.abs().amax(dim=1, keepdim=True).clamp(min=1e-9))
    s = None if seeds is None else torch.as_tensor(seeds, dtype=torch.int64)
    with torch.inference_mode():
        return torch.cat([synth(u[i:i + 1], None if s is None else s[i:i + 1]) for i in range(len(u))]).numpy()


def griffin_lim_route(clips: np.ndarray, artifact: Path) -> np.ndarray:
    from kickmodel.families.mel_vae.generator import build_parts
    from kickmodel.loading import load_artifact

    front, _, inverter = build_parts(load_artifact(artifact), torch.device("cpu"))
    with torch.inference_mode():
        return torch.cat([inverter(front(torch.from_numpy(clips[i:i + 1]))) for i in range(len(clips))]).numpy()


def load_transient(source: Path) -> tuple[torch.nn.Module, list[str]]:
    """(the transient, the sha256s of the kicks its run held out) of a model with a transient part, or of a run
    folder that trains one (its newest checkpoint's EMA weights)."""
    from kickmodel.families.kick_synth.synth import n_params
    from kickmodel.families.kick_synth.transient import transient_net

    if source.is_dir():
        from kickmodel.families import from_dict
        from trainer.checkpoint import load_latest

        found = load_latest(source, log=lambda m: None)
        if found is None:
            raise SystemExit(f"{source}: no checkpoint")
        state = found[0]
        cfg, training = from_dict(state["config"]), state.get("training_summary") or {}
        head = "transient."
        weights = {k[len(head):]: v for k, v in state["ema"]["model"].items() if k.startswith(head)}
    else:
        from kickmodel.loading import load_artifact

        art = load_artifact(source)
        cfg, training = art.config_of("transient"), art.training or {}
        weights = art.part_tensors("transient")
    if not cfg.transient.enabled or not weights:
        raise SystemExit(f"{source}: no transient (a kick-synth model or run with transient.enabled)")
    net = transient_net(cfg, n_params(cfg.synth.version))
    net.load_state_dict(weights)
    held = [row["sha256"] for row in (training.get("split") or {}).get("heldout", [])]
    if not held:
        raise SystemExit(f"{source}: no held-out split recorded")
    return net.eval(), held


KID_SPLITS, KID_SIZE = 50, 20


def ceiling_kid(real: np.ndarray, routes: dict[str, np.ndarray], sr: int,
                others: np.ndarray | None = None) -> dict[str, tuple[float, float]]:
    """{name: (mean, spread)} of the KID between KID_SIZE real kicks (half the kit when smaller) and as many kicks of a
    route made from other real kicks (disjoint draws, KID_SPLITS of them), in the mfcc-stats embedding standardised by
    the real kicks; "real vs real" is the floor. With `others` (the folder's kicks that were not fitted: --subset),
    the real side is drawn from them and the route's side from all of real's routes (KID_SIZE of each, or fewer)."""
    from trainer.embeddings import get_embedding
    from trainer.evaluation.distances import kid, standardiser

    emb = get_embedding("mfcc-stats")
    e_real = np.asarray(emb(real, sr), dtype=np.float64)
    e_ref = e_real if others is None else np.asarray(emb(others, sr), dtype=np.float64)
    mu, scale = standardiser(np.concatenate([e_real, e_ref]) if others is not None else e_real)
    z = {"real vs real": (e_real - mu) / scale}
    z |= {k: (np.asarray(emb(v, sr), dtype=np.float64) - mu) / scale for k, v in routes.items()}
    ref = (e_ref - mu) / scale
    if others is None:
        size = min(KID_SIZE, len(real) // 2)  # a smaller kit: halves of it
    else:
        size = min(KID_SIZE, len(real), len(others))
    if size < 2:
        raise ValueError(f"a KID needs at least 4 real kicks, got {len(real)}")
    rng = np.random.default_rng(0)
    out = {}
    for name, zz in z.items():
        vals = []
        for _ in range(KID_SPLITS):
            if others is None:
                p = rng.permutation(len(real))
                vals.append(kid(ref[p[:size]], zz[p[size:2 * size]]))
            else:
                a, b = rng.permutation(len(others))[:size], rng.permutation(len(real))[:size]
                vals.append(kid(ref[a], zz[b]))
        out[name] = (float(np.mean(vals)), float(np.std(vals)))
    return out


ONSET_MS = 10.0
MRSTFT_SIZES = (2048, 512, 128)
ONSET_SIZES = (256, 64)


def stft_distance(a: np.ndarray, b: np.ndarray, sizes: tuple[int, ...], length: int | None = None) -> np.ndarray:
    """Per kick [n]: the multi-resolution STFT distance of b from a ([n, L] each, each row at peak 1 first), over
    their first `length` samples (all when None): the mean over window sizes of spectral convergence (|| |B| - |A| ||
    / || |A| ||) plus the mean absolute log-magnitude difference (the DDSP / Parallel WaveGAN loss, as a figure)."""
    a = torch.from_numpy(a[:, :length] if length else a).double()
    b = torch.from_numpy(b[:, :length] if length else b).double()
    a = a / a.abs().amax(dim=1, keepdim=True).clamp(min=1e-9)
    b = b / b.abs().amax(dim=1, keepdim=True).clamp(min=1e-9)
    total = torch.zeros(a.shape[0], dtype=torch.float64)
    for n in sizes:
        win = torch.hann_window(n, dtype=torch.float64)
        ma = torch.stft(a, n, n // 4, window=win, return_complex=True).abs()
        mb = torch.stft(b, n, n // 4, window=win, return_complex=True).abs()
        sc = (mb - ma).pow(2).sum(dim=(1, 2)).sqrt() / ma.pow(2).sum(dim=(1, 2)).sqrt().clamp(min=1e-9)
        lm = (torch.log(mb + 1e-5) - torch.log(ma + 1e-5)).abs().mean(dim=(1, 2))
        total += sc + lm
    return (total / len(sizes)).numpy()


def aligned(x: np.ndarray) -> np.ndarray:
    """Each kick moved to start at its onset (the first sample at 10 % of its peak, less 1 ms of lead-in)."""
    out = np.zeros_like(x)
    for i, row in enumerate(x):
        a = np.abs(row)
        k = int(np.argmax(a >= 0.1 * a.max())) if a.max() > 0 else 0
        k = max(0, k - 44)
        out[i, :len(row) - k] = row[k:]
    return out


def pick(n_all: int, subset: int | None) -> np.ndarray:
    """The indices of the kicks fitted: all, or a fixed draw of `subset` of them (sorted), the same in every run."""
    if subset is None or subset >= n_all:
        return np.arange(n_all)
    return np.sort(np.random.default_rng(20261206).choice(n_all, subset, replace=False))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", default=str(REPO / "kickserver" / "data" / "kicks"))
    ap.add_argument("--fits", type=Path, default=None, help="a kick-synth run's synth_fits.safetensors (else fit now)")
    ap.add_argument("--artifact", type=Path, default=REPO / "kickserver" / "models" / "default.safetensors",
                    help="a mel-vae or latent-diffusion model whose front end and inverter the griffin-lim route uses")
    ap.add_argument("--out", type=Path, default=user_results() / "synth_ceiling.json")
    ap.add_argument("--subset", type=int, default=None, help="fit only this many kicks of the folder (a fixed draw)")
    ap.add_argument("--version", type=int, default=None, help="the synth version (default: the presets')")
    ap.add_argument("--stage", default=None, help="how much of the version's synth and fit is on (synth_v2.STAGES)")
    ap.add_argument("--no-griffin-lim", action="store_true", help="the kick-synth route only")
    ap.add_argument("--transient", type=Path, default=None, metavar="ARTIFACT_OR_RUN",
                    help="a model (or run folder) with a learned transient: its run's held-out kicks, each fit played "
                         "alone and with the transient")
    ap.add_argument("--keep-audio", type=Path, default=None,
                    help="write the real kicks and each route's (finished) to this .npz, for spectrograms")
    args = ap.parse_args(argv)

    from kickmodel.config import DataConfig
    from kickmodel.dsp import finish_kick
    from trainer.evaluation.sets import load_folder

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    cfg = DataConfig()
    every, sources, shas, _ = load_folder([args.real], cfg, log)
    sr = cfg.sample_rate
    transient = None
    if args.transient is not None:
        transient, held = load_transient(args.transient)
        chosen = np.array(sorted(i for i, h in enumerate(shas) if h in set(held)))
        if len(chosen) != len(held):
            raise SystemExit(f"{len(held)} held-out kicks recorded, {len(chosen)} of them in {args.real}")
        log(f"transient of {args.transient.name}: the {len(chosen)} kicks its run held out")
    else:
        chosen = pick(len(every), args.subset)
    real = every[chosen]
    others = None if len(chosen) == len(every) else np.delete(every, chosen, axis=0)
    routes, seconds = {}, {}
    t = time.perf_counter()
    routes["kick-synth fit"] = finish_kick(synth_route(real, sr, args.fits, log, args.version, args.stage,
                                                       seeds=chosen + 1), sr)
    seconds["kick-synth fit"] = time.perf_counter() - t
    if transient is not None:
        t = time.perf_counter()
        routes["fit + transient"] = finish_kick(synth_route(real, sr, args.fits, log, args.version, args.stage,
                                                            seeds=chosen + 1, transient=transient), sr)
        seconds["fit + transient"] = time.perf_counter() - t
        t = time.perf_counter()
        routes["fit + transient, adjusted"] = finish_kick(synth_route(
            real, sr, args.fits, log, args.version, args.stage, seeds=chosen + 1, transient=transient, readjust=True),
            sr)
        seconds["fit + transient, adjusted"] = time.perf_counter() - t
    if not args.no_griffin_lim:
        t = time.perf_counter()
        routes["griffin-lim"] = finish_kick(griffin_lim_route(real, args.artifact), sr)
        seconds["griffin-lim"] = time.perf_counter() - t
    if args.keep_audio is not None:
        args.keep_audio.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.keep_audio, real=real, sr=sr, **{k.replace(" ", "_"): v for k, v in routes.items()})

    kids = ceiling_kid(real, routes, sr, others)
    rows = {"real": summarise(measure(real, sr))} | {k: summarise(measure(v, sr)) for k, v in routes.items()}
    div = diversity_ratios({"real": real} | routes, real, None, sr)
    m_real = measure(real, sr)
    per_kick, onsets = {}, {}
    for name, clips in routes.items():
        m = measure(clips, sr)
        cents = 1200 * np.log2(np.maximum(m["pitch_end_hz"], 1) / np.maximum(m_real["pitch_end_hz"], 1))
        from kickmodel.descriptors import measure as descriptors

        d_real = descriptors(torch.from_numpy(real), sr).numpy()
        d_gen = descriptors(torch.from_numpy(clips), sr).numpy()
        onsets[name] = stft_distance(aligned(real), aligned(clips), ONSET_SIZES, int(sr * ONSET_MS / 1000) + 44)
        per_kick[name] = {
            "pitch_end_cents_median_abs": float(np.median(np.abs(cents))),
            "descriptor_pitch_cents_median_abs": float(np.median(np.abs(1200 * np.log2(d_gen[:, 1] / d_real[:, 1])))),
            "decay_ratio_median": float(np.median(d_gen[:, 0] / np.maximum(d_real[:, 0], 1e-3))),
            "click_db_median_abs": float(np.median(np.abs(d_gen[:, 2] - d_real[:, 2]))),
            "attack_ms_median_abs": float(np.median(np.abs(m["attack_ms"] - m_real["attack_ms"]))),
            "mrstft_median": float(np.median(stft_distance(aligned(real), aligned(clips), MRSTFT_SIZES))),
            "onset_median": float(np.median(onsets[name])),
            "onset_mean": float(np.mean(onsets[name])),
        }
    if transient is not None:  # paired: the same kick's onset with and without
        for name in ("fit + transient", "fit + transient, adjusted"):
            per_kick[name]["onset_better_share"] = float((onsets[name] < onsets["kick-synth fit"]).mean())
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
    print(f"kick-synth fit: {seconds['kick-synth fit'] / len(real):.1f} s a kick ({len(real)} kicks, fitted and "
          "played back)")
    out = {"date": datetime.date.today().isoformat(), "machine": machine("cpu"), "kicks": len(real),
           "real": _shown(Path(args.real)), "rows": rows, "version": args.version, "stage": args.stage,
           "subset": [Path(sources[i]).name for i in chosen] if args.subset or transient is not None else None,
           "transient": args.transient.name if args.transient is not None else None,
           "diversity": div,
           "per_kick": per_kick, "kid": {k: {"mean": m, "spread": s} for k, (m, s) in kids.items()},
           "seconds": seconds}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
