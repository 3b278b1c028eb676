"""The kick synth's amortised inverses (one per synth version: version 1's for the models trained before version 2,
version 2's for the shipped kick-synth model and every model trained today): their weights as shipped, what they
refuse, their guesses on the synth's own renders, the fits that start from them, and a daemon serving the shipped
kick-synth model locating a file from the guess."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from kickmodel.clips import prepare_audio
from kickmodel.config import DataConfig
from kickmodel.dsp import finish_kick
from kickmodel.families.kick_synth import fit as F
from kickmodel.families.kick_synth import inverse as inv
from kickmodel.families.kick_synth.synth import params_for, synth_for, to_params
from kickmodel.loading import load_generator

SR, LENGTH = 44100, 45056
REPO = inv.HERE.parents[2]
SYNTH_MODEL = REPO / "kickserver" / "models" / "kick-synth.safetensors"
KIT = REPO / "kickserver" / "data" / "kicks"
V1_NUMBERS = REPO / "tests" / "fixtures" / "synth_v1_kit_numbers.json"
N1 = len(params_for(1))
N2 = len(params_for(2))


@pytest.fixture(scope="module")
def net():
    n = inv.shipped(1)
    assert n is not None, "no inverse shipped for synth version 1 (the models trained before version 2)"
    return n


@pytest.fixture(scope="module")
def gen():
    return load_generator(SYNTH_MODEL, "cpu")


def kit_renders(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(version-1 numbers [n, N1], their kicks as a located file is: played, finished, prepared): the numbers drawn as
    /kick/near drew them around the kit map of the version-1 model shipped until 2026-12-06 (a point on the pad,
    spread 0.2), kept in tests/fixtures/synth_v1_kit_numbers.json (seeds 3: 6 kicks, 5: 2 kicks), so this file's
    version-1 tests render the kicks they rendered while that model shipped."""
    rows = json.loads(V1_NUMBERS.read_text())[f"seed{seed}"]
    u = torch.tensor(rows, dtype=torch.float32)
    with torch.no_grad():
        raw = synth_for(1, SR, LENGTH)(u).numpy()
    kicks = finish_kick(raw, SR)
    clips = [prepare_audio(k.astype(np.float32), SR, DataConfig(sample_rate=SR, length=LENGTH), highpass=False)[0]
             for k in kicks]
    return u, torch.from_numpy(np.stack(clips))


