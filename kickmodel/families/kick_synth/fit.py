"""Analysis by synthesis: the synth's numbers for a kick, by gradient descent on how far its sound is from it.

The loss is what a listener compares: multi-resolution STFT magnitudes (log and linear, as DDSP's
spectral loss), the loudness envelope in dB, and the first milliseconds of the waveform (the attack and
the click). Frequency gradients alone have many local minima (a sweep fitted an octave off is a valley
of its own), so the body's pitch starts from measurements: its settled frequency from the project's
pitch descriptor, its early frequency from a short window after the onset; and each kick is fitted
from a few sweep shapes at once (RESTARTS), the best kept after the first stage.

Deterministic: the same clips give the same numbers (fixed starts, Adam, no noise).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from ... import descriptors
from .synth import U_LIMIT, from_params, index_for, params_for, synth_for, to_params

FFT_SIZES = (4096, 1024, 256)
ENV_MS = 5.0
ENV_FLOOR_DB = -70.0
ONSET_MS = 25.0
ONSET_WEIGHT = 0.4  # the waveform itself over the first ONSET_MS (relative L1): the attack and the click
# starting sweep shapes (sweep, sweep_tau s) tried for every kick; the best after stage one goes on
# a log-mel term (bands spaced as an ear spaces them, as the MFCCs and a listener weigh a kick): in the linear bins
# of the STFT terms the 30..250 Hz body is a handful of the 2049, so a fit could leave its spectral shape a pure
# sine's while real kicks spread energy over it (the ceiling's embedding showed the pitch-band levels 1.3 sd off)
MEL_BANDS = 64
MEL_FMIN = 20.0
MEL_WEIGHT = 1.0
CROP_DB = -60.0
MIN_FIT_S = 0.3
FIT_RATE_DIVISOR = 2
RESTARTS = ((1.0, 0.01), (3.0, 0.02), (6.0, 0.008), (0.4, 0.05))
# with a pitch track (version 2's fit) the first start is the track's, and the steep guess (6.0, 0.008) is left out:
# over 24 starter kicks its first stage left the best of these three 0.05 above the best of all four on average
# (distance about 7; the track's start won 5, (3.0, 0.02) 11), and the second stage, whose synth plays the partials
# and modes, costs about 1.45 times version 1's a step: three starts keep a served fit near version 1's cost
TRACKED_STARTS = (RESTARTS[0], RESTARTS[1], RESTARTS[3])
# a refinement from an amortised guess (inverse.py) stops once no kick of the batch has bettered its best objective by
# REFINE_TOL (relative) in REFINE_PATIENCE steps: a good guess takes few steps, a poor one up to its iteration limit
REFINE_TOL = 0.002
REFINE_PATIENCE = 10
REFINE_TETHER = 0.3  # the refinement's pull back to the guess (_descend's tether)
# the share of its guess_iters a refinement is priced at (fit_seconds): it stops when the distance stops falling;
# served one at a time, 4 starter kicks took 19, 40, 59 and 60 of 120 steps (2026-12-05)
REFINE_PRICED = 0.5


def starts_for(track: bool) -> tuple[tuple[float, float], ...]:
    """The (sweep, sweep_tau) shapes a fit starts each kick from: the first's sweep is measured (with a track: the
    track's sweep and time)."""
    return TRACKED_STARTS if track else RESTARTS
# the onset, weighed on its own (synth version 2 on; version 1's fits are as they were): the first ONSET10_MS of the
# clip in short windows (ONSET10_FFT samples at the fit's rate: 3 ms) and as a waveform, so the attack and the click,
# a few per cent of a kick's energy and of the long windows' frames, are fitted as a listener hears them first
ONSET10_MS = 10.0
ONSET10_FFT = 64
ONSET10_WEIGHT = 0.5
# what distance()'s figure means, for the lines a fit logs: 0 is the kick itself; another kick of the starter kit
# played against a kick's target measures a median of 8.0 (10th percentile 5.5; 40 kicks, each against a random other)
DISTANCE_MEANING = ("0: the kick itself; another kick of the starter kit scores a median 8.0 (its nearest tenth under "
                    "5.5); lower is closer")
# version 2's distance adds the onset term (ONSET10_*): a pair of starter kicks measures about 15 % more with it (40
# kicks, each against a random other, at the fit's rate over the target's fit length: median 18.9 against 16.5)
DISTANCE_MEANING_V2 = DISTANCE_MEANING + "; version 2 adds its onset term, about 15 % more for the same two kicks"


