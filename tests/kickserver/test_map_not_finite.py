"""A kit map with a tiny but valid bandwidth, or with huge latents, made `/kick/near` answer
`/kick/done` with all-zero files (kickmodel.dsp.finish_kick turned the decoder's NaN into silence) and `/kick/locate`
reply `nan nan`. Such maps are refused when the artifact loads (`/kick/model` says why and the daemon keeps serving
what it served), and any kick the model makes with NaN or inf in it is an error reply, never a silent file."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import soundfile as sf
from daemon_util import make_artifact, models_folder, start_daemon
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from kickmodel import kitmap
from kickmodel.artifact import read_header
from kickmodel.generator import Item
from kickmodel.kitmap import KitMap
from kickmodel.loading import load_artifact, load_generator


def small_kit(dim: int, n: int = 24) -> KitMap:
    rng = np.random.default_rng(0)
    xy = rng.uniform(-20, 20, size=(n, 2))
    lat = xy @ rng.normal(size=(2, dim)) / 10 + 0.05 * rng.normal(size=(n, dim))
    desc = np.column_stack([0.3 + 0.01 * xy[:, 0], 50 + xy[:, 1], rng.normal(-30, 3, n)])
    return KitMap.build(xy, lat, [f"kick_{i:02d}" for i in range(n)], "tsne", desc)


def tampered(src, dst, *, bandwidth=None, scale=None):
    """dst: src with its map's bandwidth set, or its latents multiplied by scale (the map's sha256 made to match, as
    an attacker would)."""
    meta, _ = read_header(src)
    tensors = st_load(src.read_bytes())
    m = json.loads(meta["kitmap"])
    if bandwidth is not None:
        m["bandwidth"] = bandwidth
    if scale is not None:
        tensors["kitmap.latents"] = tensors["kitmap.latents"] * scale
        m["sha256"] = kitmap._digest(tensors["kitmap.points"].numpy(), tensors["kitmap.latents"].numpy())
    meta["kitmap"] = json.dumps(m)
    dst.write_bytes(st_save(tensors, metadata=meta))
    return dst


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = tmp_path_factory.mktemp("map_not_finite")
    plain = make_artifact(d / "plain.safetensors", seed=2, family="mel_vae")
    art = load_artifact(plain)
    art.kit_map = small_kit(art.config_of("vae").vae.latent_dim)
    models = models_folder(d / "models", plain)
    good = art.save(models / "mapped.safetensors")
    tampered(good, models / "narrow.safetensors", bandwidth=1e-300)
    tampered(good, models / "huge.safetensors", scale=np.float32(1e30))
    with start_daemon(d, models, model="mapped") as daemon:
        yield daemon


def ask(d, address, *args, expect=1, timeout=60.0):
    return d.send(address, *args, expect=expect, timeout=timeout)


@pytest.mark.parametrize("name, why", [("narrow", "bandwidth"), ("huge", "latents reach")])
def test_a_degenerate_map_never_makes_silence_or_nan(daemon, name, why):
    (address, args), = ask(daemon, "/kick/model", name, timeout=30)
    served = address == "/kick/model" and args[0] == name
    if served:  # the commit before: served, then silent files and nan
        time.sleep(0.5)
    made = ask(daemon, "/kick/near", 0.3, 0.7, "count", 2, expect=2)
    silent = [a[1] for ad, a in made if ad == "/kick/done" and not np.abs(sf.read(a[1])[0]).max() > 0]
    assert not silent, f"{name}: /kick/near wrote {len(silent)} silent file(s)"
    done = [a[1] for ad, a in made if ad == "/kick/done"]
    if done:
        ((laddr, largs),) = ask(daemon, "/kick/locate", done[0])
        assert laddr != "/kick/locate" or all(math.isfinite(v) for v in largs[:2]), largs
    assert not served, f"{name}: a map with a degenerate {why} was served"
    assert address == "/kick/error" and "kit map" in args[1] and why in args[1], args
    ((_, status),) = ask(daemon, "/kick/status")
    assert status[0] == "mapped"  # still serving what it served


def test_a_kick_the_model_makes_non_finite_is_an_error_reply_not_silence(tmp_path):
    """The core every mode ends in keeps a non-finite kick NaN (finish_kick made it silence), the other kicks of
    the batch as they were; the daemon's writer refuses that kick with the reason."""
    from kickmodel.wavfile import KickInfo
    from kickserver.writer import KickWriter, WriteError

    path = make_artifact(tmp_path / "m.safetensors", seed=1, family="mel_vae")
    gen = load_generator(path)
    items = [Item(seed=1), Item(seed=2)]
    ok = gen.generate(items, gen.settings())
    raw = gen._sample(items, gen.settings(), lambda info: None)
    raw[1, 100] = np.nan
    out = gen._finish(raw, None)
    assert np.isnan(out[1]).all(), "a NaN kick came out finite (silence)"
    np.testing.assert_array_equal(out[0], ok[0])
    w = KickWriter(tmp_path / "out", gen.sample_rate)
    with pytest.raises(WriteError, match="not finite"):
        w.write(out[1], KickInfo(model="m", seed=2, steps=None, sampler=None, controls={}))
    assert not list((tmp_path / "out").glob("*.wav"))
