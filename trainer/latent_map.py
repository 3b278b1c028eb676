"""`kicktrain map`: every kick of a folder as a point in a model's latent space, as a picture and a table.

    kicktrain map kickserver/models/default.safetensors kickserver/data/kicks --out map/   # map.png, map.csv

Any model that can encode (its generator declares the `encode` capability; `kicktrain map --help` names the
registered families that do, from the registry) makes a map: the bundled model is one, so the line above runs on a
fresh clone. Each file is decoded as training decodes it (kickmodel.clips.load_clip, the artifact's clip
settings), encoded to its posterior mean by the model's encoder, and laid out in two dimensions twice:
t-SNE (scikit-learn, PCA initialisation, a fixed seed; van der Maaten & Hinton 2008) and PCA. The picture
colours the points by the measured decay (s), pitch (Hz) and click (dB) of kickmodel/descriptors.py, one
colour bar each, clipped to the 2nd..98th percentile so that one odd kick does not flatten the scale (the
bar's pointed ends mark values beyond it): punchy, boomy and clicky kicks show where they gather. Dots
carry their kick's name: all of them up to ALL_LABELS_UP_TO kicks, else, in each panel, the two highest
and two lowest of that panel's measure and the three dots farthest from the rest. map.csv holds one row
per file: path, name (the file name without extension), tsne_x, tsne_y, pca_x, pca_y, decay, pitch, click
(t-SNE columns empty when skipped).

t-SNE needs more points than its perplexity: a folder of fewer than 3 x perplexity + 1 kicks is laid out at the
largest perplexity it allows, (N - 1) // 3 (said in a line; 26 for 81 kicks), down to 2; fewer than 7 kicks get a
PCA-only map. A family without an encoder is refused.

The model can keep the map (kickmodel/kitmap.py), so the daemon serves its points:

    kicktrain map kickserver/models/default.safetensors kickserver/data/kicks --split train \
        --into kickserver/models/default.safetensors [--out map/]

stores the kicks' points (the t-SNE layout map.csv holds, else PCA's, moved to 0..1 by KitMap's affine map), latents,
names and axes in the artifact, written to a temp file, fsynced and renamed over it (never half written). --split
train keeps only the kicks the artifact records as its training split (by name and content hash). A map holds at most
kickmodel.kitmap.MAX_POINTS kicks (more: an even subsample, said in a line), and t-SNE runs on at most MAX_TSNE_KICKS
of them when the map is built for an artifact (more: PCA, said in a line), so a map costs seconds, not minutes.
`kicktrain export RUN --out A --map-data KIT` stores the map of the run's training kicks found in KIT the same way.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kickmodel.descriptors import CONTROL_NAMES, measure
from kickmodel.fsutil import atomic_write_bytes
from kickmodel.kitmap import MAX_POINTS, KitMap, finite_corr

DEFAULT_PERPLEXITY = 30.0
UNITS = {"decay": "s", "pitch": "Hz", "click": "dB"}
CLIP_PERCENTILES = (2.0, 98.0)
ALL_LABELS_UP_TO = 12  # kicks; more get their extremes and outliers named
NAME_WIDTH = 20
MAX_TSNE_KICKS = 2000  # a map stored in an artifact: t-SNE on at most this many kicks (tens of seconds), else PCA


def short_name(stem: str, width: int = NAME_WIDTH) -> str:
    """A kick's name for a label: the file name's start and end around an ellipsis when longer than width (the
    end tells layers and numbers apart; map.csv has the whole name)."""
    if len(stem) <= width:
        return stem
    head = (width - 1) * 3 // 8
    return f"{stem[:head]}…{stem[len(stem) - (width - 1 - head):]}"


def colour_limits(values: np.ndarray, percentiles: tuple[float, float] = CLIP_PERCENTILES) -> tuple[float, float]:
    """(vmin, vmax) of a colour scale: the values' 2nd and 98th percentiles (NaN ignored), and no wider than the
    quartiles -/+ 3 interquartile ranges (Tukey's "far out" fences: three 150 Hz toms among a hundred 50 Hz kicks
    are more than 2 %, and would otherwise still flatten the pitch scale); widened to a unit range when all the
    values are equal."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return 0.0, 1.0
    lo, hi = (float(x) for x in np.percentile(v, percentiles))
    q1, q3 = (float(x) for x in np.percentile(v, (25.0, 75.0)))
    if q3 > q1:
        lo, hi = max(lo, q1 - 3 * (q3 - q1)), min(hi, q3 + 3 * (q3 - q1))
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return lo - 0.5, hi + 0.5
    return lo, hi


