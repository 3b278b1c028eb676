"""The map you play, daemon side: `/kick/map`, `/kick/near` and `/kick/locate` through a running daemon,
and `/kick/controls`' last word (`map` / `no-map`).

Two daemons: a tiny mel-VAE with a made-up map of 200 kicks with long names (the map needs several datagrams; renders
in a blink), and the bundled model with the map of the starter kit built here through kickmodel.kitmap and trainer's
own layout and map.csv writer (as `kicktrain map` does), so nothing depends on whether the bundled artifact ships a
map yet. What a kick from a point sounds like is measured on the evaluation embedding (mfcc-stats standardised by the
kit's statistics, as `kicktrain eval` standardises by the real clips')."""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from daemon_util import REPO, build_message, make_artifact, models_folder, parse_replies, start_daemon

from kickmodel.kitmap import MAX_NAME, KitMap, normalise_points
from kickmodel.loading import load_artifact

MAP, AXES, NEAR, LOCATE = "/kick/map", "/kick/map/axes", "/kick/near", "/kick/locate"
KIT = REPO / "kickserver" / "data" / "kicks"
BUNDLED = REPO / "kickserver" / "models" / "default.safetensors"
N_TINY = 200
DATAGRAM = 4096  # what Max's [udpreceive] and Pd's [netreceive] take


def long_name(i: int) -> str:
    return f"kick {i:03d} " + "long-boomy-808-with-a-click_" * 3  # cut to MAX_NAME by the map


