"""Measures of a kick on its waveform, per clip [n, L] at a sample rate: tail hiss, the level at the end, the
haze over the body.

They look for what the first models got wrong and what an embedding distance averages away: hiss in the
tail where real kicks decay to near silence, a kick still ringing when the clip is cut, noise over the
body's low tone. `kicktrain eval` reports each set's median (trainer/evaluate.py's docstring says how to
read them); bench/sound_check.py uses them too. A second hit (a loop's next beat, a flam) is measured in the runtime,
which guards every kick against it: kickmodel.descriptors.second_hit_ms.
"""

from __future__ import annotations

import numpy as np

ONSET_DB = -30.0
TAIL_MS = (400.0, 900.0)
TAIL_HZ = 4000.0
END_MS = (80.0, 30.0)  # the window from 80 ms to 30 ms before the end
FLOOR_DB = -120.0
HAZE_MS = (30.0, 200.0)
HAZE_HZ = (1000.0, 8000.0)


def _onsets(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    peak = a.max(axis=1, keepdims=True)
    return np.argmax(a >= peak * 10 ** (ONSET_DB / 20), axis=1)


def _db(v: np.ndarray) -> np.ndarray:
    return np.maximum(10 * np.log10(np.maximum(v, 1e-300)), FLOOR_DB)


def tail_window_ms(length: int, sample_rate: int) -> tuple[float, float]:
    """The tail window after the onset: TAIL_MS, scaled to 40..90 % of the clip when it is shorter."""
    dur_ms = 1000.0 * length / sample_rate
    return min(TAIL_MS[0], 0.4 * dur_ms), min(TAIL_MS[1], 0.9 * dur_ms)


def tail_hiss_db(clips: np.ndarray, sample_rate: int, cutoff_hz: float = TAIL_HZ) -> np.ndarray:
    """Per clip: mean-square energy above cutoff_hz in the tail window (see tail_window_ms) after the
    onset, dB re. the clip's peak squared (Hann-windowed periodogram; zeros beyond the clip's end)."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    n, length = x.shape
    a_ms, b_ms = tail_window_ms(length, sample_rate)
    a = int(round(a_ms * sample_rate / 1000))
    w_len = max(8, int(round((b_ms - a_ms) * sample_rate / 1000)))
    idx = _onsets(x)[:, None] + a + np.arange(w_len)[None, :]
    seg = np.where(idx < length, np.take_along_axis(x, np.minimum(idx, length - 1), axis=1), 0.0)
    w = np.hanning(w_len)
    p = np.abs(np.fft.rfft(seg * w, axis=1)) ** 2
    f = np.fft.rfftfreq(w_len, 1.0 / sample_rate)
    ms = 2.0 * p[:, f >= cutoff_hz].sum(axis=1) / (w_len * (w * w).sum())
    peak2 = np.abs(x).max(axis=1) ** 2
    return _db(ms / np.maximum(peak2, 1e-300))


def after_onset(clips: np.ndarray, sample_rate: int, window_ms: tuple[float, float]) -> np.ndarray:
    """[n, samples] float64: each clip from window_ms[0] to window_ms[1] ms after its onset (its first sample at 10 %
    of its peak), zeros past its end."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    peak = np.abs(x).max(axis=1, keepdims=True)
    on = np.argmax(np.abs(x) >= 0.1 * np.maximum(peak, 1e-12), axis=1)
    a, n = int(window_ms[0] * sample_rate / 1000), int((window_ms[1] - window_ms[0]) * sample_rate / 1000)
    idx = on[:, None] + a + np.arange(n)[None, :]
    return np.where(idx < x.shape[1], np.take_along_axis(x, np.minimum(idx, x.shape[1] - 1), axis=1), 0.0)


def body_haze_db(clips: np.ndarray, sample_rate: int) -> np.ndarray:
    """The haze over the body: energy between HAZE_HZ over HAZE_MS after the onset (the first sample at 10 %
    of the peak), dB re. all the energy in that window (Hann window). Real kick bodies are nearly pure
    low tones; the first bundled model put about 11 dB more here than real kicks."""
    body = after_onset(clips, sample_rate, HAZE_MS)
    n = body.shape[1]
    spec = np.abs(np.fft.rfft(body * np.hanning(n), axis=1)) ** 2
    f = np.fft.rfftfreq(n, 1.0 / sample_rate)
    hf = spec[:, (f >= HAZE_HZ[0]) & (f <= HAZE_HZ[1])].sum(axis=1)
    return _db(hf / np.maximum(spec.sum(axis=1), 1e-300))


def end_level_db(clips: np.ndarray, sample_rate: int) -> np.ndarray:
    """Per clip: RMS from END_MS[0] to END_MS[1] ms before the end, dB re. the clip's peak."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    length = x.shape[1]
    a = max(0, length - int(round(END_MS[0] * sample_rate / 1000)))
    b = max(a + 1, length - int(round(END_MS[1] * sample_rate / 1000)))
    ms = (x[:, a:b] ** 2).mean(axis=1)
    return _db(ms / np.maximum(np.abs(x).max(axis=1) ** 2, 1e-300))
