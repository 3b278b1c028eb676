"""Measured kick descriptors: the controls a musician turns ("decay", "pitch", "click").

`measure` gives raw units (seconds, Hz, dB) from audio, vectorised over a batch. Models are
conditioned on dial positions in 0..1, `to_dial(raw, quantiles)`: a piecewise-linear empirical CDF fitted
on the training set (`fit_quantiles`), so 0.5 on a dial is the training median; `from_dial` maps a dial
position back to units for labels ("pitch 0.7 ~ 58 Hz"). Quantiles are plain lists so they go into JSON and
artifact metadata.

All three are measured from the onset: the first sample whose magnitude reaches -30 dB re. the
clip's peak, minus 1 ms (prepared clips have it at ~0; generated ones may not).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
import torchaudio.functional as AF

CONTROL_NAMES = ("decay", "pitch", "click")
# The same controls in their units, as a request may give them to a model that sets them exactly (a kick-synth
# model: kickmodel.generator.UNITS): name -> (the dial it stands for, lowest, highest value taken)
# (the ends are what the kick-synth family reaches in every kick: its decay under 0.05 s and its click over -15 dB
# measured off target; a model's own range is narrower where its clip is short: GeneratorBase.unit_range)
UNIT_CONTROLS: dict[str, tuple[str, float, float]] = {
    "decay_s": ("decay", 0.05, 2.5),
    "pitch_hz": ("pitch", 30.0, 250.0),
    "click_db": ("click", -60.0, -15.0),
}

ONSET_DB = -30.0
ENV_WINDOW_MS = 10.0  # RMS window of the decay envelope
ENV_HOP_MS = 2.5
DECAY_DB = 40.0
PITCH_WINDOW_MS = (40.0, 250.0)  # after the onset
PITCH_RANGE_HZ = (30.0, 250.0)
PITCH_NFFT = 1 << 15
CLICK_MS = 15.0
CLICK_TOTAL_MS = 100.0
CLICK_HZ = 2000.0
CLICK_RANGE_DB = (-60.0, 0.0)
_EPS = 1e-12


def _onsets(x: torch.Tensor, sample_rate: int) -> torch.Tensor:
    a = x.abs()
    peak = a.amax(dim=1, keepdim=True)
    first = (a >= peak * 10.0 ** (ONSET_DB / 20.0)).to(torch.uint8).argmax(dim=1)
    return (first - int(sample_rate / 1000)).clamp(min=0)


def _segments(x: torch.Tensor, start: torch.Tensor, n: int) -> torch.Tensor:
    """x[b, start[b] : start[b] + n] for each b, zero beyond the end."""
    length = x.shape[1]
    idx = start[:, None] + torch.arange(n, device=x.device)[None, :]
    valid = idx < length
    seg = torch.gather(x, 1, idx.clamp(max=length - 1))
    return seg * valid


def _decay(x: torch.Tensor, sample_rate: int) -> torch.Tensor:
    win = max(1, int(round(ENV_WINDOW_MS * sample_rate / 1000)))
    hop = max(1, int(round(ENV_HOP_MS * sample_rate / 1000)))
    power = F.avg_pool1d((x * x)[:, None, :], win, hop, padding=win // 2, count_include_pad=True)[:, 0]
    env = 10.0 * torch.log10(power + _EPS)  # [B, frames]
    frames = env.shape[1]
    k_max = env.argmax(dim=1)
    thr = env.amax(dim=1) - DECAY_DB
    pos = torch.arange(frames, device=x.device)[None, :]
    above = (env > thr[:, None]) & (pos >= k_max[:, None])
    last = torch.where(above, pos, torch.zeros_like(pos)).amax(dim=1)  # last frame still above the threshold
    nxt = (last + 1).clamp(max=frames - 1)
    e0 = env.gather(1, last[:, None])[:, 0]
    e1 = env.gather(1, nxt[:, None])[:, 0]
    frac = torch.where((nxt > last) & (e0 > e1), ((e0 - thr) / (e0 - e1 + _EPS)).clamp(0, 1), torch.zeros_like(e0))
    frames_after_peak = (last - k_max).to(x.dtype) + frac
    cap = x.shape[1] / sample_rate
    return (frames_after_peak * hop / sample_rate).clamp(0.0, cap)


def _pitch(x: torch.Tensor, onset: torch.Tensor, sample_rate: int) -> torch.Tensor:
    a = int(round(PITCH_WINDOW_MS[0] * sample_rate / 1000))
    n = int(round((PITCH_WINDOW_MS[1] - PITCH_WINDOW_MS[0]) * sample_rate / 1000))
    seg = _segments(x, onset + a, n)
    seg = seg - seg.mean(dim=1, keepdim=True)
    seg = seg * torch.hann_window(n, periodic=False, dtype=x.dtype, device=x.device)
    nfft = max(PITCH_NFFT, 1 << math.ceil(math.log2(n)))
    mag = torch.fft.rfft(seg, n=nfft).abs()
    lo = int(math.floor(PITCH_RANGE_HZ[0] * nfft / sample_rate))
    hi = int(math.ceil(PITCH_RANGE_HZ[1] * nfft / sample_rate))
    band = torch.log(mag[:, lo - 1:hi + 2] + _EPS)  # one extra bin each side for the interpolation
    k = band[:, 1:-1].argmax(dim=1) + 1
    ym, y0, yp = (band.gather(1, (k + d)[:, None])[:, 0] for d in (-1, 0, 1))
    den = ym - 2 * y0 + yp
    delta = torch.where(den.abs() > _EPS, 0.5 * (ym - yp) / den, torch.zeros_like(den)).clamp(-0.5, 0.5)
    f = (k + lo - 1).to(x.dtype) + delta
    return (f * sample_rate / nfft).clamp(*PITCH_RANGE_HZ)


def _click(x: torch.Tensor, onset: torch.Tensor, sample_rate: int) -> torch.Tensor:
    n_total = int(round(CLICK_TOTAL_MS * sample_rate / 1000))
    n_click = int(round(CLICK_MS * sample_rate / 1000))
    seg = _segments(x, onset, n_total)
    seg = seg * (0.25 / seg.abs().amax(dim=1, keepdim=True).clamp(min=_EPS))  # headroom: torchaudio's biquads clamp
    total = (seg * seg).sum(dim=1)
    hp = seg
    for _ in range(3):  # 6th-order Butterworth-ish high-pass: a 400 Hz body is ~80 dB down at 2 kHz
        hp = AF.highpass_biquad(hp, sample_rate, CLICK_HZ, Q=0.7071)
    hf = (hp[:, :n_click] ** 2).sum(dim=1)
    return (10.0 * torch.log10((hf + _EPS) / (total + _EPS))).clamp(*CLICK_RANGE_DB)


@torch.no_grad()
def measure(batch: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """Raw descriptors [B, 3] (decay s, pitch Hz, click dB) of a batch of mono clips [B, L].

    - decay: seconds from the peak of the RMS envelope (10 ms windows, 2.5 ms hop) until it falls
      for the last time below 40 dB under its maximum (linear interpolation between frames),
      capped at the clip length. A hiss floor within 40 dB of the peak measures as a long decay.
    - pitch: the body frequency, the strongest spectral peak between 30 and 250 Hz of the
      Hann-windowed 40..250 ms after the onset (FFT zero-padded to 32768 points, parabolic
      interpolation on the log magnitude).
    - click: energy above 2 kHz (three cascaded 2nd-order high-passes) in the first 15 ms after the
      onset over the total energy of the first 100 ms, in dB, clamped to -60..0.
    """
    x = batch.detach().to(torch.float32)
    if x.dim() == 1:
        x = x[None]
    if x.dim() != 2:
        raise ValueError(f"measure expects [B, L] audio, got shape {tuple(batch.shape)}")
    if x.shape[0] == 0:  # no clip: no row (an FFT of no rows is an error in MKL, not an empty answer)
        return torch.zeros(0, 3, dtype=torch.float32, device=x.device)
    onset = _onsets(x, sample_rate)
    return torch.stack([_decay(x, sample_rate), _pitch(x, onset, sample_rate), _click(x, onset, sample_rate)], dim=1)


def fit_quantiles(raw: torch.Tensor | np.ndarray, n: int = 33) -> list[list[float]]:
    """Per control, n quantiles (0, 1/(n-1), ..., 1) of the training set's raw values, strictly increasing.

    Ties (a constant control, repeated values) are broken by adding a tiny step so the mapping
    stays invertible.
    """
    # a tensor may be on any device (measured there): the quantiles are a few numbers, taken on the CPU
    r = raw.detach().cpu().double() if isinstance(raw, torch.Tensor) else torch.as_tensor(np.asarray(raw),
                                                                                         dtype=torch.float64)
    if r.dim() != 2 or r.shape[0] == 0:
        raise ValueError(f"fit_quantiles expects [N, C] with N >= 1, got shape {tuple(r.shape)}")
    if n < 2:
        raise ValueError("fit_quantiles needs n >= 2")
    q = torch.quantile(r, torch.linspace(0, 1, n, dtype=torch.float64), dim=0).T  # [C, n]
    out = []
    for row in q.tolist():
        span = max(row[-1] - row[0], max(abs(row[0]), abs(row[-1]), 1.0))
        eps = 1e-6 * span
        fixed = [row[0]]
        for v in row[1:]:
            fixed.append(max(v, fixed[-1] + eps))
        out.append([float(v) for v in fixed])
    return out


def _interp(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """np.interp for 1-D increasing xp: piecewise linear, clamped to fp's ends."""
    x = x.clamp(xp[0], xp[-1])
    i = torch.searchsorted(xp, x.contiguous(), right=True).clamp(1, len(xp) - 1)
    x0, x1, f0, f1 = xp[i - 1], xp[i], fp[i - 1], fp[i]
    return f0 + (x - x0) * (f1 - f0) / (x1 - x0)


