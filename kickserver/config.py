"""The daemon's settings: a typed dataclass read from TOML, overridden by the command line.

Precedence: built-in defaults < the TOML file (`--config FILE`, else ~/.config/kickserver/config.toml
if present) < command-line options. Unknown keys and wrong types in the TOML are an error.

    host = "0.0.0.0"            # bind beyond loopback: only `allow` networks (and loopback) are served
    port = 9000
    reply_port = 9001
    out = "~/Music/kickserver"
    models = "~/.local/share/kickserver/models"
    model = "default"
    sample_rate = 48000
    allow = ["192.168.1.0/24"]
    read_roots = ["~/Samples"]  # /kick/variation may read absolute paths under these (and the out folder)
    max_files = 500             # keep at most this many generated kicks in `out` (oldest removed first)
    max_mb = 200.0
    name_pattern = "kick_{note}_{word}_{label}"   # kick_A1_short_5513.wav; "kick_{time}_{label}": the old names
    render_capture = "auto"     # auto (CUDA graphs on CUDA, eager on the CPU), off, compile or graphs
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kickmodel.config import MAX_STEPS, OUTPUT_SAMPLE_RATES
from kickmodel.naming import DEFAULT_PATTERN, NAME_FIELDS, TIME_PATTERN, check_pattern

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kickserver" / "config.toml"


def _default_out() -> str:
    return os.path.join("~", "Music", "kickserver")


def _default_models() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join("~", ".local", "share")
    return os.path.join(base, "kickserver", "models")


# render_capture's values: kickmodel.capture.MODES (not imported here: that imports torch, which the CLI imports
# only after setting OpenMP's environment)
CAPTURE_MODES = ("auto", "off", "compile", "graphs")


class ServerConfigError(ValueError):
    """A setting that cannot be used; the message says which and why."""




RETURN_PROOF = ("network", "all", "off")
DEFAULT_MAX_MB = 1024.0  # keep generated kicks under 1 GB in the output folder unless told otherwise (about 7,000)


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 9000
    reply_port: int = 9001
    out: str = field(default_factory=_default_out)
    models: str = field(default_factory=_default_models)
    model: str | None = None  # None: "default" if there is one, else the newest artifact in `models`
    device: str = "auto"
    sample_rate: int = 44100
    allow: list[str] = field(default_factory=list)
    read_roots: list[str] = field(default_factory=list)
    max_files: int | None = None
    # the output folder's disk budget (on by default: without one, one address wrote 24.9 MB in 45 s); 0: none
    max_mb: float | None = DEFAULT_MAX_MB
    # how kick files are named (kickmodel.naming): the sound's note and character word, then the seed
    name_pattern: str = DEFAULT_PATTERN
    queue_limit: int = 64  # kicks waiting at most; past that a request is refused with "busy"
    client_queue_limit: int = 32  # kicks one host (source address, all its ports together) may have waiting
    max_batch: int = 8  # kicks generated together on the device
    max_steps: int = 200  # upper bound for a request's steps (raise to 1000 for benchmarking baselines)
    steps: int = 0  # sampler steps when a request names none; 0: the model's own default
    threads: int = 0  # torch CPU threads; 0: torch's default
    # how the worker runs the networks: auto (CUDA graphs on CUDA, eager on the CPU), off, compile, graphs
    render_capture: str = "auto"
    log_level: str = "info"
    reply_rate_kb: float = 32.0  # reply budget per source IP: KB per second ...
    reply_burst_kb: float = 128.0  # ... and at most this many KB at once (ratelimit.py)
    # which sources must prove their return path (ratelimit.ReturnPaths): "network" (all but
    # loopback), "all" (loopback too), "off" (none); until they do, they share one reply budget and one queue share
    return_proof: str = "network"

    # ------------------------------------------------------------ derived
    @property
    def out_dir(self) -> Path:
        return Path(os.path.expanduser(self.out)).absolute()

    @property
    def models_dir(self) -> Path:
        return Path(os.path.expanduser(self.models)).absolute()

    @property
    def read_root_dirs(self) -> list[Path]:
        return [Path(os.path.expanduser(r)).absolute() for r in self.read_roots]

    @property
    def allow_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        return [ipaddress.ip_network(a, strict=False) for a in self.allow]

    def validate(self) -> ServerConfig:
        def bad(msg: str) -> ServerConfigError:
            return ServerConfigError(msg)

        for name in ("port", "reply_port"):
            v = getattr(self, name)
            if not 1 <= v <= 65535:
                raise bad(f"{name} must be within 1..65535, got {v}")
        if self.sample_rate not in OUTPUT_SAMPLE_RATES:
            raise bad(f"sample_rate must be {' or '.join(map(str, OUTPUT_SAMPLE_RATES))}, got {self.sample_rate}")
        for a in self.allow:
            try:
                ipaddress.ip_network(a, strict=False)
            except ValueError:
                raise bad(f"allow: {a!r} is not a network (CIDR such as 192.168.1.0/24)") from None
        if self.max_files is not None and self.max_files < 1:
            raise bad(f"max_files must be >= 1, got {self.max_files}")
        if self.max_mb is not None and not self.max_mb >= 0:
            raise bad(f"max_mb must be >= 0 (0: no disk budget, keep every kick), got {self.max_mb}")
        if self.max_mb == 0:
            self.max_mb = None  # no budget: no ledger, nothing pruned
        try:
            check_pattern(self.name_pattern)
        except ValueError as e:
            raise bad(f"name_pattern: {e}; its fields: " + ", ".join(f"{{{k}}}" for k in NAME_FIELDS)
                      + f" (default {DEFAULT_PATTERN!r}; the old time-based names: {TIME_PATTERN!r})") from None
        if self.queue_limit < 1:
            raise bad(f"queue_limit must be >= 1, got {self.queue_limit}")
        if self.client_queue_limit < 1:
            raise bad(f"client_queue_limit must be >= 1, got {self.client_queue_limit}")
        if not self.reply_rate_kb > 0 or not self.reply_burst_kb >= 4:
            raise bad(f"reply_rate_kb must be > 0 and reply_burst_kb >= 4 (one reply datagram), got "
                      f"{self.reply_rate_kb:g} and {self.reply_burst_kb:g}")
        if self.max_batch < 1:
            raise bad(f"max_batch must be >= 1, got {self.max_batch}")
        if not 1 <= self.max_steps <= MAX_STEPS:
            raise bad(f"max_steps must be within 1..{MAX_STEPS}, got {self.max_steps}")
        if not 0 <= self.steps <= self.max_steps:
            raise bad(f"steps must be within 0..max_steps ({self.max_steps}), got {self.steps}")
        if self.threads < 0:
            raise bad(f"threads must be >= 0, got {self.threads}")
        if self.return_proof not in RETURN_PROOF:
            raise bad(f"return_proof must be one of {', '.join(RETURN_PROOF)}, got {self.return_proof!r}")
        if self.render_capture not in CAPTURE_MODES:
            raise bad(f"render_capture must be {', '.join(CAPTURE_MODES)}, got {self.render_capture!r}")
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise bad(f"log_level must be debug, info, warning or error, got {self.log_level!r}")
        if self.model is not None and not valid_model_name(self.model):
            raise bad(f"model {self.model!r} is not a model name (a file name without extension)")
        if len(str(self.out_dir)) > 2048:
            raise bad("out: the folder's path is too long for a reply datagram")
        return self


MAX_MODEL_NAME = 128  # characters, and at most 200 bytes: NAME.safetensors stays under NAME_MAX (255 bytes)


def valid_model_name(name: str) -> bool:
    return (0 < len(name) <= MAX_MODEL_NAME and len(name.encode("utf-8", "surrogatepass")) <= 200
            and "/" not in name and "\\" not in name and "\0" not in name and not name.startswith("."))


# ------------------------------------------------------------ reading


def _check_type(name: str, tp: Any, value: Any) -> Any:
    """Value converted to the field's type, or ServerConfigError."""
    s = str(tp)
    optional = "Optional" in s or "None" in s
    if value is None:
        if optional:
            return None
        raise ServerConfigError(f"{name}: a value is required")
    if "list[str]" in s:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ServerConfigError(f"{name}: expected a list of strings, got {value!r}")
        return list(value)
    if "int" in s and "float" not in s:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ServerConfigError(f"{name}: expected an integer, got {value!r}")
        return value
    if "float" in s:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ServerConfigError(f"{name}: expected a number, got {value!r}")
        return float(value)
    if "str" in s:
        if not isinstance(value, str):
            raise ServerConfigError(f"{name}: expected a string, got {value!r}")
        return value
    raise ServerConfigError(f"{name}: unsupported setting type {s}")  # pragma: no cover


