"""Typed configuration for data, model, diffusion and training, with named presets.

A config is a tree of dataclasses. `from_dict` rebuilds one from plain JSON types and rejects
unknown keys and wrong types, so a typo in a saved run or an artifact's metadata is an error,
not a silently ignored setting. Presets are named instances (`PRESETS`), not copies of dicts.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field, replace
from typing import Any

CONFIG_VERSION = 1


@dataclass(frozen=True)
class DataConfig:
    sample_rate: int = 44100
    length: int = 45056  # samples; about 1.02 s at 44.1 kHz, divisible by the model's total stride
    onset_threshold_db: float = -40.0  # leading samples below this (re. peak) are trimmed
    peak_db: float = -1.0  # normalised peak
    fade_ms: float = 30.0  # fade-out at the end of the crop
    min_ms: float = 30.0  # shorter usable audio than this is skipped
    val_fraction: float = 0.1  # held-out validation split (by file, deterministic)


@dataclass(frozen=True)
class AugmentConfig:
    """On-the-fly augmentation: each has a probability and a range."""

    gain_p: float = 0.5
    gain_db: tuple[float, float] = (-6.0, 0.0)
    pitch_p: float = 0.3
    pitch_semitones: tuple[float, float] = (-2.0, 2.0)
    stretch_p: float = 0.2
    stretch_rate: tuple[float, float] = (0.9, 1.1)
    offset_p: float = 0.2
    offset_ms: tuple[float, float] = (0.0, 3.0)
    noise_p: float = 0.1
    noise_db: tuple[float, float] = (-70.0, -55.0)
    reverb_p: float = 0.1
    reverb_ms: tuple[float, float] = (20.0, 80.0)
    reverb_wet: tuple[float, float] = (0.02, 0.1)
    eq_p: float = 0.3
    eq_gain_db: tuple[float, float] = (-4.0, 4.0)
    eq_freq_hz: tuple[float, float] = (60.0, 4000.0)


@dataclass(frozen=True)
class ModelConfig:
    """A compact 1-D U-Net over the waveform (family "waveform_diffusion")."""

    family: str = "waveform_diffusion"
    patch: int = 16  # stride of the overlapping learned down/up-sampling at the input/output
    patch_kernel: int = 32  # kernel of that layer (> patch: overlapping, no patch-boundary tones)
    widths: tuple[int, ...] = (32, 48, 64, 96, 128)  # channels per level; each level after the first halves time
    blocks_per_level: int = 1
    dilations: tuple[int, ...] = (1, 3)  # dilated convolutions inside each residual block
    attention: bool = True  # self-attention at the lowest resolution only
    heads: int = 4
    emb_dim: int = 128  # noise-level (and conditioning) embedding width
    out_smoothing: int = 9  # kernel of a full-rate conv after the output upsampling (0: none)
    controls: tuple[str, ...] = ()  # named conditioning inputs, each a float 0..1
    dropout: float = 0.0


@dataclass(frozen=True)
class DiffusionConfig:
    schedule: str = "cosine"  # "cosine" | "linear"
    prediction: str = "x0"  # "x0" | "v" | "eps" (x0: see docs/model.md)
    timesteps: int = 1000  # discrete DDPM steps for training; 0 = continuous time
    stft_loss_weight: float = 0.5  # multi-resolution STFT term on the predicted clean signal (low noise)
    data_scale: float = 3.0  # the network sees x0 * data_scale (kicks are quiet on average: RMS ~0.1)
    low_noise_bias: float = 0.0  # > 0 samples low-noise t more often (t = u ** (1 + bias))
    curriculum_steps: int = 0  # > 0: train high-noise levels first, widening to all t by this step
    cond_drop: float = 0.1  # probability of dropping each control during training (for guidance)


@dataclass(frozen=True)
class SamplingConfig:
    sampler: str = "dpmpp_2m"  # "ddim" | "ddpm" | "dpmpp_2m"
    steps: int = 25
    guidance: float = 1.0  # classifier-free guidance scale for controls (1: plain conditional)
    # sampling times t_i = (i / steps) ** time_power: < 1 spends more steps at high noise and ends with one
    # x0 estimate from moderate noise. Bundled model, 10 steps: KID 1.89 at 1.0, 1.40 at 0.35 (docs/model.md)
    time_power: float = 0.35
    image_reject_db: float = 30.0  # dip the output upsampler's images at k * sample_rate / patch (0: off)


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 16  # effective batch
    micro_batch: int = 16  # per forward/backward; batch_size / micro_batch accumulation steps
    lr: float = 3e-4
    finetune_lr: float = 1e-4  # used with --init
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_steps: int = 4000
    grad_clip: float = 1.0
    ema_decay: float = 0.999
    ema_warmup: bool = True  # effective decay min(decay, (1+n)/(10+n)) early on
    mixed_precision: str = "auto"  # "auto" | "bf16" | "fp16" | "off"
    grad_checkpointing: bool = False
    pin_memory: bool = True
    cudnn_benchmark: bool = True
    num_threads: int = 0  # CPU threads for torch; 0: torch's default
    log_every: int = 25
    val_every: int = 250
    ckpt_every: int = 250
    sample_every: int = 1000
    keep_checkpoints: int = 3
    early_stop_patience: int = 0  # validation rounds without improvement before stopping; 0: off
    seed: int = 0


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    diffusion: DiffusionConfig = field(default_factory=DiffusionConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    preset: str = "custom"
    version: int = CONFIG_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def total_stride(self) -> int:
        return self.model.patch * 2 ** (len(self.model.widths) - 1)


class ConfigError(ValueError):
    """A config that names an unknown key, has a wrong type or an impossible value."""


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
        return _from_dict(tp, value, where)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (typing.Union, types.UnionType):
        errors = []
        for a in typing.get_args(tp):
            try:
                return _convert(a, value, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError("; ".join(errors))
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{where}: expected null")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported type {tp}")


def _from_dict(cls: Any, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where or 'config'}: unknown key(s) {', '.join(unknown)}")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


def from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a Config from plain types; missing keys take defaults, unknown keys are an error."""
    cfg = _from_dict(Config, data, "")
    validate(cfg)
    return cfg


