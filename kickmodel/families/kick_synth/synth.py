"""The kick synthesiser: a differentiable patch of a few dozen bounded numbers -> a kick.

    body      a sine whose frequency falls from f_end * (1 + sweep) to f_end, exp(-(t / sweep_tau) ** sweep_curve),
              phase-accumulated from 0; a second partial at body2_ratio times it, with its own level and decay
    amplitude (1 - exp(-t / attack)) * exp(-(t / decay) ** decay_curve): 0 at t = 0, rising in the attack
    click     noise through a band (centre click_hz, click_bw octaves wide), under its own short envelope
    drive     tanh(drive * x) / tanh(drive) over body and click
    residual  what the patch cannot make (room, beater texture, inharmonic modes): noise shaped by RESIDUAL_BANDS
              gains, under the body's attack and its own decay, at most RESIDUAL_MAX_DB under the body

Every parameter is a squashing of one unconstrained number (PARAMS: a sigmoid onto its range, in log
where the range spans octaves), so no value the prior or a fit produces is unphysical, and the kick's
first sample is exactly 0 whatever the numbers are: every part starts under an envelope that is 0 at
t = 0. The noise is one fixed draw (NOISE_SEED) filtered per kick: a kick is a function of its numbers. The draw is
`period` samples long (the model's length) and a synth playing longer repeats it (its filtered noise is periodic in
the period: the circular filter's own output), so a kick played longer is, over the period, the kick it was.

Versions: the synth a model was trained on is part of the model (its config's `synth.version`; an artifact without it
is version 1, this module's KickSynth and PARAMS: 34 numbers, the model shipped until 2026-12-06). Everything that
needs the numbers' count, names or ranges, or a synth to play them, asks by version here, in one place:
params_for(version), n_params(version), synth_for(version, sample_rate, length), to_params / from_params /
describe(..., version).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

NOISE_SEED = 20261204
RESIDUAL_BANDS = 16
RESIDUAL_MAX_DB = -12.0
RESIDUAL_LO_HZ, RESIDUAL_HI_HZ = 40.0, 16000.0


@dataclass(frozen=True)
class Param:
    name: str
    lo: float
    hi: float
    log: bool = False
    unit: str = ""


PARAMS: tuple[Param, ...] = (
    Param("f_end", 25.0, 250.0, True, "Hz"),
    Param("sweep", 0.02, 24.0, True),  # f_start / f_end - 1
    Param("sweep_tau", 0.0005, 0.25, True, "s"),
    Param("sweep_curve", 0.5, 2.0, True),
    Param("attack", 0.00005, 0.02, True, "s"),
    Param("decay", 0.01, 3.0, True, "s"),
    Param("decay_curve", 0.4, 3.0, True),
    Param("body2_ratio", 1.2, 4.5, True),
    Param("body2_db", -70.0, 0.0, False, "dB"),
    Param("body2_decay", 0.05, 1.0, True),  # of the body's decay
    Param("click_db", -70.0, 6.0, False, "dB"),
    Param("click_tau", 0.0002, 0.04, True, "s"),
    Param("click_hz", 200.0, 16000.0, True, "Hz"),
    Param("click_bw", 0.3, 7.0, True, "oct"),
    Param("drive", 0.05, 8.0, True),
    Param("level_db", -30.0, 12.0, False, "dB"),
    Param("residual_db", -80.0, RESIDUAL_MAX_DB, False, "dB"),
    Param("residual_tau", 0.003, 2.0, True, "s"),
    *(Param(f"residual_band{i}", -40.0, 0.0, False, "dB") for i in range(RESIDUAL_BANDS)),
)
N_PARAMS = len(PARAMS)
INDEX = {p.name: i for i, p in enumerate(PARAMS)}
U_LIMIT = 8.0  # unconstrained values are kept within +-U_LIMIT (sigmoid(8) = 0.9997: the ranges' ends)


VERSIONS = (1, 2)  # the synth versions this kickserver plays (2: synth_v2.py)
LATEST = VERSIONS[-1]  # what a new model is trained on (the presets' synth.version)


# version -> (its numbers, make(sample_rate, length, stage, period) -> the synth): each version's module registers
# itself (version 1 below, 2 at the end of synth_v2.py, which the family's package imports), so this module imports
# none of them and the version lookup stays in this one place
Make = Callable[[int, int, "str | None", "int | None"], torch.nn.Module]
_SYNTHS: dict[int, tuple[tuple[Param, ...], Make]] = {}


def register(version: int, params: tuple[Param, ...], make: Make) -> None:
    _SYNTHS[int(version)] = (tuple(params), make)


def params_for(version: int) -> tuple[Param, ...]:
    """The numbers of synth `version`, in order (ValueError for a version this kickserver does not know)."""
    try:
        return _SYNTHS[version][0]
    except (KeyError, TypeError):
        raise ValueError(f"synth version {version!r}: this kickserver plays {', '.join(map(str, VERSIONS))}") from None


def n_params(version: int) -> int:
    return len(params_for(version))


def index_for(version: int) -> dict[str, int]:
    """Each number's column by name, for synth `version`."""
    return {p.name: i for i, p in enumerate(params_for(version))}


