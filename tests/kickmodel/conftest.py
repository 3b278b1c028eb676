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


@pytest.fixture
def fit_ticks(monkeypatch):
    """A counter ([n]) of the kicks the kick synth's fit takes the loss of (fit.distance, one per row), patched in for
    the test: a clock for fit.fit_seconds that advances by the descent's own work, not by the wall."""
    from kickmodel.families.kick_synth import fit as F

    ticks = [0]
    real = F.distance

    def counted(y, target):
        ticks[0] += y.shape[0]
        return real(y, target)

    monkeypatch.setattr(F, "distance", counted)
    return ticks
