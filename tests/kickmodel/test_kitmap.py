"""The model knows its kit's map: kickmodel/kitmap.py's KitMap, stored in the artifact under `kitmap.` and
read back with every size and value bounded, the mappings both ways, and kicks rendered from a map point."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from kickmodel.artifact import ArtifactError, read_header
from kickmodel.generator import Item
from kickmodel.kitmap import MAX_NAME, MAX_POINTS, KitMap, clean_name, normalise_points
from kickmodel.loading import check_artifact, load_artifact, load_generator


def _kit(n: int = 24, dim: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layout [n, 2], latents [n, dim], descriptors [n, 3]): latents that follow the layout, as t-SNE's do."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-20, 20, size=(n, 2)) * [1.0, 0.5]
    proj = rng.normal(size=(2, dim))
    lat = xy @ proj / 10 + 0.05 * rng.normal(size=(n, dim))
    desc = np.column_stack([xy[:, 0] * 0.01 + 0.3, 50 + xy[:, 1], rng.normal(-30, 3, n)])
    return xy, lat, desc


def _map(dim: int = 8, n: int = 24) -> KitMap:
    xy, lat, desc = _kit(n, dim)
    return KitMap.build(xy, lat, [f"kick_{i:02d}" for i in range(n)], "tsne", desc)


@pytest.fixture(scope="module")
def mel(tmp_path_factory):
    """A tiny mel-VAE artifact (random weights) and the same with a map of its latent size."""
    from daemon_util import make_artifact

    d = tmp_path_factory.mktemp("kitmap")
    plain = make_artifact(d / "mel.safetensors", seed=2, family="mel_vae")
    art = load_artifact(plain)
    dim = art.config_of("vae").vae.latent_dim
    art.kit_map = _map(dim)
    return plain, art.save(d / "mel-map.safetensors"), dim


def _restored(src: Path, dst: Path, edit) -> Path:
    """dst: src's tensors and metadata with edit(tensors, meta) applied, written as safetensors."""
    meta, _ = read_header(src)
    tensors = st_load(src.read_bytes())
    edit(tensors, meta)
    dst.write_bytes(st_save(tensors, metadata=meta))
    return dst


def _meta_edit(**changes):
    def edit(tensors, meta):
        m = json.loads(meta["kitmap"])
        for k, v in changes.items():
            m[k] = v
        meta["kitmap"] = json.dumps(m)
    return edit


def test_a_map_round_trips_through_the_artifact_and_leaves_its_parts_as_they_were(mel):
    plain, with_map, dim = mel
    assert load_artifact(plain).kit_map is None and load_generator(plain).kit_map is None  # no map: as before
    check_artifact(with_map)
    a, b = load_artifact(plain), load_artifact(with_map)
    km, want = b.kit_map, _map(dim)
    assert km is not None and km.n == 24 and km.latent_dim == dim and km.method == "tsne"
    np.testing.assert_array_equal(km.points, want.points)
    np.testing.assert_array_equal(km.latents, want.latents.astype(np.float32))
    assert km.names == want.names and km.axes == want.axes
    assert km.bandwidth == want.bandwidth and km.locate_bandwidth == want.locate_bandwidth
    assert a.part_hashes == b.part_hashes and json.loads(a.meta["parts"]) == json.loads(b.meta["parts"])
    assert set(b.tensors) == set(a.tensors)  # the map is not a part: its tensors are the map's, not the model's
    assert b.kit_map.axes["x"]["decay"] > 0.9  # x follows decay in this kit (_kit)
    again = b.save(with_map.parent / "again.safetensors")  # saved again, the map stays
    assert load_artifact(again).kit_map.names == km.names


