"""A model's map of its kit: where each training kick lies in two dimensions, and the way back to a latent.

    km = gen.kit_map                       # KitMap, or None (gen.kit_map_missing says why)
    km.points, km.names, km.axes           # [N, 2] in 0..1, the kicks' names, each axis' correlation with
                                           # decay, pitch and click
    z = km.near(0.3, 0.7, spread=0.2, seed=5)   # a latent under that point (seeded noise scaled by spread)
    gen.from_map(0.3, 0.7, 0.2, items)     # kicks from there (kickmodel.generator)
    km.locate(gen.encode(clip[None])[0])   # where a new kick lies on the map (gen.locate(clip) does both)

The points are the layout `kicktrain map` draws and writes to map.csv (trainer/latent_map.py: t-SNE of the kicks'
latents, or PCA when there are too few kicks or too many), moved to 0..1 by one affine map that keeps the aspect
ratio: both axes are scaled by the same factor, 1 / (the larger of the two ranges), and centred at 0.5, so the
longer axis spans exactly 0..1 and the shorter one is centred within it:

    point = (csv - centre) / scale + 0.5      centre: the midpoint of each axis' range; scale: the larger range

Keeping the aspect ratio keeps distances on the pad what they are in the layout (t-SNE's neighbourhoods are
isotropic), so one isotropic kernel serves both axes. `affine` in the stored metadata holds centre and scale.

The way back, a 2-D point -> a latent (`latent_at`), is Nadaraya-Watson kernel regression (Nadaraya 1964, Watson
1964) fitted on the kit's points: the latent at p is the average of the kit's latents weighted by a Gaussian of
their points' distance to p, exp(-|p - p_i|^2 / 2h^2), normalised (a softmax, so far from every point the nearest
kicks take over instead of the weights vanishing). Why this mapping: t-SNE has no inverse at all (it is an
optimisation over the kit's points, not a function of the latent); PCA's inverse from 2 components puts every point
on a plane through the kit's mean, which for a 32-dimensional latent lands far from most kicks (the other 30
dimensions' variance is lost: a point on a kick reads back as a blurred average kick). Kernel regression instead
interpolates between real kicks' latents: at a kick's point with a small bandwidth it returns (nearly) that kick's
latent, between kicks a blend of the nearby ones, and always a convex combination of the kit's latents, i.e. inside
the region the decoder was trained on. The bandwidth h is chosen when the map is built by leave-one-out error on the
kit (each kick's latent predicted from the others, error in units of each latent dimension's spread), from a grid
bounded to BANDWIDTH_RANGE times the median nearest-neighbour distance of the points: never so narrow that the map
is a patchwork of single kicks, never so wide that it is the kit's mean everywhere.

The way there, a latent -> a point (`locate`), is latent_at's inverse: the point whose latent_at lies nearest the
latent (standardised per dimension by the kit's spread), searched on a grid within reach of the kit's points and
refined; a latent nearer a kit kick's own latent than latent_at comes anywhere lands on that kick's point. It was a
regression onto the kit's points (weights by latent distance, a leave-one-out bandwidth), which snapped a kick made
between kicks onto the nearest one; `locate_bandwidth` is still stored and checked, and unused. Why not
t-SNE's own placement: t-SNE cannot place a new point without re-running its optimisation (and moving the others).

`near(x, y, spread, seed)`: latent_at plus Gaussian noise, seeded (numpy's PCG64 for that seed: the same seed gives
the same latent on any machine), scaled per dimension by `spread` (0..1) times the kit's standard deviation in that
dimension: spread 0 is the point itself, 1 a kick as far from it as a kit kick typically is from the kit's mean.

Stored in the artifact (kickmodel/artifact.py) as two tensors, `kitmap.points` [N, 2] and `kitmap.latents` [N, D],
and one metadata entry `kitmap` (JSON: version, method, names, axes, bandwidths, affine, sha256 of the two tensors).
Everything is bounded and checked when read (`from_stored`): at most MAX_POINTS kicks, D equal to the family's latent
size, finite values, points within 0..1, names short, printable and without a folder.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

VERSION = 1
PREFIX = "kitmap."
META_KEY = "kitmap"
TENSORS = ("points", "latents")
METHODS = ("tsne", "pca")
DESCRIPTORS = ("decay", "pitch", "click")  # kickmodel.descriptors.CONTROL_NAMES
AXES = ("x", "y")
MAX_POINTS = 4096
MIN_POINTS = 2
MAX_LATENT_DIM = 4096
MAX_NAME = 64
BANDWIDTH_RANGE = (0.25, 4.0)  # times the median nearest-neighbour distance
BANDWIDTH_GRID = 17  # geometric steps across that range tried by leave-one-out
MIN_BANDWIDTH = 1e-3  # latent_at's narrowest kernel, times the median nearest-neighbour distance of the points
MAX_LATENT_ABS = 1e3  # the largest |latent| a map may hold (the shipped maps: 4.7 and 7.9)


class KitMapError(ValueError):
    """A map that cannot be used; the message names the field and the reason."""


def clean_name(stem: str) -> str:
    """A kick's name as a map stores it: the file stem, with characters that are not printable or that separate
    folders replaced by '_', at most MAX_NAME characters."""
    out = "".join(c if c.isprintable() and c not in "/\\" else "_" for c in str(stem))[:MAX_NAME]
    return out if out.strip(". ") else "_"


def check_name(name: Any, i: int) -> str:
    if not isinstance(name, str):
        raise KitMapError(f"names[{i}] is not a string")
    if not 1 <= len(name) <= MAX_NAME:
        raise KitMapError(f"names[{i}] is {len(name)} characters long (1..{MAX_NAME})")
    if not name.isprintable():
        raise KitMapError(f"names[{i}] {name[:20]!r} holds a control character")
    if "/" in name or "\\" in name or not name.strip(". "):
        raise KitMapError(f"names[{i}] {name[:20]!r} is a path, not a file stem")
    return name


def normalise_points(xy: np.ndarray) -> tuple[np.ndarray, tuple[float, float], float]:
    """(points in 0..1, centre, scale) of a layout [N, 2]: (xy - centre) / scale + 0.5, aspect ratio kept (see the
    module's docstring)."""
    xy = np.asarray(xy, dtype=np.float64)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    centre = (lo + hi) / 2
    scale = float((hi - lo).max())
    if not scale > 0 or not math.isfinite(scale):
        scale = 1.0
    pts = np.clip((xy - centre) / scale + 0.5, 0.0, 1.0)
    return pts, (float(centre[0]), float(centre[1])), scale


def _sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d, 0.0)


