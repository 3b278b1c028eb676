"""Spectrograms of real kicks beside their resyntheses and generated kicks, with the 1-8 kHz band visible.

    python bench/studies/synth_spectrograms.py --audio v1=/tmp/v1.npz --audio v2=/tmp/v2.npz \
        --artifact kickserver/models/kick-synth.safetensors --artifact runs/synth2/kick-synth.safetensors \
        --out docs/img/kick-synth-body.png

--audio NAME=FILE: a file bench/studies/synth_ceiling.py wrote with --keep-audio (its real kicks and each route's,
finished): the first's real kicks are the top row, then each file's "kick-synth fit" row (named NAME), then the
first file's griffin-lim row when it has one. --artifact: a model whose first --kicks kicks (seeds 1..) are a row
of their own. Each kick is two panels: its spectrogram over the first SPEC_MS (log frequency 30 Hz..16 kHz, so the
1-8 kHz band where the click, the modes and the haze live has half the height; 70 dB of range re the kick's
loudest bin) and its first WAVE_MS as a waveform (the attack: where a kick starts from 0, and how).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

SPEC_MS = 300.0
WAVE_MS = 10.0
N_FFT, HOP = 1024, 64
F_LO, F_HI = 30.0, 16000.0
RANGE_DB = 70.0


def spectrogram_db(x: np.ndarray, sr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dB [bins, frames] re the loudest bin, bin frequencies, frame times in ms) over the first SPEC_MS."""
    n = int(sr * SPEC_MS / 1000)
    x = np.pad(x[:n + N_FFT // 2], (N_FFT // 2, N_FFT))[:n + N_FFT]  # frames centred on 0..SPEC_MS, not cut at its end
    win = np.hanning(N_FFT)
    frames = np.stack([x[i:i + N_FFT] * win for i in range(0, len(x) - N_FFT, HOP)])
    mag = np.abs(np.fft.rfft(frames, axis=1)).T
    db = 20 * np.log10(mag / max(mag.max(), 1e-12) + 1e-9)
    return db, np.fft.rfftfreq(N_FFT, 1 / sr), np.arange(mag.shape[1]) * HOP * 1000 / sr


def generated(artifact: Path, n: int) -> tuple[np.ndarray, int]:
    from kickmodel.generator import Item
    from kickmodel.loading import load_generator

    gen = load_generator(artifact)
    return np.asarray(gen.generate([Item(seed=s) for s in range(1, n + 1)], gen.settings())), gen.sample_rate


def draw(rows: list[tuple[str, np.ndarray, int]], out: Path) -> None:
    """rows of (name, kicks [cols, samples], rate) -> out (PNG): each kick its spectrogram over SPEC_MS (log
    frequency, 1 and 8 kHz dotted) above its first WAVE_MS as a waveform."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(kicks) for _, kicks, _ in rows)
    fig, axes = plt.subplots(2 * len(rows), cols, figsize=(3.2 * cols, 2.6 * len(rows)),
                             gridspec_kw={"height_ratios": [3, 1] * len(rows)}, squeeze=False)
    for r, (name, kicks, sr) in enumerate(rows):
        for c in range(cols):
            x = np.asarray(kicks[c], dtype=np.float64)
            db, freqs, times = spectrogram_db(x, sr)
            keep = (freqs >= F_LO) & (freqs <= F_HI)
            ax = axes[2 * r, c]
            ax.pcolormesh(times, freqs[keep], db[keep], vmin=-RANGE_DB, vmax=0, cmap="magma", shading="auto")
            ax.set_yscale("log")
            ax.set_ylim(F_LO, F_HI)
            ax.axhline(1000, color="w", lw=0.4, ls=":")
            ax.axhline(8000, color="w", lw=0.4, ls=":")
            ax.set_title(f"{name} {c + 1}", fontsize=8)
            ax.tick_params(labelsize=6)
            if c == 0:
                ax.set_ylabel("Hz (1, 8 kHz dotted)", fontsize=7)
            w = axes[2 * r + 1, c]
            k = int(sr * WAVE_MS / 1000)
            w.plot(np.arange(k) * 1000 / sr, x[:k] / max(np.abs(x).max(), 1e-9), lw=0.7, color="k")
            w.set_ylim(-1.05, 1.05)
            w.tick_params(labelsize=6)
            if c == 0:
                w.set_ylabel(f"first {WAVE_MS:g} ms", fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--audio", action="append", default=[], help="NAME=FILE.npz (synth_ceiling.py --keep-audio)")
    ap.add_argument("--artifact", action="append", default=[], type=Path, help="a model whose kicks are a row")
    ap.add_argument("--kicks", type=int, default=4, help="kicks (columns)")
    ap.add_argument("--pick", default=None, help="which of the files' kicks, e.g. 0,5,9,17 (default: the first)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    rows: list[tuple[str, np.ndarray, int]] = []
    pick = [int(i) for i in args.pick.split(",")] if args.pick else list(range(args.kicks))
    for i, spec in enumerate(args.audio):
        name, _, path = spec.partition("=")
        data = np.load(path)
        sr = int(data["sr"])
        if i == 0:
            rows.append(("real", data["real"][pick], sr))
        rows.append((f"{name} fit", data["kick-synth_fit"][pick], sr))
    if args.audio:
        data = np.load(args.audio[0].partition("=")[2])
        if "griffin-lim" in data:
            rows.append(("griffin-lim", data["griffin-lim"][pick], int(data["sr"])))
    for art in args.artifact:
        kicks, sr = generated(art, len(pick))
        rows.append((f"{art.stem} (generated)", kicks, sr))

    draw(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
