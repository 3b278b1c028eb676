"""Velocity layers and round robins as rules over a finished kick: what makes a kit's harder hit louder and
brighter, and its repeated hits not quite the same, for any model. Pure functions; the generator's kit mode
(kickmodel.generator: GeneratorBase.kit) calls them, and a family with numbers of its own has its own rules beside
them (KIT_NUMBERS: kick-synth's, kickmodel/families/kick_synth/kits.py), which share the conventions below.

Conventions
- A kit has `layers` velocity layers; layer i (0 = softest) sits at position p = (i + 1) / layers in (0, 1]: the
  top layer is at 1 and is the kick that was asked for (its numbers, its audio; a click-less kick with a beater, see
  below), the layers under it are softer hits of the same drum. No hit peaks over the asked kick. Velocities split
  evenly (kickserver.kitfiles.velocity_ranges).
- Every layer is LEVEL_RANGE_DB * (1 - p) quieter than the top (layer_gain_db), applied to the finished kick after
  any peak normalisation (a family's finish step would undo a level set in its numbers).
- Brightness falls with p: a gentle high shelf cut that deepens as the hit softens (TILT_RANGE_DB at p = 0, shelf
  at TILT_HZ): audio_layer. A kick with almost no click of its own (under BEATER_TOP_DB, as the bundled model's
  often are: nothing to cut) also gets a beater click, a short burst of band-passed noise drawn per hit,
  BEATER_TOP_DB at the top and BEATER_RANGE_DB less at p = 0 (beater): its top layer is then the asked kick with
  that beater. Drive is not added: drive cannot be taken out of a finished kick for the softer layers, and the
  beater is what a harder hit adds. (A family with numbers lowers its click, drive and sweep instead.)
- Round robin r of a layer (0 = the layer's kick itself) is a small seeded variation of it: a seeded rotation of
  the body's phase against the attack (a causal 2nd-order all-pass, so the spectrum's magnitude is unchanged and
  nothing comes before the onset), a shelf within +-ROBIN_TILT_DB, the peak of the kick less 0..ROBIN_LEVEL_DB
  (audio_robin). distinct_robins checks robins by their correlation and turns the phase of any robin that
  correlates at ROBIN_MAX_CORR or more with an earlier one further (a family's robins too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

LEVEL_RANGE_DB = 18.0

TILT_RANGE_DB = 12.0
TILT_HZ = 1500.0
TILT_Q = 0.707

BEATER_TOP_DB = -30.0
BEATER_RANGE_DB = 24.0
BEATER_BAND_HZ = (2500.0, 9000.0)
BEATER_TAU_S = 0.003
BEATER_RISE_S = 0.0002
BEATER_LENGTH_S = 0.03

ROBIN_LEVEL_DB = 0.4
ROBIN_TILT_DB = 1.0
ROBIN_PHASE_STEP = 0.12  # radians of body phase (at ROBIN_REF_HZ) between successive robins
ROBIN_REF_HZ = 60.0
ROBIN_MAX_CORR = 0.99
ALLPASS_Q = 0.707
MAX_LAYERS, MAX_ROBINS = 8, 4


def check_counts(layers: int, robins: int) -> tuple[int, int]:
    """(layers, robins) as ints within 1..MAX_LAYERS and 1..MAX_ROBINS, or ValueError saying which and the range."""
    for name, v, hi in (("layers", layers, MAX_LAYERS), ("robins", robins, MAX_ROBINS)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not 1 <= int(v) <= hi:
            raise ValueError(f"{name} {v!r}: out of range; give a whole number 1..{hi}")
    return int(layers), int(robins)


def layer_positions(layers: int) -> np.ndarray:
    """Each layer's position in (0, 1], softest first; the top layer at 1."""
    layers, _ = check_counts(layers, 1)
    return np.arange(1, layers + 1, dtype=np.float64) / layers


def check_position(p: float) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"layer position {p!r}: outside 0..1 (1 is the top layer, the kick asked for)")
    return p


def layer_gain_db(position: float) -> float:
    """A layer's level against the top layer, in dB (0 at the top, -LEVEL_RANGE_DB at position 0)."""
    return -LEVEL_RANGE_DB * (1.0 - check_position(position))


def _biquad(x: np.ndarray, fn) -> np.ndarray:
    """x through a torchaudio biquad fn(tensor) -> tensor, in float64 with headroom (torchaudio clamps its output to
    [-1, 1]); the input's dtype and level come back."""
    x = np.asarray(x)
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        return x.copy()
    scale = 0.05 / peak
    y = fn(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64) * scale)).numpy() / scale
    return y.astype(x.dtype, copy=False)