def labelled(xy: np.ndarray, values: np.ndarray, extremes: int = 2, outliers: int = 3) -> list[int]:
    """Indices of the dots to name: all up to ALL_LABELS_UP_TO, else the `extremes` highest and lowest of values
    and the `outliers` dots farthest from the median (per axis in units of its spread, so either layout
    counts alike)."""
    n = len(xy)
    if n <= ALL_LABELS_UP_TO:
        return list(range(n))
    v = np.where(np.isfinite(values), values, np.nanmedian(values) if np.isfinite(values).any() else 0.0)
    order = np.argsort(v, kind="stable")
    chosen = set(order[:extremes].tolist()) | set(order[-extremes:].tolist())
    xy = np.asarray(xy, dtype=np.float64)
    spread = np.percentile(xy, 75, axis=0) - np.percentile(xy, 25, axis=0)
    d = np.linalg.norm((xy - np.median(xy, axis=0)) / np.where(spread > 0, spread, 1.0), axis=1)
    for i in np.argsort(-d, kind="stable"):
        if len(chosen) >= 2 * extremes + outliers:
            break
        chosen.add(int(i))
    return sorted(int(i) for i in chosen)


class MapError(ValueError):
    """A map that cannot be made; the message says why."""


def min_points(perplexity: float) -> int:
    return int(3 * perplexity) + 1


def layout(latents: np.ndarray, perplexity: float = DEFAULT_PERPLEXITY, seed: int = 0,
           log: Callable[[str], None] = print, max_tsne: int | None = None) -> tuple[np.ndarray | None, np.ndarray]:
    """(t-SNE [n, 2] or None when there are too few points, or more than max_tsne, PCA [n, 2])."""
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
            f"{min_points(perplexity)}); writing the PCA map only (try --perplexity {max(1, (n - 1) // 3)})")
        return None, pca
    if max_tsne is not None and n > max_tsne:
        log(f"{n} kicks are more than the {max_tsne} a stored map lays out by t-SNE (it would take minutes); "
            "storing the PCA map")
        return None, pca
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(z)
    return tsne, pca


def orient(xy: np.ndarray | None, desc: np.ndarray) -> np.ndarray | None:
    """xy turned (a rotation, perhaps with a mirror: distances and so t-SNE's neighbourhoods unchanged) so that its
    axes read as sounds: x along the direction in which the best-explained descriptor (decay, pitch or click: the
    largest R^2 of a linear fit on the layout) grows, y across it, pointing where the better correlated of the other
    two grows. t-SNE's and PCA's own axes are arbitrary (t-SNE's any rotation of the same map; PCA's by variance,
    whatever sound that is), so without this a pad's axes read "mixed", or both the same descriptor (both followed
    click on the starter kit). None stays None; fewer than 3 kicks or no usable descriptor: unchanged."""
    if xy is None:
        return None
    xy = np.asarray(xy, np.float64)
    d = np.asarray(desc, np.float64)
    centre = xy.mean(axis=0)
    c = xy - centre
    fits = []
    for j in range(d.shape[1]):
        ok = np.isfinite(d[:, j])
        v = d[ok, j] - d[ok, j].mean() if ok.sum() >= 3 else None
        if v is None or not np.any(v) or np.linalg.matrix_rank(c[ok]) < 2:
            continue
        w, *_ = np.linalg.lstsq(c[ok], v, rcond=None)
        r2 = 1.0 - float(np.sum((v - c[ok] @ w) ** 2)) / float(np.sum(v * v))
        fits.append((r2, j, w, ok))
    if not fits:
        return xy
    fits.sort(key=lambda f: -f[0])
    _, first, w, _ = fits[0]
    u = w / np.linalg.norm(w)  # x grows with the first descriptor
    v = np.array([-u[1], u[0]])
    rest = [finite_corr(c[ok] @ v, d[ok, j]) or 0.0 for _, j, _, ok in fits[1:]]
    if rest and max(rest, key=abs) < 0:  # y grows with the better correlated of the others
        v = -v
    return c @ np.stack([u, v], axis=1) + centre