def tiny_kit(dim: int, n: int = N_TINY) -> KitMap:
    """A map whose x follows decay and whose y runs against pitch (click is noise), as t-SNE's layouts do."""
    rng = np.random.default_rng(3)
    xy = rng.uniform(-30, 30, size=(n, 2))
    lat = xy @ rng.normal(size=(2, dim)) / 10 + 0.05 * rng.normal(size=(n, dim))
    desc = np.column_stack([0.3 + 0.01 * xy[:, 0] + 0.01 * rng.normal(size=n), 60 - 0.5 * xy[:, 1],
                            rng.normal(-30, 3, n)])
    return KitMap.build(xy, lat, [long_name(i) for i in range(n)], "tsne", desc)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(daemon serving `mapped`, a tiny mel-VAE with a map of 200 kicks; the map; `plain`, the same without one)."""
    d = tmp_path_factory.mktemp("kitmap_osc")
    plain = make_artifact(d / "plain.safetensors", seed=2, family="mel_vae")
    art = load_artifact(plain)
    art.kit_map = tiny_kit(art.config_of("vae").vae.latent_dim)
    models = models_folder(d / "models", plain)
    art.save(models / "mapped.safetensors")
    with start_daemon(d, models, model="mapped") as daemon:
        yield daemon, load_artifact(models / "mapped.safetensors").kit_map


def ask_map(d, timeout: float = 10.0) -> list[bytes]:
    """The raw datagrams /kick/map draws, up to and including /kick/map/axes (or an error)."""
    out: list[bytes] = []
    with d.socket() as s:
        s.sendto(build_message(MAP, []), (d.host, d.port))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data, _ = s.recvfrom(65536)
            except TimeoutError:
                break
            out.append(data)
            if parse_replies(data)[0][0] in (AXES, "/kick/error"):
                break
    return out


def read_map(datagrams: list[bytes]) -> tuple[list[tuple[float, float, str]], list[str], int]:
    """(points in order, the axes' labels, parts) from /kick/map's datagrams, every framing rule checked."""
    points: list[tuple[float, float, str]] = []
    parts = None
    *maps, axes = datagrams
    for i, data in enumerate(maps, start=1):
        assert len(data) < DATAGRAM, len(data)
        ((address, args),) = parse_replies(data)
        assert address == MAP and args[:2] == [i, len(maps)], args[:2]
        parts = args[1]
        body = args[2:]
        assert body and len(body) % 3 == 0
        for x, y, name in zip(body[0::3], body[1::3], body[2::3], strict=True):
            assert isinstance(x, float) and isinstance(y, float) and isinstance(name, str)
            points.append((x, y, name))
    ((address, labels),) = parse_replies(axes)
    assert address == AXES and len(labels) == 2 and all(isinstance(v, str) for v in labels), (address, labels)
    return points, labels, parts


def replies_of(d, address, *args, expect=1, timeout=60.0):
    return d.send(address, *args, expect=expect, timeout=timeout)


def dones(d, address, *args, expect=1, timeout=120.0) -> list[list]:
    replies = d.send(address, *args, expect=expect, timeout=timeout)
    assert [a for a, _ in replies] == ["/kick/done"] * expect, (replies, d.stderr_text()[-3000:])
    return [p for _, p in replies]


def made(d) -> tuple[int, int]:
    """(kicks queued, kicks generated) by /kick/status."""
    ((address, args),) = d.send("/kick/status", expect=1, timeout=10)
    assert address == "/kick/status", args
    return args[2], args[3]


def settled(d, timeout: float = 30.0) -> tuple[int, int]:
    """made(d) once nothing is queued: the writer answers a batch's kicks before it saves the ledger and prunes, and
    counts them as queued until then, so right after the last reply the queue may still hold them (a refusal's
    "nothing was queued" check read that as the refusal's doing under load)."""
    deadline = time.monotonic() + timeout
    while True:
        now = made(d)
        if now[0] == 0 or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def refused(d, address, *args, timeout=10.0) -> tuple[int, str]:
    """(id, reason) of the one /kick/error the request gets, refused before it was queued: nothing was queued or made
    for it, and the model never saw it (the worker logs each request the model refuses)."""
    before, seen = settled(d), d.stderr_text().count("refused by the model")
    assert before[0] == 0, f"{before[0]} kicks still queued from earlier requests"
    replies = d.send(address, *args, expect=1, timeout=timeout)
    assert len(replies) == 1 and replies[0][0] == "/kick/error", replies
    assert made(d) == (0, before[1]) and d.stderr_text().count("refused by the model") == seen
    return replies[0][1][0], replies[0][1][1]


def wavs(folder: Path) -> set[str]:
    return {p.name for p in Path(folder).glob("*")} if Path(folder).is_dir() else set()


# ---------------------------------------------------------------- /kick/map


def test_the_map_comes_back_exactly_in_datagrams_under_4096_bytes(tiny):
    d, km = tiny
    datagrams = ask_map(d)
    points, labels, parts = read_map(datagrams)
    assert parts > 1 and len(datagrams) == parts + 1  # 200 long names: several datagrams, then the axes
    assert all(len(g) < DATAGRAM for g in datagrams)
    assert [n for _, _, n in points] == list(km.names) and all(len(n) == MAX_NAME for n in km.names)
    xy = np.array([(x, y) for x, y, _ in points], dtype=np.float32)
    np.testing.assert_array_equal(xy, km.points)  # float32 both ways: exact
    assert labels == ["longer decay ->", "lower pitch ->"]  # x follows decay, y runs against pitch (tiny_kit)


def test_the_map_is_paid_for_whole_by_the_reply_budget(tmp_path, tiny):
    """The map's datagrams are charged together: with a burst that holds the map once, it arrives whole (every part),
    and asked again at once it gets one /kick/error saying when to ask again; with a burst under the map's size, one
    /kick/error naming the size and the setting. Never a part of a map."""
    from kickserver import osc_api

    km = tiny[1]
    size = sum(map(len, osc_api.kit_map(km.points, km.names))) + len(osc_api.map_axes(km.axes, km.n))
    total_kb = 2 * size / 1024  # sent to the source port and to the reply port
    models = models_folder(tmp_path / "models", tiny[0].models_dir / "mapped.safetensors")
    for burst in (total_kb + 1, total_kb - 1):
        args = ["--reply-burst-kb", f"{burst:.3f}", "--reply-rate-kb", "0.1"]
        with start_daemon(tmp_path, models, extra_args=args) as d:
            datagrams = ask_map(d, timeout=5)
            if burst > total_kb:
                points, _, _ = read_map(datagrams)
                assert [n for _, _, n in points] == list(km.names)
                datagrams = ask_map(d, timeout=3)
            ((address, (named, why)),) = [r for g in datagrams for r in parse_replies(g)]
            assert address == "/kick/error" and named == -1 and why.startswith("the kit map is"), why
            fix = ("ask again in" if burst > total_kb
                   else f"raise reply_burst_kb in the config to at least {math.ceil(total_kb)}")
            assert fix in why, why


def test_controls_end_with_the_map_word(tiny):
    d, _ = tiny
    assert replies_of(d, "/kick/controls") == [("/kick/controls", ["decay", "pitch", "click", "map"])]


# ---------------------------------------------------------------- /kick/near


def test_near_makes_count_kicks_tagged_with_the_point_and_the_same_seed_makes_the_same_bytes(tiny):
    d, _ = tiny
    first = dones(d, NEAR, 0.25, 0.75, "count", 2, "seed", 5, "spread", 0.3, "id", 7, expect=2)
    assert [(r[0], r[2]) for r in first] == [(7, 5), (7, 6)]  # the seed /kick/near x y seed S makes again
    names = [Path(r[1]).name for r in first]
    assert all(n.startswith("kick_") for n in names) and [n.split("_")[-1] for n in names] == ["m5.wav", "m6.wav"]
    with sf.SoundFile(first[0][1]) as f:
        tags = f.comment.split()
    assert {"model=mapped", "seed=5", "map_x=0.25", "map_y=0.75", "spread=0.3"} <= set(tags), tags
    assert not any(t.startswith(("decay=", "steps=", "source=")) for t in tags), tags
    # the same seed again, alone and with the dials a client sends (ignored: the map's latent is decoded as it is)
    (again,) = dones(d, NEAR, 0.25, 0.75, "seed", 5, "spread", 0.3, "decay", 0.9, "pitch", 0.1)
    a, b = (sf.read(p[1], dtype="int32")[0] for p in (first[0], again))
    assert a.shape == b.shape and np.array_equal(a, b)
    (other,) = dones(d, NEAR, 0.25, 0.75, "seed", 6, "spread", 0.0)
    c = sf.read(other[1], dtype="int32")[0]
    (other2,) = dones(d, NEAR, 0.25, 0.75, "seed", 9, "spread", 0.0)
    assert np.array_equal(c, sf.read(other2[1], dtype="int32")[0])  # spread 0: the point itself, every seed alike
    assert not np.array_equal(a, c)
    (free,) = dones(d, NEAR, 0.5, 0.5)  # no seed: the server picks one, and the reply says which
    assert free[0] < -1 and 0 <= free[2] < 2**24 and Path(free[1]).name.endswith(f"_m{free[2]}.wav")
    with sf.SoundFile(free[1]) as f:
        assert "spread=0.2" in f.comment.split()  # the default spread


@pytest.mark.parametrize("args, reason", [
    ([1.5, 0.5], "x must be within 0..1, got 1.5"),
    ([0.5, -0.1], "y must be within 0..1, got -0.1"),
    ([float("nan"), 0.5], "x must be a finite number"),
    ([0.5, float("inf")], "y must be a finite number"),
    (["count", 2], "/kick/near needs x and y"),
    ([0.5], "/kick/near needs x and y"),
    ([0.5, "a"], "y must be a number"),
    ([0.5, 0.5, "spread", 1.5], "spread must be within 0..1, got 1.5"),
    ([0.5, 0.5, "spread", float("nan")], "spread must be a finite number"),
    ([0.5, 0.5, "count", 0], "count must be within 1..16, got 0"),
    ([0.5, 0.5, "count", 17], "count must be within 1..16, got 17"),
    ([0.5, 0.5, "colour", 3], "unknown key 'colour'; this request takes id, count, spread, seed"),
    ([0.5, 0.5, "seed", -1], "seed must be within 0..2147483647"),
    ([0.5, 0.5, "decay", 1.5], "decay must be within 0..1"),
    ([0.5, 0.5, "strength", 0.5], "unknown key 'strength'"),
    ([0.5, 0.5, "count"], "odd number"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_near_refuses_bad_input_clearly_and_makes_nothing(tiny, args, reason):
    d, _ = tiny
    settled(d)  # the last test's batch written whole, its ledger saved: no temp file comes or goes meanwhile
    before = wavs(d.out_dir)
    named, why = refused(d, NEAR, *args, "id", 9) if len(args) % 2 == 0 else refused(d, NEAR, *args)
    assert reason in why, why
    assert named == (9 if len(args) % 2 == 0 else -1)
    assert wavs(d.out_dir) == before and d.alive()


@pytest.mark.parametrize("args, reason", [
    ([], "/kick/locate needs a source"),
    ([3], "source must be a string"),
    (["a.wav", "b.wav"], "/kick/locate takes one argument"),
    (["nothere.wav"], "nothere.wav"),
    (["/etc/passwd"], "under a read root"),
    (["../x.wav"], "bare file name"),
    ([""], "source is empty"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_locate_refuses_a_missing_or_forbidden_source_clearly(tiny, args, reason):
    d, _ = tiny
    named, why = refused(d, LOCATE, *args)
    assert named == -1 and reason in why, why
    assert d.alive()


def test_locate_places_a_kick_the_daemon_made(tiny):
    d, km = tiny
    i = 17
    x, y = (float(v) for v in km.points[i])
    (done,) = dones(d, NEAR, x, y, "spread", 0.0, "seed", 1)
    ((address, args),) = replies_of(d, LOCATE, Path(done[1]).name)
    assert address == LOCATE and args[2] == Path(done[1]).name, args
    assert all(isinstance(v, float) and 0 <= v <= 1 for v in args[:2])


def test_a_model_without_a_map_says_so_everywhere(tiny):
    d, _ = tiny
    settled(d)
    before = wavs(d.out_dir)
    try:
        assert replies_of(d, "/kick/model", "plain") == [("/kick/model", ["plain"])]
        assert replies_of(d, "/kick/controls") == [("/kick/controls", ["decay", "pitch", "click", "no-map"])]
        ((address, (named, why)),) = replies_of(d, MAP)
        assert address == "/kick/error" and named == -1
        assert "model plain stores no kit map" in why and "kicktrain map" in why, why
        assert refused(d, NEAR, 0.5, 0.5, "id", 4) == (4, why)
        assert refused(d, LOCATE, "x.wav") == (-1, why)
        assert wavs(d.out_dir) == before
    finally:
        assert replies_of(d, "/kick/model", "mapped") == [("/kick/model", ["mapped"])]
    assert replies_of(d, "/kick/controls")[0][1][-1] == "map"


# ---------------------------------------------------------------- the bundled model on the starter kit


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """The bundled model with the map of the starter kit, made as `kicktrain map` makes it (trainer.latent_map's
    layout, map.csv by its writer, KitMap.build on the same columns), served with the kit's folder as a read root.
    Yields (daemon, the map, map.csv's rows, the kit's clips by name, the model's sample rate and clip settings)."""
    import torch

    from kickmodel.descriptors import measure
    from kickmodel.loading import load_generator
    from trainer.evaluation.sets import load_folder
    from trainer.latent_map import kick_name, layout, write_csv

    d = tmp_path_factory.mktemp("kitmap_bundled")
    gen = load_generator(BUNDLED)
    clips, sources, _, _ = load_folder([str(KIT)], gen.config.data, lambda m: None)
    latents = np.concatenate([gen.encode(clips[i:i + 32]) for i in range(0, len(clips), 32)])
    desc = measure(torch.from_numpy(clips), gen.sample_rate).numpy()
    tsne, pca = layout(latents, seed=0, log=lambda m: None)
    csv_path = write_csv(d / "map.csv", sources, tsne, pca, desc)
    art = load_artifact(BUNDLED)
    art.kit_map = KitMap.build(tsne, latents, [kick_name(s) for s in sources], "tsne", desc)
    models = d / "models"
    models.mkdir()
    art.save(models / "starter.safetensors")
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_name = {kick_name(s): c for s, c in zip(sources, clips, strict=True)}
    with start_daemon(d, models, model="starter", extra_args=["--read-root", str(KIT)]) as daemon:
        yield daemon, art.kit_map, rows, by_name, gen.config.data


def embed(clips: np.ndarray, rate: int) -> np.ndarray:
    from trainer.embeddings import get_embedding

    return get_embedding("mfcc-stats")(np.asarray(clips, dtype=np.float32), rate)


def test_the_map_is_kicktrain_maps_csv_under_the_documented_affine_map(kit):
    d, km, rows, _, _ = kit
    points, labels, parts = read_map(ask_map(d))
    assert [n for _, _, n in points] == [r["name"] for r in rows]
    layout_xy = np.array([[float(r["tsne_x"]), float(r["tsne_y"])] for r in rows])
    want, _, _ = normalise_points(layout_xy)  # (csv - centre) / scale + 0.5, the aspect ratio kept
    got = np.array([(x, y) for x, y, _ in points])
    np.testing.assert_allclose(got, want, atol=2e-5)  # the CSV holds 6 significant digits
    assert got[:, 0].min() == 0.0 or got[:, 1].min() == 0.0  # the longer axis spans 0..1
    for label in labels:
        assert label == "mixed" or label.endswith(" ->"), labels


def _nearness(d, km, by_name, cfg, picked, spreads, seeds):
    """({spread: [[distance of each seed's kick to the picked kick] per picked kick]}, the median distance of the
    other kit kicks to each picked kick, and whether each spread-0 kick is nearer its kit kick than the median of its
    distances to the other kit kicks), on the embedding standardised by the kit's statistics."""
    from kickmodel.clips import load_clip
    from trainer.evaluation.distances import standardiser

    names = list(km.names)
    raw = embed(np.stack([by_name[n] for n in names]), cfg.sample_rate)
    mu, sd = standardiser(raw)
    ek = (raw - mu) / sd
    out, medians, own = {s: [] for s in spreads}, [], []
    for i in picked:
        x, y = (float(v) for v in km.points[i])
        medians.append(float(np.median(np.delete(np.linalg.norm(ek - ek[i], axis=1), i))))
        for s in spreads:
            n = 1 if s == 0 else seeds
            files = [r[1] for r in dones(d, NEAR, x, y, "spread", s, "seed", 11, "count", n, expect=n)]
            made = np.stack([load_clip(Path(f), cfg)[0] for f in files])
            e = (embed(made, cfg.sample_rate) - mu) / sd
            out[s].append(list(np.linalg.norm(e - ek[i], axis=1)))
            if s == 0:
                to_kit = np.linalg.norm(ek - e[0], axis=1)
                own.append(bool(to_kit[i] < np.median(np.delete(to_kit, i))))
    return out, medians, own


def test_a_kick_asked_at_a_kit_kicks_point_is_nearer_it_than_the_median_kit_kick(kit):
    """Spread 0 at five kit kicks' points: each kick is nearer its kit kick than the median kit kick is, and nearer
    its kit kick than the median other kit kick (which a kit-average kick, near every kick, would fail)."""
    d, km, _, by_name, cfg = kit
    picked = [int(i) for i in np.linspace(0, km.n - 1, 5).round()]
    dist, medians, own = _nearness(d, km, by_name, cfg, picked, (0.0,), 1)
    near = [dk[0] < m for dk, m in zip(dist[0.0], medians, strict=True)]
    print(f"nearer than the median kit kick: {sum(near)} of {len(near)}; nearer its own than the median other: "
          f"{sum(own)} of {len(own)}; distances {[round(float(dk[0]), 2) for dk in dist[0.0]]}, medians "
          f"{[round(m, 2) for m in medians]}")
    assert all(near) and all(own), (dist, medians, own)


def test_spread_widens_the_kicks_around_a_point(kit):
    """Spread 0, 0.25, 0.5, 1 at four kit kicks' points, 4 seeds each: the mean distance to the point's kick grows
    with the spread."""
    d, km, _, by_name, cfg = kit
    picked = [int(i) for i in np.linspace(0, km.n - 1, 4).round()]
    spreads = (0.0, 0.25, 0.5, 1.0)
    dist, _, _ = _nearness(d, km, by_name, cfg, picked, spreads, 4)
    curve = [float(np.mean([np.mean(v) for v in dist[s]])) for s in spreads]
    print(f"mean distance to the point's kick by spread {dict(zip(spreads, (round(c, 2) for c in curve)))}")
    assert all(a < b for a, b in zip(curve, curve[1:])), curve


def test_locate_puts_a_kit_kicks_own_file_near_its_point(kit):
    d, km, rows, _, _ = kit
    paths = {r["name"]: r["path"] for r in rows}
    far = []
    for i in (3, 40, 77):
        path = str(Path(paths[km.names[i]]).resolve())
        ((address, args),) = replies_of(d, LOCATE, path)
        assert address == LOCATE and args[2] == path, args
        far.append(math.hypot(args[0] - float(km.points[i][0]), args[1] - float(km.points[i][1])))
    print(f"located kit kicks from their points: {[round(f, 4) for f in far]}")
    assert max(far) < 0.02, far