def _check(t: torch.Tensor, quantiles: list[list[float]]) -> None:
    if t.dim() != 2 or t.shape[1] != len(quantiles):
        raise ValueError(f"expected [B, {len(quantiles)}], got shape {tuple(t.shape)}")


def to_dial(raw: torch.Tensor, quantiles: list[list[float]]) -> torch.Tensor:
    """Raw descriptors [B, C] in units (s, Hz, dB) -> dial positions [B, C] in [0, 1] by the empirical CDF of
    the training set."""
    raw = torch.as_tensor(raw)
    _check(raw, quantiles)
    r = raw.to(torch.float64)
    cols = []
    for c, q in enumerate(quantiles):
        xp = torch.tensor(q, dtype=torch.float64, device=r.device)
        fp = torch.linspace(0, 1, len(q), dtype=torch.float64, device=r.device)
        cols.append(_interp(r[:, c], xp, fp))
    return torch.stack(cols, dim=1).to(raw.dtype if raw.is_floating_point() else torch.float32)


def from_dial(u: torch.Tensor, quantiles: list[list[float]]) -> torch.Tensor:
    """Inverse of to_dial: dial positions [B, C] in [0, 1] -> raw units."""
    u = torch.as_tensor(u)
    _check(u, quantiles)
    v = u.to(torch.float64)
    cols = []
    for c, q in enumerate(quantiles):
        xp = torch.linspace(0, 1, len(q), dtype=torch.float64, device=v.device)
        fp = torch.tensor(q, dtype=torch.float64, device=v.device)
        cols.append(_interp(v[:, c], xp, fp))
    return torch.stack(cols, dim=1).to(u.dtype if u.is_floating_point() else torch.float32)


