"""Through a running daemon, every shipped model: a kick is the same file, sample for sample, whether it was asked
for alone or came at any position of a batch of 2, 4 or 8, for /kick/generate, /kick/near, /kick/variation and
/kick/interpolate. The daemon renders a request's count as one batch (--max-batch 8), and the networks compute a
batch as a batch at one fixed shape (kickmodel.batching), so a kick's bits cannot depend on its neighbours; with
batch-dependent compute the bundled model's kicks differ by thousands of 24-bit steps (Griffin-Lim)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from daemon_util import start_daemon

from kickserver import osc_api

SHIPPED = Path(__file__).resolve().parents[2] / "kickserver" / "models"
STEPS = 2  # the denoisers' batch shape is what is tested; two steps keep the bundled model's kicks cheap


@pytest.fixture(scope="module", params=["default", "kick-synth"])
def daemon(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    models = tmp / "models"
    models.mkdir()
    shutil.copy2(SHIPPED / f"{request.param}.safetensors", models)
    with start_daemon(tmp, models, model=request.param, extra_args=["--max-batch", "8"]) as d:
        yield d


def kicks(d, address, *args, count: int) -> list[np.ndarray]:
    replies = d.send(address, *args, expect=count, timeout=300)
    assert [a for a, _ in replies] == [osc_api.DONE] * count, replies
    return [sf.read(p[1], dtype="int32")[0] for _, p in replies]


def same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.shape == b.shape and np.array_equal(a, b), f"{what}: differs by {np.abs(a - b).max() >> 8} LSB (24-bit)"


def test_a_generated_kick_is_the_same_file_alone_and_at_every_position(daemon):
    seed = 500
    (alone,) = kicks(daemon, "/kick/generate", 1, "seed", seed, "steps", STEPS, count=1)
    for n in (2, 4, 8):
        for at in range(n):
            got = kicks(daemon, "/kick/generate", n, "seed", seed - at, "steps", STEPS, count=n)
            same(got[at], alone, f"seed {seed} at {at} of {n}")


def test_a_kick_from_the_map_is_the_same_file_alone_and_in_a_batch(daemon):
    (alone,) = kicks(daemon, "/kick/near", 0.3, 0.7, "seed", 77, "spread", 0.3, count=1)
    for at in (0, 3, 7):
        got = kicks(daemon, "/kick/near", 0.3, 0.7, "count", 8, "seed", 77 - at, "spread", 0.3, count=8)
        same(got[at], alone, f"map seed 77 at {at} of 8")


def test_a_variation_is_the_same_file_alone_and_in_a_batch(daemon):
    (src,) = daemon.send("/kick/generate", 1, "seed", 3, "steps", STEPS, expect=1, timeout=300)
    name = Path(src[1][1]).name
    (alone,) = kicks(daemon, "/kick/variation", name, "strength", 0.4, "seed", 41, "steps", STEPS, count=1)
    for at in (0, 5):
        got = kicks(daemon, "/kick/variation", name, "strength", 0.4, "count", 8, "seed", 41 - at, "steps", STEPS,
                    count=8)
        same(got[at], alone, f"variation seed 41 at {at} of 8")


def test_a_morphs_kick_is_the_same_file_whatever_its_count(daemon):
    (alone,) = kicks(daemon, "/kick/interpolate", "a", 5, "b", 9, "t", 0.5, "steps", STEPS, count=1)
    for n in (3, 5, 9):
        got = kicks(daemon, "/kick/interpolate", "a", 5, "b", 9, "count", n, "steps", STEPS, count=n)
        same(got[n // 2], alone, f"t 0.5 at {n // 2} of {n}")
