"""Velocity layers and round robins (kickmodel.kitrules' audio rules, and the kick-synth family's number rules in
kickmodel/families/kick_synth/kits.py), measured the project's way (kickmodel.descriptors: click is
the energy above 2 kHz in the first 15 ms against the first 100 ms): over the layers, peak and click rise (Spearman
>= 0.9); robins correlate under 0.99 with each other, yet stay near the kick they vary."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from kit_util import spearman

from kickmodel import kitrules
from kickmodel.descriptors import measure
from kickmodel.families.kick_synth import kits
from kickmodel.families.kick_synth.synth import N_PARAMS, PARAMS, KickSynth, from_params, to_params

SR = 44100
KIT = Path(__file__).resolve().parents[2] / "kickserver" / "data" / "kicks"
REAL = ["BJA_Pacific_BD_02.flac", "BJA_Pacific_BD_05.flac", "Audiophob_86335_zgump_tom_0105.flac"]


def _real(name: str) -> np.ndarray:
    x, sr = sf.read(KIT / name, dtype="float32", always_2d=True)
    assert sr == SR
    return x.mean(axis=1)


def _synth_params(**over) -> dict[str, float]:
    p = dict(zip([q.name for q in PARAMS], to_params(torch.zeros(1, N_PARAMS))[0].tolist()))
    p.update({"f_end": 52.0, "sweep": 3.0, "sweep_tau": 0.02, "sweep_curve": 1.0, "attack": 0.0003, "decay": 0.25,
              "decay_curve": 1.0, "body2_db": -40.0, "click_db": -12.0, "click_hz": 4000.0, "click_tau": 0.004,
              "drive": 2.0, "residual_db": -60.0, "level_db": 0.0})
    p.update(over)
    return p


def _render(params_list: list[dict[str, float]], length: int = 22050) -> list[np.ndarray]:
    """The synth's kicks, each peak-normalised to -1 dBFS as a family's finish step does."""
    u = from_params(torch.tensor([[p[q.name] for q in PARAMS] for p in params_list], dtype=torch.float32))
    x = KickSynth(SR, length)(u).detach().numpy()
    return [k / np.abs(k).max() * 10 ** (-1 / 20) for k in x]


def _peak_click(kicks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    n = max(len(k) for k in kicks)
    batch = torch.tensor(np.stack([np.pad(k, (0, n - len(k))) for k in kicks]), dtype=torch.float32)
    return np.array([np.abs(k).max() for k in kicks]), measure(batch, SR)[:, 2].numpy()


@pytest.mark.parametrize("name", REAL)
def test_audio_layers_rise_in_peak_and_click(name):
    x = _real(name)
    layers = [kitrules.audio_layer(x, SR, p) for p in kitrules.layer_positions(8)]
    peak, click = _peak_click(layers)
    steps = np.arange(8)
    assert spearman(steps, peak) >= 0.9 and spearman(steps, click) >= 0.9, (peak, click)
    assert click[-1] - click[0] >= 3.0  # a change a listener hears, not rounding
    assert np.array_equal(layers[-1], x)  # the top layer is the kick asked for
    assert 20 * np.log10(peak[-1] / peak[0]) == pytest.approx(kitrules.LEVEL_RANGE_DB * 7 / 8, abs=1.5)


def test_synth_layers_rise_in_peak_and_click():
    top = _synth_params()
    params = [kits.synth_layer(top, p) for p in kitrules.layer_positions(8)]
    assert params[-1] == pytest.approx(top)
    assert [p["f_end"] for p in params] == [52.0] * 8  # the pitch the kit is tuned to does not move
    assert all(a["click_db"] < b["click_db"] and a["drive"] < b["drive"] and a["sweep"] < b["sweep"]
               for a, b in itertools.pairwise(params))
    kicks = [k * 10 ** (kitrules.layer_gain_db(p) / 20)
             for k, p in zip(_render(params), kitrules.layer_positions(8))]
    peak, click = _peak_click(kicks)
    steps = np.arange(8)
    assert spearman(steps, peak) >= 0.9 and spearman(steps, click) >= 0.9, (peak, click)
    assert click[-1] - click[0] >= 3.0


def test_synth_layers_stay_in_range():
    lo = {q.name: q.lo for q in PARAMS}
    soft = kits.synth_layer(_synth_params(click_db=-65.0, drive=0.06, sweep=0.03), 0.0)
    assert soft["click_db"] == lo["click_db"] and soft["drive"] == lo["drive"] and soft["sweep"] == lo["sweep"]


def _assert_distinct_and_near(robins: list[np.ndarray]):
    """Every two robins correlate under 0.99, yet each measures as robin 0 does: its pitch within 25 cents, its
    decay within 15 %, its click within 3 dB, its peak within 1.5 dB (variations of one hit, not other kicks)."""
    pairs = [kitrules.correlation(a, b) for a, b in itertools.combinations(robins, 2)]
    assert max(pairs) < 0.99, pairs
    n = max(len(r) for r in robins)
    d = measure(torch.tensor(np.stack([np.pad(r, (0, n - len(r))) for r in robins]), dtype=torch.float32), SR).numpy()
    assert np.all(np.abs(1200 * np.log2(d[:, 1] / d[0, 1])) < 25), d
    assert np.all(np.abs(d[:, 0] / d[0, 0] - 1) < 0.15), d
    assert np.all(np.abs(d[:, 2] - d[0, 2]) < 3.0), d
    peaks = np.array([np.abs(r).max() for r in robins])
    assert np.all(np.abs(20 * np.log10(peaks / peaks[0])) < 1.5), peaks


@pytest.mark.parametrize("name", REAL)
def test_audio_robins_are_distinct(name):
    x = _real(name)
    robins = kitrules.distinct_robins([kitrules.audio_robin(x, SR, r, seed=7) for r in range(4)], SR, seed=7)
    _assert_distinct_and_near(robins)
    assert np.array_equal(robins[0], x)
    again = [kitrules.audio_robin(x, SR, r, seed=7) for r in range(4)]
    assert all(np.array_equal(a, b) for a, b in zip(again, [kitrules.audio_robin(x, SR, r, seed=7) for r in range(4)]))
    other = kitrules.audio_robin(x, SR, 1, seed=8)
    assert not np.array_equal(other, again[1])  # the seed matters
    # magnitude spectrum kept within the robin's shelf and level (+-1.4 dB) below 1 kHz
    spec = lambda y: np.abs(np.fft.rfft(y, 1 << 16))[: (1 << 16) * 1000 // SR]  # noqa: E731
    ratio_db = 20 * np.log10(spec(again[1]) / spec(x))
    weights = spec(x) ** 2
    assert abs(np.average(ratio_db, weights=weights)) < 1.5


def test_synth_robins_are_distinct():
    top = _synth_params()
    params = [kits.synth_robin(top, r, seed=3) for r in range(4)]
    assert params[0] == top and all(p["f_end"] == top["f_end"] for p in params)
    assert all(p != top for p in params[1:])
    robins = kitrules.distinct_robins(_render(params), SR, seed=3)
    _assert_distinct_and_near(robins)
    assert all(r[0] == 0.0 for r in robins)  # the synth's kicks start from silence, and the rules are causal


def test_distinct_robins_turns_copies_apart():
    """Four copies of one kick (a model whose variations came back the same) are turned apart."""
    x = _real(REAL[0])
    robins = kitrules.distinct_robins([x, x.copy(), x.copy(), x.copy()], SR, seed=1)
    _assert_distinct_and_near(robins)
    with pytest.raises(ValueError, match="robin 1"):
        kitrules.distinct_robins([np.zeros(1000), np.zeros(1000)], SR, seed=1)


@pytest.mark.parametrize("layers, robins, what", [(0, 1, "layers"), (9, 1, "layers"), (1, 0, "robins"),
                                                  (1, 5, "robins"), (2.5, 1, "layers"), (True, 1, "layers"),
                                                  ("2", 1, "layers")])
def test_counts(layers, robins, what):
    with pytest.raises(ValueError, match=f"^{what} .*out of range; give a whole number 1..(8|4)"):
        kitrules.check_counts(layers, robins)
    assert kitrules.check_counts(8.0, 4) == (8, 4)
    with pytest.raises(ValueError, match="layer position"):
        kitrules.layer_gain_db(1.5)


def test_kit_builders():
    """audio_kit and synth_kit give [layer][robin]: the top layer's first robin is the asked kick, every layer's
    robins distinct, peaks rising over the layers."""
    x = _real(REAL[1])
    grid = kitrules.audio_kit(x, SR, 3, 2, seed=4)
    top = kitrules.audio_layer(x, SR, 1.0, kitrules.beater(x, SR, 1.0, 4, 2, 0))  # the asked kick, with its beater
    assert [len(row) for row in grid] == [2, 2, 2] and np.array_equal(grid[-1][0], top)
    assert all(kitrules.correlation(*row) < 0.99 for row in grid)
    peaks = [np.abs(row[0]).max() for row in grid]
    assert peaks[0] < peaks[1] < peaks[2]

    synth = _synth_params()
    grid = kits.synth_kit(synth, _render, SR, 2, 3, seed=4)
    assert [len(row) for row in grid] == [3, 3]
    assert np.allclose(grid[-1][0], _render([synth])[0], atol=1e-6)  # the asked kick (its numbers through float32)
    assert np.abs(grid[0][0]).max() < np.abs(grid[1][0]).max()
    with pytest.raises(ValueError, match="render gave 1 kicks for 3 robins"):
        kits.synth_kit(synth, lambda numbers: _render(numbers[:1]), SR, 2, 3, seed=4)
    with pytest.raises(ValueError, match="robins 5"):
        kitrules.audio_kit(x, SR, 2, 5, seed=4)


def _sine_kick(n: int = 22050) -> np.ndarray:
    """A kick with no click at all: a decaying 55 Hz sine (click under the measure's -60 dB floor)."""
    t = np.arange(n) / SR
    return (0.89 * np.sin(2 * np.pi * 55 * t) * np.exp(-t / 0.12)).astype(np.float32)


def test_a_kick_without_click_gets_a_beater_that_rises_with_the_hit():
    x = _sine_kick()
    assert kitrules.click_db(x, SR) == -60.0  # nothing a shelf could cut
    grid = kitrules.audio_kit(x, SR, 8, 3, seed=2)
    firsts = [row[0] for row in grid]
    peak, click = _peak_click(firsts)
    assert spearman(range(8), peak) >= 0.9 and spearman(range(8), click) >= 0.9, (peak, click)
    assert click[-1] == pytest.approx(kitrules.BEATER_TOP_DB, abs=3.0)
    assert all(np.abs(h).max() <= np.abs(x).max() + 1e-6 for row in grid for h in row)  # none louder than asked
    assert all(h[0] == 0.0 for row in grid for h in row)  # still silent before the onset
    b = [kitrules.beater(x, SR, 1.0, 2, 7, r) for r in range(3)]
    assert max(kitrules.correlation(b0, b1) for b0, b1 in itertools.combinations(b, 2)) < 0.5  # a draw per hit
    # a kick with a click of its own gets none: its top layer is the asked kick, untouched
    clicky = _render([_synth_params()])[0]
    assert kitrules.click_db(clicky, SR) > kitrules.BEATER_TOP_DB
    assert kitrules.beater(clicky, SR, 1.0, 2, 7, 0) is None
    assert np.array_equal(kitrules.audio_kit(clicky, SR, 2, 2, seed=2)[-1][0], clicky)


def _crossing_ms(x: np.ndarray, k: int = 4) -> float:
    """When the k-th zero crossing after the first sample comes, in ms (sooner: a higher pitch early on)."""
    s = np.signbit(x[1:])
    return 1000.0 * (np.flatnonzero(s[1:] != s[:-1])[k - 1] + 2) / SR


def test_a_softer_layer_of_a_version_2_kick_glides_less():
    """Synth version 2's tension glide (the pitch a struck head rises by, with the square of its vibration's
    amplitude) falls over the layers with the square of the layer's amplitude: at position 0, 18 dB down, it is 1/63
    of the top's (the softest of 8 layers, at 1/8, is 15.75 dB down: 1/38), and the kick's early pitch falls with it
    (its 4th zero crossing later than the same layer's with the top's glide), the end pitch kept."""
    from kickmodel.families.kick_synth.synth_v2 import PARAMS_V2, KickSynth2

    names = [q.name for q in PARAMS_V2]
    top = dict(zip(names, to_params(torch.zeros(1, len(names)), 2)[0].tolist()))
    top.update({"f_end": 50.0, "sweep": 0.05, "glide": 0.3, "decay": 0.4, "decay_curve": 1.0, "attack": 0.0003,
                "click_db": -70.0, "residual_db": -80.0, "partials_db": -70.0, "modes_db": -80.0, "body2_db": -70.0,
                "drive": 0.1, "level_db": 0.0})
    layers = [kits.synth_layer(top, p) for p in kitrules.layer_positions(8)]
    assert [p["glide"] for p in layers] == sorted(p["glide"] for p in layers) and layers[-1] == pytest.approx(top)
    assert [p["f_end"] for p in layers] == [50.0] * 8
    soft = kits.synth_layer(top, 0.0)
    assert soft["glide"] == pytest.approx(0.3 * 10 ** (-kitrules.LEVEL_RANGE_DB / 10))
    rows = [soft, dict(soft, glide=top["glide"])]
    u = from_params(torch.tensor([[p[n] for n in names] for p in rows], dtype=torch.float32), 2)
    kicks = KickSynth2(SR, SR // 2)(u).detach().numpy()
    less, more = _crossing_ms(kicks[0]), _crossing_ms(kicks[1])
    assert less > more + 2.0, (less, more)
