"""The signal processing every kick shares, each said once: finishing a generated kick for a DAW, resampling, the
raised-cosine fades and the high-pass filter, with the two high-pass corners named for what they do.

    finish_kick(audio, sr)           a generated clip made ready to drop into a DAW ([L] or [n, L])
    first_hit_only(x, sr)            clips that hit twice (a loop, a flam) faded out before their second hit
    resample(x, from_rate, to_rate)  torchaudio's windowed sinc along the last axis, its kernel bounded
    rise(n), fall(n)                 half a Hann window up (0 -> 1) and down (1 -> 0)
    highpass(x, sr, hz, q)           torchaudio's 2nd-order high-pass biquad on float arrays
    tail_end(x), trim_tail(x, sr)    where a finished kick has decayed (its tail under TAIL_FLOOR_DB re its peak),
                                     and the kick cut there with a TAIL_FADE_MS fade-out: what a file holds
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

# The subsonic filter every finished kick gets (finish_kick): kick fundamentals sit at 40..100 Hz, below 20 Hz is drift
# and rumble a model leaves (see finish_kick).
SUBSONIC_HZ = 20.0
# The gentler filter a training clip gets when it is prepared (kickmodel.clips.prepare_audio): DC and rumble out of a
# recorded file after its mean is taken away, at Q 0.5, leaving the body to the models.
CLIP_HIGHPASS_HZ = 10.0
OUTPUT_PEAK_DB = -1.0  # a finished kick's peak
# Where a kick's file ends (trim_tail): after its last sample at or above TAIL_FLOOR_DB under its peak, and a
# TAIL_FADE_MS fade-out over the samples after it (all under the floor already), so the last sample is 0. A file is
# as long as its kick, not as the model's render (a kick that has not decayed by the end of the render keeps it all).
TAIL_FLOOR_DB = -60.0
TAIL_FADE_MS = 10.0
CUT_BEFORE_MS = 10.0  # first_hit_only: a cut ends this long before the second hit's attack, faded over as long

MAX_RESAMPLE_KERNEL = 1 << 20  # values: 4 MB of float32, about 20 MB while it is built
_LOWPASS_WIDTH, _ROLLOFF = 6, 0.99  # torchaudio.functional.resample's defaults, which it is called with


def rise(n: int) -> np.ndarray:
    """n samples (float64) going from exactly 0 up to 1: half a Hann window."""
    return 0.5 * (1 - np.cos(np.linspace(0, math.pi, n)))


def fall(n: int) -> np.ndarray:
    """n samples (float64) going from 1 down to exactly 0 (n <= 1: zeros)."""
    if n <= 1:
        return np.zeros(max(n, 0))
    return 0.5 * (1.0 + np.cos(np.linspace(0.0, math.pi, n)))


def highpass(x: np.ndarray, sample_rate: int, hz: float, q: float = 0.707) -> np.ndarray:
    """x (float32 or float64, along its last axis) through a 2nd-order high-pass biquad at hz (torchaudio's, whose
    state starts at 0 and which clamps its output to [-1, 1]: give it a signal with headroom)."""
    import torchaudio.functional as AF

    return AF.highpass_biquad(torch.from_numpy(np.ascontiguousarray(x)), sample_rate, hz, Q=q).numpy()


def first_hit_only(clips: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """(clips, when each one's second hit starts in ms after its first sample, NaN for a one-shot) for float clips
    [L] or [n, L]: a clip that hits twice (kickmodel.descriptors.second_hit_ms: a loop's next beat, a flam) is
    silent from CUT_BEFORE_MS before its second attack on, faded out (raised cosine) over the CUT_BEFORE_MS before
    that; a one-shot is returned as it was, bit for bit (the same array when no clip hits twice)."""
    from .descriptors import second_hit_ms

    x = np.asarray(clips)
    at_ms = second_hit_ms(x, sample_rate, from_start=True)
    if np.isnan(at_ms).all():
        return clips, at_ms
    out = np.array(np.atleast_2d(x), copy=True)
    n = int(round(CUT_BEFORE_MS * sample_rate / 1000))
    for i in np.flatnonzero(~np.isnan(at_ms)):
        end = max(0, int(round(at_ms[i] * sample_rate / 1000)) - n)
        start = max(0, end - n)
        out[i, start:end] *= fall(end - start).astype(out.dtype)
        out[i, end:] = 0
    return (out[0] if x.ndim == 1 else out), at_ms


def finish_kick(audio: np.ndarray, sample_rate: int, peak_db: float = OUTPUT_PEAK_DB, fade_ms: float = 20.0,
                highpass_hz: float = SUBSONIC_HZ, fade_in_ms: float = 0.5, one_hit: bool = True) -> np.ndarray:
    """Make a generated clip ready to drop into a DAW: finite, a fade_in_ms raised-cosine rise at the start (so the
    first sample is 0, no step), a 2nd-order subsonic high-pass at highpass_hz (0: off; it also takes out DC), a
    short raised-cosine fade at the end (so the last sample is 0, no click), peak at peak_db, and one hit only
    (one_hit; first_hit_only). Works on [L] or [n, L].

    One hit: a kick that hits again (a loop's next beat or a flam, which the bundled model learned from two loops in
    the starter kit and made in about 1 kick of 80) is faded out before its second attack and levelled again; the
    detector reads the finished kick, so a kick that hits once is not changed by a single bit. one_hit=False is for
    measuring what a model makes before the guard (bench/studies/second_hits.py).

    The high-pass is what a sample-pack editor does by hand: the bundled model's raw output carries a
    slow drift below 20 Hz that sits as a floor about 65 dB under the peak through the whole tail (a
    real kick's file decays to silence), and stacks into rumble when the kick repeats. The filter
    takes that floor under -100 dB and leaves the body (-0.3 dB at 40 Hz).

    The start: no mean is subtracted. The filter has no gain at 0 Hz, so DC goes without it; with the filter off (a
    variation at strength 0: a prepared clip, which starts from silence) subtracting it put -mean at sample 0, a step
    of up to 11 % of the peak for the starter kit's files at 4096 samples, and a -mean floor under the whole tail.
    The rise is the 0.5 ms one every training clip has before its onset (kickmodel.clips PRE_ONSET_MS), 1/18 of a
    real kick's median attack (onset to peak: 9 ms): where a model's kick starts from silence it changes nothing
    above 1 % of the peak; where one starts with a step (an untrained network's noise, a waveform model's kick
    caught 0.5 ms into its rise, a source cut at its attack) it is what keeps that step out of the file. A mel
    model's kick must not lean on it: Griffin-Lim builds the rise itself (kickmodel.codecs.mel)."""
    x = np.nan_to_num(np.asarray(audio, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    squeeze = x.ndim == 1
    x = np.atleast_2d(x)
    n_in = min(int(round(sample_rate * fade_in_ms / 1000)), x.shape[1])
    if n_in > 0:  # before the filter: it then never sees a step, and makes none (its state starts at 0)
        x[:, :n_in] *= rise(n_in)
    if highpass_hz > 0 and x.shape[1] > 1:
        # torchaudio's biquads clamp to [-1, 1]: filter at peak 0.5 (the level is set again below)
        scale = 2.0 * np.maximum(np.abs(x).max(axis=1, keepdims=True), 1e-12)
        x = highpass(x / scale, sample_rate, highpass_hz) * scale
    n_fade = max(1, int(sample_rate * fade_ms / 1000))
    n_fade = min(n_fade, x.shape[1])
    if n_fade > 1:
        x[:, -n_fade:] *= fall(n_fade)
    x = _level(x, peak_db)
    if one_hit:
        cut, at_ms = first_hit_only(x, sample_rate)
        if not np.isnan(at_ms).all():  # only the kicks that hit twice are levelled again
            again = ~np.isnan(at_ms)
            x[again] = _level(cut[again], peak_db)
    out = x.astype(np.float32)
    return out[0] if squeeze else out


def tail_end(x: np.ndarray, floor_db: float = TAIL_FLOOR_DB) -> np.ndarray:
    """Per row of x ([L] or [n, L]): one past its last sample whose magnitude is at or above floor_db re the row's
    peak (0 for a silent row). An int for [L], an int array [n] for [n, L]."""
    a = np.abs(np.atleast_2d(np.asarray(x)))
    if a.shape[1] == 0:
        out = np.zeros(a.shape[0], dtype=np.int64)
    else:
        peak = a.max(axis=1, keepdims=True)
        loud = (a >= peak * 10.0 ** (floor_db / 20.0)) & (peak > 0)
        last = a.shape[1] - 1 - np.argmax(loud[:, ::-1], axis=1)
        out = np.where(loud.any(axis=1), last + 1, 0).astype(np.int64)
    return int(out[0]) if np.asarray(x).ndim == 1 else out


def trim_tail(x: np.ndarray, sample_rate: int, floor_db: float = TAIL_FLOOR_DB,
              fade_ms: float = TAIL_FADE_MS) -> np.ndarray:
    """A finished kick [L] cut where it has decayed: its samples up to its tail's last one at or above floor_db re its
    peak (tail_end) kept bit for bit, then fade_ms more under a raised-cosine fade-out ending at exactly 0. The kick
    itself when that is not shorter (a kick still sounding at the end of its render keeps its own fade-out) or it is
    silent. float32 out."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    end = tail_end(x, floor_db)
    n_fade = max(2, int(round(sample_rate * fade_ms / 1000)))
    if end == 0 or end + n_fade >= len(x):
        return x
    out = x[:end + n_fade].copy()
    out[end:] = (out[end:].astype(np.float64) * fall(n_fade)).astype(np.float32)
    return out


def _level(x: np.ndarray, peak_db: float) -> np.ndarray:
    """Rows of x with their peak at peak_db (a silent row: zeros)."""
    peak = np.abs(x).max(axis=1, keepdims=True)
    target = 10 ** (peak_db / 20)
    return np.where(peak > 1e-9, x * (target / np.maximum(peak, 1e-12)), 0.0)


def kernel_size(down: int, up: int) -> int:
    """Values in torchaudio's sinc kernel for resampling by up/down (both already reduced)."""
    width = math.ceil(_LOWPASS_WIDTH * down / (min(down, up) * _ROLLOFF))
    return up * (down + 2 * width)


def resample_ratio(sr: int, target: int) -> tuple[int, int]:
    """(down, up): resampling sr to target is resampling by up/down. The exact ratio (reduced by the gcd)
    when its kernel has at most MAX_RESAMPLE_KERNEL values, as it has for every common rate; else the
    closest fraction whose kernel does (a 9071 Hz file to 44.1 kHz: 2003/412, 0.00007 % off, where the exact
    44100/9071 would need 1.6 GB). Within the rates a file may have (kickmodel.clips MIN_RATE..MAX_RATE) the pitch
    moves by under 0.1 % (2 cents; at worst 0.06 %, 1 cent, for a ratio near 1 such as 44071 Hz to 44.1 kHz), which
    no one hears in a kick."""
    g = math.gcd(int(sr), int(target))
    down, up = int(sr) // g, int(target) // g
    limit = down
    while kernel_size(down, up) > MAX_RESAMPLE_KERNEL and limit > 1:
        limit = max(1, limit * 3 // 4)
        f = Fraction(int(target), int(sr)).limit_denominator(limit)
        down, up = f.denominator, f.numerator
    return down, up


def resample(x: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """float32 x ([L] or [n, L]) at from_rate resampled to to_rate along its last axis (torchaudio's windowed sinc,
    its kernel bounded by resample_ratio); x itself when the rates are equal."""
    if int(from_rate) == int(to_rate):
        return x
    import torchaudio.functional as AF

    down, up = resample_ratio(from_rate, to_rate)
    return AF.resample(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), down, up).numpy()
