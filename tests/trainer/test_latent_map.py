"""`kicktrain map` as the README shows it: the bundled model (latent diffusion: it can encode) on a few kicks of the
starter kit, dots named, colour scales that one odd kick cannot flatten."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "kickserver" / "models" / "default.safetensors"
KIT = ROOT / "kickserver" / "data" / "kicks"


def test_colour_limits_clip_to_the_2nd_and_98th_percentiles():
    from trainer.latent_map import colour_limits

    values = np.concatenate([np.linspace(40.0, 60.0, 99), [400.0]])  # one kick's pitch read far off
    lo, hi = colour_limits(values)
    assert lo == pytest.approx(np.percentile(values, 2)) and hi == pytest.approx(np.percentile(values, 98))
    assert hi < 61.0  # the outlier does not stretch the scale
    # three toms among 97 kicks are more than 2 %: the quartiles -/+ 3 IQR still keep them off the scale
    values = np.concatenate([np.linspace(40.0, 60.0, 97), [150.0, 151.0, 154.0]])
    q1, q3 = np.percentile(values, (25, 75))
    assert colour_limits(values)[1] == pytest.approx(q3 + 3 * (q3 - q1)) and colour_limits(values)[1] < 100
    assert colour_limits(np.full(5, 3.0)) == (pytest.approx(2.5), pytest.approx(3.5))  # all equal: a usable range
    assert colour_limits(np.array([1.0, np.nan, 2.0, 3.0])) == pytest.approx((np.nanpercentile([1, 2, 3], 2),
                                                                               np.nanpercentile([1, 2, 3], 98)))


def test_labelled_kicks_are_all_of_a_few_and_the_extremes_and_outliers_of_many():
    from trainer.latent_map import ALL_LABELS_UP_TO, labelled, short_name

    rng = np.random.default_rng(0)
    few = rng.normal(size=(ALL_LABELS_UP_TO, 2))
    assert labelled(few, rng.normal(size=ALL_LABELS_UP_TO)) == list(range(ALL_LABELS_UP_TO))
    xy = rng.normal(size=(100, 2))
    xy[17] = [30.0, -30.0]  # far from the rest
    values = rng.normal(size=100)
    values[5], values[60] = 10.0, -10.0  # the loudest and the quietest of the coloured measure
    chosen = labelled(xy, values)
    assert {17, 5, 60} <= set(chosen) and len(chosen) <= 8
    assert short_name("ColomboAcousticDrumkit_bassdrum_4mics_br_stereo_soft2") == "Colombo…stereo_soft2"
    assert short_name("BJA_Pacific_BD_02") == "BJA_Pacific_BD_02"


def test_kicktrain_map_with_the_bundled_model_names_the_kicks(tmp_path, capsys):
    from trainer.cli import main as kicktrain

    kicks = tmp_path / "kicks"
    kicks.mkdir()
    files = sorted(p for p in KIT.iterdir() if p.suffix in (".flac", ".wav"))[:8]
    for f in files:
        shutil.copy(f, kicks / f.name)
    out = tmp_path / "m"
    assert kicktrain(["map", str(BUNDLED), str(kicks), "--out", str(out), "--perplexity", "2"]) == 0
    rows = list(csv.DictReader((out / "map.csv").open()))
    assert [r["name"] for r in rows] == [f.stem for f in files]
    assert all(r["tsne_x"] and r["pca_x"] for r in rows)
    png = (out / "map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_map_figure_labels_the_dots_and_clips_each_colour_scale():
    from trainer.latent_map import colour_limits, map_figure

    rng = np.random.default_rng(1)
    n = 100
    desc = np.column_stack([rng.uniform(0.2, 0.6, n), rng.uniform(40, 60, n), rng.uniform(-40, -20, n)])
    desc[3, 1] = 400.0
    xy = rng.normal(size=(n, 2))
    names = [f"kick{i:02d}" for i in range(n)]
    fig = map_figure(xy, xy * 2, desc, names, "t")
    scatter_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(scatter_axes) == 6
    for ax in scatter_axes:
        texts = [t.get_text() for t in ax.texts]
        assert texts and set(texts) <= set(names) and len(texts) < n
    pitch = scatter_axes[1].collections[0]
    assert pitch.get_clim() == pytest.approx(colour_limits(desc[:, 1]))
    assert pitch.get_clim()[1] < 61.0  # the 400 Hz kick is clipped, not the top of the scale


def test_orient_turns_the_layout_so_its_axes_read_as_sounds():
    """kicktrain map turns the layout (t-SNE's axes are arbitrary) so that x grows with the descriptor the layout
    explains best and y with the better of the others: distances between kicks are kept exactly."""
    from trainer.latent_map import orient

    rng = np.random.default_rng(3)
    xy = rng.normal(size=(60, 2)) * [3.0, 1.0]
    a = np.deg2rad(35.0)
    turn = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    decay = (xy @ turn)[:, 0] + 0.05 * rng.normal(size=60)   # decay along one direction of the layout
    pitch = -(xy @ turn)[:, 1] + 0.4 * rng.normal(size=60)   # pitch across it, running the other way, noisier
    click = rng.normal(size=60)                               # click unrelated
    desc = np.column_stack([decay, pitch, click])
    out = orient(xy, desc)
    d = lambda p: np.linalg.norm(p[:, None] - p[None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(d(out), d(xy), atol=1e-9)
    assert np.corrcoef(out[:, 0], decay)[0, 1] > 0.95 and np.corrcoef(out[:, 1], pitch)[0, 1] > 0.8
    assert orient(None, desc) is None
    np.testing.assert_array_equal(orient(xy, np.full((60, 3), np.nan)), xy)  # nothing to read: unchanged