def map_figure(tsne: np.ndarray | None, pca: np.ndarray, desc: np.ndarray, names: Sequence[str], title: str):
    """Rows t-SNE (when there) and PCA; columns coloured by decay, pitch, click, each with a colour bar clipped to
    colour_limits; some dots named (labelled)."""
    from .plots import pyplot

    plt = pyplot()
    rows = [("t-SNE", tsne)] if tsne is not None else []
    rows.append(("PCA", pca))
    fig, axes = plt.subplots(len(rows), 3, figsize=(14, 4.6 * len(rows)), squeeze=False)
    cmaps = {"decay": "viridis", "pitch": "plasma", "click": "cividis"}
    for c, name in enumerate(CONTROL_NAMES):
        values = desc[:, c]
        vmin, vmax = colour_limits(values)
        finite = values[np.isfinite(values)]
        below, above = bool((finite < vmin).any()), bool((finite > vmax).any())
        extend = {(True, True): "both", (True, False): "min", (False, True): "max"}.get((below, above), "neither")
        for r, (label, xy) in enumerate(rows):
            ax = axes[r, c]
            sc = ax.scatter(xy[:, 0], xy[:, 1], c=values, cmap=cmaps[name], vmin=vmin, vmax=vmax, s=22,
                            edgecolors="k", linewidths=0.3)
            bar = fig.colorbar(sc, ax=ax, extend=extend)
            bar.set_label(f"{name} ({UNITS[name]})")
            ax.set_title(f"{label}, coloured by {name}", fontsize=10)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.margins(0.08)
    fig.suptitle(f"{title}\ncolour scales clipped at the 2nd and 98th percentiles (and the quartiles ± 3 IQR): "
                 "a pointed end holds the kicks beyond", fontsize=10)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()  # names are placed once the layout is final, where they overlap nothing
    for c in range(len(CONTROL_NAMES)):
        for r, (_, xy) in enumerate(rows):
            _name_dots(axes[r, c], xy, [(i, short_name(names[i])) for i in labelled(xy, desc[:, c])], renderer)
    return fig


# where a name may sit, in points from its dot: beside it first, then above, below, farther out
_OFFSETS = [(4, 2), (-4, 2), (4, -8), (-4, -8), (0, 6), (0, -12), (8, 10), (-8, 10), (8, -16), (-8, -16)]


def _name_dots(ax, xy: np.ndarray, names: Sequence[tuple[int, str]], renderer) -> None:
    """Each name beside its dot at the first offset where it overlaps no name already placed and stays inside the
    panel (else at the first offset that stays inside)."""
    inside = ax.get_window_extent(renderer)
    placed = []
    for i, text in names:
        first = None
        for dx, dy in _OFFSETS:
            a = ax.annotate(text, (xy[i, 0], xy[i, 1]), xytext=(dx, dy), textcoords="offset points",
                            ha="left" if dx > 0 else "right" if dx < 0 else "center", va="bottom", fontsize=6,
                            color="0.1", bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none",
                                               "alpha": 0.65})
            box = a.get_window_extent(renderer)
            fits = (box.x0 >= inside.x0 and box.x1 <= inside.x1 and box.y0 >= inside.y0 and box.y1 <= inside.y1)
            if fits and not any(box.overlaps(b) for b in placed):
                if first is not None:
                    first[0].remove()
                placed.append(box)
                break
            if first is None and fits:
                first = (a, box)
            else:
                a.remove()
        else:
            if first is not None:
                placed.append(first[1])


def draw(path: Path, tsne: np.ndarray | None, pca: np.ndarray, desc: np.ndarray, title: str,
         names: Sequence[str] | None = None) -> Path:
    """map_figure as a PNG, written atomically."""
    from .plots import save_figure

    names = list(names) if names is not None else [str(i) for i in range(len(pca))]
    return save_figure(map_figure(tsne, pca, desc, names, title), path)


def kick_name(source: str) -> str:
    """A kick's name: its file name without the extension."""
    return Path(source).stem


def write_csv(path: Path, sources: Sequence[str], tsne: np.ndarray | None, pca: np.ndarray,
              desc: np.ndarray) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["path", "name", "tsne_x", "tsne_y", "pca_x", "pca_y", *CONTROL_NAMES])
    for i, src in enumerate(sources):
        t = ["", ""] if tsne is None else [f"{tsne[i, 0]:.6g}", f"{tsne[i, 1]:.6g}"]
        w.writerow([src, kick_name(src), *t, f"{pca[i, 0]:.6g}", f"{pca[i, 1]:.6g}",
                    *(f"{v:.6g}" for v in desc[i])])
    atomic_write_bytes(path, buf.getvalue().encode())
    return path


