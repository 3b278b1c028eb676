"""Every shipped model makes a kit (its generator's kit mode, gen.kit: the kick-synth model by its family's number
rules, the bundled model by kickmodel.kitrules' audio rules, the rules every family can honour) that rises over its
layers in peak and click (Spearman >= 0.9, click measured by kickmodel.descriptors), whose robins correlate under
0.99 with each other, yet lie nearer each other than the median pair of the starter kit's kicks on the evaluation
embedding (tests/kit_util.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from kit_util import kit_space as _kit_space
from kit_util import robin_spread, spearman

from kickmodel import kitrules
from kickmodel.descriptors import measure
from kickmodel.generator import Item
from kickmodel.loading import load_generator

SR = 44100
REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "kickserver" / "models").glob("*.safetensors"))


@pytest.fixture(scope="module")
def kit_space():
    return _kit_space()


def test_there_are_shipped_models():
    assert {p.stem for p in SHIPPED} >= {"default", "kick-synth"}


@pytest.mark.parametrize("model", SHIPPED, ids=lambda p: p.stem)
def test_a_kit_of_every_shipped_model(model, kit_space):
    embed, kit_median = kit_space
    gen = load_generator(model, "cpu")
    settings = gen.settings()
    for seed in (1,):
        x = gen.generate([Item(seed=seed)], settings, sample_rate=SR)[0]
        grid = gen.kit([Item(seed=seed)], 8, 4, settings, sample_rate=SR)
        if gen.kit_rules() == "numbers":  # the top layer's first robin is the kick asked for, played from its numbers
            assert np.array_equal(grid[-1][0], x)
        else:
            assert np.array_equal(grid[-1][0], kitrules.audio_layer(x, SR, 1.0, kitrules.beater(x, SR, 1.0, seed, 7,
                                                                                                  0)))
        firsts = [row[0] for row in grid]
        peak = [float(np.abs(k).max()) for k in firsts]
        click = measure(torch.from_numpy(np.stack(firsts)), SR)[:, 2].numpy()
        assert spearman(range(8), peak) >= 0.9 and spearman(range(8), click) >= 0.9, (model.stem, seed, peak, click)
        for row in grid:
            assert max(kitrules.correlation(a, b) for a, b in itertools.combinations(row, 2)) < 0.99
        robins = robin_spread(embed, grid[-1])
        assert robins < kit_median, (model.stem, seed, robins, kit_median)
