"""On-the-fly augmentation of onset-aligned kick batches, seeded only by the caller's generator.

    aug = Augmenter(cfg.augment, cfg.data.sample_rate, peak_db=cfg.data.peak_db)
    batch = aug(batch, generator)  # [B, L] -> new [B, L]

Each example independently gets each augmentation with its probability (AugmentConfig), in this
order; every random number comes from `generator`, drawn in a fixed order and amount whatever the
probabilities, so a seed gives the same batch bit for bit, and changing one probability does not
reshuffle the others' draws (the noise and reverb sample tensors excepted, which are drawn only for
examples that use them).

1. EQ: one RBJ peaking biquad per example (log-uniform centre in eq_freq_hz, gain in eq_gain_db,
   Q 0.7..2), run as one batched `torchaudio.functional.lfilter`.
2. Pitch shift: resampling, as a sampler does (pitch and length change together: up is shorter).
   Ratios are quantised to n/128 (about 0.14 semitone) so examples share resample kernels.
3. Time stretch ("decay stretch"): the pitch is kept and only the envelope is stretched: the clip is
   multiplied by a smooth gain g(t) = env(t * rate) / env(t) (RMS envelope, 512-sample windows),
   clamped to -24..+12 dB and held at 1 for the first 10 ms so the transient is untouched. rate > 1
   shortens the decay, like torchaudio's phase vocoder's `rate`, without its transient smearing.
4. Reverb: exponentially decaying Gaussian noise impulse response (reverb_ms is its RT60), unit
   energy, convolved by FFT (torch.fft at a 5-smooth size) and mixed in at reverb_wet.
5. Noise: Gaussian noise at noise_db relative to the clip's *local* RMS envelope, so it decays with
   the kick and tails stay clean (a constant hiss floor would teach the model to hiss).
6. Onset offset: shift right by offset_ms with zero padding (the transient then sits a few ms late).
Then every example is faded out over the last `fade_ms`, re-normalised to `peak_db`, and finally:
7. Gain: the peak is lowered by gain_db (<= 0). This is the last step on purpose: before the
   re-normalisation a gain would be undone. Examples without it keep their peak at `peak_db`.

The signal processing runs on the batch's device (the training device: a GPU does in a few ms what takes a
CPU tens); the draws do not move: every random number, and every decision taken from them (which rows, which
pitch ratios, how long a reverb), comes from the caller's CPU generator and is made on the CPU, then the
parameters and noise tensors are moved to the device. So a seed draws the same on every device, nothing waits
for the device to answer (no value is read back), and on the CPU the output is what it was bit for bit.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import torchaudio.functional as AF

from kickmodel.config import AugmentConfig

PITCH_BASE = 128  # pitch ratios are n / PITCH_BASE
ENV_WIN = 512
ENV_HOP = 128
STRETCH_HOLD_MS = 10.0
STRETCH_GAIN_DB = (-24.0, 12.0)
EQ_Q = (0.7, 2.0)
_EPS = 1e-12


def _uniform(g: torch.Generator, n: int, lo_hi: tuple[float, float]) -> torch.Tensor:
    lo, hi = lo_hi
    return lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)


def _fast_size(n: int) -> int:
    """Smallest m >= n whose only prime factors are 2, 3 and 5 (fast FFT sizes)."""
    m = n
    while True:
        r = m
        for f in (2, 3, 5):
            while r % f == 0:
                r //= f
        if r == 1:
            return m
        m += 1


def _envelope_power(x: torch.Tensor) -> torch.Tensor:
    """Mean power in ENV_WIN windows every ENV_HOP samples, frame k centred at k * ENV_HOP: [B, F]."""
    return F.avg_pool1d((x * x)[:, None, :], ENV_WIN, ENV_HOP, padding=ENV_WIN // 2, count_include_pad=True)[:, 0]


def _to_samples(frames: torch.Tensor, length: int) -> torch.Tensor:
    """Frame values (frame k at sample k * ENV_HOP) linearly interpolated to [B, length]."""
    pos = torch.arange(length, dtype=torch.float32, device=frames.device) / ENV_HOP
    i0 = pos.floor().long().clamp(max=frames.shape[1] - 1)
    i1 = (i0 + 1).clamp(max=frames.shape[1] - 1)
    w = (pos - i0.float())[None, :]
    return frames[:, i0] * (1 - w) + frames[:, i1] * w


def _on(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor (drawn or derived from the draws) on the batch's device; the copy does not wait for the device."""
    return t.to(device, non_blocking=True)


