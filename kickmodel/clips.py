"""One kick file as a model sees it: decode, mix to mono, resample, onset-align, clean and fit to the
model's clip length. Training (trainer/data.py) and serving (a variation's source, an interpolation's
end) prepare clips with these same functions, so a kick means the same thing to both.

    clip, seconds = load_clip(Path("kick.wav"), DataConfig())   # BadAudio with the reason if unusable
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from . import dsp
from .config import DataConfig
from .dsp import CLIP_HIGHPASS_HZ, fall, resample

PRE_ONSET_MS = 0.5  # kept before the detected onset so the attack's first rise is not cut
END_FADE_MS = 2.0  # fade at the natural end of a clip shorter than cfg.length
SILENCE_DB = -80.0  # a file whose peak is below this (dBFS) is "silent"

# What a file may cost before any work starts (training files and the daemon's variation sources alike;
# kickserver/sources.py checks the same from the header). A kick is short: a longer file is refused, not
# decoded whole to find its first hit.
MAX_SECONDS = 30.0
MAX_SAMPLES = 8 << 20  # frames x channels decoded at most (32 MB of float32)
MIN_RATE, MAX_RATE = 1000, 384000  # sample rates a file may have (Hz); any rate in between is resampled
# torchaudio's sinc resampler builds a kernel of new' x (orig' + 2 x width) values, orig'/new' the ratio
# reduced by the rates' gcd: 147 x 174 from 48 kHz to 44.1 kHz, but 44100 x 9085 (1.6 GB) from 9071 Hz.
# Ratios whose kernel is larger than this are approximated (resample_ratio); every common rate is exact.


def _audio_extensions() -> frozenset[str]:
    formats = set(sf.available_formats())
    ext = {".wav", ".flac"}  # libsndfile always has these
    if "AIFF" in formats:
        ext |= {".aif", ".aiff"}
    if "OGG" in formats:
        ext.add(".ogg")
    if "MP3" in formats:
        ext.add(".mp3")
    return frozenset(ext)


AUDIO_EXTENSIONS: frozenset[str] = _audio_extensions()  # lower case, with the dot, as Path.suffix.lower()


class BadAudio(Exception):
    """A file that cannot be used; the message is the reason ("silent", "contains NaN", ...)."""



# decoding one clip


def check_header(frames: int, rate: int, channels: int) -> None:
    """Whether a file this long, at this rate, with these channels may be decoded and prepared (its cost is
    bounded: MAX_SECONDS, MAX_SAMPLES, MIN_RATE..MAX_RATE); BadAudio with the reason if not."""
    if rate <= 0 or channels <= 0 or frames < 0:
        raise BadAudio("malformed header (no sample rate or channels)")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise BadAudio(f"sample rate {rate} Hz is outside {MIN_RATE}..{MAX_RATE} Hz; convert the file to "
                       "44100 or 48000 Hz")
    if frames / rate > MAX_SECONDS:
        raise BadAudio(f"{frames / rate:.1f} s long; at most {MAX_SECONDS:g} s (cut the kick out of the file)")
    if frames * channels > MAX_SAMPLES:
        raise BadAudio(f"{channels} channels x {frames} frames; at most {MAX_SAMPLES} samples in all")


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """(float32 [frames, channels], sample rate) of a sound file; BadAudio with the reason if unreadable or
    larger than check_header allows (judged from the header, before decoding)."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise BadAudio(f"unreadable: {e.strerror or e}") from None
    if size == 0:
        raise BadAudio("empty file")
    try:
        with sf.SoundFile(str(path)) as snd:
            check_header(snd.frames, snd.samplerate, snd.channels)
            data = snd.read(frames=snd.frames, dtype="float32", always_2d=True)
            sr = snd.samplerate
    except sf.LibsndfileError as e:
        msg = str(e.error_string if hasattr(e, "error_string") else e).strip()
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic in (b"RIFF", b"RIFX", b"RF64", b"FORM", b"fLaC", b"OggS"):
            raise BadAudio(f"malformed header ({msg})") from None
        raise BadAudio(f"unreadable: {msg}") from None
    except (RuntimeError, TypeError, ValueError, OSError) as e:
        raise BadAudio(f"unreadable: {e}") from None
    if data.shape[0] == 0:
        raise BadAudio("empty file")
    return data, int(sr)


