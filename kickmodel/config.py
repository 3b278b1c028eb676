"""Typed configuration: the sections every family shares, plus the sections its family declares.

A config is a tree of frozen dataclasses. Every family shares `data`, `augment`, `conditioning`
and `train`; the family named by `family` adds its own sections (the waveform U-Net adds `model`,
`diffusion` and `sampling`; see kickmodel/families/). `from_dict` rebuilds a config from plain JSON
types and rejects unknown keys, unknown sections and wrong types, so a typo in a saved run or an
artifact's metadata is an error, not a silently ignored setting. Presets are named instances that
each family defines (`preset(name, family)`), not copies of dicts.

Version 1 configs (artifacts and runs before families were plug-ins: `model.family`,
`model.controls`, `diffusion.cond_drop`) are converted on load.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONFIG_VERSION = 2
# The family of a config or artifact that names none: version 1 (and the first version 2) configs were all
# waveform diffusion, written when it was the only family. A format default, fixed for good; what kicktrain
# trains when told no family is trainer.cli.DEFAULT_CLI_FAMILY.
UNNAMED_FAMILY = "waveform_diffusion"
SHARED_SECTIONS = ("data", "augment", "conditioning", "train")

# Limits the runtime shares with its callers (the daemon, the trainer, the clients' docs), each said once.
SAMPLE_RATES = (22050, 32000, 44100, 48000)  # rates a model may work at (data.sample_rate)
OUTPUT_SAMPLE_RATES = (44100, 48000)  # rates the daemon writes: what DAWs load without conversion
MAX_STEPS = 1000  # most sampling steps any generator takes (a server may cap lower: kickserver's max_steps)
SEED_LIMIT = 1 << 24  # seeds chosen for a user stay below 2^24: exact as float32, as Pd and Max hold numbers


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
class ConditioningConfig:
    """Named controls (kickmodel/descriptors.py), measured on every augmented batch and given to the
    network as values 0..1 with a presence mask, so one network serves free and conditioned
    generation (and classifier-free guidance)."""

    controls: tuple[str, ...] = ()
    drop_all: float = 0.1  # probability of dropping every control of an example
    drop_each: float = 0.3  # probability of dropping each control on its own


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
    prefetch: bool = True  # prepare the next step's batch (augmentation, controls, mel/latents) on a second thread
    log_every: int = 25
    val_every: int = 250
    ckpt_every: int = 250
    sample_every: int = 1000
    keep_checkpoints: int = 3
    early_stop_patience: int = 0  # validation rounds without improvement before stopping; 0: off
    # what chooses the step an export holds: "loss", the validation loss; "dials", how well the dials follow (each
    # control asked for alone at 0.1..0.9, select_kicks kicks a value from fixed seeds, rendered as served and
    # measured: 1 - the mean Spearman r; trainer/evaluation/dials.py), for a family whose validation loss does not
    # follow its sound (kick-synth: the loss of its prior's numbers rises while its kicks and dials get better);
    # "recon", a mel-VAE's reconstruction of the held-out kicks, for a VAE a latent diffusion will decode through
    select_by: str = "loss"
    select_kicks: int = 8
    # draw velocity layers and near-copies of one kick (trainer.split's groups) as one kick: a kick recorded at
    # five velocities is then drawn as often as one recorded once (the member at random), not five times
    balance_layers: bool = False
    seed: int = 0


class ConfigError(ValueError):
    """A config that names an unknown key, has a wrong type or an impossible value."""


@dataclass(frozen=True)
class Config:
    """The shared sections plus `parts`: the family's own sections by name (read them as
    attributes: `cfg.model`, `cfg.sampling`). Build one with `make_config` or `from_dict`."""

    family: str = UNNAMED_FAMILY
    data: DataConfig = field(default_factory=DataConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    conditioning: ConditioningConfig = field(default_factory=ConditioningConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    parts: Mapping[str, Any] = field(default_factory=dict)
    preset: str = "custom"
    version: int = CONFIG_VERSION

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not fields: the family's sections
        parts = self.__dict__.get("parts")
        if parts is not None and name in parts:
            return parts[name]
        raise AttributeError(f"config of family {self.__dict__.get('family')!r} has no section {name!r}")

    @property
    def controls(self) -> tuple[str, ...]:
        return tuple(self.conditioning.controls)

    def section_names(self) -> tuple[str, ...]:
        return SHARED_SECTIONS + tuple(self.parts)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"version": self.version, "preset": self.preset, "family": self.family}
        for name in SHARED_SECTIONS:
            d[name] = dataclasses.asdict(getattr(self, name))
        for name, sec in self.parts.items():
            d[name] = dataclasses.asdict(sec)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, section: str | None = None, **changes: Any) -> Config:
        """A validated copy: `cfg.replace("train", lr=1e-4)` changes fields of one section;
        `cfg.replace(preset="x")` (no section) changes top-level fields."""
        if section is None:
            new = dataclasses.replace(self, **changes)
        elif section in SHARED_SECTIONS:
            new = dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})
        elif section in self.parts:
            parts = dict(self.parts)
            parts[section] = dataclasses.replace(parts[section], **changes)
            new = dataclasses.replace(self, parts=parts)
        else:
            raise ConfigError(f"unknown section {section!r} (this config has {', '.join(self.section_names())})")
        validate(new)
        return new

    def with_section(self, section: str, value: Any) -> Config:
        """A validated copy with one whole section replaced by another instance of its class."""
        if section in SHARED_SECTIONS:
            new = dataclasses.replace(self, **{section: value})
        elif section in self.parts:
            new = dataclasses.replace(self, parts={**self.parts, section: value})
        else:
            raise ConfigError(f"unknown section {section!r}")
        validate(new)
        return new


# ----------------------------------------------------------------------------------------------
# plain types <-> dataclasses


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
        if len(value) > 64:
            raise ConfigError(f"{where}: a list of {len(value)} items is too long (at most 64)")
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
        if abs(value) > 2**53:
            raise ConfigError(f"{where}: {value} is out of range")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        if len(value) > 256:
            raise ConfigError(f"{where}: a string of {len(value)} characters is too long")
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


def _upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """A version 1 config (one family, controls in `model`, cond_drop in `diffusion`) as version 2."""
    d = json.loads(json.dumps(d))
    model = d.get("model") if isinstance(d.get("model"), dict) else {}
    diffusion = d.get("diffusion") if isinstance(d.get("diffusion"), dict) else {}
    d["family"] = model.pop("family", UNNAMED_FAMILY)
    cond: dict[str, Any] = {}
    if "controls" in model:
        cond["controls"] = model.pop("controls")
    if "cond_drop" in diffusion:
        cond["drop_all"] = diffusion.pop("cond_drop")
    d["conditioning"] = cond
    d["version"] = CONFIG_VERSION
    return d


def parse_sections(data: dict[str, Any], family_name: str, family_sections: Mapping[str, type]) -> Config:
    """A Config of the family (name, its section classes) from plain types: missing keys take defaults, unknown
    keys are an error. The registry (kickmodel.families.from_dict) looks the family up and calls this."""
    allowed = {"version", "preset", "family", *SHARED_SECTIONS, *family_sections}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"config: unknown section(s) {', '.join(unknown)} for family {family_name}")
    kwargs: dict[str, Any] = {"family": family_name, "version": CONFIG_VERSION}
    if "preset" in data:
        kwargs["preset"] = _convert(str, data["preset"], "preset")
    hints = typing.get_type_hints(Config)
    for name in SHARED_SECTIONS:
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], name)
    kwargs["parts"] = {name: _convert(cls, data.get(name, {}), name) for name, cls in family_sections.items()}
    cfg = Config(**kwargs)
    validate(cfg)
    return cfg


def without_keys(data: dict[str, Any], section: str, *keys: str) -> dict[str, Any]:
    """A config table with keys since dropped from one section removed (a copy; data is kept): what a family's
    `upgrade` does so that configs written before still parse strictly."""
    table = data.get(section)
    if isinstance(table, dict) and any(k in table for k in keys):
        data = dict(data, **{section: {k: v for k, v in table.items() if k not in keys}})
    return data


def upgrade(data: Any) -> dict[str, Any]:
    """A config table of any readable version as the current version's (ConfigError if none)."""
    if not isinstance(data, dict):
        raise ConfigError(f"config: expected a table, got {type(data).__name__}")
    version = data.get("version", CONFIG_VERSION)
    if version == 1:
        data = _upgrade_v1(data)
    elif version != CONFIG_VERSION:
        raise ConfigError(f"config version {version!r} is not supported (this kicktrain reads 1 and {CONFIG_VERSION})")
    family_name = data.get("family", UNNAMED_FAMILY)
    if not isinstance(family_name, str):
        raise ConfigError(f"family: expected a string, got {family_name!r}")
    return data


