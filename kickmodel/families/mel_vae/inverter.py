"""From a normalised log-mel back to audio.

- `VocosInverter` (learned; Siuzdenko et al. 2023, "Vocos"): ConvNeXt blocks over the mel frames
  predict, per STFT frame, a log-magnitude and a phase angle for each of the n_fft/2 + 1 bins; an
  inverse STFT (hop = the mel hop) gives the audio. No layer upsamples audio samples, so nothing
  images the signal at multiples of sample_rate / stride (the transposed-convolution artefact of Pons
  et al., ICASSP 2021, that put notches at sample_rate/16 into the waveform family's kicks). Trained
  with the VAE on the mel of real, augmented kicks: multi-resolution STFT loss + log-mel L1.
- `GriffinLimInverter` (training-free baseline): the mel filterbank's pseudo-inverse (clamped at 0)
  for the linear magnitude, then Griffin-Lim (torchaudio's iteration, zero initial phase, so it is
  deterministic) with the kick's start as its training clips have it: silence before sample 0 and a
  0.5 ms rise into it (GriffinLimInverter.griffin_lim).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...clips import PRE_ONSET_MS
from ...diffusion import multires_stft_loss
from .config import InverterConfig
from .mel import MelFrontEnd


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, layer_scale: float) -> None:
        super().__init__()
        self.dw = nn.Conv1d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pw1 = nn.Linear(dim, 3 * dim)
        self.pw2 = nn.Linear(3 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), layer_scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dw(x).transpose(1, 2)
        h = self.pw2(F.gelu(self.pw1(self.norm(h))))
        return x + (self.gamma * h).transpose(1, 2)


class VocosInverter(nn.Module):
    kind = "vocos"

    def __init__(self, cfg: InverterConfig, n_mels: int, n_fft: int, hop: int, length: int) -> None:
        super().__init__()
        self.n_fft, self.hop, self.length = n_fft, hop, length
        self.gain = n_fft / 4.0
        self.embed = nn.Conv1d(n_mels, cfg.dim, 7, padding=3)
        self.norm = nn.LayerNorm(cfg.dim)
        self.blocks = nn.ModuleList(ConvNeXtBlock(cfg.dim, 1.0 / max(1, cfg.blocks)) for _ in range(cfg.blocks))
        self.final_norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, n_fft + 2)
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised log-mel [B, n_mels, frames] -> audio [B, length]."""
        x = torch.cat([x, x[..., -1:]], dim=-1).float()  # the centred STFT's last frame
        h = self.norm(self.embed(x).transpose(1, 2)).transpose(1, 2)
        for blk in self.blocks:
            h = blk(h)
        out = self.head(self.final_norm(h.transpose(1, 2))).transpose(1, 2)  # [B, n_fft + 2, frames]
        logmag, angle = out.float().chunk(2, dim=1)
        mag = logmag.exp().clamp(max=1e2) * self.gain
        spec = torch.polar(mag, angle)
        return torch.istft(spec, self.n_fft, self.hop, window=self.window, center=True, length=self.length)