def _raised_cosine(n: int) -> np.ndarray:
    """n samples going from 1 to exactly 0 (half a Hann window), float32."""
    return fall(n).astype(np.float32)


def load_clip(path: Path, cfg: DataConfig) -> tuple[np.ndarray, float]:
    """Decode one file into (float32 mono clip of exactly cfg.length samples, original duration in s);
    see prepare_audio. Raises BadAudio with the reason."""
    data, sr = read_audio(Path(path))
    return prepare_audio(data, sr, cfg)


def prepare_audio(data: np.ndarray, sr: int, cfg: DataConfig, *, highpass: bool = True) -> tuple[np.ndarray, float]:
    """Decoded audio ([frames] or [frames, channels] at sr) as a training clip: (float32 mono clip of
    exactly cfg.length samples, original duration in s).

    Mix to mono -> reject NaN/inf and too short -> resample to cfg.sample_rate (torchaudio) ->
    subtract the mean -> reject silent -> start PRE_ONSET_MS before the first sample above
    peak * 10**(onset_threshold_db/20) -> 10 Hz high-pass -> crop (with a cfg.fade_ms raised-cosine
    fade-out when cropped) or zero-pad (with a 2 ms fade at the natural end) -> peak to cfg.peak_db.
    Raises BadAudio with the reason.

    highpass=False leaves out the 10 Hz high-pass (a variation's source: GeneratorBase.prepare_source).
    """
    data = np.asarray(data, dtype=np.float32)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] == 0:
        raise BadAudio("empty file" if data.size == 0 else f"unexpected audio shape {data.shape}")
    sr = int(sr)
    if sr <= 0:
        raise BadAudio(f"bad sample rate {sr}")
    check_header(data.shape[0], sr, data.shape[1])
    duration = data.shape[0] / sr
    if not np.isfinite(data).all():
        raise BadAudio("contains NaN" if np.isnan(data).any() else "contains inf")
    if duration * 1000.0 < cfg.min_ms:
        raise BadAudio(f"shorter than {cfg.min_ms:g} ms ({duration * 1000.0:.1f} ms)")
    x = data.mean(axis=1, dtype=np.float64).astype(np.float32)
    x = resample(x, sr, cfg.sample_rate)
    x = x - x.mean(dtype=np.float64).astype(np.float32)
    peak = float(np.abs(x).max())
    if not peak > 10.0 ** (SILENCE_DB / 20.0):
        raise BadAudio("silent")

    thr = peak * 10.0 ** (cfg.onset_threshold_db / 20.0)
    onset = int(np.argmax(np.abs(x) > thr))
    pre = int(round(PRE_ONSET_MS * cfg.sample_rate / 1000.0))
    start = max(0, onset - pre)
    x = x[start:]
    if onset - start > 1:  # ramp the pre-roll in so sample 0 is ~0 (it is below the onset threshold anyway)
        x[: onset - start] *= _raised_cosine(onset - start)[::-1]
    x = np.ascontiguousarray(x) * np.float32(0.5 / peak)  # headroom: torchaudio's biquads clamp to [-1, 1]
    if highpass:
        x = dsp.highpass(x, cfg.sample_rate, CLIP_HIGHPASS_HZ, q=0.5)

    out = np.zeros(cfg.length, dtype=np.float32)
    if x.shape[0] > cfg.length:
        out[:] = x[: cfg.length]
        n_fade = min(cfg.length, max(2, int(round(cfg.fade_ms * cfg.sample_rate / 1000.0))))
        out[-n_fade:] *= _raised_cosine(n_fade)
    else:
        n = x.shape[0]
        out[:n] = x
        n_fade = min(n, max(2, int(round(END_FADE_MS * cfg.sample_rate / 1000.0))))
        out[n - n_fade:n] *= _raised_cosine(n_fade)
    peak = float(np.abs(out).max())
    if not peak > 10.0 ** (SILENCE_DB / 20.0):
        raise BadAudio("silent")
    out *= np.float32(10.0 ** (cfg.peak_db / 20.0) / peak)
    return out, float(duration)


# ----------------------------------------------------------------------------------------------