# A second hit: a loop's next beat or a flam inside what should be a one-shot (second_hit_ms)
SECOND_HIT_ONSET_DB = -30.0  # the first onset: the first sample within this of the clip's peak
SECOND_HIT_FRAME_MS = 5.0
SECOND_HIT_AFTER_MS = 40.0  # a second hit starts at least this long after the first onset (a flam, a loop's next beat)
SECOND_HIT_JUMP_DB = 15.0  # its attack is this much above every frame of the SECOND_HIT_BEFORE_MS before it...
SECOND_HIT_BEFORE_MS = 30.0
SECOND_HIT_LEVEL_DB = -20.0  # ...and within this of the first attack
SECOND_HIT_BODY_DB = 3.0  # and the kick's own level (not only its click) climbs this much in 10 ms: a hit, not a tick
# Or a smeared re-attack (a model's, through Griffin-Lim): the level of 10 ms climbs this much over every frame of the
# 20..60 ms before it, to within SECOND_HIT_BODY_LEVEL_DB of the first hit's level
SECOND_HIT_REATTACK_DB = 15.0
SECOND_HIT_REATTACK_MS = (20.0, 60.0)
SECOND_HIT_BODY_LEVEL_DB = -25.0
_SECOND_HIT_FLOOR_DB = -120.0


def _frame_db(v: np.ndarray, frames: int, hop: int) -> np.ndarray:
    return np.maximum(10 * np.log10(np.maximum((v[:frames * hop].reshape(frames, hop) ** 2).mean(axis=1), 1e-300)),
                      _SECOND_HIT_FLOOR_DB)