def training_kicks(training: dict, sources: Sequence[str], shas: Sequence[str]) -> list[int]:
    """Indices of the files an artifact's training record lists in its training split (by name and content hash);
    MapError when it records no split or none of the files is in it."""
    split = training.get("split") if isinstance(training, dict) else None
    train = split.get("train") if isinstance(split, dict) else None
    if not isinstance(train, list):
        raise MapError("the model records no training split; leave out --split train to map every kick given")
    wanted = {(e.get("name"), e.get("sha256")) for e in train if isinstance(e, dict)}
    keep = [i for i, (src, h) in enumerate(zip(sources, shas)) if (Path(src).name, h) in wanted]
    if not keep:
        raise MapError(f"none of the {len(sources)} kicks given is in the model's training split "
                       f"({len(wanted)} kicks); give the folder it was trained on")
    return keep


def even_subsample(n: int, limit: int) -> list[int]:
    """At most limit indices of range(n), evenly spaced (deterministic)."""
    if n <= limit:
        return list(range(n))
    return sorted({int(i) for i in np.linspace(0, n - 1, limit).round()})


def kit_map_of(tsne: np.ndarray | None, pca: np.ndarray, latents: np.ndarray, desc: np.ndarray,
               sources: Sequence[str]) -> KitMap:
    """The map an artifact stores: t-SNE's layout when there is one, else PCA's (the columns map.csv holds), the
    latents, the file stems and the descriptors (kickmodel.kitmap.KitMap.build)."""
    xy, method = (tsne, "tsne") if tsne is not None else (pca, "pca")
    return KitMap.build(xy, latents, [kick_name(s) for s in sources], method, desc)


def encode_kicks(gen, clips: np.ndarray, batch: int = 32, encode=None) -> np.ndarray:
    """Latents of clips [n, L], batch by batch: gen.encode, or encode(gen, clips) (a run's memo of them)."""
    encode = encode or (lambda g, x: g.encode(x))
    return np.concatenate([encode(gen, clips[i:i + batch]) for i in range(0, len(clips), batch)])


def _check_can_map(gen, perplexity: float) -> None:
    from kickmodel.families import cli_name
    from kickmodel.generator import ENCODE

    if ENCODE not in gen.capabilities:  # declared by its generator (kickmodel.generator.CAPABILITIES)
        raise MapError(f"model {gen.name} is a {cli_name(gen.family)} model, which has no encoder to place kicks "
                       f"on a map (it can: {', '.join(sorted(gen.capabilities)) or 'only make new kicks'})")
    if perplexity <= 0:
        raise MapError("--perplexity must be > 0")


def map_kicks(gen, data: Sequence[str | Path], *, split: str | None = None, limit: int | None = None,
              perplexity: float = DEFAULT_PERPLEXITY, seed: int = 0, max_tsne: int | None = None,
              log: Callable[[str], None] = print):
    """(sources, latents, descriptors, t-SNE or None, PCA) of the kicks under data as gen places them: decoded as
    training decodes them, only the artifact's training split when split == "train", at most `limit` kicks (an even
    subsample beyond, said in a line)."""
    from .evaluation.sets import load_folder

    _check_can_map(gen, perplexity)
    if split not in (None, "all", "train"):
        raise MapError(f"--split is train or all, not {split!r}")
    clips, sources, shas, _ = load_folder(list(data), gen.config.data, log)
    keep = list(range(len(sources)))
    if split == "train":
        keep = training_kicks(gen.artifact.training, sources, shas)
        log(f"{len(keep)} of {len(sources)} kicks are in the model's training split")
    return map_clips(gen, clips[keep], [sources[i] for i in keep], limit=limit, perplexity=perplexity, seed=seed,
                     max_tsne=max_tsne, log=log)


