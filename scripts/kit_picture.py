"""A picture of kits: a kit from each shipped model, written as the daemon writes it, rendered by DrumGizmo from a
MIDI file, its hits at rising velocity drawn (docs/img/kits-drumgizmo.png).

    python scripts/kit_picture.py [--out docs/img/kits-drumgizmo.png] [--seed 5] [--layers 8] [--robins 4]

Each model's kit (seed --seed) is written by `kickserver render --kit LAYERSxROBINS --seed S` (the daemon's /kick/kit
job, jobs.Kit, run offline: the generator's kit mode, the kick-synth model's layers and robins by its family's number
rules, the bundled model's by kickmodel.kitrules' audio rules; one folder by kickserver.kitfiles) into a temporary
folder, and played by `drumgizmo` (Debian package drumgizmo) from a hand-written MIDI file on the kit's own note (its
SFZ's pitch_keycenter): one hit per layer at velocities spread evenly over 1..127, 1 s apart, then 2 x robins hits at
velocity 127, 0.55 s apart. Left: the first 60 ms of each rising hit; middle: each hit's peak and the spectral
centroid of its first 20 ms, by velocity, and the repeated hits; right: how fast the body sweeps down (sweep_ms).
Prints the figures it draws and which robin each repeat played (hits correlating over 0.999 are one file).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kickmodel import kitrules  # noqa: E402
from kickmodel.fsutil import atomic_write_bytes  # noqa: E402
from kickserver.kitfiles import midi_hits  # noqa: E402

SR = 44100
REPEAT_S = 0.55  # between the repeated hits as written (1.1 s as DrumGizmo 0.9.20 plays them: a 1 s kick ends first)


def onsets(x: np.ndarray, sr: int) -> list[int]:
    """Where hits start in a render, found by the slope (the first difference), which a kick's attack has plenty of
    and its low tail little, so a hit landing on the last one's tail is found too: a 5 ms frame whose largest step is
    over 4x the previous frame's and over 0.3 % of the render's largest starts a hit (at most one in 0.25 s); the hit
    starts at the first sample, from 10 ms before that frame, whose step reaches 5 % of the largest step of its own
    first 20 ms (so a soft hit is not found late)."""
    d = np.abs(np.diff(x, prepend=0.0))
    hop = sr // 200
    f = d[: len(d) // hop * hop].reshape(-1, hop).max(axis=1)
    prev = np.concatenate([[0.0], f[:-1]])
    thr = 0.003 * f.max()
    starts: list[int] = []
    for i in np.flatnonzero((f > thr) & (f > 4 * prev)):
        if not starts or i * hop - starts[-1] > sr // 4:
            lo = max(i - 2, 0) * hop
            local = 0.05 * d[i * hop:i * hop + sr // 50].max()
            starts.append(lo + int(np.argmax(d[lo:(i + 1) * hop] >= local)))
    return starts


def sweep_ms(x: np.ndarray, sr: int, crossings: int = 4) -> float:
    """How fast a hit's body sweeps down: ms from its onset (5 % of the body's peak, the body being x through two
    300 Hz low-pass biquads) to the body's 4th zero crossing. A sweep that starts higher crosses sooner; a shelf or an
    all-pass (the audio rules) leaves it where the asked kick has it (as tests/kickserver/test_kit_daemon.py
    measures it)."""
    import torch
    import torchaudio.functional as AF

    y = torch.from_numpy(np.asarray(x, dtype=np.float64) * 0.05)
    y = AF.lowpass_biquad(AF.lowpass_biquad(y, sr, 300.0), sr, 300.0).numpy()
    onset = int(np.argmax(np.abs(y) >= 0.05 * np.abs(y).max()))
    zc = np.flatnonzero(np.diff(np.signbit(y[onset:onset + sr // 5])))
    return 1000.0 * zc[crossings - 1] / sr if len(zc) >= crossings else float("nan")


def centroid(x: np.ndarray, sr: int) -> float:
    """The spectral centroid of x (Hann window, 8192-point FFT), in Hz: where its brightness sits."""
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x)), 8192))
    f = np.fft.rfftfreq(8192, 1 / sr)
    return float(np.sum(f * spec) / np.sum(spec))


def write_kit(model: Path, seed: int, layers: int, robins: int, tmp: Path) -> tuple[Path, int, str]:
    """(the kit's folder, its MIDI note, the rules that made it) as `kickserver render --kit` writes it."""
    cfg = tmp / "empty.toml"
    cfg.write_text("")
    run = subprocess.run([sys.executable, "-m", "kickserver", "render", "--config", str(cfg), "--device", "cpu",
                          "--threads", "1", "--models", str(model.parent), "--model", model.stem,
                          "--out", str(tmp / model.stem), "--kit", f"{layers}x{robins}", "--seed", str(seed)],
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                         timeout=900)
    if run.returncode != 0:
        raise SystemExit(f"{model.stem}: kickserver render --kit failed:\n{run.stderr}")
    folder = Path(run.stdout.strip().splitlines()[-1])
    sfz = (folder / f"{folder.name}.sfz").read_text()
    return folder, int(re.search(r"pitch_keycenter=(\d+)", sfz)[1]), re.search(r"rules=(\w+)", sfz)[1]


def render(model: Path, seed: int, layers: int, robins: int, tmp: Path) -> tuple[list[int], list[np.ndarray], str]:
    """(velocities, hits as DrumGizmo played them, what made the kit: its folder's name and rules) of model's kit."""
    folder, note, rules = write_kit(model, seed, layers, robins, tmp)
    # velocities spread evenly over 1..127: where DrumGizmo places its layers (it maps velocity linearly onto the
    # span of the powers, the softest layer at 1, the hardest at 127), then full hits
    rising = [round(1 + 126 * i / max(layers - 1, 1)) for i in range(layers)]
    velocities = rising + [127] * (2 * robins)
    times = [0.5 + 1.0 * i for i in range(layers)] + [0.5 + layers + REPEAT_S * i for i in range(2 * robins)]
    mid = tmp / f"{model.stem}.mid"
    mid.write_bytes(midi_hits(note, list(zip(times, velocities))))
    prefix = tmp / f"{model.stem}_render"
    name = folder.name
    midimap = folder / f"{name}_drumgizmo_midimap.xml"
    subprocess.run(["drumgizmo", "-i", "midifile", "-I", f"file={mid},midimap={midimap}",
                    "-o", "wavfile", "-O", f"file={prefix}", "-e", str(int(SR * 2 * (times[-1] + 1))),
                    str(folder / f"{name}_drumgizmo.xml")], check=True, capture_output=True, timeout=600)
    y, sr = sf.read(f"{prefix}Kick-0.wav", dtype="float64")
    starts = onsets(y, sr)
    if len(starts) != len(velocities):
        raise SystemExit(f"{model.stem}: found {len(starts)} hits in DrumGizmo's render, wrote {len(velocities)}")
    return velocities, [y[s:s + int(0.5 * sr)] for s in starts], f"{name} (rules={rules})"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "kits-drumgizmo.png")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--robins", type=int, default=4)
    args = ap.parse_args(argv)
    if shutil.which("drumgizmo") is None:
        print("drumgizmo not installed (Debian: apt-get install drumgizmo)", file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [REPO / "kickserver" / "models" / f"{m}.safetensors" for m in ("default", "kick-synth")]
    fig, axes = plt.subplots(len(models), 3, figsize=(16, 3.8 * len(models)), constrained_layout=True,
                             gridspec_kw={"width_ratios": [1.3, 1.0, 0.8]})
    with tempfile.TemporaryDirectory(prefix="kit-picture-") as t:
        for row, model in zip(axes, models):
            velocities, hits, made = render(model, args.seed, args.layers, args.robins, Path(t))
            n = args.layers
            peaks = [20 * np.log10(np.abs(h).max()) for h in hits]
            bright = [centroid(h[: SR // 50], SR) for h in hits]
            sweep = [sweep_ms(h, SR) for h in hits]
            cmap = plt.get_cmap("viridis")
            ms = np.arange(int(0.06 * SR)) / SR * 1000
            for i in range(n):
                row[0].plot(ms, hits[i][: len(ms)], color=cmap(i / max(n - 1, 1)), lw=0.8,
                            label=f"velocity {velocities[i]}")
            row[0].set(title=f"{model.stem}: {made}, as DrumGizmo plays it",
                       xlabel="ms after the onset", ylabel="amplitude")
            row[0].legend(fontsize=7, ncol=2, loc="upper right")
            ax2 = row[1]
            ax2.plot(velocities[:n], peaks[:n], "o-", color="C0", label="peak (dBFS)")
            top = velocities[n]
            ax2.plot([top] * (len(hits) - n), peaks[n:], "x", color="C0", ms=9,
                     label=f"{len(hits) - n} repeats at {top} (robins)")
            ax2.set(xlabel="MIDI velocity", ylabel="peak, dBFS", title="level and brightness by velocity")
            ax3 = ax2.twinx()
            ax3.plot(velocities[:n], bright[:n], "s--", color="C3", label="centroid of the first 20 ms (Hz)")
            ax3.plot([top] * (len(hits) - n), bright[n:], "+", color="C3", ms=9)
            ax3.set_ylabel("centroid, Hz", color="C3")
            lines = ax2.get_legend_handles_labels()
            more = ax3.get_legend_handles_labels()
            ax2.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="lower right")
            row[2].plot(velocities[:n], sweep[:n], "D-", color="C2", label="rising velocity")
            row[2].plot([top] * (len(hits) - n), sweep[n:], "x", color="C2", ms=9, label="repeats (robins)")
            row[2].set(xlabel="MIDI velocity", ylabel="ms to the body's 4th zero crossing",
                       title="the sweep: sooner is a higher start")
            row[2].legend(fontsize=7, loc="upper right")
            lo, hi = np.nanmin(sweep), np.nanmax(sweep)
            pad = max(1.0, (8.0 - (hi - lo)) / 2)  # a flat line looks flat: at least 8 ms of axis
            row[2].set_ylim(lo - pad, hi + pad)
            firsts: list[np.ndarray] = []
            played = []
            for h in hits[n:]:
                same = [i for i, f in enumerate(firsts) if kitrules.correlation(h, f) > 0.999]
                if not same:
                    firsts.append(h)
                played.append(same[0] if same else len(firsts) - 1)
            print(f"{model.stem} ({made}): velocity {velocities[:n]} peak dBFS "
                  f"{[round(float(p), 1) for p in peaks[:n]]} "
                  f"centroid Hz {[round(b) for b in bright[:n]]} sweep ms {[round(float(m), 1) for m in sweep[:n]]}; "
                  f"repeats at {top}: peak "
                  f"{[round(float(p), 2) for p in peaks[n:]]} dBFS, files played {played}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(args.out, buf.getvalue())
    print(f"wrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