@pytest.mark.parametrize("edit, reason", [
    (lambda t, m: t.update({"kitmap.latents": torch.zeros(24, 3)}), "latents has shape (24, 3)"),
    (lambda t, m: t.update({"kitmap.points": torch.rand(MAX_POINTS + 1, 2),
                            "kitmap.latents": torch.zeros(MAX_POINTS + 1, t["kitmap.latents"].shape[1])}),
     f"points has shape ({MAX_POINTS + 1}, 2)"),
    (lambda t, m: t.update({"kitmap.points": torch.rand(24, 3)}), "points has shape (24, 3)"),
    (lambda t, m: t["kitmap.latents"].__setitem__((3, 1), float("nan")), "latents holds NaN"),
    (lambda t, m: t["kitmap.points"].__setitem__((3, 1), float("inf")), "points holds NaN"),
    (lambda t, m: t["kitmap.points"].__setitem__((3, 1), 1.5), "outside 0..1"),
    (lambda t, m: t["kitmap.latents"].__setitem__((3, 1), 7.0), "sha256"),
    (lambda t, m: t.update({"kitmap.extra": torch.zeros(2)}), "tensor kitmap.extra is not one of a map's"),
    (lambda t, m: t.pop("kitmap.points"), "tensor kitmap.points is missing"),
    (lambda t, m: m.pop("kitmap"), "no kitmap metadata"),
    (lambda t, m: m.update({"kitmap": "{not json"}), "metadata kitmap"),
    (_meta_edit(names=["a"] * 23), "names holds 23 names for 24 kicks"),
    (_meta_edit(names=["../../etc/passwd"] + [f"k{i}" for i in range(23)]), "names[0] '../../etc/passwd' is a path"),
    (_meta_edit(names=["bell\x07"] + [f"k{i}" for i in range(23)]), "names[0] 'bell\\x07' holds a control char"),
    (_meta_edit(names=["x" * (MAX_NAME + 1)] + [f"k{i}" for i in range(23)]), "names[0] is 65 characters long"),
    (_meta_edit(names=[3] + [f"k{i}" for i in range(23)]), "names[0] is not a string"),
    (_meta_edit(method="umap"), "method 'umap'"),
    (_meta_edit(version=2), "version 2"),
    (_meta_edit(axes={"x": {"decay": 2.0, "pitch": 0, "click": 0}, "y": {"decay": 0, "pitch": 0, "click": 0}}),
     "axes.x.decay"),
    (_meta_edit(axes={"x": {}}), "axes is not a table of x and y"),
    (_meta_edit(bandwidth=float("nan")), "bandwidth"),
    (_meta_edit(bandwidth=-1), "bandwidth"),
    (_meta_edit(affine={"centre": [0, "a"], "scale": 1}), "centre"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_corrupt_map_is_refused_naming_the_field(mel, tmp_path, edit, reason):
    _, with_map, _ = mel
    bad = _restored(with_map, tmp_path / "bad.safetensors", edit)
    with pytest.raises(ArtifactError) as e:
        load_artifact(bad)
    assert "kit map" in str(e.value) and reason in str(e.value), str(e.value)


def test_shapes_are_refused_before_any_tensor_is_decoded(mel, tmp_path):
    _, with_map, _ = mel
    bad = _restored(with_map, tmp_path / "bad.safetensors",
                    lambda t, m: t.update({"kitmap.latents": torch.zeros(24, 3)}))
    with pytest.raises(ArtifactError, match="kit map: latents has shape"):
        check_artifact(bad)  # the header alone


def test_a_family_without_an_encoder_has_no_map_and_says_why(tmp_path, mel):
    from daemon_util import make_artifact

    wf = make_artifact(tmp_path / "wf.safetensors", family="waveform_diffusion")
    gen = load_generator(wf)
    assert gen.kit_map is None and "no encoder" in gen.kit_map_missing
    with pytest.raises(ValueError, match="no encoder"):
        gen.from_map(0.5, 0.5, 0.0, [Item(seed=1)])
    art = load_artifact(wf)
    art.kit_map = _map(8)
    with pytest.raises(ValueError, match="no latent space to map"):
        art.save(tmp_path / "wf-map.safetensors")
    plain = load_generator(mel[0])
    assert plain.kit_map is None and "--into" in plain.kit_map_missing  # it could have one: says how
    with pytest.raises(ValueError, match="kicktrain map"):
        plain.from_map(0.5, 0.5, 0.0, [Item(seed=1)])


def test_saving_a_map_of_another_latent_size_is_refused(mel, tmp_path):
    art = load_artifact(mel[0])
    art.kit_map = _map(mel[2] + 1)
    with pytest.raises(ValueError, match="latents have"):
        art.save(tmp_path / "x.safetensors")


def test_points_are_the_layout_moved_to_0_1_keeping_its_aspect_ratio():
    xy = np.array([[-10.0, 3.0], [30.0, 5.0], [10.0, 13.0]])
    pts, centre, scale = normalise_points(xy)
    assert scale == 40.0 and centre == (10.0, 8.0)
    np.testing.assert_allclose(pts, (xy - centre) / scale + 0.5)
    assert pts[:, 0].min() == 0.0 and pts[:, 0].max() == 1.0  # the longer axis spans 0..1
    assert pts[:, 1].max() - pts[:, 1].min() == pytest.approx(10 / 40)  # the shorter one keeps its length, centred
    assert (pts[:, 1].min() + pts[:, 1].max()) / 2 == pytest.approx(0.5)


def test_names_are_cleaned_to_bounded_printable_stems():
    assert clean_name("a/b\\c\x07d") == "a_b_c_d"
    assert len(clean_name("k" * 200)) == MAX_NAME
    assert clean_name("..") == "_"
    km = KitMap.build(*_kit(4, 3)[:2], ["ok", "../up", "x\ny", "z" * 99], "pca", _kit(4, 3)[2])
    assert km.names == ("ok", ".._up", "x_y", "z" * MAX_NAME)


def test_latent_at_a_kit_point_with_a_small_bandwidth_is_that_kicks_latent():
    km = _map()
    narrow = dataclasses.replace(km, bandwidth=1e-3)
    for i in (0, 7, 19):
        z = narrow.latent_at(*km.points[i])
        np.testing.assert_allclose(z, km.latents[i], atol=1e-4)
    # the chosen bandwidth is within its bounds and blends: nearer its own kick than the kit's mean
    z = km.latent_at(*km.points[7])
    assert np.linalg.norm(z - km.latents[7]) < np.linalg.norm(km.latents.mean(0) - km.latents[7])
    far = km.latent_at(0.0, 1.0)  # far from every point: the nearest kicks, not NaN
    assert np.isfinite(far).all()
    with pytest.raises(ValueError, match="x must be within 0..1"):
        km.latent_at(1.2, 0.5)


def test_near_is_seeded_and_scaled_by_spread():
    km = _map()
    x, y = (float(v) for v in km.points[3])
    np.testing.assert_array_equal(km.near(x, y, 0.0, seed=1), km.latent_at(x, y))
    np.testing.assert_array_equal(km.near(x, y, 0.5, seed=9), km.near(x, y, 0.5, seed=9))
    assert not np.array_equal(km.near(x, y, 0.5, seed=9), km.near(x, y, 0.5, seed=10))
    base = km.latent_at(x, y)
    dev = {s: np.mean([np.abs((km.near(x, y, s, seed) - base) / km.latent_std).mean() for seed in range(200)])
           for s in (0.25, 0.5, 1.0)}
    assert dev[0.5] == pytest.approx(2 * dev[0.25], rel=0.05) and dev[1.0] == pytest.approx(np.sqrt(2 / np.pi),
                                                                                            rel=0.05)
    with pytest.raises(ValueError, match="spread"):
        km.near(x, y, 1.5)


def test_locate_is_latent_at_s_inverse_between_kit_points():
    """Locate regressed onto the kit's points with a bandwidth a third of their spacing, so a latent made
    between kicks snapped onto one; now a latent made at a point (latent_at, near at spread 0) comes back to it."""
    km = _map()
    far = []
    for x, y in ((0.3, 0.4), (0.5, 0.5), (0.62, 0.47), (0.45, 0.55)):
        lx, ly = km.locate(km.latent_at(x, y))
        far.append(np.hypot(lx - x, ly - y))
    assert max(far) < 0.002, far


def test_locate_puts_a_kit_kicks_latent_on_its_point():
    km = _map()
    for i in (0, 5, 11):
        assert np.hypot(*(np.array(km.locate(km.latents[i])) - km.points[i])) < 0.05
    with pytest.raises(ValueError, match="8 numbers"):
        km.locate(np.zeros(3))


def test_kicks_from_a_map_point_render_per_seed(mel):
    gen = load_generator(mel[1])
    km = gen.kit_map
    assert km is not None and gen.kit_map_missing == ""
    x, y = (float(v) for v in km.points[2])
    a = gen.from_map(x, y, 0.5, [Item(seed=1), Item(seed=2)])
    b = gen.from_map(x, y, 0.5, [Item(seed=2)])
    assert a.shape == (2, gen.length) and np.isfinite(a).all()
    np.testing.assert_array_equal(a[1], b[0])  # a kick is its seed's, whatever its batch
    assert not np.array_equal(a[0], a[1])
    with pytest.raises(ValueError, match="decay do not apply"):
        gen.from_map(x, y, 0.0, [Item(seed=1, controls={"decay": 0.5})])
    with pytest.raises(ValueError, match="spread must be within 0..1"):
        gen.from_map(x, y, 2.0, [Item(seed=1)])
    loc = gen.locate(gen.prepare_source(a[0], gen.sample_rate))
    assert all(0.0 <= v <= 1.0 for v in loc)


def test_a_map_the_reader_would_refuse_is_never_written(mel, tmp_path):
    """A 4096-kick map with long non-ASCII names: stored as UTF-8 (é takes 2 bytes, not a 6-byte escape) it still
    loads; one that would pass the reader's metadata limit is refused before anything is written (it made a model
    that could not load: `kicktrain map --into` replaced a working model with it)."""
    plain, _, dim = mel
    art = load_artifact(plain)
    small = _map(dim)
    reps = MAX_POINTS // small.n + 1
    pts, lat = np.tile(small.points, (reps, 1))[:MAX_POINTS], np.tile(small.latents, (reps, 1))[:MAX_POINTS]
    accents = tuple(f"{i:04d}" + "é" * (MAX_NAME - 4) for i in range(MAX_POINTS))
    art.kit_map = dataclasses.replace(small, points=pts, latents=lat, names=accents)
    ok = art.save(tmp_path / "accents.safetensors")
    assert load_artifact(ok).kit_map.names == accents
    drums = ("\U0001f941" * MAX_NAME,) * MAX_POINTS  # 4 bytes a character: over 1 MiB of names
    art.kit_map = dataclasses.replace(small, points=pts, latents=lat, names=drums)
    with pytest.raises(ArtifactError, match="would not load; nothing written .map fewer kicks"):
        art.save(tmp_path / "drums.safetensors")
    assert list(tmp_path.iterdir()) == [ok]


def test_the_readme_puts_the_clicky_kicks_where_the_shipped_pad_has_them():
    """The README said the clicky kicks gather on the left, of `kicktrain map`'s picture, with
    nothing to tell it from the pad, where the shipped model's map has them on the right (x follows click). The
    README's sentence on the pad is held to the sign of the shipped map's x-click correlation."""
    import re

    from kickmodel.artifact import read_metadata

    root = Path(__file__).resolve().parents[2]
    meta = read_metadata(root / "kickserver" / "models" / "default.safetensors")
    stored = meta["kitmap"] if isinstance(meta["kitmap"], dict) else json.loads(meta["kitmap"])
    r = stored["axes"]["x"]["click"]
    readme = " ".join((root / "README.md").read_text().split())
    m = re.search(r"on the pad you play \([^)]*\) the clicky kicks sit on the (left|right)", readme)
    assert m, "the README no longer says where the clicky kicks sit on the pad"
    assert m.group(1) == ("right" if r > 0 else "left"), (m.group(1), r)
    assert f"r {r:+.2f}" in readme, r
