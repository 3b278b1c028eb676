"""`/kick/locate` snapped to kit points (21 of 48 generated kicks within 0.001 of a kit kick's
point; six kicks asked at (0.3, 0.7) located to one kit kick's point; `/kick/near` then `/kick/locate` on a 3x3 grid:
median 0.034 from the point asked, worst 0.146). Targets: that round trip median <= 0.02, worst <= 0.05, and
generated kicks no nearer kit points than unseen real kicks (the starter kit's held-out kicks) land. Through a daemon
serving the shipped kick-synth model, whose map is the starter kit's 81 training kicks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from daemon_util import REPO, models_folder, start_daemon

from kickmodel.kitmap import clean_name
from kickmodel.loading import load_artifact
from kickmodel.wavfile import encode_wav

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
    return [path for path, _ in made_with_seeds(d, *args, count=count)]


def made_with_seeds(d, *args, count=1) -> list[tuple[str, int]]:
    replies = d.send(*args, expect=count, timeout=120)
    assert [a for a, _ in replies] == ["/kick/done"] * count, replies
    return [(r[1][1], r[1][2]) for r in replies]


def locate(d, path: str) -> tuple[float, float]:
    ((address, args),) = d.send("/kick/locate", path, timeout=60)
    assert address == "/kick/locate" and all(math.isfinite(v) for v in args[:2]), args
    return args[0], args[1]


def to_kit(km, xy) -> float:
    return float(np.sqrt(((km.points.astype(np.float64) - np.asarray(xy)) ** 2).sum(1)).min())


def resaved(src: str, dest: Path, *, comment: str | None = None, gain: float = 1.0, audio=None) -> str:
    """src's samples (or audio) times gain as a 24-bit WAV at dest, tagged with comment only (none: no tags), the
    way a DAW's bounce or an editor's save would hand a kick back."""
    a, rate = sf.read(src, dtype="float32")
    a = (a if audio is None else audio) * gain
    dest.write_bytes(encode_wav(a, rate, {"comment": comment} if comment else None))
    return str(dest)


def test_near_then_locate_comes_back_to_the_point(daemon):
    """A kick asked at a point with no spread is located at that point (3x3 grid, three seeds each): the file's tags
    say how it was made, the daemon makes it again, finds the file is that kick, and places its own latent."""
    d, _ = daemon
    trip = []
    for x in GRID:
        for y in GRID:
            for path in made(d, "/kick/near", x, y, "spread", 0.0, "count", 3, count=3):
                lx, ly = locate(d, path)
                trip.append(math.hypot(lx - x, ly - y))
    print(f"round trip: median {np.median(trip):.6f}, worst {max(trip):.6f}")
    assert np.median(trip) <= 0.02 and max(trip) <= 0.05, (np.median(trip), max(trip))


def test_a_spread_kick_is_located_where_its_own_latent_lies(daemon):
    """With the default spread (0.2) a kick's latent is its point's plus seeded noise, which moves it on the map (that
    is what spread means: median 0.014 of the map, 4.6 % of kicks beyond 0.05, for 1,800 latents of this map,
    `python bench/studies/map_spread.py`): each kick is located exactly where the latent it was made from lies."""
    d, km = daemon
    got, want = [], []
    for x, y in ((0.2, 0.8), (0.5, 0.5), (0.8, 0.2)):
        for path, seed in made_with_seeds(d, "/kick/near", x, y, "count", 3, count=3):
            got.append(locate(d, path))
            want.append(km.locate(km.near(x, y, 0.2, seed)))
    assert np.abs(np.asarray(got) - np.asarray(want)).max() <= 1e-6, (got, want)


def test_tags_that_do_not_match_the_sound_are_not_believed(daemon):
    """The tags are a claim: a kick made at (0.8, 0.8) handed back under the tags of one made at (0.2, 0.2) is located
    by its sound, far from (0.2, 0.2); a kick 0.1 dB quieter than its tags' kick is located by its sound too (so not
    exactly at its latent's place)."""
    d, km = daemon
    ((near_a, seed_a),) = made_with_seeds(d, "/kick/near", 0.2, 0.2, "spread", 0.0, count=1)
    ((far_b, _),) = made_with_seeds(d, "/kick/near", 0.8, 0.8, "spread", 0.0, count=1)
    with sf.SoundFile(near_a) as f:
        tags = f.comment
    assert "map_x=0.2" in tags and f"seed={seed_a}" in tags, tags
    forged = resaved(near_a, Path(d.out_dir) / "forged.wav", comment=tags, audio=sf.read(far_b, dtype="float32")[0])
    fx, fy = locate(d, forged)
    assert math.hypot(fx - 0.2, fy - 0.2) > 0.2, (fx, fy)
    quieter = resaved(near_a, Path(d.out_dir) / "quieter.wav", comment=tags, gain=10 ** (-0.1 / 20))
    assert locate(d, quieter) != locate(d, near_a) == pytest.approx((0.2, 0.2), abs=1e-4)


@pytest.mark.slow  # 27 kick-synth fits (a locate each): 46 s on the dev box
@pytest.mark.xfail(strict=True, reason="not met by the sound alone: a kick-synth kick decoded from a latent and "
                   "fitted again lands 2-6 kit standard deviations (norm) from that latent, as far as kit kicks lie "
                   "apart (many numbers sound alike). Measured at spread 0.2: median 0.081 worst 0.306, then 0.071 and "
                   "0.402; at spread 0 with the amortised inverse's guess: 0.035 and 0.098")
def test_near_then_locate_by_sound_alone_comes_back_to_the_point(daemon):
    """The round trip of the first test with the tags taken off (a DAW's bounce): located by fitting the sound."""
    d, _ = daemon
    trip = []
    for x in GRID:
        for y in GRID:
            for i, path in enumerate(made(d, "/kick/near", x, y, "spread", 0.0, "count", 3, count=3)):
                lx, ly = locate(d, resaved(path, Path(d.out_dir) / f"bounce_{x}_{y}_{i}.wav"))
                trip.append(math.hypot(lx - x, ly - y))
    print(f"round trip by sound: median {np.median(trip):.4f}, worst {max(trip):.4f}")
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
