"""Measures of a kick on its waveform, per clip [n, L] at a sample rate: tail hiss, the level at the end, the
haze over the body.

They look for what the first models got wrong and what an embedding distance averages away: hiss in the
tail where real kicks decay to near silence, a kick still ringing when the clip is cut, noise over the
body's low tone. `kicktrain eval` reports each set's median (trainer/evaluate.py's docstring says how to
read them); bench/sound_check.py uses them too.
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


def body_haze_db(clips: np.ndarray, sample_rate: int) -> np.ndarray:
    """The haze over the body: energy between HAZE_HZ over HAZE_MS after the onset (the first sample at 10 %
    of the peak), dB re. all the energy in that window (Hann window). Real kick bodies are nearly pure
    low tones; the first bundled model put about 11 dB more here than real kicks."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    peak = np.abs(x).max(axis=1, keepdims=True)
    on = np.argmax(np.abs(x) >= 0.1 * np.maximum(peak, 1e-12), axis=1)
    a, n = int(HAZE_MS[0] * sample_rate / 1000), int((HAZE_MS[1] - HAZE_MS[0]) * sample_rate / 1000)
    idx = on[:, None] + a + np.arange(n)[None, :]
    body = np.where(idx < x.shape[1], np.take_along_axis(x, np.minimum(idx, x.shape[1] - 1), axis=1), 0.0)
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


SECOND_HIT_FRAME_MS = 5.0
SECOND_HIT_AFTER_MS = 40.0  # a second hit starts at least this long after the first onset (a flam, a loop's next beat)
SECOND_HIT_JUMP_DB = 15.0  # its attack is this much above every frame of the SECOND_HIT_BEFORE_MS before it...
SECOND_HIT_BEFORE_MS = 30.0
SECOND_HIT_LEVEL_DB = -20.0  # ...and within this of the first attack
SECOND_HIT_BODY_DB = 3.0  # and the kick's own level (not only its click) climbs this much in 10 ms: a hit, not a tick


def second_hit_ms(clips: np.ndarray, sample_rate: int) -> np.ndarray:
    """Per clip: when a second hit starts, in ms after the first onset, or NaN for a one-shot. What is followed is
    the attack, not the body: the energy of the signal's first difference (a gentle high-pass, +6 dB an octave, so
    a body at 50 Hz counts little and a beater's click much) in 5 ms frames. A kick's click dies within tens of
    milliseconds and its body only rings out (beating by a few dB); a loop's next beat or a flam is a sudden new
    click: a frame at least SECOND_HIT_AFTER_MS after the onset, SECOND_HIT_JUMP_DB above every frame of the
    SECOND_HIT_BEFORE_MS before it and within SECOND_HIT_LEVEL_DB of the first attack, whose plain level (the
    body, not the click) climbs SECOND_HIT_BODY_DB over the same stretch within 10 ms (an edit's tick or a pedal's
    squeak clicks without it). The starter kit's two loops (beats_rave_kick01/02) hit again 330 ms after their
    onset; none of its other 99 kicks does."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    hop = max(1, int(round(sample_rate * SECOND_HIT_FRAME_MS / 1000)))
    back = max(1, int(round(SECOND_HIT_BEFORE_MS / SECOND_HIT_FRAME_MS)))
    after = int(np.ceil(SECOND_HIT_AFTER_MS / SECOND_HIT_FRAME_MS))
    out = np.full(len(x), np.nan)
    for i, (clip, onset) in enumerate(zip(x, _onsets(x))):
        d = np.diff(clip[onset:])
        frames = len(d) // hop
        if frames <= after:
            continue
        env = _db((d[:frames * hop].reshape(frames, hop) ** 2).mean(axis=1))
        body = _db((clip[onset:onset + frames * hop].reshape(frames, hop) ** 2).mean(axis=1))
        first = env[:after].max()
        for k in range(after, frames):
            if (env[k] >= first + SECOND_HIT_LEVEL_DB and env[k] >= env[k - back:k].max() + SECOND_HIT_JUMP_DB
                    and body[k:k + 2].max() >= body[k - back:k].max() + SECOND_HIT_BODY_DB):
                out[i] = k * SECOND_HIT_FRAME_MS
                break
    return out
