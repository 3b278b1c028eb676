"""Audio <-> normalised log-mel, the representation the mel-VAE family works in.

    front = MelFrontEnd(cfg.mel, sample_rate, length)
    x = front(audio)          # [B, L] -> [B, n_mels, frames] in about -1..1 (floor_db -> -1, 0 dB -> 1)
    mag = front.magnitude(x)  # back to linear mel magnitudes (for an inverter)

Magnitudes are scaled so a full-scale sine peaks near 0 dB (the STFT of a Hann window sums to
n_fft / 2; a sine of amplitude A has |X| = A n_fft / 4). Frames: `length // hop` (the centred STFT's
last frame, which holds the fade-out's end, is dropped); the inverse adds it back.
"""

from __future__ import annotations

import torch
import torchaudio

from .config import MelConfig


class MelFrontEnd(torch.nn.Module):
    def __init__(self, cfg: MelConfig, sample_rate: int, length: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.sample_rate = sample_rate
        self.length = length
        self.frames = length // cfg.hop
        self.mel = torchaudio.transforms.MelSpectrogram(
            sample_rate, n_fft=cfg.n_fft, hop_length=cfg.hop, n_mels=cfg.n_mels, f_min=cfg.f_min,
            f_max=min(cfg.f_max, sample_rate / 2), power=1.0, center=True)
        # forward() runs the same transform with the magnitude taken as hypot(re, im): torch's abs() of a
        # complex tensor took 2.3x as long on the CPU and was 15 % of a latent-diffusion training step
        # (docs/profiling.md). The complex STFT comes from the same Spectrogram module (power=None).
        self.stft = torchaudio.transforms.Spectrogram(
            n_fft=cfg.n_fft, hop_length=cfg.hop, power=None, center=True)
        self.gain = cfg.n_fft / 4.0

    @property
    def filterbank(self) -> torch.Tensor:
        """[n_fft // 2 + 1, n_mels] triangular filters."""
        return self.mel.mel_scale.fb

    @property
    def band_centres_hz(self) -> torch.Tensor:
        """[n_mels] each mel band's centre of mass on the STFT's frequency axis (Hz)."""
        fb = self.filterbank
        freqs = torch.linspace(0.0, self.sample_rate / 2, fb.shape[0], dtype=fb.dtype, device=fb.device)
        return (fb * freqs[:, None]).sum(0) / fb.sum(0).clamp(min=1e-12)

    def db_to_unit(self, db: torch.Tensor) -> torch.Tensor:
        f = self.cfg.floor_db
        return (db - f) / (-f) * 2.0 - 1.0

    def unit_to_db(self, x: torch.Tensor) -> torch.Tensor:
        f = self.cfg.floor_db
        return (x + 1.0) / 2.0 * (-f) + f

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """[B, L] audio -> [B, n_mels, frames] normalised log-mel (float32)."""
        spec = self.stft(audio.float())
        mag = self.mel.mel_scale(torch.hypot(spec.real, spec.imag))[..., : self.frames] / self.gain
        db = 20.0 * torch.log10(mag.clamp(min=10.0 ** (self.cfg.floor_db / 20.0)))
        return self.db_to_unit(db)

    def magnitude(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised log-mel [B, n_mels, frames] -> linear mel magnitudes [B, n_mels, frames + 1] in STFT
        units (the dropped last frame repeated), for an inverse STFT of `length` samples."""
        mag = 10.0 ** (self.unit_to_db(x.float()) / 20.0) * self.gain
        return torch.cat([mag, mag[..., -1:]], dim=-1)


def mel_frames(cfg) -> int:
    """Mel frames of a config's clips (what the VAE's encoder sees)."""
    return cfg.data.length // cfg.mel.hop