FIELDS = {f.name: f for f in dataclasses.fields(ServerConfig)}


def from_mapping(data: dict[str, Any], base: ServerConfig | None = None, where: str = "config") -> ServerConfig:
    """base (or defaults) with the given keys replaced; unknown keys and wrong types are errors."""
    cfg = dataclasses.replace(base) if base is not None else ServerConfig()
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ServerConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(FIELDS)})")
    for k, v in data.items():
        setattr(cfg, k, _check_type(f"{where}: {k}", FIELDS[k].type, v))
    return cfg


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ServerConfigError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as e:
        raise ServerConfigError(f"{path}: not valid TOML ({e})") from None
    except OSError as e:
        raise ServerConfigError(f"{path}: cannot read ({e.strerror or e})") from None


def load_config(config_path: str | Path | None, overrides: dict[str, Any]) -> tuple[ServerConfig, Path | None]:
    """Defaults < TOML (explicit path, or the default path if it exists) < overrides (CLI, None = not given).
    Returns the validated config and the TOML path used (or None)."""
    path: Path | None
    if config_path is not None:
        path = Path(os.path.expanduser(str(config_path)))
        data = read_toml(path)
    else:
        path = default_config_path()
        if path.is_file():
            data = read_toml(path)
        else:
            path, data = None, {}
    cfg = from_mapping(data, where=str(path) if path else "config")
    given = {k: v for k, v in overrides.items() if v is not None}
    cfg = from_mapping(given, base=cfg, where="command line")
    return cfg.validate(), path
