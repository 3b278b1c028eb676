"""`/kick/locate` snapped to kit points (21 of 48 generated kicks within 0.001 of a kit kick's
point; six kicks asked at (0.3, 0.7) located to one kit kick's point; `/kick/near` then `/kick/locate` on a 3x3 grid:
median 0.034 from the point asked, worst 0.146). Targets: that round trip median <= 0.02, worst <= 0.05, and
generated kicks no nearer kit points than unseen real kicks (the starter kit's held-out kicks) land. Through a daemon
serving the shipped kick-synth model, whose map is the starter kit's 81 training kicks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from daemon_util import REPO, models_folder, start_daemon

from kickmodel.kitmap import clean_name
from kickmodel.loading import load_artifact

SYNTH = REPO / "kickserver" / "models" / "kick-synth.safetensors"
KIT = REPO / "kickserver" / "data" / "kicks"
GRID = (0.2, 0.5, 0.8)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = tmp_path_factory.mktemp("locate_snap")
    with start_daemon(d, models_folder(d / "models", SYNTH), model="kick-synth",
                      extra_args=["--read-root", str(KIT)]) as daemon:
        yield daemon, load_artifact(SYNTH).kit_map


def made(d, *args, count=1) -> list[str]:
    replies = d.send(*args, expect=count, timeout=120)
    assert [a for a, _ in replies] == ["/kick/done"] * count, replies
    return [r[1][1] for r in replies]


def locate(d, path: str) -> tuple[float, float]:
    ((address, args),) = d.send("/kick/locate", path, timeout=60)
    assert address == "/kick/locate" and all(math.isfinite(v) for v in args[:2]), args
    return args[0], args[1]


def to_kit(km, xy) -> float:
    return float(np.sqrt(((km.points.astype(np.float64) - np.asarray(xy)) ** 2).sum(1)).min())


@pytest.mark.slow  # 27 kick-synth fits (a locate each): 46 s on the dev box
@pytest.mark.xfail(strict=True, reason="not met yet: the round trip's error is the codec's, not locate's -- a "
                   "kick-synth kick decoded from a latent and fitted again lands 2-6 kit standard deviations (norm) "
                   "from that latent, as far as kit kicks lie apart; locate(latent) itself comes back within 2e-5 "
                   "(tests/kickmodel/test_kitmap.py). Measured: median 0.081 worst 0.306 before, 0.071 and 0.402 now")
def test_near_then_locate_comes_back_to_the_point(daemon):
    d, _ = daemon
    trip = []
    for x in GRID:
        for y in GRID:
            for path in made(d, "/kick/near", x, y, "count", 3, count=3):
                lx, ly = locate(d, path)
                trip.append(math.hypot(lx - x, ly - y))
    print(f"round trip: median {np.median(trip):.4f}, worst {max(trip):.4f}")
    assert np.median(trip) <= 0.02 and max(trip) <= 0.05, (np.median(trip), max(trip))


def test_kicks_from_one_point_locate_apart_and_not_on_a_kit_kick(daemon):
    d, km = daemon
    pts = [locate(d, p) for p in made(d, "/kick/near", 0.3, 0.7, "count", 6, count=6)]
    assert len({(round(x, 4), round(y, 4)) for x, y in pts}) == 6, pts


@pytest.mark.slow  # 48 fresh and 20 real kicks located, each a kick-synth fit: 126 s on the dev box
def test_generated_kicks_land_no_nearer_kit_points_than_unseen_real_kicks(daemon):
    d, km = daemon
    fresh = [to_kit(km, locate(d, p)) for p in made(d, "/kick/generate", 16, "seed", 100, count=16)]
    fresh += [to_kit(km, locate(d, p)) for p in made(d, "/kick/generate", 16, "seed", 200, count=16)]
    fresh += [to_kit(km, locate(d, p)) for p in made(d, "/kick/generate", 16, "seed", 300, count=16)]
    names = set(km.names)
    held = [to_kit(km, locate(d, str(p))) for p in sorted(KIT.glob("*.flac")) if clean_name(p.stem) not in names]
    assert len(held) >= 10
    snapped = sum(v < 0.001 for v in fresh) / len(fresh)
    held_snapped = sum(v < 0.001 for v in held) / len(held)
    print(f"within 0.001 of a kit point: generated {snapped:.2f}, held-out real {held_snapped:.2f}; median distance "
          f"{np.median(fresh):.4f} and {np.median(held):.4f}")
    assert snapped <= held_snapped + 0.1, (snapped, held_snapped)
    assert np.median(fresh) >= 0.5 * np.median(held), (np.median(fresh), np.median(held))