# ----------------------------------------------------------------------------------------------
# checks

# The registry's lookup, installed by the registry (kickmodel.families) when it is imported: config knows no
# family module, so the registry -> config import is the only edge between them. validate asks the lookup for the
# family named by a config (an object with `name`, `sections` {name: dataclass} and `check_config(cfg)`) and checks
# the config against it here. Every Config is made by the registry's from_dict / make_config, so the lookup is in
# place before any Config is validated.
_family_lookup: Callable[[str], Any] | None = None


def install_family_lookup(lookup: Callable[[str], Any]) -> None:
    global _family_lookup
    _family_lookup = lookup


def validate(cfg: Config) -> None:
    """The shared checks, then the family's: its sections, each of its class, then `Family.check_config`."""
    from .descriptors import CONTROL_NAMES

    t, c, controls = cfg.train, cfg.conditioning, cfg.controls
    checks = [
        (cfg.version == CONFIG_VERSION, f"version {cfg.version} is not {CONFIG_VERSION}"),
        (len(set(controls)) == len(controls), "conditioning.controls has duplicates"),
        (all(n in CONTROL_NAMES for n in controls),
         f"conditioning.controls must be among {', '.join(CONTROL_NAMES)}"),
        (0.0 <= c.drop_all <= 1.0 and 0.0 <= c.drop_each <= 1.0, "conditioning drop rates must be within 0..1"),
        (t.batch_size >= 1 and t.micro_batch >= 1 and t.batch_size % t.micro_batch == 0,
         "train.batch_size must be a positive multiple of train.micro_batch"),
        (t.mixed_precision in ("auto", "bf16", "fp16", "off"),
         f"train.mixed_precision {t.mixed_precision!r} is not auto, bf16, fp16 or off"),
        (t.select_by in ("loss", "dials", "recon"), f"train.select_by {t.select_by!r} is not loss, dials or recon"),
        (t.select_by != "recon" or cfg.family == "mel_vae",
         "train.select_by=recon needs a mel-VAE run (the error of its reconstructions of the held-out kicks): "
         "choose by loss or dials"),
        (t.select_by != "dials" or controls, "train.select_by=dials needs conditioning.controls (dials to sweep); "
                                             "give the run its controls or pass --set train.select_by=loss"),
        (1 <= t.select_kicks <= 64, "train.select_kicks must be within 1..64 (kicks a dial value)"),
        (cfg.data.sample_rate in SAMPLE_RATES,
         f"data.sample_rate must be one of {', '.join(map(str, SAMPLE_RATES))}"),
        (1024 <= cfg.data.length <= 4 * 48000, "data.length must be within 1024..192000 samples"),
        (0.0 <= cfg.data.val_fraction < 1.0, "data.val_fraction must be within 0..1"),
    ]
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)
    if _family_lookup is None:
        raise ConfigError("no model family is registered (import kickmodel.families first)")
    family = _family_lookup(cfg.family)
    if set(cfg.parts) != set(family.sections):
        raise ConfigError(f"family {family.name} has sections {', '.join(family.sections)}, "
                          f"the config has {', '.join(cfg.parts) or 'none'}")
    for name, cls in family.sections.items():
        if not isinstance(cfg.parts[name], cls):
            raise ConfigError(f"section {name} must be a {cls.__name__}")
    family.check_config(cfg)


def differences(saved: Config, asked: Config, ignore: tuple[str, ...] = ("train.max_steps",)) -> list[str]:
    """Dotted keys whose values differ between two configs (e.g. a run's saved one and the command line's)."""
    out = []
    a, b = saved.to_dict(), asked.to_dict()
    for section, values in a.items():
        if isinstance(values, dict):
            other = b.get(section) if isinstance(b.get(section), dict) else {}
            for k, v in values.items():
                if f"{section}.{k}" not in ignore and other.get(k) != v:
                    out.append(f"{section}.{k} (run: {v!r}, asked: {other.get(k)!r})")
        elif section not in ("preset", "version") and b.get(section) != values:
            out.append(f"{section} (run: {values!r}, asked: {b.get(section)!r})")
    return out