def second_hit_ms(clips: np.ndarray, sample_rate: int, *, from_start: bool = False) -> np.ndarray:
    """Per clip ([L] or [n, L], numpy): when a second hit starts, in ms after the first onset (from_start: after the
    clip's first sample), or NaN for a one-shot.

    What is followed is the attack, not the body: the energy of the signal's first difference (a gentle high-pass,
    +6 dB an octave, so a body at 50 Hz counts little and a beater's click much) in 5 ms frames from the onset (the
    first sample within 30 dB of the peak). A kick's click dies within tens of milliseconds and its body only rings
    out (beating by a few dB; an 808's tail decays for seconds without a new attack); a loop's next beat or a flam is
    a sudden new click: a frame at least SECOND_HIT_AFTER_MS after the onset, SECOND_HIT_JUMP_DB above every frame of
    the SECOND_HIT_BEFORE_MS before it and within SECOND_HIT_LEVEL_DB of the first attack, whose plain level (the
    body, not the click) climbs SECOND_HIT_BODY_DB over the same stretch within 10 ms (an edit's tick or a pedal's
    squeak clicks without it). The time is that frame's start.

    A model's second hit can come without a sharp click (the bundled model's, rebuilt by Griffin-Lim, rise over 20-40
    ms): so a frame whose level over 10 ms (the body) is SECOND_HIT_REATTACK_DB above every frame from 60 to 20 ms
    before it, and within SECOND_HIT_BODY_LEVEL_DB of the first hit's level, is a second hit too, starting at the
    last frame before it still SECOND_HIT_REATTACK_DB under it (where the rise begins). Ripple cannot do that:
    a body that beats falls as it rose, and the frames before the rise hold the fall (two equal partials 1.5, 4 and
    10 Hz apart: at most 9.4 dB); a decaying 808 tail never climbs.

    Calibrated on the starter kit as first shipped (and on ../shared/data/kicks, its first 70 files): its two loops
    (beats_rave_kick01/02) hit again at 329 ms, none of its other 99 kicks does (the largest re-attack among them:
    10.2 dB, drums_bassdrum01's rattle; without the body condition two ticks were flagged, and a plain 5 ms RMS
    envelope flagged 45 kicks whose low body beats). The bundled model's second hits climb 32-45 dB."""
    x = np.atleast_2d(np.asarray(clips, dtype=np.float64))
    hop = max(1, int(round(sample_rate * SECOND_HIT_FRAME_MS / 1000)))
    back = max(1, int(round(SECOND_HIT_BEFORE_MS / SECOND_HIT_FRAME_MS)))
    after = max(back, int(np.ceil(SECOND_HIT_AFTER_MS / SECOND_HIT_FRAME_MS)))
    gap, far = (max(1, int(round(ms / SECOND_HIT_FRAME_MS))) for ms in SECOND_HIT_REATTACK_MS)
    first_k = max(after, far)  # the first frame the re-attack looks at: its whole window lies after the onset
    a = np.abs(x)
    peak = a.max(axis=1, keepdims=True)
    onsets = np.argmax(a >= peak * 10 ** (SECOND_HIT_ONSET_DB / 20), axis=1)
    out = np.full(len(x), np.nan)
    for i, (clip, onset) in enumerate(zip(x, onsets)):
        if not peak[i, 0] > 0:
            continue
        d = np.diff(clip[onset:])
        frames = len(d) // hop
        if frames <= after:
            continue
        env = _frame_db(d, frames, hop)
        body = _frame_db(clip[onset:], frames, hop)
        # for frame k: the largest of the `back` frames before it (k >= after >= back), and of it and the next
        env_before = np.lib.stride_tricks.sliding_window_view(env[:-1], back).max(axis=1)[after - back:]
        body_before = np.lib.stride_tricks.sliding_window_view(body[:-1], back).max(axis=1)[after - back:]
        body_now = np.maximum(body, np.append(body[1:], -np.inf))[after:]
        hit = ((env[after:] >= env[:after].max() + SECOND_HIT_LEVEL_DB)
               & (env[after:] >= env_before + SECOND_HIT_JUMP_DB)
               & (body_now >= body_before + SECOND_HIT_BODY_DB))
        starts = [after + int(np.argmax(hit))] if hit.any() else []
        if frames > first_k:  # the smeared re-attack: the body's 10 ms over the frames 60..20 ms before
            window = np.lib.stride_tricks.sliding_window_view(body, far - gap)[first_k - far:frames - far]
            now = np.maximum(body, np.append(body[1:], -np.inf))[first_k:]
            rise = ((now >= window.max(axis=1) + SECOND_HIT_REATTACK_DB)
                    & (now >= body[:after].max() + SECOND_HIT_BODY_LEVEL_DB))
            if rise.any():
                k = first_k + int(np.argmax(rise))
                low = body[k - far:k] <= now[k - first_k] - SECOND_HIT_REATTACK_DB
                starts.append(k - far + int(np.flatnonzero(low)[-1]))  # where the rise begins
        if starts:
            out[i] = (min(starts) * hop + (onset if from_start else 0)) * 1000.0 / sample_rate
    return out