def _weights(d2: np.ndarray, h: float) -> np.ndarray:
    """Gaussian kernel weights exp(-d^2 / 2h^2) per row, normalised (softmax: stable far from every point)."""
    logits = -d2 / (2.0 * h * h)
    logits = logits - logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    return w / w.sum(axis=1, keepdims=True)


def median_nn(x: np.ndarray) -> float:
    """The median distance from each point of x [N, K] to its nearest other (zero distances left out; 1 when none),
    in blocks of rows (a 4096-kick map's whole matrix would be 128 MB)."""
    x = np.asarray(x, np.float64)
    nn = np.empty(x.shape[0])
    for i in range(0, x.shape[0], 512):
        d2 = _sq_dists(x[i:i + 512], x)
        d2[np.arange(d2.shape[0]), np.arange(i, i + d2.shape[0])] = np.inf
        nn[i:i + 512] = np.sqrt(d2.min(axis=1))
    nn = nn[np.isfinite(nn) & (nn > 0)]
    return float(np.median(nn)) if nn.size else 1.0


def loo_bandwidth(x: np.ndarray, y: np.ndarray) -> float:
    """The bandwidth of the Gaussian kernel regression x -> y with the least leave-one-out error (y's dimensions each
    in units of its spread), from BANDWIDTH_GRID steps over BANDWIDTH_RANGE times x's median nearest-neighbour
    distance."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    base = median_nn(x)
    sd = y.std(axis=0)
    ys = y / np.where(sd > 0, sd, 1.0)
    d2 = _sq_dists(x, x)
    np.fill_diagonal(d2, np.inf)  # leave one out
    best, best_err = base, np.inf
    for m in np.geomspace(*BANDWIDTH_RANGE, BANDWIDTH_GRID):
        h = float(m * base)
        err = float(((_weights(d2, h) @ ys - ys) ** 2).sum(axis=1).mean())
        if err < best_err - 1e-12:
            best, best_err = h, err
    return best


def finite_corr(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson's r over the rows where both are finite; None under 3 such rows or for a constant side."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return None
    return float(np.clip(np.corrcoef(a[ok], b[ok])[0, 1], -1.0, 1.0))


def axis_correlations(points: np.ndarray, desc: np.ndarray) -> dict[str, dict[str, float | None]]:
    """{"x": {"decay": r, "pitch": r, "click": r}, "y": {...}}: Pearson's r of each axis with each descriptor
    (kickmodel.descriptors.measure's columns; None where undefined: a constant column or under 3 finite values)."""
    desc = np.asarray(desc, np.float64)
    return {a: {d: finite_corr(points[:, i], desc[:, j]) for j, d in enumerate(DESCRIPTORS)}
            for i, a in enumerate(AXES)}


def _digest(points: np.ndarray, latents: np.ndarray) -> str:
    """sha256 of the two tensors as kickmodel.artifact.part_hash hashes a part (names sorted; dtype, shape, bytes)."""
    h = hashlib.sha256()
    for k, t in sorted({"latents": latents, "points": points}.items()):
        t = np.ascontiguousarray(t, dtype=np.float32)
        h.update(k.encode() + b"\0" + b"torch.float32" + b"\0" + str(tuple(t.shape)).encode() + b"\0")
        h.update(t.tobytes())
    return h.hexdigest()


def _check_unit(value: Any, what: str, lo: float = 0.0, hi: float = 1.0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number within {lo:g}..{hi:g}, got {str(value)[:20]!r}") from None
    if not (math.isfinite(v) and lo <= v <= hi):
        raise ValueError(f"{what} must be within {lo:g}..{hi:g}, got {v:g}")
    return v


# KitMap.locate's search (latent_at's inverse)
LOCATE_GRID = 65  # locate's first search: a 65 x 65 grid over the map's square (steps of 1/64)
LOCATE_REACH = 3.0  # ... its points within 3 bandwidths of a kit point
LOCATE_REFINE = 5  # then 5 rounds of a 9 x 9 grid around the best, each a quarter of the step before
OWN_LATENT = 0.1  # a latent this near a kit kick's own (times the median neighbour distance) is that kick's clip


@dataclass(frozen=True, eq=False)
class KitMap:
    """The kit's kicks on a 2-D map and the mappings between the map and the latent space (module docstring).

    points: [N, 2] float32 in 0..1; latents: [N, D] float32 (what the family's `encode` produces and its
    `decode_latents` renders); names: N file stems; method: 'tsne' or 'pca'; axes: per axis ('x', 'y') Pearson's r
    with decay, pitch and click (None: undefined); bandwidth: latent_at's kernel width in map units; locate_bandwidth:
    locate's, in standardised latent units; centre, scale: the affine map from the layout's coordinates
    (map.csv) to points."""

    points: np.ndarray
    latents: np.ndarray
    names: tuple[str, ...]
    method: str
    axes: Mapping[str, Mapping[str, float | None]]
    bandwidth: float
    locate_bandwidth: float
    centre: tuple[float, float] = (0.5, 0.5)
    scale: float = 1.0

    def __post_init__(self) -> None:
        pts = np.array(self.points, dtype=np.float32)
        lat = np.array(self.latents, dtype=np.float32)
        if pts.ndim != 2 or pts.shape[1] != 2:
            raise KitMapError(f"points has shape {tuple(pts.shape)}, not [N, 2]")
        n = pts.shape[0]
        if not MIN_POINTS <= n <= MAX_POINTS:
            raise KitMapError(f"points holds {n} kicks ({MIN_POINTS}..{MAX_POINTS})")
        if lat.ndim != 2 or lat.shape[0] != n or not 1 <= lat.shape[1] <= MAX_LATENT_DIM:
            raise KitMapError(f"latents has shape {tuple(lat.shape)}, not [{n}, D] (D 1..{MAX_LATENT_DIM})")
        if not np.isfinite(pts).all():
            raise KitMapError("points holds NaN or inf")
        if pts.min() < 0.0 or pts.max() > 1.0:
            raise KitMapError(f"points lie outside 0..1 ({float(pts.min()):g}..{float(pts.max()):g})")
        if not np.isfinite(lat).all():
            raise KitMapError("latents holds NaN or inf")
        if np.abs(lat).max() > MAX_LATENT_ABS:
            # a decoder fed 1e30 makes NaN, which became a silent file: no encoder here gives such values
            raise KitMapError(f"latents reach {float(np.abs(lat).max()):.3g}, beyond any encoder's "
                              f"(|latent| <= {MAX_LATENT_ABS:g})")
        names = tuple(self.names) if isinstance(self.names, (list, tuple)) else None
        if names is None or len(names) != n:
            got = len(names) if names is not None else "no list of"
            raise KitMapError(f"names holds {got} names for {n} kicks")
        for i, name in enumerate(names):
            check_name(name, i)
        if self.method not in METHODS:
            raise KitMapError(f"method {str(self.method)[:20]!r} is not one of {', '.join(METHODS)}")
        axes = self.axes
        if not isinstance(axes, Mapping) or set(axes) != set(AXES):
            raise KitMapError("axes is not a table of x and y")
        clean_axes: dict[str, dict[str, float | None]] = {}
        for a in AXES:
            row = axes[a]
            if not isinstance(row, Mapping) or set(row) != set(DESCRIPTORS):
                raise KitMapError(f"axes.{a} is not a table of {', '.join(DESCRIPTORS)}")
            for d in DESCRIPTORS:
                r = row[d]
                if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float))
                                      or not (math.isfinite(r) and -1.0 <= r <= 1.0)):
                    raise KitMapError(f"axes.{a}.{d} is not a correlation within -1..1 (or null)")
            clean_axes[a] = {d: None if row[d] is None else float(row[d]) for d in DESCRIPTORS}
        for field, v, hi in (("bandwidth", self.bandwidth, 10.0), ("locate_bandwidth", self.locate_bandwidth, 1e6),
                             ("scale", self.scale, 1e12)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and 0 < v <= hi):
                raise KitMapError(f"{field} is not a number within (0, {hi:g}]")
        floor = MIN_BANDWIDTH * median_nn(pts.astype(np.float64))
        if self.bandwidth < floor:
            # narrower is one kick per point anyway, and far narrower (h * h under float64's range) made every
            # weight NaN: /kick/near wrote silence and /kick/locate said nan
            raise KitMapError(f"bandwidth {self.bandwidth:.3g} is degenerate: under {MIN_BANDWIDTH:g} times the "
                              f"median distance between the map's neighbouring points ({floor:.3g})")
        c = self.centre
        if not (isinstance(c, (list, tuple)) and len(c) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in c)):
            raise KitMapError("centre is not two finite numbers")
        pts.setflags(write=False)
        lat.setflags(write=False)
        sd = lat.astype(np.float64).std(axis=0)
        std = np.where(sd > 0, sd, 1.0)
        for k, v in (("points", pts), ("latents", lat), ("names", names), ("axes", clean_axes),
                     ("bandwidth", float(self.bandwidth)), ("locate_bandwidth", float(self.locate_bandwidth)),
                     ("centre", (float(c[0]), float(c[1]))), ("scale", float(self.scale)), ("_std", std)):
            object.__setattr__(self, k, v)

    # ------------------------------------------------------------------ what a client reads
    @property
    def n(self) -> int:
        return int(self.points.shape[0])

    @property
    def latent_dim(self) -> int:
        return int(self.latents.shape[1])

    @property
    def latent_std(self) -> np.ndarray:
        """Per latent dimension, the kit's standard deviation (1 where the kit does not vary): near's noise scale."""
        sd = self.latents.astype(np.float64).std(axis=0)
        return sd.astype(np.float32)

    def nearest(self, x: float, y: float) -> int:
        """The index of the kit kick whose point is nearest (x, y)."""
        p = np.array([[_check_unit(x, "x"), _check_unit(y, "y")]])
        return int(np.argmin(_sq_dists(p, self.points.astype(np.float64))[0]))

    # ------------------------------------------------------------------ the mappings
    def latent_at(self, x: float, y: float) -> np.ndarray:
        """The latent [D] under map point (x, y) (0..1 each): Gaussian kernel regression on the kit's points."""
        p = np.array([[_check_unit(x, "x"), _check_unit(y, "y")]])
        w = _weights(_sq_dists(p, self.points.astype(np.float64)), self.bandwidth)
        return (w @ self.latents.astype(np.float64))[0].astype(np.float32)

    def near(self, x: float, y: float, spread: float = 0.0, seed: int = 0) -> np.ndarray:
        """latent_at(x, y) plus seeded Gaussian noise, spread (0..1) times the kit's standard deviation per dimension;
        the same (x, y, spread, seed) gives the same latent."""
        z = self.latent_at(x, y).astype(np.float64)
        spread = _check_unit(spread, "spread")
        if spread == 0.0:
            return z.astype(np.float32)
        noise = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF).standard_normal(self.latent_dim)
        return (z + spread * self.latent_std.astype(np.float64) * noise).astype(np.float32)

    def latents_at(self, xy: np.ndarray) -> np.ndarray:
        """latent_at for many points at once: [M, 2] (0..1) -> [M, D] float64."""
        p = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        pts, lat = self.points.astype(np.float64), self.latents.astype(np.float64)
        return np.concatenate([_weights(_sq_dists(p[i:i + 512], pts), self.bandwidth) @ lat
                               for i in range(0, p.shape[0], 512)] or [np.zeros((0, self.latent_dim))])

    def _inverse_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(grid points [G, 2], their latents standardised [G, D]): LOCATE_GRID x LOCATE_GRID points of the map's
        square, those within LOCATE_REACH bandwidths of a kit point (farther out latent_at is the nearest kick's
        latent, flat: no place there is nearer a latent than another). Built once per map."""
        table = self.__dict__.get("_table")
        if table is None:
            g = np.linspace(0.0, 1.0, LOCATE_GRID)
            grid = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1).reshape(-1, 2)
            pts = self.points.astype(np.float64)
            near = np.sqrt(np.concatenate([_sq_dists(grid[i:i + 512], pts).min(axis=1)
                                           for i in range(0, grid.shape[0], 512)]))
            grid = grid[near <= LOCATE_REACH * self.bandwidth]
            table = (grid, self.latents_at(grid) / self._std)
            object.__setattr__(self, "_table", table)
        return table

    def _own_scale(self) -> float:
        """The median distance between neighbouring kit latents, standardised (cached)."""
        v = self.__dict__.get("_own")
        if v is None:
            v = median_nn(self.latents.astype(np.float64) / self._std)
            object.__setattr__(self, "_own", v)
        return v

    def locate(self, latent: np.ndarray) -> tuple[float, float]:
        """The map point (x, y) of a latent [D] (a new kick's encoding): latent_at's inverse, the point whose latent
        lies nearest it in standardised latent space (each dimension by the kit's spread), or the point of the kit
        kick whose own latent lies nearer still and within OWN_LATENT of it (a kit kick's clip lands on its point)
        -- found on a grid within reach of the kit's points (_inverse_table), then refined on finer grids around the
        best (LOCATE_REFINE rounds, each a quarter of the step before: about 2e-5 of the map at the end). So a kick
        made at a point (`near`, `from_map`) is located at that point, not snapped onto the kit kick its latent
        resembles most (the old regression onto the kit's points did: 21 of 48 fresh kicks within 0.001 of a
        kit point). ValueError for a latent of the wrong size or not finite, or a map whose place cannot be told (never
        NaN)."""
        z = np.asarray(latent, dtype=np.float64).reshape(-1)
        if z.shape[0] != self.latent_dim:
            raise ValueError(f"a latent of this map has {self.latent_dim} numbers, got {z.shape[0]}")
        if not np.isfinite(z).all():
            raise ValueError("the latent holds NaN or inf")
        zs = z / self._std
        grid, lat = self._inverse_table()
        err = ((lat - zs) ** 2).sum(axis=1)
        own = ((self.latents.astype(np.float64) / self._std - zs) ** 2).sum(axis=1)
        if own.min() < min(err.min(), (OWN_LATENT * self._own_scale()) ** 2):
            # a kit kick's own latent, or all but (its own clip encoded again), nearer than latent_at comes anywhere:
            # that kick's point (latent_at blends its neighbours in, so its clip would land off its point); a new
            # kick is never that near one (it snapped 15 % of kick-synth's fresh kicks without the bound)
            i = int(np.argmin(own))
            return float(self.points[i, 0]), float(self.points[i, 1])
        best = grid[int(np.argmin(err))]
        step = 1.0 / (LOCATE_GRID - 1)
        offsets = np.linspace(-1.0, 1.0, 9)
        for _ in range(LOCATE_REFINE):
            cand = np.clip(np.stack(np.meshgrid(best[0] + step * offsets, best[1] + step * offsets, indexing="ij"),
                                    axis=-1).reshape(-1, 2), 0.0, 1.0)
            err = ((self.latents_at(cand) / self._std - zs) ** 2).sum(axis=1)
            best = cand[int(np.argmin(err))]
            step /= 4.0
        if not np.isfinite(best).all():  # pragma: no cover - the map is checked at load (bandwidths, latents)
            raise ValueError("the map cannot place this latent (its kernel gives no finite weights)")
        return float(best[0]), float(best[1])

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, layout: np.ndarray, latents: np.ndarray, names: Sequence[str], method: str,
              descriptors: np.ndarray) -> KitMap:
        """A map from a layout [N, 2] (kicktrain map's t-SNE or PCA coordinates), the kicks' latents [N, D], their
        names (cleaned: clean_name) and their descriptors [N, 3] (decay, pitch, click): points normalised to 0..1,
        axes' correlations, both bandwidths by leave-one-out."""
        layout = np.asarray(layout, np.float64)
        lat = np.asarray(latents, np.float64)
        if layout.ndim != 2 or layout.shape[1] != 2 or lat.ndim != 2 or lat.shape[0] != layout.shape[0]:
            raise KitMapError(f"a layout [N, 2] and latents [N, D] are needed, got {layout.shape} and {lat.shape}")
        pts, centre, scale = normalise_points(layout)
        sd = lat.std(axis=0)
        std_lat = lat / np.where(sd > 0, sd, 1.0)
        return cls(points=pts, latents=lat, names=tuple(clean_name(s) for s in names), method=method,
                   axes=axis_correlations(pts, descriptors), bandwidth=loo_bandwidth(pts, lat),
                   locate_bandwidth=loo_bandwidth(std_lat, pts), centre=centre, scale=scale)

    # ------------------------------------------------------------------ storing
    def meta(self) -> dict[str, Any]:
        return {"version": VERSION, "method": self.method, "names": list(self.names), "axes": self.axes,
                "bandwidth": self.bandwidth, "locate_bandwidth": self.locate_bandwidth,
                "affine": {"centre": list(self.centre), "scale": self.scale},
                "sha256": _digest(self.points, self.latents)}

    def to_stored(self) -> tuple[dict[str, np.ndarray], str]:
        """({"kitmap.points": [N, 2], "kitmap.latents": [N, D]} float32, the `kitmap` metadata JSON)."""
        return ({PREFIX + "points": np.array(self.points), PREFIX + "latents": np.array(self.latents)},
                json.dumps(self.meta(), allow_nan=False, sort_keys=True, ensure_ascii=False))  # é: 2 bytes, not 6

    @classmethod
    def check_shapes(cls, shapes: Mapping[str, Sequence[int]], latent_dim: int | None) -> int:
        """Before any tensor is decoded: the map's tensors (names without the prefix -> shape) are exactly points
        [N, 2] and latents [N, latent_dim] with N within MIN_POINTS..MAX_POINTS; returns N. KitMapError otherwise
        (latent_dim None: this model has no latent space to map)."""
        if latent_dim is None:
            raise KitMapError("this model has no latent space to map (its family has no encoder)")
        extra = sorted(set(shapes) - set(TENSORS))
        if extra:
            raise KitMapError(f"tensor {PREFIX}{str(extra[0])[:40]} is not one of a map's ({', '.join(TENSORS)})")
        for t in TENSORS:
            if t not in shapes:
                raise KitMapError(f"tensor {PREFIX}{t} is missing")
        p, z = list(shapes["points"]), list(shapes["latents"])
        if len(p) != 2 or p[1] != 2 or not MIN_POINTS <= p[0] <= MAX_POINTS:
            raise KitMapError(f"points has shape {tuple(p)}, not [N, 2] with N {MIN_POINTS}..{MAX_POINTS}")
        if z != [p[0], latent_dim]:
            raise KitMapError(f"latents has shape {tuple(z)}, this model's map needs [{p[0]}, {latent_dim}]")
        return int(p[0])

    @classmethod
    def from_stored(cls, tensors: Mapping[str, np.ndarray], meta: Any, latent_dim: int | None) -> KitMap:
        """A map read back: tensors (names without the prefix) and the parsed `kitmap` metadata, every size and value
        checked (KitMapError naming the field)."""
        cls.check_shapes({k: tuple(np.shape(v)) for k, v in tensors.items()}, latent_dim)
        if not isinstance(meta, dict):
            raise KitMapError("its metadata is not a table")
        if meta.get("version") != VERSION:
            raise KitMapError(f"version {str(meta.get('version'))[:10]} is not {VERSION}")
        names = meta.get("names")
        if not isinstance(names, list):
            raise KitMapError("names is not a list")
        pts = np.asarray(tensors["points"], dtype=np.float32)
        lat = np.asarray(tensors["latents"], dtype=np.float32)
        affine = meta.get("affine")
        if not isinstance(affine, dict):
            raise KitMapError("affine is not a table")
        try:
            km = cls(points=pts, latents=lat, names=tuple(names), method=meta.get("method"), axes=meta.get("axes"),
                     bandwidth=meta.get("bandwidth"), locate_bandwidth=meta.get("locate_bandwidth"),
                     centre=tuple(affine.get("centre") or ()), scale=affine.get("scale"))
        except TypeError as e:  # pragma: no cover - every field is checked above or in __post_init__
            raise KitMapError(str(e)) from None
        if meta.get("sha256") != _digest(km.points, km.latents):
            raise KitMapError("its tensors do not match its recorded sha256 (the file was changed)")
        return km