def map_clips(gen, clips: np.ndarray, sources: Sequence[str], *, limit: int | None = None,
              perplexity: float = DEFAULT_PERPLEXITY, seed: int = 0, max_tsne: int | None = None,
              log: Callable[[str], None] = print, encode=None):
    """map_kicks for clips already decoded as training decodes them ([n, length], e.g. a run's training clips in
    memory), named by their sources; encode: as encode_kicks takes it."""
    import torch

    _check_can_map(gen, perplexity)
    keep = list(range(len(sources)))
    if limit is not None and len(keep) > limit:
        log(f"{len(keep)} kicks are more than the {limit} a stored map holds; mapping an even subsample of {limit}")
        keep = [keep[i] for i in even_subsample(len(keep), limit)]
    clips, sources = clips[keep], [sources[i] for i in keep]
    latents = encode_kicks(gen, clips, encode=encode)
    desc = measure(torch.from_numpy(clips), gen.sample_rate).numpy()
    if len(sources) < min_points(perplexity) and len(sources) >= min_points(2.0):
        # t-SNE's layout (a stored map's kernel regression reads its neighbourhoods) at the largest perplexity these
        # kicks allow, rather than PCA's (the first two components put unlike kicks side by side); the same for
        # map.csv and a stored map, so the CSV of `kicktrain map --out` is the layout `--into` stores
        fit = float(int((len(sources) - 1) / 3))
        log(f"{len(sources)} kicks are too few for t-SNE at perplexity {perplexity:g}; laying out at {fit:g}")
        perplexity = fit
    tsne, pca = layout(latents, perplexity, seed, log, max_tsne=max_tsne)
    return sources, latents, desc, orient(tsne, desc), orient(pca, desc)


def attach_map(art, data: Sequence[str | Path] | None = None, *, clips: np.ndarray | None = None,
               sources: Sequence[str] | None = None, limit: int = MAX_POINTS, perplexity: float = DEFAULT_PERPLEXITY,
               seed: int = 0, log: Callable[[str], None] = print, encode=None):
    """Set art.kit_map (an Artifact, e.g. an export in memory) to the map of its training kicks: found under data
    (the split it records; every kick when it records none), or given as clips (decoded as training decodes them)
    with their sources (and encode, as encode_kicks takes it); at most `limit` (an even subsample beyond); on the
    CPU. MapError when its family has no encoder or no kick is usable."""
    import torch

    from kickmodel.families import get_family

    gen = get_family(art.family).load_generator(art, torch.device("cpu"))
    limit = min(limit, MAX_POINTS)
    if clips is not None:
        sources, latents, desc, tsne, pca = map_clips(gen, clips, list(sources or ()), limit=limit,
                                                      perplexity=perplexity, seed=seed, max_tsne=MAX_TSNE_KICKS,
                                                      log=log, encode=encode)
    else:
        split = "train" if isinstance((art.training or {}).get("split"), dict) else None
        sources, latents, desc, tsne, pca = map_kicks(gen, data or [], split=split, limit=limit,
                                                      perplexity=perplexity, seed=seed, max_tsne=MAX_TSNE_KICKS,
                                                      log=log)
    art.kit_map = kit_map_of(tsne, pca, latents, desc, sources)
    log(f"the artifact stores the {art.kit_map.method} map of its {art.kit_map.n} training kicks")
    return art


def make_map(artifact: str | Path, data: Sequence[str | Path], out: str | Path | None = None, *,
             into: str | Path | None = None, split: str | None = None, perplexity: float = DEFAULT_PERPLEXITY,
             seed: int = 0, device: str = "cpu", log: Callable[[str], None] = print) -> list[Path]:
    """The map of the kicks under data in artifact's latent space: map.png and map.csv in `out`, and/or the artifact
    with the map stored in it written to `into` (atomically; it may be artifact itself). Returns what it wrote."""
    from kickmodel.loading import load_generator

    if out is None and into is None:
        raise MapError("give --out DIR (the picture and the table), --into ARTIFACT (the map stored in a model) "
                       "or both")
    if into is not None and not str(into).endswith(".safetensors"):
        raise MapError(f"--into {into}: an artifact's name ends in .safetensors")
    gen = load_generator(Path(artifact), device)
    sources, latents, desc, tsne, pca = map_kicks(
        gen, data, split=split, limit=MAX_POINTS if into is not None else None, perplexity=perplexity, seed=seed,
        max_tsne=MAX_TSNE_KICKS if into is not None else None, log=log)
    written: list[Path] = []
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written.append(draw(out / "map.png", tsne, pca, desc,
                            f"{gen.name}: {len(sources)} kicks in its {latents.shape[1]}-dimensional latent space",
                            [kick_name(src) for src in sources]))
        written.append(write_csv(out / "map.csv", sources, tsne, pca, desc))
    if into is not None:
        art = gen.artifact
        art.kit_map = kit_map_of(tsne, pca, latents, desc, sources)
        written.append(art.save(Path(into)))
        log(f"stored the {art.kit_map.method} map of {art.kit_map.n} kicks in {into}")
    return written