TUNER_WINDOW_MS = (80.0, 200.0)  # after the onset: the settled body, where a tuner reads a kick
TUNER_LOWPASS_HZ = 300.0
TUNER_SPREAD = 0.1  # largest spread of the periods (std over mean) of a tone a tuner reads


@torch.no_grad()
def tuner_hz(batch: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """[B] the body's frequency as a tuner reads it: the clip low-passed at 300 Hz (three cascaded 2nd-order
    low-passes), its rising zero crossings 80..200 ms after the onset (as `measure` finds it), each placed by linear
    interpolation between samples; the frequency is (crossings - 1) over the time from the first to the last. NaN
    where fewer than three crossings lie in the window, or where the periods between them spread by more than
    TUNER_SPREAD of their mean (no steady tone there: a body gone by 80 ms leaves noise or a partial's beating, which a
    tuner cannot read either).

    `measure`'s pitch is the strongest spectral peak of 40..250 ms, which a sweep still falling at 40 ms pulls up; a
    sampler's root note is what the settled body plays, which this reads."""
    x = batch.detach().to(torch.float32)
    if x.dim() == 1:
        x = x[None]
    onset = _onsets(x, sample_rate)
    a = int(round(TUNER_WINDOW_MS[0] * sample_rate / 1000))
    n = int(round((TUNER_WINDOW_MS[1] - TUNER_WINDOW_MS[0]) * sample_rate / 1000))
    lead = int(round(0.02 * sample_rate))  # the filter settles over the 20 ms before the window
    seg = _segments(x, (onset + a - lead).clamp(min=0), n + lead)
    seg = seg * (0.25 / seg.abs().amax(dim=1, keepdim=True).clamp(min=_EPS))  # headroom: torchaudio's biquads clamp
    for _ in range(3):
        seg = AF.lowpass_biquad(seg, sample_rate, TUNER_LOWPASS_HZ, Q=0.7071)
    seg = seg[:, lead:].double().cpu().numpy()
    out = np.full(seg.shape[0], np.nan)
    for i, s in enumerate(seg):
        up = np.nonzero((s[:-1] < 0) & (s[1:] >= 0))[0]
        if len(up) < 3:
            continue
        t = up + (-s[up]) / (s[up + 1] - s[up])  # where the line between the two samples crosses 0
        periods = np.diff(t)
        if periods.std() > TUNER_SPREAD * periods.mean():
            continue
        out[i] = (len(t) - 1) * sample_rate / (t[-1] - t[0])
    return torch.from_numpy(out).to(torch.float32)


SETTLED_SPAN_CENTS = 600.0  # a tuner reading this far from the spectral peak read a partial or noise, not the body


@torch.no_grad()
def settled_pitch_hz(batch: torch.Tensor, sample_rate: int, peak_hz: torch.Tensor | None = None) -> torch.Tensor:
    """[B] the pitch a kick settles on, what a pitch asked in Hz and a sampler's root note mean: `tuner_hz` where it
    reads within half an octave of `measure`'s pitch (peak_hz [B] where the caller has it), else that pitch (no steady
    tone at 80..200 ms, or a second partial strong enough to double the crossings)."""
    x = batch.detach().to(torch.float32)
    if x.dim() == 1:
        x = x[None]
    peak = measure(x, sample_rate)[:, 1] if peak_hz is None else peak_hz.to(torch.float32).cpu()
    tuned = tuner_hz(x, sample_rate)
    near = tuned.isfinite() & ((1200 * torch.log2(tuned.clamp(min=1e-3) / peak.clamp(min=1e-3))).abs()
                               <= SETTLED_SPAN_CENTS)
    return torch.where(near, tuned, peak)
