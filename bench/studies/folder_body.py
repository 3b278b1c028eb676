"""Does a model trained on a folder make that folder's kind of kick? Its kicks' bodies beside the folder's own.

    python bench/studies/folder_body.py --real ~/AcousticKicks --artifact v1=runs/ac1.safetensors \
        --artifact v2=runs/ac2.safetensors --n 256 --picture docs/img/kick-synth-acoustic.png
    python bench/studies/folder_body.py --real ~/AcousticKicks --audio "v2 fits=/tmp/fits2.npz" ...

A kick-synth model trained on a folder of acoustic kicks once gave kicks that were all clean swept sines, where an
acoustic kick has near-harmonic partials above its fundamental and a cluster of inharmonic modes up to a few kHz.
This measures, per kick, over the body (BODY_MS after the onset, the first sample at 10 % of the peak; Hann window):

- f0: the strongest frequency from 30 to 250 Hz (the body's fundamental);
- above_db: the energy from 1.5 x f0 to 1 kHz (where the partials and the modes are), dB re the energy within
  +-25 % of f0. A lone swept sine has almost none: its sweep's own spread and the click's tail;
- h23_db: the same for 1.6 .. 3.4 x f0 only (the second and third partials of a near-harmonic series);
- haze_db: `trainer.evaluation.measures.body_haze_db` (1-8 kHz over 30-200 ms, re all the energy there);
- a kick is "a lone sine" when its above_db is under LONE_DB.

Every usable file of --real (decoded as training decodes it) is one set; each --artifact NAME=FILE gives --n kicks
(seeds 0..n-1, its own sampling defaults, finished as the daemon finishes them); each --audio NAME=FILE.npz the
synth's fits of the folder's kicks, played back (`bench/studies/synth_ceiling.py --fits RUN/synth_fits.safetensors
--keep-audio FILE.npz`: its "kick-synth_fit" row), the best a model trained on those fits can sound. Prints medians
with 95 % bootstrap intervals and the share of lone sines, writes --json, and with --picture draws --kicks of each set
(bench/studies/synth_spectrograms.py's panels: spectrogram with the 1-8 kHz band, first 10 ms): the folder's kicks
spread evenly over its files and their fits, each model's first seeds.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from trainer.evaluation.measures import HAZE_MS  # noqa: E402

BODY_MS = HAZE_MS  # the body: 30..200 ms after the onset, where the haze is measured too
LONE_DB = -30.0
NO_BODY_DB = -60.0  # the body window's RMS re the clip's peak under which there is nothing to measure


def body_figures(clips: np.ndarray, sr: int) -> dict[str, np.ndarray]:
    """Per clip: f0 (Hz), above_db, h23_db, haze_db (the module's docstring)."""
    from trainer.evaluation.measures import after_onset, body_haze_db

    body = after_onset(clips, sr, BODY_MS)
    n = body.shape[1]
    nfft = 1 << int(np.ceil(np.log2(max(n, sr))))  # 1 Hz bins or finer
    spec = np.abs(np.fft.rfft(body * np.hanning(n), nfft, axis=1)) ** 2
    f = np.fft.rfftfreq(nfft, 1.0 / sr)
    low = (f >= 30) & (f <= 250)
    f0 = f[low][np.argmax(spec[:, low], axis=1)]

    def band(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        m = (f[None] >= lo[:, None]) & (f[None] <= hi[:, None])
        return (spec * m).sum(axis=1)

    fund = np.maximum(band(0.75 * f0, 1.25 * f0), 1e-300)
    above = band(1.5 * f0, np.full_like(f0, 1000.0))
    h23 = band(1.6 * f0, 3.4 * f0)
    out = {"f0_hz": f0, "above_db": 10 * np.log10(np.maximum(above, 1e-300) / fund),
           "h23_db": 10 * np.log10(np.maximum(h23, 1e-300) / fund), "haze_db": body_haze_db(clips, sr)}
    # a clip with no body left to measure (silent, or faded out before the window) has no figures, not 0 dB
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    gone = np.sqrt((body ** 2).mean(axis=1)) < 10 ** (NO_BODY_DB / 20) * np.maximum(np.abs(x).max(axis=1), 1e-300)
    return {k: np.where(gone, np.nan, v) for k, v in out.items()}


def summary(fig: dict[str, np.ndarray], seed: int = 0) -> dict:
    """Over the clips with a body to measure (n_measured of n): medians with 95 % bootstrap intervals (1,000
    resamples), and the share of lone sines with its interval."""
    rng = np.random.default_rng(seed)
    ok = np.isfinite(fig["above_db"])
    out: dict = {"n": int(len(ok)), "n_measured": int(ok.sum())}
    if not ok.any():
        return out
    kept = {k: v[ok] for k, v in fig.items()} | {"lone_share": (fig["above_db"][ok] < LONE_DB).astype(float)}
    for name, v in kept.items():
        stat = np.mean if name == "lone_share" else np.median
        boot = [stat(v[rng.integers(0, len(v), len(v))]) for _ in range(1000)]
        out[name] = [float(stat(v)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", nargs="+", required=True, help="the folder(s) the models were trained on")
    ap.add_argument("--artifact", action="append", default=[], help="NAME=FILE.safetensors, a row each")
    ap.add_argument("--audio", action="append", default=[], help="NAME=FILE.npz (synth_ceiling.py --keep-audio)")
    ap.add_argument("--n", type=int, default=256, help="generated kicks per model")
    ap.add_argument("--kicks", type=int, default=4, help="kicks per row of the picture")
    ap.add_argument("--picture", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from bench.studies.synth_spectrograms import draw
    from kickmodel.config import DataConfig
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator
    from trainer.evaluation.sets import load_folder

    cfg = DataConfig()  # what training decodes a folder to (44.1 kHz, 45,056 samples)
    real, _, _, _ = load_folder(args.real, cfg, log=lambda m: None)
    sets: dict[str, tuple[np.ndarray, int]] = {"real": (real, cfg.sample_rate)}
    names = [spec.partition("=")[0] for spec in args.audio + args.artifact]
    if len(set(names + ["real"])) != len(names) + 1:
        raise SystemExit(f"each --audio and --artifact needs a NAME of its own, other than 'real': got {names}")
    for spec in args.audio:  # the fits, then the models
        name, _, path = spec.partition("=")
        data = np.load(path)
        if data["real"].shape != real.shape or not np.allclose(data["real"], real, atol=1e-6):
            raise SystemExit(f"{path}: its kicks are not --real's {len(real)} (synth_ceiling.py --keep-audio of the "
                             "whole folder, without --subset or --transient, gives them all in order)")
        sets[name] = (data["kick-synth_fit"], int(data["sr"]))
    for spec in args.artifact:
        name, _, path = spec.partition("=")
        gen = load_generator(Path(path))
        kicks = np.concatenate([gen.generate([Item(seed=s) for s in range(i, min(i + 16, args.n))], gen.settings())
                                [:, :gen.length] for i in range(0, args.n, 16)])
        sets[name] = (kicks, gen.sample_rate)
    if len(sets) == 1:
        raise SystemExit("give at least one --artifact or --audio")
    rows = {}
    print(f"{'set':12s} {'n':>4s}  {'f0 Hz':>16s}  {'above dB':>22s}  {'h23 dB':>22s}  {'haze dB':>22s}  lone sines")
    for i, (name, (clips, sr)) in enumerate(sets.items()):
        s = rows[name] = summary(body_figures(clips, sr), seed=i)
        if not s["n_measured"]:
            print(f"{name:12s} {s['n']:4d}  no clip with a body to measure")
            continue

        def ci(k: str, s=s) -> str:
            return f"{s[k][0]:7.1f} [{s[k][1]:6.1f}..{s[k][2]:6.1f}]"

        print(f"{name:12s} {s['n']:4d}  {s['f0_hz'][0]:6.1f} Hz {'':7s}  {ci('above_db')}  {ci('h23_db')}  "
              f"{ci('haze_db')}  {s['lone_share'][0]:.2f} [{s['lone_share'][1]:.2f}..{s['lone_share'][2]:.2f}]")
    if args.json:
        from bench.common import machine, write_json

        payload = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "machine": machine(), "real": [Path(p).name for p in args.real],
                   "fits": [s.partition("=")[0] for s in args.audio],
                   "artifacts": [s.partition("=")[0] for s in args.artifact], "lone_db": LONE_DB,
                   "body_ms": BODY_MS, "sets": rows}
        print(f"wrote {write_json(args.json, payload)}")
    if args.picture:
        # the folder's kicks spread evenly over its files (they sort by source), each fit row the same kicks' fits;
        # each model's first seeds
        pick = np.linspace(0, len(real) - 1, args.kicks).round().astype(int)
        fitted = {"real"} | {spec.partition("=")[0] for spec in args.audio}
        draw([(name, clips[pick] if name in fitted else clips[:args.kicks], sr) for name, (clips, sr) in sets.items()],
             args.picture)
        print(f"wrote {args.picture}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
