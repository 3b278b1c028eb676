"""The one family-aware reader: an artifact file (kickmodel.artifact, which knows no family) read with its family.

    gen = load_generator(path, device)        # any family's generator; ArtifactError with the reason
    art = load_artifact(path)                 # the validated artifact (weights on the CPU, configs parsed)
    check_artifact(path)                      # would it load? (reads the header only: listing models)
    save_artifact(path, tensors, cfg, ...)    # write, refusing what this reader would refuse
    resolve_device("auto")                    # the device to load on: the first CUDA device, else the CPU

What a family says of a file is read here, in this order, before any tensor is decoded: the family named by the
metadata (the registry, kickmodel.families), its config and each part's parsed strictly, the parts a model of
that config has, the size bounds (the family's limits, MAX_PARAMETERS, what one kick costs), the tensors' names and
shapes against what the configs build on the meta device, and the kit map's latent size. Then the tensors are
decoded (the format checks values and hashes) and the family builds its generator. The format itself calls this
reader (kickmodel.artifact.read_artifact(path, read_family)): it knows no family, only that a reader must say yes
before it decodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from .artifact import (
    Artifact,
    ArtifactError,
    Reading,
    Stored,
    check_family_word,
    read_artifact,
    read_stored_header,
    write_artifact,
)
from .config import Config, ConfigError
from .families import from_dict, get_family
from .families.base import Family, expected_shapes, render_cost_of
from .generator import KickGenerator
from .kitmap import KitMap, KitMapError


def read_family(stored: Stored) -> Reading:
    """What its family makes of a stored file, before any tensor is decoded: the family named by its metadata, its
    config and each part's parsed strictly, the parts a model of them has, the size bounds (the family's limits,
    MAX_PARAMETERS, what one kick costs), the tensors' names and shapes against what the configs build on the meta
    device, and (a header read: a load checks them as it reads them) the kit map's shapes. ArtifactError names the
    file and the first thing wrong."""
    path = stored.path
    try:
        family: Family = get_family(stored.family)
        cfg = from_dict(stored.config)
    except ConfigError as e:
        raise ArtifactError(f"{path}: bad config in metadata ({e})") from None
    if cfg.family != family.name:
        raise ArtifactError(f"{path}: metadata family {family.name} disagrees with its config ({cfg.family})")
    extra = sorted(set(stored.parts) - set(family.parts))
    if extra:
        raise ArtifactError(f"{path}: part {str(extra[0])[:40]} is not one of family {family.name}'s")
    part_configs: dict[str, Config] = {}
    for p in family.parts:
        if p in stored.parts:
            try:
                part_configs[p] = from_dict(stored.parts[p].get("config"))
            except ConfigError as e:
                raise ArtifactError(f"{path}: bad config of part {p} ({e})") from None
    names = family.part_names(cfg, part_configs)
    missing = [p for p in names if p not in stored.parts]
    if missing:
        raise ArtifactError(f"{path}: part {missing[0]} is missing (this {family.name} model needs {', '.join(names)})")
    extra = sorted(set(stored.parts) - set(names))
    if extra:
        raise ArtifactError(f"{path}: part {extra[0]} is not one of this {family.name} model's")
    if stored.controls != list(cfg.conditioning.controls):
        raise ArtifactError(f"{path}: metadata controls {str(stored.controls)[:80]} disagree with its config")
    configs = {p: part_configs.get(p, cfg) for p in names}
    map_dim = family.map_latent_dim(configs)
    try:
        want = expected_shapes(family, part_configs)
        cost = render_cost_of(family, configs)  # remembered by expected_shapes' check: kept for the generator
    except ConfigError as e:
        raise ArtifactError(f"{path}: refused before loading: {e}") from None
    if stored.has_map and stored.version != "1" and not stored.decodable:
        try:
            KitMap.check_shapes({k: v["shape"] for k, v in stored.map_header.items()}, map_dim)
        except KitMapError as e:
            raise ArtifactError(f"{path}: kit map: {e}") from None
    for k, shape in want.items():
        if k not in stored.header:
            raise ArtifactError(f"{path}: tensor {k} is missing")
        if tuple(stored.header[k]["shape"]) != shape:
            raise ArtifactError(f"{path}: tensor {k} has shape {tuple(stored.header[k]['shape'])}, its config "
                                f"needs {shape}")
    extra = sorted(set(stored.header) - set(want))
    if extra:
        raise ArtifactError(f"{path}: tensor {extra[0][:100]} is not used by its config")
    return Reading(cfg, part_configs, names, map_dim, cost)


def check_artifact(path: Path | str) -> None:
    """Whether an artifact would load, reading only its header (for listing models): raises ArtifactError."""
    read_family(read_stored_header(Path(path)))


def load_artifact(path: Path | str, *, max_bytes: int | None = None) -> Artifact:
    """Read and validate an artifact with its family; raises ArtifactError naming the file and the reason."""
    return read_artifact(Path(path), read_family, max_bytes=max_bytes)


def family_record(cfg: Config, part_configs: Mapping[str, dict] | None = None) -> dict[str, Any]:
    """What an artifact of this config must hold as its family says, for Artifact.in_memory / Artifact.save to be
    held to: {"part_names": the parts, "map_dim": its kit map's latent size (0: no encoder)}."""
    family = get_family(cfg.family)
    parsed = {p: from_dict(c) for p, c in (part_configs or {}).items()}
    names = family.part_names(cfg, parsed)
    return {"part_names": names, "map_dim": family.map_latent_dim({p: parsed.get(p, cfg) for p in names}) or 0}


def save_artifact(path: Path, tensors: Mapping[str, torch.Tensor], cfg: Config, *, step: int,
                  control_quantiles: list[list[float]] | None = None, training: dict[str, Any] | None = None,
                  part_configs: Mapping[str, dict] | None = None, created: str | None = None,
                  kit_map: KitMap | None = None) -> Path:
    """Write an artifact (kickmodel.artifact.write_artifact) after its family's checks: the parts a model of cfg
    has, and a kit map's latent size (ValueError: what this reader would refuse is never written)."""
    record = family_record(cfg, part_configs)
    check_family_word(Path(path).name, cfg.family, tensors, kit_map, **record)
    return write_artifact(Path(path), tensors, cfg, step=step, control_quantiles=control_quantiles,
                          training=training, part_configs=part_configs, created=created, kit_map=kit_map)


def load_generator(path: Path | str, device: torch.device | str = "cpu", *,
                   max_bytes: int | None = None) -> KickGenerator:
    """Load any artifact as a generator on device. Raises ArtifactError with a reason."""
    dev = resolve_device(device) if isinstance(device, str) else device
    art = read_artifact(Path(path), read_family, max_bytes=max_bytes)
    return get_family(art.family).generator_class()(art, dev)


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