def high_shelf(x: np.ndarray, sample_rate: int, gain_db: float, hz: float = TILT_HZ, q: float = TILT_Q) -> np.ndarray:
    """x through a 2nd-order high shelf of gain_db at hz (torchaudio's treble_biquad, SoX's design); 0 dB: x."""
    if gain_db == 0.0:
        return np.asarray(x).copy()
    import torchaudio.functional as AF

    return _biquad(x, lambda t: AF.treble_biquad(t, int(sample_rate), float(gain_db), float(hz), float(q)))


def allpass(x: np.ndarray, sample_rate: int, hz: float, q: float = ALLPASS_Q) -> np.ndarray:
    """x through a causal 2nd-order all-pass centred at hz: the magnitude spectrum unchanged, the phase turned."""
    import torchaudio.functional as AF

    return _biquad(x, lambda t: AF.allpass_biquad(t, int(sample_rate), float(hz), float(q)))


def _gain(db: float) -> float:
    return 10.0 ** (db / 20.0)


def audio_layer(x: np.ndarray, sample_rate: int, position: float, click: np.ndarray | None = None) -> np.ndarray:
    """The layer at position made from a finished kick x (the top layer): x plus `click` (a beater, see beater; None:
    none), through a high shelf of -TILT_RANGE_DB * (1 - p) at TILT_HZ, at x's peak at most, then at the layer's gain
    (layer_gain_db). The top layer without a click comes back as x."""
    p = check_position(position)
    x = np.asarray(x)
    y = x if click is None else _no_louder(x + click[: len(x)], x)
    y = high_shelf(y, sample_rate, -TILT_RANGE_DB * (1.0 - p))
    return (y * _gain(layer_gain_db(p))).astype(x.dtype, copy=False)


