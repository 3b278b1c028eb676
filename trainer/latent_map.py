"""`kicktrain map`: every kick of a folder as a point in a model's latent space, as a picture and a table.

    kicktrain map model.safetensors ~/Samples/Kicks --out map/     # map/map.png and map/map.csv

Each file is decoded as training decodes it (kickmodel.clips.load_clip, the artifact's clip settings),
encoded to its posterior mean by the model's encoder, and laid out in two dimensions twice: t-SNE
(scikit-learn, PCA initialisation, a fixed seed; van der Maaten & Hinton 2008) and PCA. The picture
colours the points by the measured decay (s), pitch (Hz) and click (dB) of kickmodel/descriptors.py,
one colour bar each: punchy, boomy and clicky kicks show where they gather. map.csv holds one row per
file: path, tsne_x, tsne_y, pca_x, pca_y, decay, pitch, click (t-SNE columns empty when skipped).

t-SNE needs more points than its perplexity: a folder of fewer than 3 x perplexity + 1 kicks gets a
message saying so and a PCA-only map. A family without an encoder (waveform diffusion) is refused.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kickmodel.descriptors import CONTROL_NAMES, measure
from kickmodel.fsutil import atomic_write_bytes

DEFAULT_PERPLEXITY = 30.0
UNITS = {"decay": "s", "pitch": "Hz", "click": "dB"}


class MapError(ValueError):
    """A map that cannot be made; the message says why."""


def min_points(perplexity: float) -> int:
    return int(3 * perplexity) + 1


def layout(latents: np.ndarray, perplexity: float = DEFAULT_PERPLEXITY, seed: int = 0,
           log: Callable[[str], None] = print) -> tuple[np.ndarray | None, np.ndarray]:
    """(t-SNE [n, 2] or None when there are too few points, PCA [n, 2])."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    z = np.asarray(latents, dtype=np.float64)
    n = z.shape[0]
    if n < 2:
        raise MapError(f"a map needs at least 2 kicks, found {n}")
    pca = np.zeros((n, 2))
    k = min(2, n, z.shape[1])
    pca[:, :k] = PCA(n_components=k, random_state=seed).fit_transform(z)
    if n < min_points(perplexity):
        log(f"{n} kicks are too few for t-SNE at perplexity {perplexity:g} (it needs at least "
            f"{min_points(perplexity)}); writing the PCA map only (try --perplexity {max(1.0, (n - 1) / 3):.0f})")
        return None, pca
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(z)
    return tsne, pca


def draw(path: Path, tsne: np.ndarray | None, pca: np.ndarray, desc: np.ndarray, title: str) -> Path:
    """Rows t-SNE (when there) and PCA; columns coloured by decay, pitch, click, each with a colour bar."""
    from .plots import pyplot, save_figure

    plt = pyplot()
    rows = [("t-SNE", tsne)] if tsne is not None else []
    rows.append(("PCA", pca))
    fig, axes = plt.subplots(len(rows), 3, figsize=(13, 4 * len(rows)), squeeze=False)
    cmaps = {"decay": "viridis", "pitch": "plasma", "click": "cividis"}
    for r, (label, xy) in enumerate(rows):
        for c, name in enumerate(CONTROL_NAMES):
            ax = axes[r, c]
            sc = ax.scatter(xy[:, 0], xy[:, 1], c=desc[:, c], cmap=cmaps[name], s=22, edgecolors="k", linewidths=0.3)
            bar = fig.colorbar(sc, ax=ax)
            bar.set_label(f"{name} ({UNITS[name]})")
            ax.set_title(f"{label}, coloured by {name}", fontsize=10)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def write_csv(path: Path, sources: Sequence[str], tsne: np.ndarray | None, pca: np.ndarray,
              desc: np.ndarray) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["path", "tsne_x", "tsne_y", "pca_x", "pca_y", *CONTROL_NAMES])
    for i, src in enumerate(sources):
        t = ["", ""] if tsne is None else [f"{tsne[i, 0]:.6g}", f"{tsne[i, 1]:.6g}"]
        w.writerow([src, *t, f"{pca[i, 0]:.6g}", f"{pca[i, 1]:.6g}", *(f"{v:.6g}" for v in desc[i])])
    atomic_write_bytes(path, buf.getvalue().encode())
    return path


def make_map(artifact: str | Path, data: Sequence[str | Path], out: str | Path, *, perplexity: float =
             DEFAULT_PERPLEXITY, seed: int = 0, device: str = "cpu", log: Callable[[str], None] = print
             ) -> tuple[Path, Path]:
    import torch

    from kickmodel.families import cli_name
    from kickmodel.generator import ENCODE, load_generator

    from .evaluation.sets import load_folder

    gen = load_generator(Path(artifact), device)
    if ENCODE not in gen.capabilities:  # declared by its generator (kickmodel.generator.CAPABILITIES)
        raise MapError(f"model {gen.name} is a {cli_name(gen.family)} model, which has no encoder to place kicks "
                       f"on a map (it can: {', '.join(sorted(gen.capabilities)) or 'only make new kicks'})")
    if perplexity <= 0:
        raise MapError("--perplexity must be > 0")
    clips, sources, _, _ = load_folder(list(data), gen.config.data, log)
    latents = np.concatenate([gen.encode(clips[i:i + 32]) for i in range(0, len(clips), 32)])
    desc = measure(torch.from_numpy(clips), gen.sample_rate).numpy()
    tsne, pca = layout(latents, perplexity, seed, log)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = write_csv(out / "map.csv", sources, tsne, pca, desc)
    png = draw(out / "map.png", tsne, pca, desc,
               f"{gen.name}: {len(sources)} kicks in its {latents.shape[1]}-dimensional latent space")
    return png, csv_path