class Augmenter:
    """Per-example random augmentation of a [B, L] float32 batch (see the module docstring)."""

    def __init__(self, cfg: AugmentConfig, sample_rate: int, peak_db: float = -1.0, fade_ms: float = 30.0):
        self.cfg = cfg
        self.sample_rate = int(sample_rate)
        self.peak = 10.0 ** (peak_db / 20.0)
        self.fade_ms = fade_ms
        self._fades: dict[tuple[int, str], torch.Tensor] = {}

    # -- the individual augmentations, each on the selected rows only --------------------------

    def _eq(self, x: torch.Tensor, freq: torch.Tensor, gain_db: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        w0 = 2 * math.pi * freq.clamp(max=0.45 * self.sample_rate) / self.sample_rate
        a = 10.0 ** (gain_db / 40.0)
        alpha = torch.sin(w0) / (2 * q)
        cos = torch.cos(w0)
        b = _on(torch.stack([1 + alpha * a, -2 * cos, 1 - alpha * a], dim=1), x.device)
        den = _on(torch.stack([1 + alpha / a, -2 * cos, 1 - alpha / a], dim=1), x.device)
        return AF.lfilter(x.double(), den, b, clamp=False, batching=True).float()

    def _pitch(self, x: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        out = torch.empty_like(x)
        for n in steps.unique().tolist():  # steps: on the CPU, from the draws
            rows = _on((steps == n).nonzero()[:, 0], x.device)
            if n == PITCH_BASE:
                out[rows] = x[rows]
                continue
            # playback speed n / PITCH_BASE: L samples become L * PITCH_BASE / n (speed up = shorter = higher)
            y = AF.resample(x[rows], orig_freq=n, new_freq=PITCH_BASE)
            if y.shape[1] >= length:
                out[rows] = y[:, :length]
            else:
                out[rows] = F.pad(y, (0, length - y.shape[1]))
        return out

    def _stretch(self, x: torch.Tensor, rate: torch.Tensor) -> torch.Tensor:
        length, device = x.shape[1], x.device
        p = _envelope_power(x)  # [k, F]
        frames = p.shape[1]
        floor = p.amax(dim=1, keepdim=True) * 1e-10 + _EPS
        src = torch.arange(frames, dtype=torch.float64, device=device)[None, :] * _on(rate, device)[:, None]
        i0 = src.floor().long().clamp(max=frames - 1)
        i1 = (i0 + 1).clamp(max=frames - 1)
        w = (src - src.floor()).clamp(0, 1).float()
        target = torch.where(src <= frames - 1, p.gather(1, i0) * (1 - w) + p.gather(1, i1) * w, torch.zeros_like(p))
        gain_db = (10.0 * torch.log10((target + floor) / (p + floor))).clamp(*STRETCH_GAIN_DB)
        t_ms = torch.arange(frames, dtype=torch.float32, device=device) * ENV_HOP * 1000.0 / self.sample_rate
        hold = ((t_ms - STRETCH_HOLD_MS) / STRETCH_HOLD_MS).clamp(0, 1)  # 0 in the first 10 ms, ramp to 1 by 20 ms
        gain = 10.0 ** (gain_db * hold[None, :] / 20.0)
        return x * _to_samples(gain, length)

    def _reverb(self, x: torch.Tensor, rt60_ms: torch.Tensor, wet: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        n_ir, device = noise.shape[1], x.device
        t = torch.arange(n_ir, dtype=torch.float32, device=device)[None, :] / self.sample_rate
        rt60_ms, wet, noise = _on(rt60_ms, device), _on(wet, device), _on(noise, device)
        ir = noise * 10.0 ** (-3.0 * t / (rt60_ms[:, None].float() / 1000.0))  # -60 dB at rt60
        ir = ir / ir.norm(dim=1, keepdim=True).clamp(min=_EPS)
        # torch.fft at a 5-smooth size: torchaudio's fftconvolve uses L + n - 1, which can factor badly (4x slower)
        nfft = _fast_size(x.shape[1] + n_ir - 1)
        rev = torch.fft.irfft(torch.fft.rfft(x, n=nfft) * torch.fft.rfft(ir, n=nfft), n=nfft)[:, : x.shape[1]]
        return x + wet[:, None].float() * rev

    def _noise(self, x: torch.Tensor, level_db: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        rms = _to_samples(_envelope_power(x).sqrt(), x.shape[1])
        return x + _on(noise, x.device) * rms * (10.0 ** (_on(level_db, x.device)[:, None].float() / 20.0))

    def _offset(self, x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """Row i shifted right by shift[i] samples, zeros before. shift is on the CPU (from the draws), so the
        slices need nothing from the device; a copy per row is 5x faster on a CPU than one gather of all rows."""
        out = torch.zeros_like(x)
        length = x.shape[1]
        for i, s in enumerate(shift.tolist()):
            out[i, s:] = x[i, : length - s]
        return out

    def _fade(self, length: int, device: torch.device) -> torch.Tensor:
        n = min(length, max(2, int(round(self.fade_ms * self.sample_rate / 1000.0))))
        key = (n, str(device))
        if key not in self._fades:
            self._fades[key] = _on((0.5 * (1 + torch.cos(torch.linspace(0, math.pi, n)))).float(), device)
        return self._fades[key]

    # -- the batch --------------------------------------------------------------------------------

    def __call__(self, batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if batch.dim() != 2:
            raise ValueError(f"Augmenter expects [B, L], got shape {tuple(batch.shape)}")
        c, g, sr = self.cfg, generator, self.sample_rate
        device = batch.device
        x = batch.detach().to(dtype=torch.float32, copy=True)  # on the batch's device
        b, length = x.shape

        # every draw happens here, on the CPU, in a fixed order and amount
        use = {k: torch.rand(b, generator=g, dtype=torch.float64) < p
               for k, p in (("eq", c.eq_p), ("pitch", c.pitch_p), ("stretch", c.stretch_p), ("reverb", c.reverb_p),
                            ("noise", c.noise_p), ("offset", c.offset_p), ("gain", c.gain_p))}
        eq_freq = _uniform(g, b, (math.log(c.eq_freq_hz[0]), math.log(c.eq_freq_hz[1]))).exp()
        eq_gain = _uniform(g, b, c.eq_gain_db)
        eq_q = _uniform(g, b, EQ_Q)
        semitones = _uniform(g, b, c.pitch_semitones)
        rate = _uniform(g, b, c.stretch_rate)
        rt60 = _uniform(g, b, c.reverb_ms)
        wet = _uniform(g, b, c.reverb_wet)
        noise_db = _uniform(g, b, c.noise_db)
        offset_ms = _uniform(g, b, c.offset_ms)
        gain_db = _uniform(g, b, c.gain_db)

        # rows: chosen on the CPU (from the draws), indexing the batch on its device as `at`
        rows = use["eq"].nonzero()[:, 0]
        if len(rows):
            at = _on(rows, device)
            x[at] = self._eq(x[at], eq_freq[rows], eq_gain[rows], eq_q[rows])
        # speed = 2**(semitones/12), quantised to n / PITCH_BASE
        steps = (PITCH_BASE * 2.0 ** (semitones / 12.0)).round().long()
        rows = (use["pitch"] & (steps != PITCH_BASE)).nonzero()[:, 0]
        if len(rows):
            at = _on(rows, device)
            x[at] = self._pitch(x[at], steps[rows])
        rows = (use["stretch"] & (rate != 1.0)).nonzero()[:, 0]
        if len(rows):
            at = _on(rows, device)
            x[at] = self._stretch(x[at], rate[rows])
        rows = use["reverb"].nonzero()[:, 0]
        if len(rows):
            n_ir = int(math.ceil(float(rt60[rows].max()) / 1000.0 * sr))
            ir_noise = torch.randn(len(rows), max(n_ir, 1), generator=g)
            at = _on(rows, device)
            x[at] = self._reverb(x[at], rt60[rows], wet[rows], ir_noise)
        rows = use["noise"].nonzero()[:, 0]
        if len(rows):
            at = _on(rows, device)
            x[at] = self._noise(x[at], noise_db[rows], torch.randn(len(rows), length, generator=g))
        shift = (offset_ms * sr / 1000.0).round().long().clamp(0, length - 1)
        rows = (use["offset"] & (shift > 0)).nonzero()[:, 0]
        if len(rows):
            at = _on(rows, device)
            x[at] = self._offset(x[at], shift[rows])

        fade = self._fade(length, device)
        x[:, length - len(fade):] *= fade
        peak = x.abs().amax(dim=1, keepdim=True)
        x = torch.where(peak > _EPS, x * (self.peak / peak.clamp(min=_EPS)), x)
        gain = torch.where(use["gain"], 10.0 ** (gain_db / 20.0), torch.ones_like(gain_db)).float()
        return x * _on(gain, device)[:, None]