class GriffinLimInverter(nn.Module):
    kind = "griffin-lim"
    per_kick_on_cpu = True  # its FFTs grow with every row and fill the cores (kickmodel.batching)

    def __init__(self, cfg: InverterConfig, front: MelFrontEnd) -> None:
        super().__init__()
        self.front = front
        self.iters = cfg.griffin_lim_iters
        self.nnls_iters = cfg.nnls_iters
        self.register_buffer("pinv", torch.linalg.pinv(front.filterbank.T.double()).float(), persistent=False)
        self.register_buffer("window", torch.hann_window(front.cfg.n_fft), persistent=False)

    # mel bins this close to the front end's floor (mel.floor_db, -100 dB) are silence: a decoder's output
    # hovers there in a kick's tail, and Griffin-Lim turned those crumbs into a noise floor about 78 dB
    # under the attack; zeroed, the tail is digital silence as in the prepared real kicks
    SILENCE_MARGIN_DB = 10.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mel = self.front.magnitude(x)  # [B, n_mels, frames + 1]
        floor = 10.0 ** ((self.front.cfg.floor_db + self.SILENCE_MARGIN_DB) / 20.0) * self.front.gain
        mel = torch.where(mel < floor, torch.zeros_like(mel), mel)
        lin = self.linear(mel)  # [B, n_fft/2 + 1, frames + 1]
        return self.griffin_lim(lin)

    MOMENTUM = 0.99  # torchaudio's fast Griffin-Lim (Perraudin et al. 2013), as AF.griffinlim(..., momentum=0.99)

    def griffin_lim(self, lin: torch.Tensor) -> torch.Tensor:
        """STFT magnitudes [B, n_fft/2 + 1, frames + 1] (frame k centred on sample k * hop) -> audio [B, length].

        torchaudio's Griffin-Lim iteration (its momentum, zero initial phase) on a kick that is silent before
        sample 0 and rises into it over the 0.5 ms every training clip has before its onset
        (kickmodel.clips.PRE_ONSET_MS): silent frames go before the first, the signal is rendered from n_fft/2
        before sample 0, and each pass zeroes what lies before sample 0 and ramps the first 0.5 ms, so the
        phases the next pass finds build the attack after that. Without it the first frame, centred on sample
        0, put its energy on sample 0: the bundled model's kicks started at a median 40 % of their peak, 99 %
        of them above 1 % (a real kick's own mel: 29 %; the real kick: 0 %), and reached it late (onset to peak
        12.8 ms [11.6..15.0], real kicks 9.3 [7.8..10.8]); with it they start at 0 and peak after 7.8 ms
        [7.2..8.1], their mel as close to the decoder's (mean error 1.16 dB, was 1.13; 512 kicks)."""
        c = self.front.cfg
        pre = -(-(c.n_fft // 2) // c.hop)  # silent frames: the signal starts half a window or more before 0
        start = pre * c.hop
        length = self.front.length + start
        n_rise = min(int(round(self.front.sample_rate * PRE_ONSET_MS / 1000.0)), self.front.length)
        support = torch.ones(length, dtype=lin.dtype, device=lin.device)
        support[:start] = 0.0
        support[start:start + n_rise] = 0.5 * (1.0 - torch.cos(torch.linspace(0.0, math.pi, n_rise, dtype=lin.dtype,
                                                                                device=lin.device)))
        spec = F.pad(lin, (pre, 0))  # silence before the kick
        momentum = self.MOMENTUM / (1.0 + self.MOMENTUM)
        angles = torch.ones_like(spec, dtype=torch.complex64 if spec.dtype != torch.float64 else torch.complex128)
        prev: torch.Tensor | float = 0.0
        for _ in range(self.iters):
            audio = torch.istft(spec * angles, c.n_fft, c.hop, c.n_fft, self.window, length=length) * support
            rebuilt = torch.stft(audio, c.n_fft, c.hop, c.n_fft, self.window, center=True, pad_mode="reflect",
                                 return_complex=True)
            angles = rebuilt - momentum * prev
            angles = angles / (angles.abs() + 1e-16)
            prev = rebuilt
        audio = torch.istft(spec * angles, c.n_fft, c.hop, c.n_fft, self.window, length=length) * support
        return audio[..., start:]

    def linear(self, mel: torch.Tensor) -> torch.Tensor:
        """Linear mel magnitudes [B, n_mels, T] -> non-negative STFT magnitudes [B, n_fft/2 + 1, T] whose mel
        is closest to them: the pseudo-inverse clamped at 0, refined by multiplicative NNLS updates
        (each keeps every bin >= 0 and does not raise ||fb^T lin - mel||^2)."""
        fb = self.front.filterbank.to(mel)  # [F, M]; mel = fb^T lin
        lin = (self.pinv @ mel).clamp(min=0.0)
        if self.nnls_iters == 0:
            return lin
        # a bin the clamp zeroed could never grow again under multiplicative updates: start it just above 0
        lin = lin + 1e-3 * lin.mean(dim=(1, 2), keepdim=True).clamp(min=1e-12)
        target = fb @ mel
        for _ in range(self.nnls_iters):
            lin = lin * target / (fb @ (fb.T @ lin)).clamp(min=1e-12)
        return lin


def build_inverter(cfg: InverterConfig, front: MelFrontEnd) -> nn.Module:
    if cfg.kind == "vocos":
        c = front.cfg
        return VocosInverter(cfg, c.n_mels, c.n_fft, c.hop, front.length)
    return GriffinLimInverter(cfg, front)


def inverter_loss(audio_hat: torch.Tensor, audio: torch.Tensor, front: MelFrontEnd) -> torch.Tensor:
    """Per-kick multi-resolution STFT loss + L1 between the log-mels (both 0..2-ish): [B]."""
    mel_l1 = (front(audio_hat) - front(audio)).abs().flatten(1).mean(1)
    return multires_stft_loss(audio_hat.float(), audio.float()) + mel_l1
