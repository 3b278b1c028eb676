"""Draw the XY pad of the Max for Live device / Pd patch over a kit's map, as the device shows it.

    .venv/bin/kicktrain map kickserver/models/default.safetensors kickserver/data/kicks --out /tmp/map
    .venv/bin/python scripts/draw_map_pad.py /tmp/map/map.csv --out docs/img/map-pad.png

Reads `kicktrain map`'s map.csv (the t-SNE layout, or --layout pca), moves it to 0..1 as the model's stored map does
(kickmodel.kitmap.normalise_points: one scale for both axes, 1 / the larger range, centred at 0.5), and labels each
axis as the daemon's /kick/map/axes does (kickserver.osc_api.axis_label on kickmodel.kitmap.axis_correlations: the
descriptor it follows most, `longer decay ->`, or `mixed` under the threshold).
The pad is drawn as the device draws it: the kit's kicks as blue-grey dots, kicks asked from the pad as orange
marks, a located kick as a white square; the marks here are example clicks (--mark X Y, repeatable; --locate X Y),
not replies from a daemon.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from kickmodel.fsutil import atomic_write_bytes  # noqa: E402
from kickmodel.kitmap import AXES, DESCRIPTORS, axis_correlations, normalise_points  # noqa: E402
from kickserver.osc_api import axis_label  # noqa: E402

MAX_ROWS = 4096  # a map.csv is one row per kit kick; the stored map holds fewer


def read_map(path: Path, layout: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The layout's points [N, 2], the descriptors per kick [N, 3] (kickmodel.kitmap.DESCRIPTORS), the names;
    ValueError naming the file if it is not a `kicktrain map` CSV."""
    with path.open(newline="") as f:
        rows = []
        for i, row in enumerate(csv.DictReader(f)):
            if i >= MAX_ROWS:
                raise ValueError(f"{path}: more than {MAX_ROWS} rows; is this a kicktrain map CSV?")
            rows.append(row)
    cols = [f"{layout}_x", f"{layout}_y", *DESCRIPTORS, "name"]
    if not rows or any(c not in rows[0] for c in cols):
        raise ValueError(f"{path}: not a kicktrain map CSV (needs the columns {', '.join(cols)})")
    try:
        xy = np.array([[float(r[cols[0]]), float(r[cols[1]])] for r in rows])
        desc = np.array([[float(r[d]) for d in DESCRIPTORS] for r in rows])
    except ValueError as e:
        raise ValueError(f"{path}: a value is not a number ({e})") from None
    if not np.isfinite(xy).all():
        raise ValueError(f"{path}: the layout has values that are not finite")
    return xy, desc, [r["name"] for r in rows]


def axis_labels(points: np.ndarray, desc: np.ndarray) -> list[tuple[str, str, float]]:
    """Per axis (x, y): the label the daemon's /kick/map/axes gives it (kickserver.osc_api.axis_label on
    kickmodel.kitmap.axis_correlations, as the stored map holds them), the descriptor it follows most, and r."""
    corr = axis_correlations(points, desc)
    out = []
    for axis in AXES:
        known = {d: r for d, r in corr[axis].items() if r is not None}
        d = max(known, key=lambda k: abs(known[k])) if known else ""
        out.append((axis_label(corr[axis], len(points)), d, known.get(d, 0.0)))
    return out


def draw(points: np.ndarray, desc: np.ndarray, marks: list[tuple[float, float]],
         located: tuple[float, float] | None, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    (xlab, xd, xr), (ylab, yd, yr) = axis_labels(points, desc)
    fig, ax = plt.subplots(figsize=(4.2, 4.9), dpi=150)
    fig.patch.set_facecolor("#2b2b2b")
    ax.set_facecolor("#282828")
    # the pad as the device draws it: 120 px, points 4 px in from the edge (112 px of travel), y up
    ax.scatter(points[:, 0], points[:, 1], s=22, c="#6e96be", edgecolors="none", label="the kit's kicks")
    if marks:
        m = np.array(marks)
        ax.scatter(m[:, 0], m[:, 1], s=30, c="#ff8c28", edgecolors="none", label="kicks asked from the pad")
    if located is not None:
        ax.add_patch(Rectangle((located[0] - 0.025, located[1] - 0.025), 0.05, 0.05, color="white",
                               label="a located kick"))
    pad = 4 / 112
    ax.set_xlim(-pad, 1 + pad)
    ax.set_ylim(-pad, 1 + pad)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for s in ax.spines.values():
        s.set_color("#909090")
    grey = "#c8c8c8"
    ax.set_title(f"y: {ylab}", color=grey, fontsize=10, loc="left")
    ax.set_xlabel(f"x: {xlab}", color=grey, fontsize=10, loc="left")
    fig.text(0.5, 0.015, f"{title}; x ~ {xd} r={xr:+.2f}, y ~ {yd} r={yr:+.2f}", color="#909090",
             ha="center", fontsize=7)
    leg = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, fontsize=6, facecolor="#383838",
                    edgecolor="#606060", labelcolor=grey)
    leg.get_frame().set_alpha(0.9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor=fig.get_facecolor())
    plt.close(fig)
    return buf.getvalue()


def unit_pair(text: list[str]) -> tuple[float, float]:
    x, y = (float(v) for v in text)
    if not (0 <= x <= 1 and 0 <= y <= 1):
        raise argparse.ArgumentTypeError(f"{x} {y}: a point on the pad is within 0..1")
    return x, y


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path, help="map.csv written by `kicktrain map`")
    ap.add_argument("--out", type=Path, default=Path("docs/img/map-pad.png"))
    ap.add_argument("--layout", choices=("tsne", "pca"), default="tsne")
    ap.add_argument("--mark", nargs=2, action="append", metavar=("X", "Y"),
                    help="an example pad click (0..1); default three near (0.3, 0.7)")
    ap.add_argument("--locate", nargs=2, metavar=("X", "Y"), default=["0.62", "0.35"])
    ap.add_argument("--title", default="the starter kit on the bundled model's map")
    args = ap.parse_args(argv)
    try:
        marks = [unit_pair(m) for m in (args.mark or [["0.3", "0.7"], ["0.33", "0.66"], ["0.27", "0.72"]])]
        located = unit_pair(args.locate)
        xy, desc, _names = read_map(args.csv, args.layout)
    except (OSError, ValueError, argparse.ArgumentTypeError) as e:
        print(f"draw_map_pad: {e}", file=sys.stderr)
        return 2
    png = draw(normalise_points(xy)[0], desc, marks, located, args.title)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.out, png)
    print(f"draw_map_pad: wrote {args.out} ({len(xy)} kicks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
