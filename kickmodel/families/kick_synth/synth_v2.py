"""Version 2 of the kick synthesiser: version 1's patch (synth.py) with a body and a texture nearer a drum's.

Measured bass drums have several near-harmonic low partials (a harmonic series shifted up by a few Hz), scores of
inharmonic modes between a few hundred Hz and a few kHz under roughly one shared decay, and a pitch that falls as the
amplitude decays (tension modulation, about two semitones on an acoustic kick), beside the independent exponential
sweep of an 808-style kick. Version 2 adds, to version 1's 34 numbers (whose names, ranges and meaning it keeps):

    partials  N_PARTIALS - 1 partials above the fundamental, under its pitch envelope: partial k (2..N_PARTIALS) at
              f(t) * (k + partial_shift) / (1 + partial_shift) (a harmonic series moved up; 0: harmonic), at
              partials_db + partial_tilt * log2(k / 2) re the fundamental, decaying in
              decay * partial_decay ** log2(k) under the body's decay curve
    modes     an inharmonic cluster: MEMBRANE_RATIOS (an ideal membrane's modes, re its lowest) times modes_hz,
              following the tension glide, at modes_db in all (modes_tilt dB per octave across it), under one shared
              decay modes_decay times the body's; struck: every mode starts at phase 0, as a struck membrane's do
    glide     the body's frequency is f_end * (1 + sweep * exp(-(t / sweep_tau) ** sweep_curve) + glide * a(t) ** 2)
              where a(t) = exp(-(t / decay) ** decay_curve) is the body's decay: a pitch that falls as the amplitude
              does (f_end is still the settled pitch, so a pitch asked in Hz is still set by scaling it)
    noise     the click's and the residual's noise drawn per kick from the kick's seed (version 1 plays one draw for
              every kick: a kit of its kicks shares one texture). Without a seed (a fit) it is version 1's draw:
              a fit is deterministic, and its band gains are the texture's spectrum, whatever the draw

Every part starts under an envelope that is 0 at t = 0, so a kick's first sample is still exactly 0; every
sinusoid is muted above ALIAS_HZ_FRACTION of the rate (a high partial of a steep sweep would otherwise fold).
STAGES: how much of it is on, for the ablation (bench/studies/synth_ceiling.py --stage): each stage one addition
more, the fit's onset-weighted loss last. A model plays the whole synth (stage None).
"""

from __future__ import annotations

import math

import torch

from .synth import NOISE_SEED, PARAMS, RESIDUAL_BANDS, KickSynth, Param, curve, db, register, to_params

N_PARTIALS = 6  # the fundamental and five above it
# the modes of an ideal circular membrane, re its lowest (zeros of the Bessel functions, j_mn / j_01): the first 12
# (each mode is a sinusoid over the whole kick: a fit's cost grows with them)
MEMBRANE_RATIOS = (1.0, 1.594, 2.136, 2.296, 2.653, 2.918, 3.156, 3.501, 3.600, 3.652, 4.060, 4.154)
ALIAS_HZ_FRACTION = 0.45  # of the sample rate: a sinusoid above it is muted (over the next 5 % of the rate)

PARAMS_V2: tuple[Param, ...] = PARAMS + (
    Param("partials_db", -70.0, 0.0, False, "dB"),  # partial 2 re the fundamental
    Param("partial_tilt", -24.0, 6.0, False, "dB/oct"),  # each octave of partial number above partial 2
    Param("partial_shift", 0.0, 0.6),  # partial k at (k + shift) / (1 + shift) times the fundamental
    Param("partial_decay", 0.1, 1.0, True),  # partial k decays in decay * partial_decay ** log2(k)
    Param("modes_hz", 120.0, 1200.0, True, "Hz"),  # the cluster's lowest mode
    Param("modes_db", -80.0, 0.0, False, "dB"),  # the cluster's level re the body
    Param("modes_tilt", -12.0, 12.0, False, "dB/oct"),  # across the cluster
    Param("modes_decay", 0.02, 1.0, True),  # of the body's decay
    Param("glide", 0.001, 0.5, True),  # the tension glide: f rises by glide * a(t) ** 2
)
INDEX_V2 = {p.name: i for i, p in enumerate(PARAMS_V2)}