def _no_louder(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y scaled down to x's peak where it is over it."""
    peak_x, peak_y = float(np.max(np.abs(x))), float(np.max(np.abs(y)))
    return y * (peak_x / peak_y) if peak_y > peak_x > 0 else y


def click_db(x: np.ndarray, sample_rate: int) -> float:
    """A kick's click as the project measures it (kickmodel.descriptors: energy above 2 kHz in the first 15 ms over
    the first 100 ms after the onset, dB, floored at -60)."""
    from kickmodel.descriptors import measure

    return float(measure(torch.from_numpy(np.asarray(x, dtype=np.float32)[None]), int(sample_rate))[0, 2])


def beater(x: np.ndarray, sample_rate: int, position: float, seed: int, layer: int, robin: int,
           own_click_db: float | None = None) -> np.ndarray | None:
    """The beater click a hit of kick x at position gets, or None: a kick whose own click (click_db) reaches
    BEATER_TOP_DB needs none (its shelf alone makes the layers' clicks rise); a softer-attacked one gets a burst of
    noise (its own draw per layer and robin, so no two hits share a texture) in BEATER_BAND_HZ, rising in
    BEATER_RISE_S and decaying with BEATER_TAU_S from the kick's onset, whose energy against the kick's first 100 ms
    is BEATER_TOP_DB at the top and BEATER_RANGE_DB * (1 - p) less under it: a hard hit's beater, which a kick
    without click lacks and a sampler's top layers need (so layers rise in click on every model)."""
    p = check_position(position)
    x = np.asarray(x, dtype=np.float64)
    own = click_db(x, sample_rate) if own_click_db is None else float(own_click_db)
    if own >= BEATER_TOP_DB or not np.any(x):
        return None
    import torchaudio.functional as AF

    peak = np.abs(x).max()
    onset = max(int(np.argmax(np.abs(x) >= peak * 10 ** (-30 / 20))) - sample_rate // 1000, 0)
    e100 = float(np.sum(x[onset:onset + sample_rate // 10] ** 2))
    n = int(BEATER_LENGTH_S * sample_rate)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(layer), int(robin), 2])
    noise = rng.standard_normal(n)
    lo, hi = BEATER_BAND_HZ
    noise = _biquad(noise, lambda t: AF.highpass_biquad(t, int(sample_rate), lo, 0.707))
    noise = _biquad(noise, lambda t: AF.lowpass_biquad(t, int(sample_rate), min(hi, 0.45 * sample_rate), 0.707))
    t = np.arange(n) / sample_rate
    burst = noise * (1 - np.exp(-t / BEATER_RISE_S)) * np.exp(-t / BEATER_TAU_S)
    energy_db = BEATER_TOP_DB - BEATER_RANGE_DB * (1.0 - p)
    burst *= np.sqrt(e100 * 10 ** (energy_db / 10) / max(float(np.sum(burst ** 2)), 1e-30))
    out = np.zeros(len(x))
    end = min(onset + n, len(x))
    out[onset:end] = burst[: end - onset]
    return out


def _phase_hz(theta: float) -> float:
    """The all-pass centre that turns a ROBIN_REF_HZ body by about theta radians (its phase is about
    2 (f / f0) / Q well below f0)."""
    return 2.0 * ROBIN_REF_HZ / (ALLPASS_Q * theta)


def audio_robin(x: np.ndarray, sample_rate: int, robin: int, seed: int, turn: float = 1.0) -> np.ndarray:
    """Round robin `robin` of a finished kick x (robin 0: x itself): the body's phase turned by about
    ROBIN_PHASE_STEP * robin * turn radians (seeded +-20 %) and a high shelf within +-ROBIN_TILT_DB, at x's peak
    less a seeded 0..ROBIN_LEVEL_DB."""
    if robin == 0:
        return np.asarray(x).copy()
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(robin), 1])
    theta = ROBIN_PHASE_STEP * robin * turn * rng.uniform(0.8, 1.2)
    y = allpass(x, sample_rate, min(_phase_hz(theta), 0.45 * sample_rate))
    y = high_shelf(y, sample_rate, rng.uniform(-ROBIN_TILT_DB, ROBIN_TILT_DB))
    # a turned phase moves the peak (by up to a few dB): back to x's peak, then at most ROBIN_LEVEL_DB under it, so
    # no robin clips where its layer's kick does not
    peak_x, peak_y = float(np.max(np.abs(x))), float(np.max(np.abs(y)))
    y = y * (peak_x / peak_y if peak_y > 0 else 1.0) * _gain(-rng.uniform(0.0, ROBIN_LEVEL_DB))
    return y.astype(np.asarray(x).dtype, copy=False)


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Zero-lag correlation of two kicks over their common length (1.0: the same shape at any level)."""
    n = min(len(a), len(b))
    a, b = np.asarray(a[:n], dtype=np.float64), np.asarray(b[:n], dtype=np.float64)
    den = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    return float(np.dot(a, b) / den) if den > 0 else 1.0


def distinct_robins(robins: Sequence[np.ndarray], sample_rate: int, seed: int,
                    max_corr: float = ROBIN_MAX_CORR, tries: int = 6) -> list[np.ndarray]:
    """robins (robin 0 first) with every one correlating under max_corr with each earlier one: a robin that does
    not is turned further by audio_robin (its phase step grown by half each try, from the robin as given). Robins
    already distinct come back unchanged. ValueError if a robin cannot be made distinct (a silent kick)."""
    out: list[np.ndarray] = []
    for r, x in enumerate(robins):
        y = np.asarray(x)
        turn = 1.0
        for _ in range(tries + 1):
            if all(correlation(y, z) < max_corr for z in out):
                break
            turn += 0.5
            y = audio_robin(x, sample_rate, max(r, 1), seed, turn=turn)
        else:
            raise ValueError(f"robin {r}: still correlates at {max_corr} or more with an earlier robin after {tries} "
                             "turns of its phase (is the kick silent?)")
        out.append(y)
    return out


def audio_kit(x: np.ndarray, sample_rate: int, layers: int, robins: int, seed: int) -> list[list[np.ndarray]]:
    """A kit's hits [layer][robin] (softest layer first) from one finished kick x by the audio rules: robin r of x
    (audio_robin), plus the layer's beater when x has too little click of its own (beater), through the layer's
    shelf and gain (audio_layer); each layer's robins made distinct. The top layer's first robin is x itself, or x
    with its beater."""
    layers, robins = check_counts(layers, robins)
    x = np.asarray(x)
    own = click_db(x, sample_rate)
    out = []
    for i, p in enumerate(layer_positions(layers)):
        hits = [audio_layer(audio_robin(x, sample_rate, r, seed), sample_rate, p,
                            beater(x, sample_rate, p, seed, i, r, own)) for r in range(robins)]
        out.append(distinct_robins(hits, sample_rate, seed))
    return out
