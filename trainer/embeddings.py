"""Clip-level audio embeddings for evaluation: one vector per kick, compared by FAD/KID/novelty.

    emb = get_embedding("mfcc-stats")          # built in, offline, deterministic
    emb = get_embedding("mypkg.clap:embed")    # a user's callable (VGGish, CLAP, ... with local weights)
    emb = get_embedding("~/clap_embed.py:embed")
    z = emb(clips, 44100)                      # clips [n, L] float -> [n, emb.dim] float64

An embedding is anything with `name`, `dim` and `__call__(clips, sample_rate) -> [n, dim]`
(`Embedding`). A user's "module:attr" may name such an object, a class that builds one with no
arguments, or a plain function `f(clips, sample_rate) -> [n, dim]` (its dim is learned on the
first call). Nothing here downloads anything; a user's module is imported as it is.

"mfcc-stats" (version 1) is 91 numbers per clip, raw (nothing is standardised here: FAD needs the
features as they are; evaluation standardises them by the real set's statistics). Time is measured
from sample 0 (clips are onset-aligned: a kick whose transient comes late is a worse kick). All
levels are dB re. full scale of a power spectrum scaled so a full-scale sine reads about 0 dB,
floored at -100 dB (digital silence). One STFT serves A-D: Hann window of about 23 ms (1024 samples
at 44.1/48 kHz, 512 at 22.05/32 kHz), hop of a quarter window, zero padding (not reflection)
around the clip so the attack is not mirrored into negative time.

  A. 40 timbre numbers: 20 MFCCs (DCT-II, orthonormal, of the 40-band log-mel spectrum, HTK mel
     20 Hz .. min(16 kHz, sr/2)), their mean (20) and standard deviation (20) over all frames.
     Most frames of a kick are its tail, so the mean follows the tail's colour (hiss raises the
     upper coefficients) and the std follows how much the spectrum moves (a sweep, a decay).
  B. 30 envelope-by-band numbers: the mean power in each of 5 time segments after sample 0
     (0-20, 20-80, 80-200, 200-500 ms, 500 ms-end: attack, body, decay, tail, late tail) in each of
     6 bands (20-100 Hz fundamental, 100-300 Hz harmonics, 300-1000 Hz, 1-3 kHz, 3-8 kHz click,
     8 kHz-sr/2 air), in dB. Hiss in the tail lifts the last segments' upper bands by tens of dB
     over a real kick's silence; a click lifts the first segment's upper bands; the body's decay
     shape is the low bands across segments. A segment beyond the clip reads -100 dB.
  C. 5 tonality numbers: spectral flatness (10 log10 of the geometric over the arithmetic mean,
     100 Hz .. min(16 kHz, sr/2)) of each segment's mean power spectrum, in dB: near 0 for noise
     (and for silence, which sits on the flat floor), strongly negative for a tonal body.
  D. 4 envelope-timing numbers, in ms, from the broadband frame energy: attack (first frame
     within 30 dB of the peak frame, to the peak frame) and the time after the peak frame of the
     last frame still within 20, 40 and 60 dB of it (a hiss floor 30 dB down holds the last two at
     the clip's end).
  E. 12 pitch-profile numbers: the body's spectrum 20-200 ms after sample 0 (Hann window, FFT
     zero-padded to >= 0.7 s for ~1.3 Hz bins), its power in 12 quarter-octave bands from 30 to
     240 Hz, in dB re. the sum of those bands (shape only: where the fundamental sits).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
import torchaudio.functional as AF

FLOOR_DB = -100.0
_FLOOR = 10.0 ** (FLOOR_DB / 10.0)
SEGMENTS_MS = ((0.0, 20.0), (20.0, 80.0), (80.0, 200.0), (200.0, 500.0), (500.0, math.inf))
SEGMENT_NAMES = ("0-20ms", "20-80ms", "80-200ms", "200-500ms", "500ms-end")
BANDS_HZ = ((20.0, 100.0), (100.0, 300.0), (300.0, 1000.0), (1000.0, 3000.0), (3000.0, 8000.0), (8000.0, math.inf))
BAND_NAMES = ("20-100Hz", "100-300Hz", "300-1kHz", "1-3kHz", "3-8kHz", "8kHz-")
N_MELS = 40
N_MFCC = 20
MEL_FMIN = 20.0
MEL_FMAX = 16000.0
FLATNESS_HZ = (100.0, 16000.0)
ATTACK_DB = 30.0
DECAY_DBS = (20.0, 40.0, 60.0)
PITCH_SEGMENT_MS = (20.0, 200.0)
PITCH_BANDS = 12
PITCH_LOW_HZ = 30.0  # edges 30 * 2**(k/4), k = 0..12: 30 .. 240 Hz
PITCH_MIN_FFT_S = 0.7


@runtime_checkable
class Embedding(Protocol):
    """A clip-level embedding: [n, L] audio at sample_rate -> [n, dim] features (deterministic)."""

    name: str
    dim: int

    def __call__(self, clips: np.ndarray, sample_rate: int) -> np.ndarray: ...


def _as_batch(clips: np.ndarray) -> torch.Tensor:
    x = np.asarray(clips, dtype=np.float32)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"an embedding takes clips [n, L], got shape {tuple(np.shape(clips))}")
    if not np.isfinite(x).all():
        raise ValueError("clips contain NaN or inf")
    return torch.from_numpy(np.ascontiguousarray(x))


def _db(p: torch.Tensor) -> torch.Tensor:
    return 10.0 * torch.log10(p.clamp(min=0.0) + _FLOOR)


class MfccStats:
    """The built-in "mfcc-stats" embedding (see the module docstring for every feature)."""

    name = "mfcc-stats"
    version = 1
    dim = 2 * N_MFCC + len(SEGMENTS_MS) * len(BANDS_HZ) + len(SEGMENTS_MS) + 1 + len(DECAY_DBS) + PITCH_BANDS

    def __init__(self) -> None:
        self._cache: dict[int, dict[str, torch.Tensor]] = {}

    @staticmethod
    def feature_names() -> list[str]:
        names = [f"mfcc{i}_mean" for i in range(N_MFCC)] + [f"mfcc{i}_std" for i in range(N_MFCC)]
        names += [f"level_{s}_{b}" for s in SEGMENT_NAMES for b in BAND_NAMES]
        names += [f"flatness_{s}" for s in SEGMENT_NAMES]
        names += ["attack_ms"] + [f"decay{int(d)}_ms" for d in DECAY_DBS]
        edges = [PITCH_LOW_HZ * 2 ** (k / 4) for k in range(PITCH_BANDS + 1)]
        names += [f"pitch_{edges[k]:.0f}-{edges[k + 1]:.0f}Hz" for k in range(PITCH_BANDS)]
        return names

    @staticmethod
    def n_fft(sample_rate: int) -> int:
        return 1 << int(round(math.log2(0.0232 * sample_rate)))

    def _tables(self, sample_rate: int) -> dict[str, torch.Tensor]:
        if sample_rate in self._cache:
            return self._cache[sample_rate]
        n_fft = self.n_fft(sample_rate)
        n_bins = n_fft // 2 + 1
        freqs = torch.arange(n_bins, dtype=torch.float64) * sample_rate / n_fft
        fmax = min(MEL_FMAX, sample_rate / 2)
        mel = AF.melscale_fbanks(n_bins, MEL_FMIN, fmax, N_MELS, sample_rate, norm=None, mel_scale="htk")
        dct = AF.create_dct(N_MFCC, N_MELS, norm="ortho")  # [n_mels, n_mfcc]
        bands = torch.stack([((freqs >= lo) & (freqs < hi)).float() for lo, hi in BANDS_HZ], dim=1)  # [bins, 6]
        flat = (freqs >= FLATNESS_HZ[0]) & (freqs < min(FLATNESS_HZ[1], sample_rate / 2))
        window = torch.hann_window(n_fft, periodic=True)
        t = {"n_fft": torch.tensor(n_fft), "mel": mel.float(), "dct": dct.float(), "bands": bands,
             "flat": flat, "window": window, "scale": torch.tensor(2.0 / float(window.sum()) ** 2)}
        self._cache[sample_rate] = t
        return t

    @torch.no_grad()
    def __call__(self, clips: np.ndarray, sample_rate: int) -> np.ndarray:
        x = _as_batch(clips)
        n, length = x.shape
        tb = self._tables(sample_rate)
        n_fft = int(tb["n_fft"])
        hop = n_fft // 4
        spec = torch.stft(x, n_fft, hop, window=tb["window"], center=True, pad_mode="constant",
                          return_complex=True)
        power = (spec.real ** 2 + spec.imag ** 2) * tb["scale"]  # [n, bins, frames]
        frames = power.shape[2]
        t_ms = torch.arange(frames, dtype=torch.float64) * hop * 1000.0 / sample_rate  # frame centres

        # A. MFCC mean and std over frames
        logmel = _db(torch.einsum("nbf,bm->nmf", power, tb["mel"]))  # [n, mels, frames]
        mfcc = torch.einsum("nmf,mc->ncf", logmel, tb["dct"])
        feats = [mfcc.mean(dim=2), mfcc.std(dim=2, unbiased=False)]

        # B, C. per segment: band levels and flatness of the segment's mean power spectrum
        levels, flatness = [], []
        for a, b in SEGMENTS_MS:
            sel = (t_ms >= a) & (t_ms < b)
            if not bool(sel.any()):
                levels.append(torch.full((n, len(BANDS_HZ)), FLOOR_DB))
                flatness.append(torch.zeros(n))
                continue
            mean_spec = power[:, :, sel].mean(dim=2)  # [n, bins]
            levels.append(_db(mean_spec @ tb["bands"]))
            p = mean_spec[:, tb["flat"]].double() + _FLOOR
            flatness.append((10.0 * (p.log().mean(dim=1) - p.mean(dim=1).log()) / math.log(10.0)).float())
        feats += [torch.cat(levels, dim=1), torch.stack(flatness, dim=1)]

        # D. envelope timing from the broadband frame energy
        env = _db(power.sum(dim=1))  # [n, frames]
        peak_val, peak_idx = env.max(dim=1)
        pos = torch.arange(frames)[None, :]
        frame_ms = hop * 1000.0 / sample_rate
        first = (env >= (peak_val - ATTACK_DB)[:, None]).float().argmax(dim=1)
        timing = [(peak_idx - first).float() * frame_ms]
        for d in DECAY_DBS:
            above = (env >= (peak_val - d)[:, None]) & (pos >= peak_idx[:, None])
            last = torch.where(above, pos, torch.zeros_like(pos)).amax(dim=1)
            timing.append((last - peak_idx).float() * frame_ms)
        feats.append(torch.stack(timing, dim=1))

        # E. pitch profile of the body
        a = min(int(round(PITCH_SEGMENT_MS[0] * sample_rate / 1000)), length - 2)
        b = max(min(int(round(PITCH_SEGMENT_MS[1] * sample_rate / 1000)), length), a + 2)
        seg = x[:, a:b].double()
        seg = (seg - seg.mean(dim=1, keepdim=True)) * torch.hann_window(b - a, periodic=False, dtype=torch.float64)
        nfft = 1 << math.ceil(math.log2(max(b - a, PITCH_MIN_FFT_S * sample_rate)))
        mag2 = torch.fft.rfft(seg, n=nfft).abs() ** 2
        f = torch.arange(mag2.shape[1], dtype=torch.float64) * sample_rate / nfft
        edges = [PITCH_LOW_HZ * 2 ** (k / 4) for k in range(PITCH_BANDS + 1)]
        band_p = torch.stack([mag2[:, (f >= edges[k]) & (f < edges[k + 1])].sum(dim=1) for k in range(PITCH_BANDS)],
                             dim=1)
        total = band_p.sum(dim=1, keepdim=True)
        rel = torch.where(total > 0, band_p / total.clamp(min=1e-300), torch.full_like(band_p, 1.0 / PITCH_BANDS))
        feats.append((10.0 * torch.log10(rel + _FLOOR)).float())

        out = torch.cat([f_.float() for f_ in feats], dim=1).double().numpy()
        assert out.shape == (n, self.dim), out.shape
        return out


class _FunctionEmbedding:
    """Wraps a user's function f(clips, sample_rate) -> [n, dim]; checks what it returns."""

    def __init__(self, name: str, fn: Callable[[np.ndarray, int], Any], dim: int | None = None) -> None:
        self.name = name
        self._fn = fn
        self.dim = int(dim) if dim is not None else -1  # learned on the first call

    def __call__(self, clips: np.ndarray, sample_rate: int) -> np.ndarray:
        x = _as_batch(clips).numpy()
        out = self._fn(x, sample_rate)
        if isinstance(out, torch.Tensor):
            out = out.detach().cpu().numpy()
        out = np.asarray(out, dtype=np.float64)
        if out.ndim != 2 or out.shape[0] != x.shape[0]:
            raise ValueError(f"embedding {self.name!r} returned shape {out.shape} for {x.shape[0]} clips; "
                             "expected [n, dim]")
        if self.dim < 0:
            self.dim = int(out.shape[1])
        elif out.shape[1] != self.dim:
            raise ValueError(f"embedding {self.name!r} returned {out.shape[1]} features, it said {self.dim}")
        if not np.isfinite(out).all():
            raise ValueError(f"embedding {self.name!r} returned NaN or inf")
        return out


BUILTIN: dict[str, Callable[[], Embedding]] = {"mfcc-stats": MfccStats}


def _import(module: str) -> Any:
    path = Path(module).expanduser()
    if module.endswith(".py"):
        if not path.is_file():
            raise ValueError(f"embedding module file {module!r} does not exist")
        mod_name = f"_kick_embedding_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot import {module!r}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"cannot import embedding module {module!r}: {e}") from None


def get_embedding(spec: str) -> Embedding:
    """A built-in embedding by name ("mfcc-stats"), or "module:attr" / "path/file.py:attr" for a
    user's embedding object, class (built with no arguments) or function f(clips, sample_rate)."""
    if spec in BUILTIN:
        return BUILTIN[spec]()
    module, sep, attr = spec.rpartition(":")
    if not sep or not module or not attr:
        raise ValueError(f"unknown embedding {spec!r}: use one of {', '.join(BUILTIN)} or module:function")
    obj = getattr(_import(module), attr, None)
    if obj is None:
        raise ValueError(f"embedding module {module!r} has no attribute {attr!r}")
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"embedding {spec!r} is not callable")
    return _FunctionEmbedding(str(getattr(obj, "name", spec)), obj, getattr(obj, "dim", None))
