"""The served artifact: one safetensors file of EMA weights plus JSON metadata.

This is the one format the trainer writes and the daemon reads. Loading never unpickles:
safetensors holds only tensors and a string-to-string metadata table. The metadata says which
model family the weights belong to, the full config, the sample rate, the controls and how
their 0..1 dial values map to measured units, a summary of the training data, the step and the
creation time. An artifact of an unknown format version or family is refused with a reason.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as st_save

from . import __version__
from .config import Config, ConfigError, from_json
from .fsutil import atomic_write_bytes

FORMAT_KEY = "kickserver_format"
FORMAT_VERSION = 1
FAMILIES = ("waveform_diffusion",)


class ArtifactError(ValueError):
    """An artifact that cannot be served; the message names the file and the reason."""


def save_artifact(path: Path, state_dict: dict[str, torch.Tensor], cfg: Config, *, step: int,
                  control_quantiles: list[list[float]] | None = None, training: dict[str, Any] | None = None) -> Path:
    """Write weights (EMA) and metadata atomically to path (a .safetensors file)."""
    controls = list(cfg.model.controls)
    if controls and (control_quantiles is None or len(control_quantiles) != len(controls)):
        raise ValueError("an artifact with controls needs one quantile table per control")
    meta = {
        FORMAT_KEY: str(FORMAT_VERSION),
        "family": cfg.model.family,
        "config": cfg.to_json(),
        "sample_rate": str(cfg.data.sample_rate),
        "length": str(cfg.data.length),
        "controls": json.dumps(controls),
        "control_quantiles": json.dumps(control_quantiles or []),
        "training": json.dumps(training or {}),
        "step": str(int(step)),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "software": f"kickserver {__version__}",
    }
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state_dict.items()}
    atomic_write_bytes(Path(path), st_save(tensors, metadata=meta))
    return Path(path)


class Artifact:
    """A loaded, validated artifact: metadata plus CPU tensors."""

    def __init__(self, path: Path, meta: dict[str, str], tensors: dict[str, torch.Tensor], cfg: Config) -> None:
        self.path = Path(path)
        self.meta = meta
        self.tensors = tensors
        self.config = cfg
        self.family = meta["family"]
        self.controls: list[str] = json.loads(meta.get("controls", "[]"))
        self.control_quantiles: list[list[float]] = json.loads(meta.get("control_quantiles", "[]"))
        self.training: dict[str, Any] = json.loads(meta.get("training", "{}"))
        self.step = int(meta.get("step", "0"))

    @property
    def name(self) -> str:
        return self.path.name.removesuffix(".safetensors")


def read_metadata(path: Path) -> dict[str, str]:
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise ArtifactError(f"{path}: not a readable safetensors file ({e})") from None


def load_artifact(path: Path) -> Artifact:
    """Read and validate an artifact; raises ArtifactError naming the file and the reason."""
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such file")
    with open(path, "rb") as f:
        head = f.read(9)
    # safetensors: an 8-byte little-endian header length, then the JSON header's "{". Only when that
    # "{" is missing is a leading 0x80 (pickle protocol) or "PK" (torch.save's zip) a diagnosis.
    if head[8:9] != b"{" and (head[:1] == b"\x80" or head[:2] == b"PK"):
        raise ArtifactError(f"{path}: looks like a pickle/zip (torch.save) file; only safetensors artifacts are served")
    meta = read_metadata(path)
    version = meta.get(FORMAT_KEY)
    if version is None:
        raise ArtifactError(f"{path}: no {FORMAT_KEY} in its metadata; not a kickserver artifact")
    if version != str(FORMAT_VERSION):
        raise ArtifactError(f"{path}: format version {version} is not supported "
                            f"(this kickserver reads {FORMAT_VERSION})")
    family = meta.get("family")
    if family not in FAMILIES:
        raise ArtifactError(f"{path}: model family {family!r} is not known (known: {', '.join(FAMILIES)})")
    try:
        cfg = from_json(meta["config"])
    except (KeyError, ValueError, ConfigError) as e:
        raise ArtifactError(f"{path}: bad config in metadata ({e})") from None
    try:
        tensors: dict[str, torch.Tensor] = {}
        with safe_open(str(path), framework="pt") as f:
            for k in f.keys():
                tensors[k] = f.get_tensor(k)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise ArtifactError(f"{path}: cannot read tensors ({e})") from None
    art = Artifact(path, meta, tensors, cfg)
    if art.controls != list(cfg.model.controls):
        raise ArtifactError(f"{path}: metadata controls {art.controls} disagree with its config")
    if art.controls and len(art.control_quantiles) != len(art.controls):
        raise ArtifactError(f"{path}: missing control quantiles")
    return art
