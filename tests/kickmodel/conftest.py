"""Fixtures of the runtime's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

BUNDLED = Path(__file__).resolve().parents[2] / "kickserver" / "models" / "default.safetensors"


@pytest.fixture(scope="module")
def generators(tmp_path_factory):
    """{family: a generator of make_tiny_artifact's random model of it, for every registered family; "bundled": the
    bundled model}, on the CPU (a module's own: a test may set what a generator lets it)."""
    from daemon_util import make_artifact

    from kickmodel.families import family_names
    from kickmodel.loading import load_generator

    d = tmp_path_factory.mktemp("gens")
    gens = {f: load_generator(make_artifact(d / f"{f}.safetensors", family=f), "cpu") for f in family_names()}
    gens["bundled"] = load_generator(BUNDLED, "cpu")
    return gens