def from_json(text: str) -> Config:
    return from_dict(json.loads(text))


def validate(cfg: Config) -> None:
    m, d, t, s = cfg.model, cfg.diffusion, cfg.train, cfg.sampling
    checks = [
        (cfg.version == CONFIG_VERSION, f"version {cfg.version} is not {CONFIG_VERSION}"),
        (m.family == "waveform_diffusion", f"model.family {m.family!r} is not known"),
        (len(m.widths) >= 1 and all(w > 0 and w % m.heads == 0 for w in m.widths),
         "model.widths must be positive multiples of model.heads"),
        (m.patch_kernel >= m.patch and (m.patch_kernel - m.patch) % 2 == 0,
         "model.patch_kernel must be >= model.patch and differ from it by an even number"),
        (cfg.data.length % cfg.total_stride() == 0,
         f"data.length {cfg.data.length} must be a multiple of the model's total stride {cfg.total_stride()}"),
        (len(set(m.controls)) == len(m.controls), "model.controls has duplicates"),
        (d.schedule in ("cosine", "linear"), f"diffusion.schedule {d.schedule!r} is not cosine or linear"),
        (d.prediction in ("v", "eps", "x0"), f"diffusion.prediction {d.prediction!r} is not v, eps or x0"),
        (d.timesteps >= 0, "diffusion.timesteps must be >= 0"),
        (s.sampler in ("ddim", "ddpm", "dpmpp_2m"), f"sampling.sampler {s.sampler!r} is not known"),
        (1 <= s.steps <= 1000, "sampling.steps must be 1..1000"),
        (s.time_power > 0, "sampling.time_power must be > 0"),
        (d.data_scale > 0, "diffusion.data_scale must be > 0"),
        (t.batch_size >= 1 and t.micro_batch >= 1 and t.batch_size % t.micro_batch == 0,
         "train.batch_size must be a positive multiple of train.micro_batch"),
        (t.mixed_precision in ("auto", "bf16", "fp16", "off"),
         f"train.mixed_precision {t.mixed_precision!r} is not auto, bf16, fp16 or off"),
        (cfg.data.sample_rate in (22050, 32000, 44100, 48000), "data.sample_rate must be 22050, 32000, 44100 or 48000"),
    ]
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)


_TINY = Config(
    preset="tiny",
    data=DataConfig(length=4096),
    model=ModelConfig(patch=8, patch_kernel=16, widths=(16, 32), heads=2, emb_dim=32, out_smoothing=5,
                      dilations=(1,), controls=("decay", "pitch", "click")),
    train=TrainConfig(batch_size=4, micro_batch=4, max_steps=40, warmup_steps=5, log_every=5, val_every=10,
                      ckpt_every=10, sample_every=0, ema_decay=0.9),
    sampling=SamplingConfig(steps=10),
)
_SMALL = Config(
    preset="small",
    model=ModelConfig(widths=(32, 48, 64, 96, 128), controls=("decay", "pitch", "click")),
    diffusion=DiffusionConfig(low_noise_bias=0.5),
    train=TrainConfig(batch_size=16, micro_batch=16, max_steps=3000, sample_every=500),
)
_BASE = Config(
    preset="base",
    model=ModelConfig(widths=(64, 96, 128, 192, 256), blocks_per_level=2, dilations=(1, 3, 9),
                      controls=("decay", "pitch", "click")),
    train=TrainConfig(batch_size=32, micro_batch=16, max_steps=30000, mixed_precision="auto",
                      grad_checkpointing=True, lr=2e-4),
)
PRESETS: dict[str, Config] = {"tiny": _TINY, "small": _SMALL, "base": _BASE}


def preset(name: str) -> Config:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def override(cfg: Config, section: str, **changes: Any) -> Config:
    """Return cfg with fields of one section replaced (validated)."""
    new = replace(cfg, **{section: replace(getattr(cfg, section), **changes)})
    validate(new)
    return new