def stft_mag(x: torch.Tensor, n: int) -> torch.Tensor:
    win = torch.hann_window(n, device=x.device, dtype=x.dtype)
    s = torch.view_as_real(torch.stft(x, n, hop_length=n // 4, window=win, return_complex=True, center=True))
    return s.pow(2).sum(-1).add(1e-12).sqrt()  # |.| with a finite gradient at 0


def spectral_l1(sy: torch.Tensor, mag_x: torch.Tensor, log_x: torch.Tensor, sum_x: torch.Tensor) -> torch.Tensor:
    """Per kick [n]: two STFT magnitudes [n, bins, frames] apart, in log (mean L1; log_x = log(mag_x + 1e-5)) plus in
    magnitude (L1 relative to the target's sum_x [n]): the onset term's spectral half."""
    return (torch.log(sy + 1e-5) - log_x).abs().mean(dim=(1, 2)) + (sy - mag_x).abs().sum(dim=(1, 2)) / sum_x


def relative_l1(y: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Per kick [n]: waveforms [n, k] apart (mean L1), over the target's own mean magnitude scale [n]: the onset
    term's waveform half."""
    return (y - x).abs().mean(dim=1) / scale


def _envelope_db(x: torch.Tensor, sample_rate: int) -> torch.Tensor:
    w = max(1, int(sample_rate * ENV_MS / 1000))
    power = torch.nn.functional.avg_pool1d((x * x)[:, None], w, w)[:, 0]
    return 10 * torch.log10(power + 1e-10)


def _mel_bank(n_fft: int, sample_rate: int, device: torch.device) -> torch.Tensor:
    import torchaudio.functional as AF

    with torch.device("cpu"):  # computed here even while a render's cost is traced on the meta device
        fb = AF.melscale_fbanks(n_fft // 2 + 1, MEL_FMIN, sample_rate / 2, MEL_BANDS, sample_rate, norm="slaney")
    return fb.to(device)


def _log_mel(mag: torch.Tensor, fb: torch.Tensor) -> torch.Tensor:
    """[n, bins, frames] magnitudes -> [n, MEL_BANDS, frames] log mel power."""
    return torch.log(torch.einsum("nbf,bm->nmf", mag.pow(2), fb) + 1e-6)


class Target:
    """What distance() compares against, computed once per fit: a target's spectrograms, envelope, first ms (and with
    onset, its first ONSET10_MS in short windows)."""

    def __init__(self, x: torch.Tensor, sample_rate: int, mask: torch.Tensor | None = None,
                 onset: bool = False, level_free: bool = False) -> None:
        self.sample_rate = sample_rate
        self.mask = torch.ones_like(x) if mask is None else mask  # what of each clip is fitted (its own length)
        # level_free: a render is compared at the target's RMS (over the mask), so the synth's output gain (level_db)
        # is no part of the distance: a file is levelled when written and when read, so its level says nothing of
        # the numbers (a refinement that matched it moved a located kick's level_db, a kit spread or more)
        self.level_free = level_free
        self.rms = _rms(x * self.mask, self.mask)
        longest = 1 << max(4, int(math.log2(max(x.shape[1] // 2, 16))))  # torch.stft's padding needs n < 2 L
        self.sizes = sorted({min(n, longest) for n in FFT_SIZES}, reverse=True)
        self.mags = [stft_mag(x, n) for n in self.sizes]
        self.mel_fb = _mel_bank(self.sizes[0], sample_rate, x.device)
        self.log_mel = _log_mel(self.mags[0], self.mel_fb)
        self.logs = [torch.log(m + 1e-5) for m in self.mags]
        self.sums = [m.sum(dim=(1, 2)).clamp(min=1e-8) for m in self.mags]
        env = _envelope_db(x, sample_rate)
        self.floor = env.amax(dim=1, keepdim=True) + ENV_FLOOR_DB
        self.env = env.maximum(self.floor)
        self.k = int(sample_rate * ONSET_MS / 1000)
        self.early = x[:, :self.k]
        self.early_scale = self.early.abs().mean(dim=1).clamp(min=1e-4)
        self.k10 = int(sample_rate * ONSET10_MS / 1000) if onset else 0
        if self.k10:
            head = x[:, :self.k10]
            self.onset_mag = stft_mag(head, ONSET10_FFT)
            self.onset_log = torch.log(self.onset_mag + 1e-5)
            self.onset_sum = self.onset_mag.sum(dim=(1, 2)).clamp(min=1e-8)
            self.onset_scale = head.abs().mean(dim=1).clamp(min=1e-4)

    def level_free_copy(self) -> Target:
        """The same targets, compared level-free (a render at each target's RMS)."""
        out = Target.__new__(Target)
        out.__dict__ = dict(self.__dict__, level_free=True)
        return out

    def repeat(self, r: int) -> Target:
        """The same targets, each r times in a row (a kick's restarts)."""
        out = Target.__new__(Target)
        out.__dict__ = {k: ([v.repeat_interleave(r, 0) for v in val] if k in ("mags", "logs", "sums")
                            else val.repeat_interleave(r, 0) if isinstance(val, torch.Tensor) and k != "mel_fb"
                            else val)
                        for k, val in self.__dict__.items()}
        return out


def _rms(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x.pow(2).sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1)).add(1e-12).sqrt()


def distance(y: torch.Tensor, target: Target) -> torch.Tensor:
    """Per kick [n]: how far synthesised y [n, L] is from its target (over the target's own length: its mask; at the
    target's RMS when the target is level_free)."""
    y = y * target.mask
    if target.level_free:
        y = y * (target.rms / _rms(y, target.mask))
    total = torch.zeros(y.shape[0], device=y.device)
    for n, log_x, mag_x, sum_x in zip(target.sizes, target.logs, target.mags, target.sums):
        sy = stft_mag(y, n)
        log_term = (torch.log(sy + 1e-5) - log_x).abs().mean(dim=(1, 2))
        total = total + log_term + (sy - mag_x).abs().sum(dim=(1, 2)) / sum_x
        if n == target.sizes[0]:  # the log-mel of the longest window: the 30..250 Hz body in many bands, as an ear
            total = total + MEL_WEIGHT * (_log_mel(sy, target.mel_fb) - target.log_mel).abs().mean(dim=(1, 2))
    ey = _envelope_db(y, target.sample_rate).maximum(target.floor)
    total = total + 0.05 * (ey - target.env).abs().mean(dim=1)
    early = (y[:, :target.k] - target.early).abs().mean(dim=1) / target.early_scale
    total = total + ONSET_WEIGHT * early
    if target.k10:
        head = y[:, :target.k10]
        sy = stft_mag(head, ONSET10_FFT)
        onset = (spectral_l1(sy, target.onset_mag, target.onset_log, target.onset_sum)
                 + relative_l1(head, target.early[:, :target.k10], target.onset_scale))
        total = total + ONSET10_WEIGHT * onset
    return total


# version 2's numbers' starts: partials and modes quiet, a small glide (the descent raises what a kick has)
V2_STARTS = {"partials_db": -30.0, "partial_tilt": -6.0, "partial_shift": 0.05, "partial_decay": 0.5,
             "modes_hz": 350.0, "modes_db": -40.0, "modes_tilt": -3.0, "modes_decay": 0.2, "glide": 0.02}


def _early_pitch(x: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """The strongest frequency under 600 Hz in 3..23 ms after the start (zero-padded FFT): where the sweep is."""
    a, n = int(0.003 * sample_rate), int(0.020 * sample_rate)
    seg = x[:, a:a + n] * torch.hann_window(n, periodic=False, dtype=x.dtype)
    nfft = 1 << 15
    mag = torch.fft.rfft(seg, n=nfft).abs()
    lo, hi = int(30 * nfft / sample_rate), int(600 * nfft / sample_rate)
    k = mag[:, lo:hi].argmax(dim=1) + lo
    return k.to(x.dtype) * sample_rate / nfft


# the pitch track's windows (start, length in ms after the clip's start): short where the sweep is fast, longer where
# the body's few cycles need them
TRACK_WINDOWS_MS = ((2.0, 8.0), (5.0, 10.0), (9.0, 14.0), (15.0, 20.0), (25.0, 30.0))


def _strongest(x: torch.Tensor, sample_rate: int, start_ms: float, length_ms: float, top_hz: float = 600.0
               ) -> torch.Tensor:
    a, n = int(start_ms * sample_rate / 1000), int(length_ms * sample_rate / 1000)
    seg = x[:, a:a + n] * torch.hann_window(n, periodic=False, dtype=x.dtype)
    nfft = 1 << 15
    mag = torch.fft.rfft(seg, n=nfft).abs()
    lo, hi = int(30 * nfft / sample_rate), int(top_hz * nfft / sample_rate)
    return (mag[:, lo:hi].argmax(dim=1) + lo).to(x.dtype) * sample_rate / nfft


def sweep_from_track(x: torch.Tensor, sample_rate: int, f_end: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sweep, sweep_tau s) [n] of f_end * (1 + sweep * exp(-t / tau)) fitted to the clips' pitch track (the strongest
    frequency under 600 Hz in TRACK_WINDOWS_MS, at each window's centre) by least squares on log(f / f_end - 1):
    where fewer than two of a clip's points lie 3 % above f_end, version 1's start (the 3..23 ms pitch, tau 10 ms)."""
    ts = torch.tensor([(a + n / 2) / 1000 for a, n in TRACK_WINDOWS_MS], dtype=x.dtype)
    f = torch.stack([_strongest(x, sample_rate, a, n) for a, n in TRACK_WINDOWS_MS], dim=1)  # [n, W]
    rel = f / f_end[:, None] - 1
    ok = rel > 0.03
    y = torch.log(rel.clamp(min=1e-3))
    w = ok.to(x.dtype)
    cnt = w.sum(dim=1).clamp(min=1)
    tm, ym = (w * ts).sum(dim=1) / cnt, (w * y).sum(dim=1) / cnt
    cov = (w * (ts - tm[:, None]) * (y - ym[:, None])).sum(dim=1)
    var = (w * (ts - tm[:, None]) ** 2).sum(dim=1).clamp(min=1e-12)
    slope = cov / var  # -1 / tau
    tau = (-1 / slope.clamp(max=-1e-3)).clamp(0.001, 0.2)
    sweep = torch.exp(ym + tm / tau).clamp(0.05, 20.0)
    fallback = (_early_pitch(x, sample_rate) / f_end - 1).clamp(0.05, 20.0) * 1.5
    usable = (ok.sum(dim=1) >= 2) & (slope < 0)
    return torch.where(usable, sweep, fallback), torch.where(usable, tau, torch.full_like(tau, 0.01))


def initial_params(x: torch.Tensor, sample_rate: int, version: int = 1, track: bool = False) -> torch.Tensor:
    """Starting numbers [n * len(starts_for(track)), n_params(version)] (unconstrained) for clips x [n, L] from
    measurements. track: the first start's sweep from the clip's pitch track (sweep_from_track), not one window."""
    params, ix = params_for(version), index_for(version)
    raw = descriptors.measure(x, sample_rate)  # decay s, pitch Hz, click dB
    decay, pitch = raw[:, 0].clamp(0.03, 2.5), raw[:, 1]
    early = _early_pitch(x, sample_rate)
    tracked = sweep_from_track(x, sample_rate, pitch * 0.97) if track else None
    starts = []
    for sweep, tau in starts_for(track):
        p = torch.zeros(x.shape[0], len(params))
        for q in params:  # the middle of each range (geometric for log ranges)
            p[:, ix[q.name]] = math.sqrt(q.lo * q.hi) if q.log else 0.5 * (q.lo + q.hi)
        p[:, ix["f_end"]] = pitch * 0.97
        measured_sweep = (early / pitch - 1).clamp(0.05, 20.0)
        p[:, ix["sweep"]] = torch.where(torch.tensor(sweep == RESTARTS[0][0]), measured_sweep * 1.5,
                                           torch.full_like(pitch, sweep))
        p[:, ix["sweep_tau"]] = tau
        if tracked is not None and sweep == RESTARTS[0][0]:
            p[:, ix["sweep"]], p[:, ix["sweep_tau"]] = tracked
        p[:, ix["sweep_curve"]] = 1.0
        p[:, ix["attack"]] = 0.0005
        p[:, ix["decay"]] = decay / 3.0
        p[:, ix["decay_curve"]] = 1.0
        if "body2_db" in ix:
            p[:, ix["body2_db"]] = -40.0
        p[:, ix["click_db"]] = -20.0
        p[:, ix["click_tau"]] = 0.003
        p[:, ix["click_hz"]] = 3000.0
        p[:, ix["click_bw"]] = 2.0
        p[:, ix["drive"]] = 0.5
        p[:, ix["level_db"]] = -1.0
        p[:, ix["residual_db"]] = -50.0
        p[:, ix["residual_tau"]] = 0.05
        for i in range(16):
            p[:, ix[f"residual_band{i}"]] = -20.0
        for name, v in V2_STARTS.items():
            if name in ix:
                p[:, ix[name]] = v
        starts.append(from_params(p, version))
    return torch.stack(starts, dim=1).reshape(-1, len(params))  # clip-major: clip i's restarts are rows i*R..


Guess = Callable[[torch.Tensor, int], torch.Tensor]  # (clips [n, L], sample_rate) -> unconstrained numbers [n, N]


def _descend(synth: torch.nn.Module, u: torch.Tensor, target: Target, iters: int, lr: float,
             progress: Callable[[int], None] | None = None, patience: int = 0,
             tether: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Adam on distance from u for iters steps (lr on a cosine schedule); (numbers, their distance). patience > 0 (a
    refinement from a guess): each kick's best numbers so far are kept rather than the last (from a good start Adam's
    first steps can overshoot), and the descent stops once no kick has bettered its best by REFINE_TOL in `patience`
    steps. tether > 0 adds tether times the mean square of how far each kick's numbers have moved from u: where the
    sound cannot tell numbers apart, they stay where the guess put them."""
    start = u.detach().clone()

    def objective(d: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return d + tether * (v - start).pow(2).mean(dim=1) if tether > 0 else d

    if iters <= 0:
        with torch.no_grad():
            return start, distance(synth(u), target)
    u = u.clone().requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, iters, eta_min=lr * 0.05)
    best_u, best_d = start.clone(), torch.zeros(u.shape[0])
    best_o = torch.full((u.shape[0],), float("inf"))
    since = 0
    for i in range(iters):
        opt.zero_grad(set_to_none=True)
        d = distance(synth(u), target)
        o = objective(d, u)
        if patience > 0:
            with torch.no_grad():
                od = o.detach()
                better = od < best_o - REFINE_TOL * best_o.abs()
                now = od < best_o
                best_u = torch.where(now[:, None], u.detach(), best_u)
                best_d = torch.where(now, d.detach(), best_d)
                best_o = torch.minimum(best_o, od)
                since = 0 if bool(better.any()) else since + 1
            if since >= patience:
                break
        o.sum().backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            u.clamp_(-U_LIMIT, U_LIMIT)
        if progress is not None:
            progress(i)
    with torch.no_grad():
        final = distance(synth(u), target)
        if patience > 0:
            keep = objective(final, u) < best_o
            return torch.where(keep[:, None], u.detach(), best_u), torch.where(keep, final, best_d)
    return u.detach(), final


ADJUST_PASSES = 6
_NEPERS_40DB = 40.0 / 20.0 * math.log(10.0)  # the decay measure's 40 dB in nepers


def adjust(synth: torch.nn.Module, u: torch.Tensor, targets: torch.Tensor,
           finish: Callable[[torch.Tensor], torch.Tensor], passes: int = ADJUST_PASSES,
           check: Callable[[], None] | None = None, seeds: torch.Tensor | None = None,
           settled: bool = False) -> torch.Tensor:
    """Numbers u [n, N] (of synth.version) moved until each kick measures as targets [n, 3] says (decay s, pitch Hz,
    click dB, as kickmodel.descriptors.measure gives them; NaN: leave it; with `settled`, the pitch as a tuner reads
    the settled body, descriptors.settled_pitch_hz: what a pitch asked in Hz means, where a fit matches its clip's
    descriptors). Measured on finish(synth(u, seeds)) (the file a listener gets: seeds [n], each kick's, where the
    synth draws its noise per kick), then the number that moves each measure is corrected, `passes` times:
    - pitch: the whole frequency track scaled (f_end; where f_end is at its range's end, the sweep made shorter,
      which takes its share of the 40..250 ms window the pitch is measured in);
    - decay: the decay time and the residual's (where the decay time is at its range's end, its curve);
    - click: the click's level in dB."""
    device, version = u.device, synth.version
    ix, params = index_for(version), params_for(version)
    u, targets = u.detach().cpu().clone(), targets.detach().cpu()  # measured on the CPU: corrected there too
    decay = targets[:, 0]
    if not bool(decay.isnan().all()):  # first, where exp(-(t / tau) ** c) is 40 dB down, without measuring
        p = to_params(u, version)
        c = p[:, ix["decay_curve"]]
        tau = decay / torch.exp(math.log(_NEPERS_40DB) / c)
        ratio = torch.where(decay.isnan(), torch.ones_like(decay), tau / p[:, ix["decay"]])
        p[:, ix["decay"]] *= ratio
        p[:, ix["residual_tau"]] *= ratio
        u = from_params(p, version)
    keep_best = version >= 2  # the last pass measured too, and each kick's closest pass kept (below)
    best_u, best_err = u.clone(), torch.full((len(u),), float("inf"))
    for k in range(passes + keep_best):
        if check is not None:
            check()
        kicks = finish(torch.cat([synth(u[i:i + 1].to(device), None if seeds is None else seeds[i:i + 1])
                                  for i in range(len(u))]).cpu())
        # one kick at a time: measured in a batch, a kick's figures (and so its correction) move with its neighbours
        got = torch.cat([descriptors.measure(kicks[i:i + 1], synth.sample_rate) for i in range(len(kicks))])
        if settled:
            got[:, 1] = torch.cat([descriptors.settled_pitch_hz(kicks[i:i + 1], synth.sample_rate, got[i:i + 1, 1])
                                   for i in range(len(kicks))])
        if keep_best:
            # the measures are steps, not slopes, where a low kick's tail is a few of its cycles (a 10 ms RMS crosses
            # -40 dB half a period early or late): a correction can overshoot, so the closest pass is the answer
            err = _miss(got, targets)
            better = err < best_err
            best_u[better], best_err[better] = u[better], err[better]
            if k == passes:
                return best_u.to(device)
        p = to_params(u, version)
        lo, hi = (torch.tensor([q.lo for q in params]), torch.tensor([q.hi for q in params]))
        pitch, decay, click = targets[:, 1], targets[:, 0], targets[:, 2]
        r = torch.where(pitch.isnan(), torch.ones_like(pitch), pitch / got[:, 1].clamp(min=1e-3))
        f_end = p[:, ix["f_end"]] * r
        left = f_end / f_end.clamp(lo[ix["f_end"]], hi[ix["f_end"]])  # the part f_end cannot take
        p[:, ix["f_end"]] = f_end
        p[:, ix["sweep_tau"]] *= torch.where(left < 1, left.pow(2), torch.ones_like(left))
        d = torch.where(decay.isnan(), torch.ones_like(decay), decay / got[:, 0].clamp(min=1e-3))
        tau = p[:, ix["decay"]] * d
        lo_tau = lo[ix["decay"]] * 1.01
        stuck = tau < lo_tau  # the shortest decay time with this curve is still too long: steepen the curve
        want = torch.where(decay.isnan(), torch.ones_like(decay), decay)
        if version >= 2:
            # from where the curve is, by the measured ratio: the body's own 40 dB time at the shortest decay, moved
            # by want / got (version 1's closed form aims the body's envelope at `want` itself, so it stops short
            # wherever the attack, the drive or the partials lengthen the measured tail: a fixed point off target)
            want = lo_tau * _NEPERS_40DB ** (1 / p[:, ix["decay_curve"]]) * d
        steeper = math.log(_NEPERS_40DB) / (want / lo_tau).clamp(min=1.05).log()  # tau_lo * 4.6 ** (1 / c) = want
        p[:, ix["decay_curve"]] = torch.where(stuck, steeper, p[:, ix["decay_curve"]])
        p[:, ix["decay"]] = tau
        p[:, ix["residual_tau"]] *= d
        p[:, ix["click_db"]] += torch.where(click.isnan(), torch.zeros_like(click), click - got[:, 2])
        u = from_params(p, version)
    return u.to(device)


def _miss(got: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """How far measures [n, 3] are from targets [n, 3] (NaN: free), the worst of pitch in quarter-semitones (25
    cents), decay in 10 % steps and click in 3 dB steps: [n]."""
    scale = torch.tensor([math.log(1.1), math.log(2 ** (25 / 1200)), 3.0])
    off = torch.stack([(got[:, 0].clamp(min=1e-4) / targets[:, 0]).log().abs(),
                       (got[:, 1].clamp(min=1e-3) / targets[:, 1]).log().abs(), (got[:, 2] - targets[:, 2]).abs()],
                      dim=1) / scale
    return torch.where(targets.isnan(), torch.zeros_like(off), off).amax(dim=1)


def pitch_tracked(u: torch.Tensor, clips: torch.Tensor, sample_rate: int, version: int = 1,
                  check: Callable[[], None] | None = None) -> torch.Tensor:
    """Numbers u [n, n_params(version)] (an amortised guess) with their frequency track scaled until they measure the
    pitch their clips [n, L] measure (kickmodel.descriptors' pitch: one pass of adjust, pitch only). An oscillator's
    frequency is what a descent finds worst (its loss is full of local minima: Hayes et al., ICASSP 2023), and the
    guess reads it from mel bands a semitone or more wide at a kick's 40-60 Hz."""
    want = descriptors.measure(clips, sample_rate)
    want[:, 0] = float("nan")
    want[:, 2] = float("nan")
    return adjust(synth_for(version, sample_rate, clips.shape[1]), u, want, finish=_level_like_a_clip, passes=1,
                  check=check)


def serve_restart_iters(f) -> int:
    """The steps from each start when a served model fits a source file (half of training's)."""
    return max(1, f.restart_iters // 2)


def serve_options(f, version: int = 1, guess: Guess | None = None) -> dict:
    """fit()'s options when a served model fits a source file (a variation's, a morph's end, a located file), from its
    config's fit section f: serve_iters from the best of the measured starts; with an amortised inverse's guess
    (inverse.shipped), also at most serve_iters from the guess (stopping early), each kick's nearer fit kept."""
    opts = {"iters": f.serve_iters, "restart_iters": serve_restart_iters(f), "lr": f.lr, "batch": f.batch,
            "version": version}
    return opts if guess is None else opts | {"guess": guess, "guess_iters": f.serve_iters, "keep_nearer": True}


def fit_lengths(x: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """Samples worth fitting [n] for each clip of x [n, L]: until it has fallen CROP_DB under its peak, plus 50 ms, at
    least MIN_FIT_S (the numbers hold for the whole clip: the synth has no end). Each clip's own: the rest of it is
    masked (Target.mask), so no clip is weighed over another's length."""
    env = _envelope_db(x, sample_rate)
    above = env >= env.amax(dim=1, keepdim=True) + CROP_DB
    last = (above.float() * torch.arange(env.shape[1])).amax(dim=1).long() + 1
    n = last * int(sample_rate * ENV_MS / 1000) + int(0.05 * sample_rate)
    return n.clamp(min=int(MIN_FIT_S * sample_rate), max=x.shape[1])


def fit_rate(sample_rate: int) -> int:
    """The rate the descent runs at (FIT_RATE_DIVISOR)."""
    return sample_rate // FIT_RATE_DIVISOR if sample_rate >= 32000 else sample_rate


def _problem(x: torch.Tensor, sample_rate: int, rate: int, version: int = 1, stage: str | None = None,
             onset: bool = False, level_free: bool = False) -> tuple[torch.nn.Module, torch.Tensor, Target]:
    """What the descent fits clips x [n, L] with: the synth (of `version`, at `stage`) at the fit's rate and length,
    every clip's starts (initial_params; the sweep from a pitch track when onset), and the targets weighed over each
    clip's own length (fit_lengths), with the onset term when onset (level_free: Target's)."""
    import torchaudio.functional as AF

    lengths = (fit_lengths(x, sample_rate) * rate) // sample_rate
    xf = AF.resample(x, sample_rate, rate) if rate != sample_rate else x
    xf = xf[:, :int(lengths.max())]
    mask = (torch.arange(xf.shape[1])[None] < lengths[:, None]).float()
    return (synth_for(version, rate, xf.shape[1], stage), initial_params(x, sample_rate, version, track=onset),
            Target(xf * mask, rate, mask, onset=onset, level_free=level_free))


def fit_seconds(clip: torch.Tensor, sample_rate: int, *, iters: int, restart_iters: int, lr: float = 0.05,
                probe: int = 3, check: Callable[[], None] | None = None,
                clock: Callable[[], float] = time.perf_counter, version: int = 1, guess: Guess | None = None,
                guess_iters: int | None = None, keep_nearer: bool = False) -> float:
    """About how long fit(clip [1, L], ...) takes on this machine now, from a few of its steps (a few per cent of
    the fit's work): its set-up, `probe` steps of each stage (every start at once, then the best one), and one of
    adjust's passes, each timed and counted as often as the fit runs it. What the daemon prices a source file's
    encoding by (kickserver.pricing) without running a whole fit, which could take minutes.

    With guess (fit's): the guess and the pitch track timed, and the refinement's steps counted at REFINE_PRICED of
    guess_iters (it stops early), instead of the measured starts' two stages; keep_nearer: both, and the two
    evaluations that pick the nearer (heard_distance)."""
    x = clip.detach().float().cpu()[:1]
    r, probe = len(starts_for(version >= 2)), max(1, int(probe))
    with torch.enable_grad():
        t0 = clock()
        synth, starts, target = _problem(x, sample_rate, fit_rate(sample_rate), version, onset=version >= 2,
                                         level_free=guess is not None)
        setup = clock() - t0
        if guess is not None:
            from_guess = _guess_seconds(x, sample_rate, synth, target, lr, probe, check, clock, version, guess,
                                        iters if guess_iters is None else guess_iters)
            if not keep_nearer:
                return setup + from_guess
            t0 = clock()
            heard_distance(starts[:1], x, sample_rate, version)  # the pick: each fit heard once
            pick = 2 * (clock() - t0)
            return setup + from_guess + pick + fit_seconds(clip, sample_rate, iters=iters, lr=lr, probe=probe,
                                                               restart_iters=restart_iters, check=check, clock=clock,
                                                               version=version)
        each = (lambda i: check()) if check is not None else None

        def step_s(play: torch.nn.Module, u: torch.Tensor, tgt: Target) -> tuple[float, torch.Tensor]:
            """Seconds a step of the descent from u takes (its closing evaluation taken off), and where it ends."""
            t0 = clock()
            u, _ = _descend(play, u, tgt, probe, lr, each)
            total = clock() - t0
            t0 = clock()
            with torch.no_grad():
                distance(play(u), tgt)
            return max(total - (clock() - t0), 0.5 * total) / probe, u

        restarts = synth.for_restarts()  # the first stage's synth, as fit plays it
        _descend(restarts, starts, target.repeat(r), 1, lr, each)  # a first step of each shape: lazy initialisation
        first, _ = step_s(restarts, starts, target.repeat(r))
        second, u = step_s(synth, starts[:1], target)
    with torch.no_grad():
        t0 = clock()
        adjust(synth_for(version, sample_rate, x.shape[1]), u, descriptors.measure(x, sample_rate),
               finish=_level_like_a_clip, passes=1, check=check)
        one_pass = clock() - t0
    return setup + restart_iters * first + iters * second + (ADJUST_PASSES + (version >= 2)) * one_pass


def _guess_seconds(x: torch.Tensor, sample_rate: int, synth: torch.nn.Module, target: Target, lr: float, probe: int,
                   check: Callable[[], None] | None, clock: Callable[[], float], version: int, guess: Guess,
                   guess_iters: int) -> float:
    """fit_seconds' estimate of a fit from a guess (after its set-up)."""
    each = (lambda i: check()) if check is not None else None
    t0 = clock()
    with torch.no_grad():
        u = guess(x, sample_rate).float().cpu().clamp(-U_LIMIT, U_LIMIT)
        u = pitch_tracked(u, x, sample_rate, version, check)
    first = clock() - t0
    _descend(synth, u, target, 1, lr, each)  # lazy initialisation
    t0 = clock()
    _descend(synth, u, target, probe, lr, each)
    step = (clock() - t0) / (probe + 1)  # probe steps and the closing evaluation (about a step's forward)
    t0 = clock()
    with torch.no_grad():
        adjust(synth_for(version, sample_rate, x.shape[1]), u, descriptors.measure(x, sample_rate),
               finish=_level_like_a_clip, passes=1, check=check)
    one_pass = clock() - t0
    return first + REFINE_PRICED * max(0, int(guess_iters)) * step + (ADJUST_PASSES + (version >= 2)) * one_pass


def heard_distance(u: torch.Tensor, x: torch.Tensor, sample_rate: int, version: int = 1,
                   stage: str | None = None) -> torch.Tensor:
    """[n]: distance() of each clip of x [n, L] (prepared) from its numbers u [n, N] played as the daemon plays them
    (the synth at the clip's rate and length, its fixed noise, finished: kickmodel.dsp.finish_kick), over the clip's
    fit length (fit_lengths), at the full rate, level and all. One yardstick for fits made any way: a descent's own
    figure is taken at half the rate, on a shorter render, and (from a guess) level-free."""
    from ...dsp import finish_kick

    synth = synth_for(version, sample_rate, x.shape[1], stage)
    out = []
    with torch.no_grad():
        for clip, row in zip(x, u):
            clip = clip[None].float()
            y = torch.from_numpy(finish_kick(synth(row[None].float()).numpy(), sample_rate)).float()
            n = int(fit_lengths(clip, sample_rate)[0])
            out.append(distance(y[:, :n], Target(clip[:, :n], sample_rate))[0])
    return torch.stack(out)


def nearer(fits: list[torch.Tensor], x: torch.Tensor, sample_rate: int, version: int = 1,
           stage: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(each kick's nearest of fits [k][n, N], its heard_distance [n]) to clips x [n, L] (ties: the first)."""
    d = torch.stack([heard_distance(u, x, sample_rate, version, stage) for u in fits], dim=1)  # [n, k]
    best = d.argmin(dim=1)
    rows = torch.arange(len(x))
    return torch.stack(fits, dim=1)[rows, best], d[rows, best]


def fit(clips: torch.Tensor, sample_rate: int, *, iters: int = 300, restart_iters: int = 60, lr: float = 0.05,
        batch: int = 32, log: Callable[[str], None] | None = None,
        check: Callable[[], None] | None = None, progress_s: float | None = None,
        clock: Callable[[], float] = time.monotonic, version: int = 1,
        stage: str | None = None, guess: Guess | None = None, guess_iters: int | None = None,
        keep_nearer: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(numbers [n, n_params(version)] unconstrained, distance [n]) fitted to clips [n, L] (prepared, on the CPU), for
    synth `version` (stage: how much of its synth and fit is on, for the ablation: synth_v2.STAGES; None: all).

    guess: an amortised inverse ((clips, sample_rate) -> numbers: inverse.InverseNet.guess, for this version): each
    batch starts from its guesses, their pitch set from the clips' (pitch_tracked), and descends at most guess_iters
    steps (default iters; 0: the guess as pitch_tracked and adjust leave it), stopping early once the distance stops
    falling (REFINE_PATIENCE), tethered to the guess (REFINE_TETHER), at the clips' level (Target.level_free),
    instead of from the measured starts. keep_nearer (with a guess): the fit from the measured starts as well, and
    each kick's nearer of the two kept (nearer(): its distance is then heard_distance's): over the starter kit the
    guess's fit is the nearer for 57 of 101 kicks, the other 44 it misses by more than the measured starts do.

    log: a line per batch of clips fitted, with their median distance and what it means (DISTANCE_MEANING); with
    progress_s, also a line at least that many seconds (on `clock`) apart while a batch is being fitted: how far
    it is and about how long is left.

    The descent runs at half the rate (FIT_RATE_DIVISOR: a kick's body, sweep and most of its click lie under a
    quarter of the rate, and it halves the cost), weighing the part of each clip that sounds (fit_lengths); the numbers
    mean the same at any rate. Then `adjust` at the clips' own rate makes each fit measure as its clip does
    (decay, pitch, click): what the descent leaves a few per cent off, the controls are read from."""
    x_all = clips.detach().float().cpu()
    n = x_all.shape[0]
    rate = fit_rate(sample_rate)
    numbers = len(params_for(version))
    onset = False  # version 1's fit as it was: no onset term, the one-window sweep start
    if version >= 2:
        from .synth_v2 import stage_of

        onset = stage_of(stage)[1]
    out_u, out_d = torch.zeros(n, numbers), torch.zeros(n)
    r = len(starts_for(onset))
    refine = iters if guess_iters is None else max(0, int(guess_iters))
    # the work in all, in kick-steps: a first-stage step descends every start of its kicks (r rows a kick)
    n_work = -(-n // batch) * ((refine if guess is not None else 0)
                               + (restart_iters * r + iters if guess is None or keep_nearer else 0))
    started = clock()
    said = [started, 0]  # when the last progress line was logged, kick-steps done

    def tick(work: int) -> None:
        if check is not None:
            check()
        said[1] += work
        now = clock()
        if log is not None and progress_s is not None and now - said[0] >= progress_s:
            said[0] = now
            done = min(1.0, said[1] / n_work)
            left = (now - started) * (1 - done) / max(done, 1e-9)
            log(f"fitting the synth to {n} clips: {done:.0%} after {now - started:.0f} s, about {left:.0f} s left")

    with torch.enable_grad():
        for a in range(0, n, batch):
            x = x_all[a:a + batch]
            # each clip whole until here (resampled, measured for its starts), then weighed over its own length only;
            # the batch is played to its longest clip (the synth's fixed noise is a draw of that length, and Adam turns
            # the batched FFTs' rounding into small differences: a clip's numbers still move a little with the clips
            # fitted beside it; training fits each clip once and keeps it, serving fits one file at a time)
            synth, starts, target = _problem(x, sample_rate, rate, version, stage, onset)
            each = check is not None or log is not None  # a cancel between two steps, a progress line
            if guess is not None:
                u = guess(x, sample_rate).float().cpu().clamp(-U_LIMIT, U_LIMIT)
                u = pitch_tracked(u, x, sample_rate, version, check)
                u, d = _descend(synth, u, target.level_free_copy(), refine, lr, (lambda i: tick(1)) if each else None,
                                patience=REFINE_PATIENCE, tether=REFINE_TETHER)
                fits = [u]
            if guess is None or keep_nearer:
                u, d = _descend(synth.for_restarts(), starts, target.repeat(r), restart_iters, lr,
                                (lambda i: tick(r)) if each else None)
                best = d.reshape(-1, r).argmin(dim=1)
                u = u.reshape(-1, r, numbers)[torch.arange(len(x)), best]
                u, d = _descend(synth, u, target, iters, lr, (lambda i: tick(1)) if each else None)
                fits = [u] if guess is None else fits + [u]
            with torch.no_grad():
                full = x_all[a:a + batch]
                fits = [adjust(synth_for(version, sample_rate, full.shape[1], stage), u,
                               descriptors.measure(full, sample_rate), finish=_level_like_a_clip, check=check)
                        for u in fits]
                if len(fits) > 1:  # each kick's nearer as the daemon plays it (heard_distance)
                    u, d = nearer(fits, x, sample_rate, version, stage)
                else:
                    u = fits[0]
            out_u[a:a + len(x)], out_d[a:a + len(x)] = u, d
            if log is not None:
                log(f"fitted the synth to clips {a + 1}..{a + len(x)} of {n} in {clock() - started:.0f} s "
                    f"(distance median {d.median():.3f}; {DISTANCE_MEANING_V2 if onset else DISTANCE_MEANING})")
    return out_u, out_d


def _level_like_a_clip(y: torch.Tensor) -> torch.Tensor:
    return y / y.abs().amax(dim=1, keepdim=True).clamp(min=1e-9)
