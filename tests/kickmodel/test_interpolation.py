"""Interpolation between two kicks through a model's noise or latent space (issue: dials and morphs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kickmodel.descriptors import measure
from kickmodel.generator import Endpoint, Item
from kickmodel.loading import load_generator

ROOT = Path(__file__).resolve().parents[2]
# the waveform-diffusion model bundled until 2026-12-04 (trained)
WAVEFORM = ROOT / "tests" / "fixtures" / "models" / "waveform-small-2026-12-03.safetensors"
BUNDLED = ROOT / "kickserver" / "models" / "default.safetensors"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from daemon_util import make_artifact

    d = tmp_path_factory.mktemp("interp")
    return {f: load_generator(make_artifact(d / f"{f}.safetensors", family=f), "cpu")
            for f in ("waveform_diffusion", "mel_vae", "latent_diffusion")}


@pytest.mark.parametrize("family", ["waveform_diffusion", "mel_vae", "latent_diffusion"])
def test_the_ends_of_a_morph_between_seeds_are_those_seeds_kicks(models, family):
    gen = models[family]
    steps = 3 if gen.samplers else None
    c = {"decay": 0.3}
    a = gen.generate([Item(seed=5, controls=c)], gen.settings(steps))
    b = gen.generate([Item(seed=9, controls=c)], gen.settings(steps))
    def at(t: float) -> np.ndarray:
        return gen.morph(Endpoint(seed=5), Endpoint(seed=9), [t], [Item(seed=0, controls=c)], gen.settings(steps))

    assert np.array_equal(at(0.0), a) and np.array_equal(at(1.0), b)  # bit for bit
    mid = at(0.5)
    assert not np.allclose(mid, a) and not np.allclose(mid, b)
    sweep = gen.morph(Endpoint(seed=5), Endpoint(seed=9), [0.0, 0.5, 1.0], [Item(seed=0, controls=c)] * 3,
                      gen.settings(steps))
    assert np.allclose(sweep[0], a[0], atol=1e-5) and np.allclose(sweep[2], b[0], atol=1e-5)


def test_a_file_endpoint_and_refusals(models):
    gen = models["waveform_diffusion"]
    src = gen.prepare_source(gen.generate([Item(seed=2)], gen.settings(3))[0], gen.sample_rate)
    out = gen.morph(Endpoint(source=src), Endpoint(seed=4), [0.0, 1.0], [Item(seed=0)] * 2, gen.settings(3))
    assert out.shape == (2, gen.length) and np.isfinite(out).all()
    with pytest.raises(ValueError, match="deterministic sampler"):
        gen.morph(Endpoint(seed=1), Endpoint(seed=2), [0.5], [Item(seed=0)], gen.settings(3, "ddpm"))
    with pytest.raises(ValueError, match="one t within 0..1 per kick"):
        gen.morph(Endpoint(seed=1), Endpoint(seed=2), [1.5], [Item(seed=0)], gen.settings(3))
    with pytest.raises(ValueError, match="a seed or a source clip"):
        Endpoint()


@pytest.mark.parametrize("model", [BUNDLED, WAVEFORM], ids=["bundled", "waveform"])
def test_descriptors_move_monotonically_on_average_along_a_sweep(model):
    """Trained models, pairs of seeds whose decay or pitch differ: the measured descriptor follows t."""
    from scipy.stats import spearmanr

    gen = load_generator(model, "cpu")
    ts = [0.0, 0.25, 0.5, 0.75, 1.0]
    seeds = list(range(20, 32))
    kicks = gen.generate([Item(seed=s) for s in seeds], gen.settings(6))
    ends = measure(torch.from_numpy(kicks), gen.sample_rate).numpy()
    rs = []
    for col in (0, 1):  # decay, pitch
        order = np.argsort(ends[:, col])
        for lo, hi in ((order[0], order[-1]), (order[1], order[-2])):  # the most different pairs
            sweep = gen.morph(Endpoint(seed=seeds[lo]), Endpoint(seed=seeds[hi]), ts, [Item(seed=0)] * len(ts),
                              gen.settings(6))
            d = measure(torch.from_numpy(sweep), gen.sample_rate).numpy()[:, col]
            rs.append(spearmanr(ts, d).statistic)
    assert np.mean(rs) > 0.6, rs