PARTS = ("noise", "partials", "modes", "glide")
# the ablation's rows, in order: (parts on, whether the fit weighs the onset: fit.py ONSET10_*)
STAGES: dict[str, tuple[frozenset[str], bool]] = {
    "texture": (frozenset({"noise"}), False),
    "partials": (frozenset({"noise", "partials"}), False),
    "modes": (frozenset({"noise", "partials", "modes"}), False),
    "glide": (frozenset(PARTS), False),
    "fit": (frozenset(PARTS), True),
}

RESTART_PARTS = frozenset({"noise", "glide"})  # what a fit's first stage plays (KickSynth2.for_restarts)


def stage_of(stage: str | None) -> tuple[frozenset[str], bool]:
    """(parts, onset loss) of a stage name; None: the whole synth and fit, what a model plays."""
    if stage is None:
        return frozenset(PARTS), True
    try:
        return STAGES[stage]
    except KeyError:
        raise ValueError(f"synth stage {stage!r}: one of {', '.join(STAGES)}") from None


def noise_seed(seed: int) -> int:
    """The noise draw's seed for a kick's seed: mixed, so it is not the prior's own draw for that seed."""
    return (int(seed) * 0x9E3779B97F4A7C15 + NOISE_SEED) % (1 << 63)


class KickSynth2(KickSynth):
    """Version 2: params_u [n, len(PARAMS_V2)] (unconstrained), seeds [n] or None -> audio [n, length]."""

    version = 2

    def __init__(self, sample_rate: int, length: int, stage: str | None = None,
                 parts: frozenset[str] | None = None, period: int | None = None) -> None:
        super().__init__(sample_rate, length, period)
        self.parts = stage_of(stage)[0] if parts is None else parts
        self.register_buffer("partial_k", torch.arange(2, N_PARTIALS + 1, dtype=torch.float32)[None, :, None],
                             persistent=False)
        self.register_buffer("mode_ratio", torch.tensor(MEMBRANE_RATIOS)[None, :, None], persistent=False)

    def for_restarts(self) -> KickSynth2:
        """The synth a fit's first stage plays, where a few sweep shapes are tried and one kept: without the partials
        and the modes (its numbers stay where they start; the second stage fits them), so trying shapes costs what
        version 1's does."""
        return KickSynth2(self.sample_rate, self.length, parts=self.parts & RESTART_PARTS,
                          period=self.period).to(self.t.device)

    def _noise(self, seeds: torch.Tensor | None, n: int) -> torch.Tensor:
        """[1 or n, 2, bins]: the noise spectra (click, residual): one draw per kick from its seed, else the fixed."""
        if seeds is None or "noise" not in self.parts:
            return self.noise_spec[None]
        draws = [torch.randn(2, self.period, generator=torch.Generator().manual_seed(noise_seed(s)))
                 for s in seeds.reshape(-1).tolist()]
        return torch.fft.rfft(torch.stack(draws)).to(self.noise_spec.device)

    def _unaliased(self, hz: torch.Tensor) -> torch.Tensor:
        top = ALIAS_HZ_FRACTION * self.sample_rate
        return ((top - hz) / (0.05 * self.sample_rate)).clamp(0.0, 1.0)

    def forward(self, u: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        p = to_params(u.float(), 2)
        P = {name: p[:, i:i + 1] for name, i in INDEX_V2.items()}
        t, log_t = self.t[None], self.log_t[None]
        sr = self.sample_rate
        rise = 1 - torch.exp(-t / P["attack"])
        fall = curve(log_t, P["decay"], P["decay_curve"])  # (t / decay) ** c: the body decays as exp(-fall)
        a = torch.exp(-fall)
        glide = P["glide"] * a * a if "glide" in self.parts else torch.zeros_like(a)
        rel = 1 + P["sweep"] * torch.exp(-curve(log_t, P["sweep_tau"], P["sweep_curve"])) + glide
        freq = P["f_end"] * rel
        phase = 2 * math.pi * torch.cumsum(freq.double(), dim=1).float() / sr
        phase = phase - phase[:, :1]  # sin starts at 0
        amp = rise * a
        body2_amp = rise * torch.exp(-curve(log_t, P["decay"] * P["body2_decay"], P["decay_curve"]))
        body = amp * torch.sin(phase) + db(P["body2_db"]) * body2_amp * torch.sin(P["body2_ratio"] * phase)
        c = P["decay_curve"][:, :, None]
        if "partials" in self.parts:
            k = self.partial_k  # [1, K, 1]
            shift = P["partial_shift"][:, :, None]
            ratio = (k + shift) / (1 + shift)  # [n, K, 1]
            level = db(P["partials_db"][:, :, None] + P["partial_tilt"][:, :, None] * torch.log2(k / 2))
            # exp(-(t / (decay * m)) ** c) = exp(-fall * m ** -c), m = partial_decay ** log2(k)
            env = torch.exp(-fall[:, None] * P["partial_decay"][:, :, None].pow(-c * torch.log2(k)))
            with torch.no_grad():  # a mute, not a number to fit: no gradient through it
                audible = self._unaliased(freq[:, None] * ratio)
            body = body + rise * (level * env * audible * torch.sin(ratio * phase[:, None])).sum(dim=1)
        if "modes" in self.parts:
            r = self.mode_ratio  # [1, M, 1]
            base = 2 * math.pi * torch.cumsum((P["modes_hz"] * (1 + glide)).double(), dim=1).float() / sr
            base = base - base[:, :1]
            top = 1 + (P["glide"] if "glide" in self.parts else 0.0)  # the glide's highest, at t = 0
            # each mode's level, muted where its highest frequency would fold: constant in time ([n, 1, M])
            w = (db(P["modes_db"][:, :, None] + P["modes_tilt"][:, :, None] * torch.log2(r)) / math.sqrt(r.numel())
                 * self._unaliased(P["modes_hz"][:, :, None] * r * top[:, :, None] if torch.is_tensor(top)
                                   else P["modes_hz"][:, :, None] * r)).transpose(1, 2)
            env = rise * torch.exp(-fall * P["modes_decay"].pow(-P["decay_curve"]))  # one shared decay
            body = body + env * torch.bmm(w, torch.sin(r * base[:, None]))[:, 0]
        spec = self._noise(seeds, u.shape[0])
        click_mag = torch.exp(-0.5 * ((self.log2f[None] - torch.log2(P["click_hz"])) / (P["click_bw"] / 2.355)) ** 2)
        click_env = (1 - torch.exp(-t / P["attack"].clamp(max=0.002))) * torch.exp(-t / P["click_tau"])
        click = db(P["click_db"]) * click_env * self._shaped(spec[:, 0], click_mag)
        drive = P["drive"]
        mix = torch.tanh(drive * (body + click)) / torch.tanh(drive)
        bands = p[:, INDEX_V2["residual_band0"]:INDEX_V2["residual_band0"] + RESIDUAL_BANDS]
        res_mag = db(bands) @ self.band_interp
        res_env = rise * torch.exp(-t / P["residual_tau"])
        residual = db(P["residual_db"]) * res_env * self._shaped(spec[:, 1], res_mag)
        return db(P["level_db"]) * (mix + residual)


def _version_2(sample_rate: int, length: int, stage: str | None, period: int | None = None) -> KickSynth2:
    return KickSynth2(sample_rate, length, stage, period=period)


register(2, PARAMS_V2, _version_2)
