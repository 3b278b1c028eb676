"""Pictures to look at: spectrograms of generated kicks beside real ones, envelopes, loss curves.

matplotlib is imported inside the functions (Agg backend), so importing this module is cheap and
the daemon never pays for it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def pyplot():
    """matplotlib.pyplot on the Agg backend, imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, dpi: int = 90) -> Path:
    """Render fig as PNG and write it atomically (temp + fsync + rename), then close it."""
    import io

    from kickmodel.fsutil import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    path = Path(path)
    atomic_write_bytes(path, buf.getvalue())
    return path


def _spec_db(x: np.ndarray, n_fft: int = 1024, hop: int = 128) -> np.ndarray:
    import torch

    t = torch.as_tensor(np.asarray(x, dtype=np.float32))
    S = torch.stft(t, n_fft, hop, window=torch.hann_window(n_fft), return_complex=True).abs()
    return (20 * torch.log10(S.clamp(min=1e-6))).numpy()


def spectrogram_figure(rows: Sequence[tuple[str, np.ndarray]], sample_rate: int, *, fmax: float = 8000.0,
                       cols: int = 4, title: str = ""):
    """rows: (label, clips [n, L]) pairs. Each clip: waveform above, spectrogram 0..fmax below; a time axis in ms
    under the bottom row (every column shares it: the clips are the same length). Returns the figure."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    n_rows = len(rows)
    fig, axes = plt.subplots(2 * n_rows, cols, figsize=(3.2 * cols, 3.0 * n_rows + 0.3), squeeze=False,
                             gridspec_kw={"height_ratios": [1, 2] * n_rows})
    for r, (label, clips) in enumerate(rows):
        clips = np.atleast_2d(clips)
        bottom = r == n_rows - 1
        for c in range(cols):
            ax_w, ax_s = axes[2 * r, c], axes[2 * r + 1, c]
            ax_w.set_xticks([])
            ax_s.set_xticks([])
            if c >= len(clips):
                ax_w.axis("off")
                ax_s.axis("off")
                continue
            x = clips[c]
            t = np.arange(len(x)) * 1000.0 / sample_rate  # ms
            ax_w.plot(t, x, lw=0.4, color="k")
            ax_w.set_xlim(0, t[-1])
            ax_w.set_ylim(-1, 1)
            ax_w.set_yticks([])
            ax_w.set_title(f"{label} {c + 1}", fontsize=8)
            S = _spec_db(x)
            ax_s.imshow(S, origin="lower", aspect="auto", cmap="magma", vmin=S.max() - 90, vmax=S.max(),
                        extent=(0, t[-1], 0, sample_rate / 2))
            ax_s.set_ylim(0, fmax)
            if bottom:
                ax_s.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
                ax_s.tick_params(axis="x", labelsize=7)
                ax_s.set_xlabel("ms", fontsize=7, labelpad=1)
            if c == 0:
                ax_s.set_ylabel("Hz", fontsize=7)
            else:
                ax_s.set_yticks([])
    if title:  # tight_layout leaves the suptitle out: keep ~0.35 inch above the first row's titles for it
        fig.suptitle(title, fontsize=10)
        fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - 0.35 / fig.get_figheight()))
    else:
        fig.tight_layout()
    return fig


def spectrogram_grid(rows: Sequence[tuple[str, np.ndarray]], sample_rate: int, path: Path, *,
                     fmax: float = 8000.0, cols: int = 4, title: str = "") -> Path:
    """spectrogram_figure as a PNG, written atomically."""
    return save_figure(spectrogram_figure(rows, sample_rate, fmax=fmax, cols=cols, title=title), path)


def envelope_plot(sets: Sequence[tuple[str, np.ndarray]], sample_rate: int, path: Path, win_ms: float = 10.0) -> Path:
    """Median RMS envelope (dB re. peak) of each set, with its 10..90 % band."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = max(1, int(sample_rate * win_ms / 1000))
    for label, clips in sets:
        clips = np.atleast_2d(clips)
        n = clips.shape[1] // w
        rms = np.sqrt((clips[:, : n * w].reshape(len(clips), n, w) ** 2).mean(-1) + 1e-12)
        db = 20 * np.log10(rms / rms.max(axis=1, keepdims=True))
        t = np.arange(n) * w / sample_rate
        med = np.median(db, axis=0)
        ax.plot(t, med, label=label)
        ax.fill_between(t, np.percentile(db, 10, axis=0), np.percentile(db, 90, axis=0), alpha=0.2)
    ax.set_ylim(-90, 3)
    ax.set_xlabel("s")
    ax.set_ylabel("dB re. peak")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def loss_curve(history_jsonl: Path, path: Path) -> Path | None:
    """Training and validation loss from a run's metrics.jsonl."""
    rows = []
    p = Path(history_jsonl)
    if not p.is_file():
        return None
    for line in p.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    train = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
    if not train:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    s, lo = zip(*train)
    ax.plot(s, lo, lw=0.8, label="train (EMA of batch loss)")
    if val:
        s, lo = zip(*val)
        ax.plot(s, lo, "o-", label="validation (EMA weights)")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)
