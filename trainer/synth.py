"""A procedural kick synthesiser: test data everywhere, and the evaluation baseline.

A kick is a sine body whose frequency sweeps exponentially from `pitch_start` down to `pitch_end`
(time constant `sweep`), under an exponential amplitude decay that reaches -40 dB after `decay`
seconds (so `descriptors.measure`'s decay should read about `decay`), plus a click (an
exponentially decaying high-passed noise burst, level `click` relative to the body's peak), an
optional tanh saturation (`drive`, 0 = clean), peak at -1 dBFS and a short fade at the end.

    kick = synth_kick(np.random.default_rng(0), pitch_end=55.0, decay=0.3, click=0.0)
    batch = synth_batch(16, seed=1)  # [16, 45056]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torchaudio.functional as AF

PEAK_DB = -1.0
END_FADE_MS = 5.0


def random_params(rng: np.random.Generator, **overrides: Any) -> dict[str, float]:
    """Draw a kick's parameters from rng (always drawing all, so overrides do not shift the others)."""
    p = {
        "pitch_start": float(rng.uniform(150.0, 400.0)),  # Hz at the onset
        "pitch_end": float(rng.uniform(40.0, 80.0)),  # Hz the body settles to
        "sweep": float(rng.uniform(0.005, 0.03)),  # s, time constant of the pitch sweep
        "decay": float(rng.uniform(0.1, 0.8)),  # s until the body is 40 dB down
        "attack_ms": float(rng.uniform(0.2, 1.5)),  # raised-cosine attack of the body
        "click": float(rng.uniform(0.0, 0.6)),  # click burst peak relative to the body
        "click_ms": float(rng.uniform(1.0, 6.0)),  # click burst decay time constant
        "click_hz": float(rng.uniform(1500.0, 5000.0)),  # click high-pass corner
        "drive": float(rng.uniform(1.0, 4.0)) if rng.uniform() < 0.5 else 0.0,  # tanh drive, 0 = clean
        "seed": int(rng.integers(0, 2**31 - 1)),  # noise of the click
    }
    unknown = sorted(set(overrides) - set(p))
    if unknown:
        raise TypeError(f"unknown kick parameter(s): {', '.join(unknown)}")
    p.update({k: (int(v) if k == "seed" else float(v)) for k, v in overrides.items()})
    return p


def render_kick(params: dict[str, float], sample_rate: int = 44100, length: int = 45056) -> np.ndarray:
    """Render one kick from parameters (see random_params) as float32 [length], peak -1 dBFS."""
    p = params
    t = np.arange(length, dtype=np.float64) / sample_rate
    f0, f1, tau = p["pitch_start"], p["pitch_end"], max(p["sweep"], 1e-4)
    phase = 2 * math.pi * (f1 * t + (f0 - f1) * tau * (1.0 - np.exp(-t / tau)))
    env = 10.0 ** (-2.0 * t / max(p["decay"], 1e-3))  # -40 dB at t = decay
    n_att = max(1, int(round(p["attack_ms"] * sample_rate / 1000)))
    env[:n_att] *= 0.5 * (1 - np.cos(np.linspace(0, math.pi, n_att)))
    x = np.sin(phase) * env

    if p["click"] > 0:
        noise = np.random.default_rng(int(p["seed"])).standard_normal(length)
        burst = 0.05 * noise * np.exp(-t / (p["click_ms"] / 1000.0))  # headroom: torchaudio's biquads clamp
        burst = AF.highpass_biquad(torch.from_numpy(burst), sample_rate, min(p["click_hz"], sample_rate * 0.45)).numpy()
        burst /= max(np.abs(burst).max(), 1e-12)
        x = x + p["click"] * burst
    if p["drive"] > 0:
        x = np.tanh(p["drive"] * x) / math.tanh(p["drive"])
    n_fade = min(length, int(round(END_FADE_MS * sample_rate / 1000)))
    x[length - n_fade:] *= 0.5 * (1 + np.cos(np.linspace(0, math.pi, n_fade)))
    x *= 10.0 ** (PEAK_DB / 20.0) / max(np.abs(x).max(), 1e-12)
    return x.astype(np.float32)


def synth_kick(rng: np.random.Generator, sample_rate: int = 44100, length: int = 45056, **overrides: Any) -> np.ndarray:
    """One random kick, float32 [length]; any parameter of random_params can be fixed by keyword."""
    return render_kick(random_params(rng, **overrides), sample_rate, length)


def synth_batch(n: int, seed: int, sample_rate: int = 44100, length: int = 45056, **overrides: Any) -> np.ndarray:
    """n random kicks [n, length] from one seed (the same seed gives the same batch)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, length), dtype=np.float32)
    for i in range(n):
        out[i] = synth_kick(rng, sample_rate, length, **overrides)
    return out
