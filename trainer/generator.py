"""The one small interface through which the daemon (and evaluation) talk to a model.

    gen = load_generator(path, device)        # any family; refuses bad artifacts with ArtifactError
    gen.controls                               # ("decay", "pitch", "click"): dials, each 0..1
    gen.sample([Item(seed=7, controls={"decay": 0.8})], steps=25, sampler="dpmpp_2m") -> [n, length]
    gen.vary(source, strength=0.5, items=[...]) -> [n, length]

A later family (a mel VAE, latent diffusion) implements the same three things and registers in
FAMILY_LOADERS; the daemon does not change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from .artifact import Artifact, ArtifactError, load_artifact
from .diffusion import SAMPLERS, Denoiser, run_sampler
from .model import build_network

MAX_STEPS = 1000


@dataclass
class Item:
    """One kick to make: its seed and its control values (0..1; absent controls are left free)."""

    seed: int
    controls: dict[str, float] = field(default_factory=dict)


class KickGenerator(Protocol):
    name: str
    family: str
    sample_rate: int
    length: int
    controls: tuple[str, ...]
    default_steps: int
    default_sampler: str
    device: torch.device

    def sample(self, items: Sequence[Item], steps: int | None = None,
               sampler: str | None = None) -> np.ndarray: ...

    def vary(self, source: np.ndarray, strength: float, items: Sequence[Item], steps: int | None = None,
             sampler: str | None = None) -> np.ndarray: ...


def resolve_device(spec: str = "auto") -> torch.device:
    """'auto' -> first CUDA device if present, else CPU; 'cuda' / 'cuda:N' / 'cpu' as given (checked)."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(spec)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device {spec!r} asked for, but CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise RuntimeError(f"device {spec!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist")
    elif dev.type != "cpu":
        raise RuntimeError(f"device {spec!r} is not supported (use auto, cpu, cuda or cuda:N)")
    return dev


HIGHPASS_HZ = 20.0  # subsonic filter: kick fundamentals sit at 40..100 Hz, below 20 Hz is drift and rumble


def finish_kick(audio: np.ndarray, sample_rate: int, peak_db: float = -1.0, fade_ms: float = 20.0,
                highpass_hz: float = HIGHPASS_HZ) -> np.ndarray:
    """Make a generated clip ready to drop into a DAW: finite, DC removed, a 2nd-order subsonic
    high-pass at highpass_hz (0: off), a short raised-cosine fade at the end (so the last sample is
    0, no click), peak at peak_db. Works on [L] or [n, L].

    The high-pass is what a sample-pack editor does by hand: the bundled model's raw output carries a
    slow drift below 20 Hz that sits as a floor about 65 dB under the peak through the whole tail (a
    real kick's file decays to silence), and stacks into rumble when the kick repeats. The filter
    takes that floor under -100 dB and leaves the body (-0.3 dB at 40 Hz)."""
    x = np.nan_to_num(np.asarray(audio, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    squeeze = x.ndim == 1
    x = np.atleast_2d(x)
    x = x - x.mean(axis=1, keepdims=True)
    if highpass_hz > 0 and x.shape[1] > 1:
        import torchaudio.functional as AF

        # torchaudio's biquads clamp to [-1, 1]: filter at peak 0.5 (the level is set again below)
        scale = 2.0 * np.maximum(np.abs(x).max(axis=1, keepdims=True), 1e-12)
        x = AF.highpass_biquad(torch.from_numpy(x / scale), sample_rate, highpass_hz).numpy() * scale
    n_fade = max(1, int(sample_rate * fade_ms / 1000))
    n_fade = min(n_fade, x.shape[1])
    x[:, -n_fade:] *= 0.5 * (1 + np.cos(np.linspace(0, math.pi, n_fade)))
    peak = np.abs(x).max(axis=1, keepdims=True)
    target = 10 ** (peak_db / 20)
    x = np.where(peak > 1e-9, x * (target / np.maximum(peak, 1e-12)), 0.0)
    out = x.astype(np.float32)
    return out[0] if squeeze else out


def reject_images(audio: np.ndarray, sample_rate: int, period: int, depth_db: float = 30.0,
                  width_hz: float = 200.0) -> np.ndarray:
    """Attenuate bands around multiples of sample_rate / period (zero phase, FFT domain).

    A network whose output layer upsamples frames of `period` samples leaves images of the signal
    around those frequencies (for the 16-sample frames of the waveform U-Net: 2756, 5512, 8269 Hz,
    ...: the body's frequency as sidebands of each). Each band gets a Gaussian dip of depth_db at
    its centre and width_hz standard deviation; the rest of the spectrum is untouched."""
    x = np.atleast_2d(np.asarray(audio, dtype=np.float64))
    n = x.shape[1]
    pad = n + 8192  # no wrap-around of the filter's short ring
    freqs = np.fft.rfftfreq(pad, 1.0 / sample_rate)
    f0 = sample_rate / period
    gain = np.ones_like(freqs)
    depth = 1.0 - 10 ** (-depth_db / 20)
    k = 1
    while k * f0 < sample_rate / 2:
        gain *= 1.0 - depth * np.exp(-0.5 * ((freqs - k * f0) / width_hz) ** 2)
        k += 1
    y = np.fft.irfft(np.fft.rfft(x, pad, axis=1) * gain, pad, axis=1)[:, :n]
    out = y.astype(np.float32)
    return out[0] if np.ndim(audio) == 1 else out


class WaveformDiffusionGenerator:
    """Family "waveform_diffusion": a U-Net denoiser over the raw waveform."""

    family = "waveform_diffusion"

    def __init__(self, artifact: Artifact, device: torch.device) -> None:
        cfg = artifact.config
        self.artifact = artifact
        self.config = cfg
        self.name = artifact.name
        self.sample_rate = cfg.data.sample_rate
        self.length = cfg.data.length
        self.controls = tuple(cfg.model.controls)
        self.control_quantiles = artifact.control_quantiles
        self.default_steps = cfg.sampling.steps
        self.default_sampler = cfg.sampling.sampler
        self.guidance = cfg.sampling.guidance
        self.device = device
        net = build_network(cfg)
        try:
            net.load_state_dict(artifact.tensors, strict=True)
        except RuntimeError as e:
            first = str(e).strip().splitlines()
            reason = first[0] if first else e
            raise ArtifactError(f"{artifact.path}: weights do not fit its config ({reason})") from None
        net.eval().requires_grad_(False)
        self.denoiser = Denoiser.from_config(net, cfg).to(device)
        self.schedule = self.denoiser.schedule
        self.scale = cfg.diffusion.data_scale
        self.time_power = cfg.sampling.time_power
        self.image_reject_db = cfg.sampling.image_reject_db

    # ----------------------------------------------------------- helpers
    def _cond(self, items: Sequence[Item]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if not self.controls:
            for it in items:
                if it.controls:
                    raise ValueError(f"model {self.name!r} takes no controls (got {', '.join(sorted(it.controls))})")
            return None, None
        vals = torch.zeros(len(items), len(self.controls))
        mask = torch.zeros(len(items), len(self.controls))
        for i, it in enumerate(items):
            unknown = sorted(set(it.controls) - set(self.controls))
            if unknown:
                raise ValueError(f"unknown control(s) {', '.join(unknown)}; model {self.name!r} takes "
                                 f"{', '.join(self.controls)}")
            for j, name in enumerate(self.controls):
                if name in it.controls:
                    v = float(it.controls[name])
                    if not (0.0 <= v <= 1.0):
                        raise ValueError(f"control {name} must be within 0..1, got {v}")
                    vals[i, j], mask[i, j] = v, 1.0
        return vals.to(self.device), mask.to(self.device)

    def _denoise_fn(self, cond: torch.Tensor | None, mask: torch.Tensor | None) -> Callable:
        den = self.denoiser
        if cond is None or self.guidance == 1.0 or not bool(mask.any()):
            return lambda x, t: den(x, t, cond, mask)
        w = self.guidance

        def guided(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            n = x.shape[0]
            both = den(torch.cat([x, x]), torch.cat([t, t]), torch.cat([cond, cond]),
                       torch.cat([mask, torch.zeros_like(mask)]))
            c, u = both[:n], both[n:]
            return (u + w * (c - u)).clamp(-self.scale, self.scale)

        return guided

    def _noise(self, items: Sequence[Item], offset: int = 0) -> tuple[torch.Tensor, list[torch.Generator]]:
        gens = []
        noise = []
        for it in items:
            g = torch.Generator().manual_seed(int(it.seed) + offset)
            noise.append(torch.randn(1, self.length, generator=g))
            gens.append(g)
        return torch.stack(noise).to(self.device), gens

    def _timegrid(self, steps: int, t_start: float) -> torch.Tensor:
        return t_start * self.schedule.timegrid(steps, 1.0) ** self.time_power

    def _check(self, steps: int | None, sampler: str | None) -> tuple[int, str]:
        steps = self.default_steps if steps is None else int(steps)
        sampler = self.default_sampler if sampler is None else sampler
        if not 1 <= steps <= MAX_STEPS:
            raise ValueError(f"steps must be within 1..{MAX_STEPS}, got {steps}")
        if sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
        return steps, sampler

    # ----------------------------------------------------------- the interface
    @torch.inference_mode()
    def sample(self, items: Sequence[Item], steps: int | None = None, sampler: str | None = None) -> np.ndarray:
        """New kicks, one per item, [n, length] float32 at self.sample_rate (raw: see finish_kick)."""
        steps, sampler = self._check(steps, sampler)
        cond, mask = self._cond(items)
        x, gens = self._noise(items)
        ts = self._timegrid(steps, 1.0)
        x = x * float(self.schedule.alpha_sigma(ts[0])[1])
        out = run_sampler(sampler, self._denoise_fn(cond, mask), x, ts, self.schedule, generator=gens)
        return self._output(out)

    def _output(self, out: torch.Tensor) -> np.ndarray:
        audio = (out[:, 0] / self.scale).float().cpu().numpy()
        if self.image_reject_db > 0:
            audio = reject_images(audio, self.sample_rate, self.config.model.patch, self.image_reject_db)
        return audio

    @torch.inference_mode()
    def vary(self, source: np.ndarray, strength: float, items: Sequence[Item], steps: int | None = None,
             sampler: str | None = None) -> np.ndarray:
        """Variations of source ([length] at self.sample_rate) by SDEdit: noise it to t = strength,
        then denoise. strength 0 returns the source; 1 is a fresh kick."""
        steps, sampler = self._check(steps, sampler)
        if not 0.0 <= strength <= 1.0:
            raise ValueError(f"strength must be within 0..1, got {strength}")
        src = torch.as_tensor(np.asarray(source, dtype=np.float32)).reshape(1, 1, -1)
        if src.shape[-1] != self.length:
            raise ValueError(f"source has {src.shape[-1]} samples, the model makes {self.length}")
        src = src.to(self.device).expand(len(items), 1, self.length)
        if strength == 0.0:
            return src[:, 0].float().cpu().numpy().copy()
        cond, mask = self._cond(items)
        noise, gens = self._noise(items)
        n_steps = max(1, math.ceil(steps * strength))
        ts = self._timegrid(n_steps, strength)
        a, s = self.schedule.alpha_sigma(ts[0])
        x = float(a) * src * self.scale + float(s) * noise
        out = run_sampler(sampler, self._denoise_fn(cond, mask), x, ts, self.schedule, generator=gens)
        return self._output(out)

    def describe(self) -> dict:
        return {"name": self.name, "family": self.family, "sample_rate": self.sample_rate, "length": self.length,
                "controls": list(self.controls), "steps": self.default_steps, "sampler": self.default_sampler,
                "device": str(self.device), "step": self.artifact.step}


FAMILY_LOADERS: dict[str, Callable[[Artifact, torch.device], KickGenerator]] = {
    "waveform_diffusion": WaveformDiffusionGenerator,
}


def load_generator(path: Path | str, device: torch.device | str = "cpu") -> KickGenerator:
    """Load any artifact as a generator on device. Raises ArtifactError with a reason."""
    art = load_artifact(Path(path))
    dev = resolve_device(device) if isinstance(device, str) else device
    return FAMILY_LOADERS[art.family](art, dev)
