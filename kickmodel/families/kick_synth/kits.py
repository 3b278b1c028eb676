"""The kick-synth family's kit rules: a kit's velocity layers and round robins made from the synth's own numbers,
what a drum does when hit softer or again (the audio rules every finished kick takes are kickmodel.kitrules; the
conventions shared with them, positions, levels and distinct robins, are there too).

- Layer at position p (kickmodel.kitrules.layer_positions: the top layer, the kick asked for, at 1): as a drum's
  head tension and beater energy fall with a softer hit, the click's level falls (click_db, CLICK_RANGE_DB lower at
  p = 0), the drive is divided by up to DRIVE_RATIO and the pitch sweep's start (sweep, f_start / f_end - 1) falls
  to SWEEP_FRACTION of it (synth_layer); the tension glide of synth version 2 (glide: the pitch a struck head
  rises by, in proportion to the squared amplitude of its vibration) falls with the square of the layer's amplitude
  (the layer's gain as a power ratio: 10 ** (layer_gain_db / 10)), so a soft hit barely falls in pitch, as a soft
  stroke on a drum does; every other number, the end pitch first, is kept, so a tuned kit stays tuned. The
  layer's level is kitrules.layer_gain_db's, applied to the finished kick (a finish step normalises the peak, and
  would undo a level set in the numbers).
- Round robin r of a layer (0: the layer's numbers as they are): the click's level, centre and decay, the drive,
  the body's decay and the sweep's time move by a seeded few per cent (ROBIN_SPREAD; dB for click_db), each robin
  its own draw (synth_robin); the end pitch does not move. kitrules.distinct_robins then turns any robin still
  correlating 0.99 or more with an earlier one.

synth_kit plays them through a render the generator gives (KickSynthGenerator._kit_numbers: the synth, then the
finish step every kick takes), so a kit's top layer's first robin is the kick /kick/generate makes for its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ... import kitrules
from .synth_v2 import PARAMS_V2

CLICK_RANGE_DB = 15.0
DRIVE_RATIO = 3.0
SWEEP_FRACTION = 0.5
# the numbers a robin moves, and by how much (a relative spread, or dB for the *_db ones)
ROBIN_SPREAD: dict[str, float] = {"click_db": 1.5, "click_hz": 0.12, "click_tau": 0.1, "drive": 0.08, "decay": 0.04,
                                  "sweep_tau": 0.04}
_RANGES = {p.name: (p.lo, p.hi) for p in PARAMS_V2}  # version 1's numbers and version 2's (a superset)


def clamped(values: Mapping[str, float]) -> dict[str, float]:
    """values (by name, in units) each within the synth's range for it."""
    return {k: (min(max(float(v), _RANGES[k][0]), _RANGES[k][1]) if k in _RANGES else float(v))
            for k, v in values.items()}


def synth_layer(params: Mapping[str, float], position: float) -> dict[str, float]:
    """The numbers (by name, in their units: kickmodel.families.kick_synth.synth.describe) of the layer at position,
    from the asked kick's numbers (the top layer): click_db, drive and sweep fall with the hit, and glide (version 2)
    with the square of its amplitude; every other number (the end pitch, the decay...) is kept. Values stay within
    the synth's ranges."""
    s = 1.0 - kitrules.check_position(position)
    out = dict(params)
    if "click_db" in out:
        out["click_db"] = float(out["click_db"]) - CLICK_RANGE_DB * s
    if "drive" in out:
        out["drive"] = float(out["drive"]) / DRIVE_RATIO ** s
    if "sweep" in out:
        out["sweep"] = float(out["sweep"]) * (1.0 - (1.0 - SWEEP_FRACTION) * s)
    if "glide" in out:
        out["glide"] = float(out["glide"]) * 10.0 ** (kitrules.layer_gain_db(position) / 10.0)
    return clamped(out)


def synth_robin(params: Mapping[str, float], robin: int, seed: int) -> dict[str, float]:
    """Round robin `robin` of a kick's numbers: robin 0 is params as given; the others move the numbers in
    ROBIN_SPREAD by a seeded draw (dB for *_db, else relative), each robin its own draw."""
    if robin == 0:
        return dict(params)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(robin)])
    out = dict(params)
    for name, spread in ROBIN_SPREAD.items():
        if name in out:
            d = rng.uniform(-1.0, 1.0) * spread
            out[name] = float(out[name]) + d if name.endswith("_db") else float(out[name]) * (1.0 + d)
    return clamped(out)


def synth_kit(params: Mapping[str, float], render: Callable[[list[dict[str, float]]], Sequence[np.ndarray]],
              sample_rate: int, layers: int, robins: int, seed: int) -> list[list[np.ndarray]]:
    """A kit's hits [layer][robin] from the numbers of the asked kick (by name, in units): each layer's numbers
    (synth_layer), its robins' (synth_robin), rendered by render(list of numbers) -> finished kicks (the family's
    synth and finish step, peak-normalised), made distinct (kitrules.distinct_robins), then at the layer's gain. The
    top layer's first robin is asked of render as clamped(params)."""
    layers, robins = kitrules.check_counts(layers, robins)
    out = []
    for p in kitrules.layer_positions(layers):
        numbers = [synth_robin(synth_layer(params, p), r, seed) for r in range(robins)]
        kicks = [np.asarray(k) for k in render(numbers)]
        if len(kicks) != robins:
            raise ValueError(f"synth_kit: render gave {len(kicks)} kicks for {robins} robins")
        gain = 10.0 ** (kitrules.layer_gain_db(p) / 20.0)
        out.append([(k * gain).astype(k.dtype, copy=False) for k in kitrules.distinct_robins(kicks, sample_rate,
                                                                                                seed)])
    return out
