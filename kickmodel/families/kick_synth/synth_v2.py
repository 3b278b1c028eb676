"""Version 2 of the kick synthesiser: version 1's patch (synth.py) with a body and a texture nearer a drum's.

Version 2 keeps version 1's 34 numbers (their names, ranges and meaning) and changes:

    noise     the click's and the residual's noise drawn per kick from the kick's seed (version 1 plays one draw for
              every kick: a kit of its kicks shares one texture). Without a seed (a fit) it is version 1's draw:
              a fit is deterministic, and its band gains are the texture's spectrum, whatever the draw

Every part starts under an envelope that is 0 at t = 0, so a kick's first sample is still exactly 0.
STAGES: how much of it is on, for the ablation (bench/studies/synth_ceiling.py --stage): each stage one addition
more. A model plays the whole synth (stage None).
"""

from __future__ import annotations

import math

import torch

from .synth import NOISE_SEED, PARAMS, RESIDUAL_BANDS, KickSynth, Param, curve, db, to_params

PARAMS_V2: tuple[Param, ...] = PARAMS
INDEX_V2 = {p.name: i for i, p in enumerate(PARAMS_V2)}

PARTS = ("noise",)
# the ablation's rows, in order: (parts on, whether the fit weighs the onset)
STAGES: dict[str, tuple[frozenset[str], bool]] = {
    "texture": (frozenset({"noise"}), False),
}


def stage_of(stage: str | None) -> tuple[frozenset[str], bool]:
    """(parts, onset loss) of a stage name; None: the whole synth and fit, what a model plays."""
    if stage is None:
        return frozenset(PARTS), False
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
                 parts: frozenset[str] | None = None) -> None:
        super().__init__(sample_rate, length)
        self.parts = stage_of(stage)[0] if parts is None else parts

    def _noise(self, seeds: torch.Tensor | None, n: int) -> torch.Tensor:
        """[1 or n, 2, bins]: the noise spectra (click, residual): one draw per kick from its seed, else the fixed."""
        if seeds is None or "noise" not in self.parts:
            return self.noise_spec[None]
        draws = [torch.randn(2, self.length, generator=torch.Generator().manual_seed(noise_seed(s)))
                 for s in seeds.reshape(-1).tolist()]
        return torch.fft.rfft(torch.stack(draws)).to(self.noise_spec.device)

    def _shaped(self, spec: torch.Tensor, mag: torch.Tensor) -> torch.Tensor:
        x = torch.fft.irfft(spec * mag, n=self.length)
        return x / x.pow(2).mean(dim=1, keepdim=True).add(1e-12).sqrt()

    def forward(self, u: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        p = to_params(u.float(), 2)
        P = {name: p[:, i:i + 1] for name, i in INDEX_V2.items()}
        t, log_t = self.t[None], self.log_t[None]
        sr = self.sample_rate
        rise = 1 - torch.exp(-t / P["attack"])
        fall = curve(log_t, P["decay"], P["decay_curve"])  # (t / decay) ** c: the body decays as exp(-fall)
        a = torch.exp(-fall)
        rel = 1 + P["sweep"] * torch.exp(-curve(log_t, P["sweep_tau"], P["sweep_curve"]))
        freq = P["f_end"] * rel
        phase = 2 * math.pi * torch.cumsum(freq.double(), dim=1).float() / sr
        phase = phase - phase[:, :1]  # sin starts at 0
        amp = rise * a
        body2_amp = rise * torch.exp(-curve(log_t, P["decay"] * P["body2_decay"], P["decay_curve"]))
        body = amp * torch.sin(phase) + db(P["body2_db"]) * body2_amp * torch.sin(P["body2_ratio"] * phase)
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