def renders(version: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(numbers [n, N], their kicks as a located file is: played, finished, prepared) for numbers each drawn within
    +-2 of the middle of its range (the unconstrained scale; a fit of the starter kit lies mostly within it), each
    kick with a noise draw of its own seed (version 2; version 1 plays one draw for every kick)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.empty(n, len(params_for(version))).uniform_(-2.0, 2.0, generator=g)
    with torch.no_grad():
        raw = synth_for(version, SR, LENGTH)(u, torch.arange(n) + 1000 * seed).numpy()
    kicks = finish_kick(raw, SR)
    clips = [prepare_audio(k.astype(np.float32), SR, DataConfig(sample_rate=SR, length=LENGTH), highpass=False)[0]
             for k in kicks]
    return u, torch.from_numpy(np.stack(clips))


def test_the_version_1_inverse_is_small_and_made_for_version_1s_synth(net, tmp_path):
    """inverse_v1 is read for synth version 1: a model trained before version 2 fits from its guess."""
    from tests.conftest import make_tiny_artifact

    path = inv.weights_path(1)
    assert path.stat().st_size < 2 << 20
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    assert meta["synth_version"] == "1"
    assert json.loads(meta["params"]) == [p.name for p in params_for(1)]
    assert net.n_params == N1
    assert net.guess(torch.zeros(2, 4096), 22050).shape == (2, N1)  # any rate and length
    from kickmodel.families import preset

    cfg = preset("tiny", "kick_synth").replace("synth", version=1)
    g = load_generator(make_tiny_artifact(tmp_path / "v1.safetensors", family="kick_synth", cfg=cfg), "cpu")
    assert g.synth_version == 1 and g.latent_dim == N1
    assert g.inverse is net and g.fit_options["guess"] == net.guess  # the served model fits from it


def test_a_file_for_another_version_numbers_or_shapes_is_refused(net, tmp_path):
    src = inv.weights_path(1)
    with safe_open(str(src), "pt") as f:
        meta, state = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    with pytest.raises(inv.InverseError, match="not 2"):  # version 1's weights read as version 2's
        inv.load(2, src)
    save_file(state, str(tmp_path / "v2.safetensors"), metadata=dict(meta, synth_version="2"))
    with pytest.raises(inv.InverseError, match="version"):
        inv.load(1, tmp_path / "v2.safetensors")
    other = dict(meta, params=json.dumps([p.name for p in params_for(1)][::-1]))
    save_file(state, str(tmp_path / "other.safetensors"), metadata=other)
    with pytest.raises(inv.InverseError, match="other numbers"):
        inv.load(1, tmp_path / "other.safetensors")
    cut = dict(state)
    cut["u_std"] = cut["u_std"][:-1].contiguous()
    save_file(cut, str(tmp_path / "cut.safetensors"), metadata=meta)
    with pytest.raises(inv.InverseError, match="shape"):
        inv.load(1, tmp_path / "cut.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(inv.InverseError):
        inv.load(1, tmp_path / "junk.safetensors")
    with pytest.raises(inv.InverseError):
        inv.load(1, tmp_path / "missing.safetensors")
    with pytest.raises(inv.InverseError, match="plays"):
        inv.load(7)


def test_a_refused_or_missing_inverse_leaves_the_served_fit_as_it_was(monkeypatch, tmp_path):
    """A weights file that does not match (or none) is not used: the model fits from its measured starts, and the
    daemon's price lines name the plain fit."""
    bad = tmp_path / "inverse_v1.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    monkeypatch.setattr(inv, "weights_path", lambda version: bad)
    monkeypatch.setattr(inv, "_CACHE", {})
    g = load_generator(SYNTH_MODEL, "cpu")
    assert g.inverse is None and "guess" not in g.fit_options
    assert g.fit_options == F.serve_options(g.fit_config, g.synth_version) and g.encoder_name == "a fit of the synth"
    monkeypatch.setattr(inv, "weights_path", lambda version: tmp_path / "none.safetensors")
    monkeypatch.setattr(inv, "_CACHE", {})
    assert inv.shipped(1) is None and inv.shipped(2) is None


def test_save_then_load_gives_the_same_guesses(net, tmp_path):
    path = tmp_path / "again.safetensors"
    inv.save(net, path, 1, {"note": "copy"})
    again = inv.load(1, path)
    x = torch.randn(2, LENGTH) * 0.1
    assert torch.allclose(again.guess(x, SR), net.guess(x, SR), atol=1e-5)
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError):
        inv.save(net, tmp_path / "v2.safetensors", 2)  # 34 numbers are not version 2's


def test_the_guess_sounds_nearer_its_kick_than_the_fits_measured_starts(net):
    """On version 1's own kicks around the kit, the guess alone is nearer each kick (fit.distance) than
    the best of the fit's measured starts, and nearer its numbers; with its frequency set from the pitch track
    (fit.pitch_tracked) within a semitone of the truth."""
    u, clips = kit_renders(seed=3)
    rate = SR // F.FIT_RATE_DIVISOR
    import torchaudio.functional as AF

    xf = AF.resample(clips, SR, rate)[:, :rate // 2]
    target = F.Target(xf, rate)
    synth = synth_for(1, rate, xf.shape[1])
    guess = net.guess(clips, SR)
    starts = F.initial_params(clips, SR)
    with torch.no_grad():
        guessed = F.distance(synth(guess), target)
        started = F.distance(synth(starts), target.repeat(len(F.RESTARTS)))
    best_start = started.reshape(-1, len(F.RESTARTS)).min(dim=1).values
    print(f"distance: guess {guessed.tolist()}, best measured start {best_start.tolist()}")
    assert bool((guessed < best_start).all()), (guessed, best_start)
    off_guess = (guess - u).pow(2).mean(dim=1)
    off_starts = (starts.reshape(len(u), -1, N1) - u[:, None]).pow(2).mean(dim=2).min(dim=1).values
    assert bool((off_guess < off_starts).all()), (off_guess, off_starts)
    tracked = F.pitch_tracked(guess, clips, SR)
    cents = 1200 * torch.log2(to_params(tracked)[:, 0] / to_params(u)[:, 0]).abs()
    print(f"f_end off by {cents.round().tolist()} cents")
    assert float(cents.max()) < 100, cents


def test_a_refinement_stops_when_the_distance_stops_falling_and_keeps_the_best():
    """From numbers that already play the target, the descent stops after REFINE_PATIENCE steps without a better
    distance, not after its iteration limit, and gives back numbers at least as near as its start."""
    rate, n = 22050, 8192
    synth = synth_for(1, rate, n)
    u0 = torch.zeros(1, N1)
    with torch.no_grad():
        x = synth(u0)
    target = F.Target(x, rate)
    steps: list[int] = []
    u, d = F._descend(synth, u0, target, 200, 0.05, steps.append, patience=F.REFINE_PATIENCE)
    with torch.no_grad():
        start = F.distance(synth(u0), target)
    assert len(steps) < 200 and len(steps) <= 2 * F.REFINE_PATIENCE, len(steps)
    assert float(d[0]) <= float(start[0]) + 1e-6


def test_a_level_free_target_ignores_the_synths_output_gain():
    rate, n = 22050, 8192
    synth = synth_for(1, rate, n)
    u = torch.zeros(2, N1)
    u[1, [p.name for p in params_for(1)].index("level_db")] = 3.0  # the same kick, louder
    with torch.no_grad():
        y = synth(u)
        free, plain = F.Target(y[:1], rate, level_free=True), F.Target(y[:1], rate)
        assert float(F.distance(y[1:], free)[0]) < 1e-3
        assert float(F.distance(y[1:], plain)[0]) > 0.1


def test_a_fit_from_the_guess_takes_no_restarts(net):
    """fit(guess=...) descends from the guess only (every step one row a clip), at most guess_iters steps after the
    pitch track's one pass; 0 gives the guess as the pitch track and adjust leave it, the same every time."""
    _, clips = kit_renders(seed=5)
    calls: list[int] = []
    F.fit(clips, SR, iters=30, restart_iters=10, guess=net.guess, check=lambda: calls.append(1))
    assert 0 < len(calls) <= 1 + 30 + F.ADJUST_PASSES, len(calls)  # without the guess: 10 + 30 + 6
    only, _ = F.fit(clips, SR, iters=30, guess=net.guess, guess_iters=0)
    again, _ = F.fit(clips, SR, iters=30, guess=net.guess, guess_iters=0)
    assert torch.equal(only, again) and only.shape == (2, N1)


def test_a_served_fit_keeps_each_kicks_nearer_of_the_guess_and_the_measured_starts(net, gen):
    """fit(keep_nearer=True), as served, gives for each kick whichever of the fit from the guess and the fit from the
    measured starts plays nearer it (fit.nearer: not level-free), and so is never farther than either by that."""
    x = kit_sources(gen, ["BJA_Pacific_BD_02.flac", "BJA_Pacific_BD_03.flac"])
    opts = {"iters": 12, "restart_iters": 4, "guess": net.guess, "guess_iters": 12}
    both, d = F.fit(x, SR, **opts, keep_nearer=True)
    guessed, _ = F.fit(x, SR, **opts)
    started, _ = F.fit(x, SR, iters=12, restart_iters=4)
    want, want_d = F.nearer([guessed, started], x, SR)
    assert torch.equal(both, want) and torch.allclose(d, want_d)
    _, dg = F.nearer([guessed], x, SR)
    _, ds = F.nearer([started], x, SR)
    assert bool((d <= torch.minimum(dg, ds) + 1e-6).all())


def heard(gen, x: torch.Tensor, u: torch.Tensor) -> np.ndarray:
    """fit.distance of each clip from its numbers played as the daemon plays them (bench/synth_inverse.py)."""
    synth = synth_for(gen.synth_version, SR, x.shape[1])
    out = []
    with torch.no_grad():
        for clip, row in zip(x, u):
            y = torch.from_numpy(finish_kick(synth(row[None]).numpy(), SR)).float()
            n = int(F.fit_lengths(clip[None], SR)[0])
            out.append(float(F.distance(y[:, :n], F.Target(clip[None, :n], SR))[0]))
    return np.asarray(out)


def kit_sources(gen, names: list[str]) -> torch.Tensor:
    out = []
    for name in names:
        a, r = sf.read(KIT / name, dtype="float32")
        out.append(gen.prepare_source(a, r))
    return torch.from_numpy(np.stack(out))


@pytest.mark.slow  # today's fit and the served one of five kit kicks: minutes on the loaded 2-core box
def test_a_served_fit_from_the_guess_is_no_worse_than_from_the_measured_starts(net, gen):
    """On starter kit kicks (real files, not the synth's own), the served fit with the guess is, kick by kick, no
    farther from them (as the daemon plays the numbers: fit.heard_distance) than today's fit from its measured
    starts."""
    x = kit_sources(gen, sorted(p.name for p in KIT.glob("*.flac"))[::25])
    today, _ = F.fit(x, SR, **F.serve_options(gen.fit_config, gen.synth_version))
    guessed, _ = F.fit(x, SR, **gen.fit_options)
    a, b = heard(gen, x, today), heard(gen, x, guessed)
    print(f"today {a.round(3).tolist()}, from the guess {b.round(3).tolist()}")
    assert bool((b <= a + 1e-5).all()), (a, b)  # each kick's nearer of the two fits is served


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    from daemon_util import models_folder, start_daemon

    d = tmp_path_factory.mktemp("synth_inverse")
    with start_daemon(d, models_folder(d / "models", SYNTH_MODEL), model="kick-synth",
                      extra_args=["--read-root", str(KIT)]) as proc:
        yield proc


def test_the_daemon_locates_a_file_from_the_inverses_guess(daemon, gen):
    """/kick/locate of a starter kit file on the shipped kick-synth model answers where the served fit from the guess
    puts it (the same fit run in this process), and the daemon's price line names the fit from the guess."""
    name = "BJA_Pacific_BD_02.flac"
    ((address, args),) = daemon.send("/kick/locate", str(KIT / name), timeout=120)
    assert address == "/kick/locate" and all(math.isfinite(v) for v in args[:2]), (address, args)
    x = kit_sources(gen, [name])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the daemon's (start_daemon: --threads 1)
    try:
        u, _ = F.fit(x, SR, **F.serve_options(gen.fit_config, 2, inv.shipped(2).guess))
    finally:
        torch.set_num_threads(threads)
    want = gen.kit_map.locate(gen.net.normalise(u)[0].numpy())
    assert math.hypot(args[0] - want[0], args[1] - want[1]) < 1e-3, (args[:2], want)
    assert daemon.wait_for_log("inverse's guess", timeout=30), daemon.stderr_text()[-2000:]


def test_fit_seconds_prices_a_fit_from_the_guess_by_its_own_work(net, fit_ticks):
    """What the daemon prices a served fit by (kickserver.pricing) follows the fit from the guess: on a clock that
    advances one per kick the loss is taken of, the estimate is REFINE_PRICED of its most steps (one row a kick), plus
    the whole fit from the measured starts where the nearer of both is kept (keep_nearer, as served), and the fit
    from the guess alone takes at most its most steps and a closing one."""
    ticks = fit_ticks
    clip = synth_for(1, SR, 16384)(torch.zeros(1, N1)).detach()
    clip = clip / clip.abs().max()
    plain = F.fit_seconds(clip, SR, iters=40, restart_iters=12, clock=lambda: float(ticks[0]))
    assert plain > 40 + 12 * len(F.RESTARTS) - 5  # the measured starts' two stages
    alone = F.fit_seconds(clip, SR, iters=40, restart_iters=12, clock=lambda: float(ticks[0]), guess=net.guess,
                          guess_iters=40)
    assert abs(alone - F.REFINE_PRICED * 40) <= 1, alone
    both = F.fit_seconds(clip, SR, iters=40, restart_iters=12, clock=lambda: float(ticks[0]), guess=net.guess,
                         guess_iters=40, keep_nearer=True)
    assert abs(both - alone - plain - 2) <= 1, (both, alone, plain)  # and each fit heard once (fit.nearer)
    ticks[0] = 0
    F.fit(clip, SR, iters=40, guess=net.guess, guess_iters=40)
    assert 0 < ticks[0] <= 40 + 1, ticks[0]


# ------------------------------------------------------------------------------------------------ version 2's inverse

def test_the_version_2_inverse_is_shipped_small_and_made_for_version_2s_synth(tmp_path):
    """inverse_v2 (scripts/train_synth_inverse.py --version 2) is read for synth version 2: a model a user trains
    today (the presets' synth) fits a located file, a variation's source and a morph's end from its guess."""
    from tests.conftest import make_tiny_artifact

    path = inv.weights_path(2)
    assert path.is_file() and path.stat().st_size < 2 << 20
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    assert meta["synth_version"] == "2" and json.loads(meta["params"]) == [p.name for p in params_for(2)]
    net2 = inv.shipped(2)
    assert net2 is not None and net2.n_params == N2
    assert net2.guess(torch.zeros(2, 4096), 22050).shape == (2, N2)
    g = load_generator(make_tiny_artifact(tmp_path / "v2.safetensors", family="kick_synth"), "cpu")
    assert g.synth_version == 2 and g.inverse is net2 and g.fit_options["guess"] == net2.guess
    assert g.encoder_name == "a fit of the synth from its inverse's guess"


def test_the_version_2_guess_sounds_nearer_its_kick_than_the_fits_measured_starts():
    """On version 2's own kicks, the guess alone is nearer its kick (fit.distance at the fit's rate) than the middle
    of every range is (what a guess that knew nothing would say), and than the best of the fit's measured starts for
    most of them (6 of these 8) and in the median: a weaker guess than version 1's, whose every guess is nearer than
    the starts (the served fit keeps each kick's nearer of the two fits)."""
    net2 = inv.shipped(2)
    u, clips = renders(2, 8, seed=3)
    rate = SR // F.FIT_RATE_DIVISOR
    import torchaudio.functional as AF

    xf = AF.resample(clips, SR, rate)[:, :rate // 2]
    target = F.Target(xf, rate)
    synth = synth_for(2, rate, xf.shape[1])
    guess = net2.guess(clips, SR)
    starts = F.initial_params(clips, SR, version=2)
    with torch.no_grad():
        guessed = F.distance(synth(guess), target)
        started = F.distance(synth(starts), target.repeat(len(F.RESTARTS)))
        middle = F.distance(synth(torch.zeros_like(u)), target)
    best_start = started.reshape(-1, len(F.RESTARTS)).min(dim=1).values
    print(f"distance: guess {guessed.tolist()}, best measured start {best_start.tolist()}, middle {middle.tolist()}")
    assert bool((guessed < middle).all()), (guessed, middle)
    assert int((guessed < best_start).sum()) >= 6 and float(guessed.median()) < float(best_start.median())
