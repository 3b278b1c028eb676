"""Every shipped model renders the same kicks, bit for bit, for the same seeds and controls, through every kind of
request, as the code they were recorded on did (a moved or refactored render path must not change a sample).

The figures are sha256 of the float32 kicks, recorded on one CPU kind (torch's kernels differ by instruction set,
so the same code gives other bits on another one: the test then says so and skips). Record again, after a change
that is meant to change the sound, with

    KICK_RECORD_GOLDEN=1 python -m pytest -q tests/kickmodel/test_render_golden.py

and say in the commit why the kicks changed."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "render_golden.json"
SHIPPED = sorted((REPO / "kickserver" / "models").glob("*.safetensors"))
RECORD = os.environ.get("KICK_RECORD_GOLDEN") == "1"


def _digest(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes()).hexdigest()


def _requests(gen):
    """(name, callable returning the rendered array) for every kind of request the model takes."""
    from kickmodel.generator import ENCODE, INTERPOLATION, VARIATION, Endpoint, Item

    steps = 4 if gen.samplers else None
    dials = {gen.controls[0]: 0.3, gen.controls[-1]: 0.8} if gen.controls else {}
    out = [
        ("fresh", lambda: gen.generate([Item(seed=5)], gen.settings(steps))),
        ("fresh-batch", lambda: gen.generate([Item(seed=s) for s in (7, 5, 11)], gen.settings(steps))),
        ("dials", lambda: gen.generate([Item(seed=5, controls=dials)], gen.settings(steps))),
        ("fresh-44k1", lambda: gen.generate([Item(seed=6)], gen.settings(steps), sample_rate=44100)),
    ]
    if gen.samplers:
        out.append(("sampler", lambda: gen.generate([Item(seed=5)], gen.settings(3, gen.samplers[-1]))))
    for unit in gen.unit_controls:
        _, lo, hi = gen.unit_range(unit)
        out.append((f"units-{unit}", lambda u=unit, v=lo + 0.37 * (hi - lo): gen.generate(
            [Item(seed=8, controls={u: v})], gen.settings(steps))))
    source = gen.prepare_source(gen.generate([Item(seed=2)], gen.settings(steps))[0], gen.sample_rate)
    if VARIATION in gen.capabilities:
        for strength in (0.0, 0.4):
            out.append((f"variation-{strength}", lambda s=strength: gen.vary(
                source, s, [Item(seed=s) for s in (40, 41)], gen.settings(steps))))
    if INTERPOLATION in gen.capabilities:
        sampler = gen.interpolation_samplers[0] if gen.samplers else None
        out.append(("morph-seeds", lambda: gen.morph(
            Endpoint(seed=5), Endpoint(seed=9), [0.0, 0.5, 1.0], [Item(seed=0)] * 3, gen.settings(steps, sampler))))
        out.append(("morph-source", lambda: gen.morph(
            Endpoint(source=source), Endpoint(seed=9), [0.25, 0.75], [Item(seed=0)] * 2,
            gen.settings(steps, sampler))))
    if ENCODE in gen.capabilities and gen.kit_map is not None:
        out.append(("near", lambda: gen.from_map(0.3, 0.7, 0.2, [Item(seed=s) for s in (3, 4)])))
        out.append(("locate", lambda: np.asarray(gen.locate(source), dtype=np.float32)))
    return out


def _render_all() -> dict:
    from kickmodel.loading import load_generator

    torch.manual_seed(0)
    got = {}
    for path in SHIPPED:
        gen = load_generator(path, "cpu")
        for name, fn in _requests(gen):
            got[f"{path.name}/{name}"] = _digest(fn())
    return got


@pytest.mark.skipif(RECORD, reason="recording")
def test_every_shipped_model_renders_as_recorded():
    golden = json.loads(GOLDEN.read_text())
    cap = torch.backends.cpu.get_cpu_capability()
    if golden["cpu_capability"] != cap:
        pytest.skip(f"recorded on a {golden['cpu_capability']} CPU, this one is {cap}: its kernels give other bits")
    got = _render_all()
    assert sorted(got) == sorted(golden["kicks"]), "the requests changed: record again and say why"
    differ = [k for k in got if got[k] != golden["kicks"][k]]
    assert not differ, f"renders changed: {differ}"


@pytest.mark.skipif(not RECORD, reason="KICK_RECORD_GOLDEN=1 records")
def test_record():
    GOLDEN.write_text(json.dumps({"cpu_capability": torch.backends.cpu.get_cpu_capability(),
                                  "torch": torch.__version__.split("+")[0], "kicks": _render_all()}, indent=1) + "\n")