def synth_for(version: int, sample_rate: int, length: int, stage: str | None = None,
              period: int | None = None) -> torch.nn.Module:
    """The synth of `version` at sample_rate, playing `length` samples: (numbers [n, n_params(version)], seeds [n] or
    None) -> audio [n, length]. stage: how much of a version's additions is on (the ablation's rows: synth_v2.STAGES;
    None, what a model plays: all of it). period: its noise draw's length (default `length`), repeated beyond it: a
    model's long kicks take the model's length, so their first `period` samples' noise is its kicks' noise."""
    params_for(version)  # an unknown version is refused here, not played as another
    return _SYNTHS[version][1](sample_rate, length, stage, period)


def _bounds(device=None, dtype=torch.float32, version: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    params = params_for(version)
    lo = torch.tensor([math.log(p.lo) if p.log else p.lo for p in params], dtype=dtype, device=device)
    hi = torch.tensor([math.log(p.hi) if p.log else p.hi for p in params], dtype=dtype, device=device)
    is_log = torch.tensor([p.log for p in params], device=device)
    return lo, hi, is_log


def to_params(u: torch.Tensor, version: int = 1) -> torch.Tensor:
    """Unconstrained [..., n_params(version)] -> parameter values in their units, each within its range."""
    lo, hi, is_log = _bounds(u.device, u.dtype, version)
    v = lo + (hi - lo) * torch.sigmoid(u)
    return torch.where(is_log, v.exp(), v)


def from_params(p: torch.Tensor, version: int = 1) -> torch.Tensor:
    """Inverse of to_params (values clamped just inside their ranges)."""
    lo, hi, is_log = _bounds(p.device, p.dtype, version)
    v = torch.where(is_log, p.clamp(min=1e-12).log(), p)
    s = ((v - lo) / (hi - lo)).clamp(1e-6, 1 - 1e-6)
    return torch.logit(s).clamp(-U_LIMIT, U_LIMIT)


class KickSynth(torch.nn.Module):
    """params_u [n, N_PARAMS] (unconstrained) -> audio [n, length] at sample_rate. No weights: the fixed noise's
    spectrum is a buffer made at construction (not saved), the rest is arithmetic."""

    per_kick_on_cpu = True  # its oscillators' work grows with every row and fills the cores (kickmodel.batching)
    one_thread_on_cpu = True  # a kick's ops are too short to split: a sleeping second thread's wake-up costs more
    version = 1

    def __init__(self, sample_rate: int, length: int, period: int | None = None) -> None:
        super().__init__()
        self.sample_rate, self.length = int(sample_rate), int(length)
        self.period = self.length if period is None else int(period)  # the noise's, repeated beyond it
        if not 0 < self.period <= self.length:
            raise ValueError(f"synth noise period {self.period}: give 1..length ({self.length})")
        g = torch.Generator().manual_seed(NOISE_SEED)
        noise = torch.randn(2, self.period, generator=g)
        self.register_buffer("noise_spec", torch.fft.rfft(noise), persistent=False)  # click, residual
        freqs = torch.fft.rfftfreq(self.period, 1.0 / self.sample_rate)
        self.register_buffer("log2f", torch.log2(freqs.clamp(min=1.0)), persistent=False)
        # residual bands: gains at RESIDUAL_BANDS centres, linear in log frequency between them
        centres = torch.linspace(math.log2(RESIDUAL_LO_HZ), math.log2(RESIDUAL_HI_HZ), RESIDUAL_BANDS)
        pos = ((self.log2f - centres[0]) / (centres[1] - centres[0])).clamp(0, RESIDUAL_BANDS - 1)
        lo_i = pos.floor().long().clamp(max=RESIDUAL_BANDS - 2)
        frac = pos - lo_i
        interp = torch.zeros(RESIDUAL_BANDS, freqs.numel())
        cols = torch.arange(freqs.numel())
        interp[lo_i, cols] = 1 - frac
        interp[lo_i + 1, cols] += frac
        interp[:, freqs < 20.0] = 0.0
        self.register_buffer("band_interp", interp, persistent=False)
        self.register_buffer("t", torch.arange(self.length, dtype=torch.float32) / self.sample_rate, persistent=False)
        # log time for the shaped curves (t / tau) ** c = exp(c (log t - log tau)), half a sample late at t = 0 so the
        # logarithm and its gradient stay finite (the curves are 1 there to within 1e-3 either way)
        self.register_buffer("log_t", torch.log(self.t + 0.5 / self.sample_rate), persistent=False)

    def _shaped_noise(self, which: int, mag: torch.Tensor) -> torch.Tensor:
        """The fixed noise `which` through the magnitude response mag [n, bins], at unit RMS."""
        return self._shaped(self.noise_spec[which][None], mag)

    def _shaped(self, spec: torch.Tensor, mag: torch.Tensor) -> torch.Tensor:
        """Noise spectra [1 or n, bins] through mag [n, bins], one period at unit RMS, repeated to the length."""
        x = torch.fft.irfft(spec * mag, n=self.period)
        return self._repeat(x / x.pow(2).mean(dim=1, keepdim=True).add(1e-12).sqrt())

    def _repeat(self, x: torch.Tensor) -> torch.Tensor:
        """[n, period] -> [n, length]: the period repeated (x itself when they are equal)."""
        if self.period == self.length:
            return x
        return x.repeat(1, -(-self.length // self.period))[:, :self.length]

    def for_restarts(self) -> KickSynth:
        """The synth a fit's first stage plays (fit.py: a few sweep shapes tried, one kept): version 1's whole."""
        return self

    def forward(self, u: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        """seeds: ignored (version 1 plays its one fixed noise draw for every kick)."""
        p = to_params(u.float())
        P = {name: p[:, i:i + 1] for name, i in INDEX.items()}
        t = self.t[None]
        sr = self.sample_rate
        f_end = P["f_end"]
        log_t = self.log_t[None]
        freq = f_end * (1 + P["sweep"] * torch.exp(-curve(log_t, P["sweep_tau"], P["sweep_curve"])))
        phase = 2 * math.pi * torch.cumsum(freq.double(), dim=1).float() / sr
        phase = phase - phase[:, :1]  # sin starts at 0
        rise = 1 - torch.exp(-t / P["attack"])
        amp = rise * torch.exp(-curve(log_t, P["decay"], P["decay_curve"]))
        body2_amp = rise * torch.exp(-curve(log_t, P["decay"] * P["body2_decay"], P["decay_curve"]))
        body = amp * torch.sin(phase) + db(P["body2_db"]) * body2_amp * torch.sin(P["body2_ratio"] * phase)
        click_mag = torch.exp(-0.5 * ((self.log2f[None] - torch.log2(P["click_hz"])) / (P["click_bw"] / 2.355)) ** 2)
        click_env = (1 - torch.exp(-t / P["attack"].clamp(max=0.002))) * torch.exp(-t / P["click_tau"])
        click = db(P["click_db"]) * click_env * self._shaped_noise(0, click_mag)
        drive = P["drive"]
        mix = torch.tanh(drive * (body + click)) / torch.tanh(drive)
        bands = p[:, INDEX["residual_band0"]:INDEX["residual_band0"] + RESIDUAL_BANDS]
        res_mag = db(bands) @ self.band_interp
        res_env = rise * torch.exp(-t / P["residual_tau"])
        residual = db(P["residual_db"]) * res_env * self._shaped_noise(1, res_mag)
        return db(P["level_db"]) * (mix + residual)


def _version_1(sample_rate: int, length: int, stage: str | None, period: int | None = None) -> KickSynth:
    if stage is not None:
        raise ValueError("synth version 1 has no stages")
    return KickSynth(sample_rate, length, period)


register(1, PARAMS, _version_1)


def curve(log_t: torch.Tensor, tau: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """(t / tau) ** c from log t."""
    return torch.exp(c * (log_t - torch.log(tau)))


def db(x: torch.Tensor) -> torch.Tensor:
    return torch.pow(10.0, x / 20.0)


def describe(u: torch.Tensor, version: int = 1) -> list[dict[str, float]]:
    """Each kick's parameters by name, in their units (for logs, the map and a musician's eyes)."""
    params = params_for(version)
    p = to_params(u.detach().float().reshape(-1, len(params)), version).tolist()
    return [{q.name: round(v, 6) for q, v in zip(params, row)} for row in p]
