"""The served artifact: one safetensors file of weights plus JSON metadata.

This is the one format the trainer writes and the daemon reads. Loading never unpickles:
safetensors holds only tensors and a string-to-string metadata table.

Format 2 (written now): tensors are namespaced by part (`denoiser.*`, `vae.*`, `inverter.*`, as the
family says), and the metadata holds
    kickserver_format  "2"
    family             e.g. "waveform_diffusion"
    config             the config of the run that made the artifact (JSON)
    parts              {part: {"config": the config that part was trained with, "sha256": its content hash}}
    sample_rate, length, controls, control_quantiles, training, step, created, software
    kitmap             only when the artifact holds its kit's map (kickmodel/kitmap.py): JSON of the map's names,
                       axes, method, bandwidths and the sha256 of its two tensors, `kitmap.points` [N, 2] and
                       `kitmap.latents` [N, D]. The map is not a part: `parts` and their hashes cover what makes the
                       kicks, so adding a map to a model (kicktrain map --into) leaves every part hash, and the
                       latent-diffusion check of its VAE's hash, as they were; the map's own hash covers its tensors.
Format 1 (the first bundled model): one family, un-namespaced U-Net tensors; read as format 2 with
every tensor under `denoiser.`.

Nothing in a file is trusted before it is bounded: the file is opened once and read whole (at most
MAX_ARTIFACT_BYTES), the header and metadata sizes are capped, the config is parsed strictly, the
family checks its size limits, and the tensors' names and shapes are compared with what that config
builds -- on the meta device, which allocates nothing -- before any tensor is decoded.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from . import __version__, safejson
from .config import Config, ConfigError
from .families import from_dict, from_json
from .fsutil import atomic_write_bytes
from .kitmap import META_KEY as KITMAP_KEY
from .kitmap import PREFIX as KITMAP_PREFIX
from .kitmap import KitMap, KitMapError

FORMAT_KEY = "kickserver_format"
FORMAT_VERSION = 2
READABLE_VERSIONS = ("1", "2")
MAX_ARTIFACT_BYTES = 512 << 20
MAX_HEADER_BYTES = 8 << 20
MAX_META_VALUE = 1 << 20
FLOAT_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


class ArtifactError(ValueError):
    """An artifact that cannot be served; the message names the file and the reason."""


def part_hash(tensors: Mapping[str, torch.Tensor]) -> str:
    """sha256 over a part's tensors (names without the part prefix, sorted; dtype, shape and bytes)."""
    h = hashlib.sha256()
    for k in sorted(tensors):
        t = tensors[k].detach().to("cpu").contiguous()
        h.update(k.encode() + b"\0" + str(t.dtype).encode() + b"\0" + str(tuple(t.shape)).encode() + b"\0")
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def split_parts(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    out: dict[str, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        part, sep, rest = k.partition(".")
        if not sep or not rest:
            raise ValueError(f"tensor {k!r} is not namespaced by a part (part.name)")
        out.setdefault(part, {})[rest] = v
    return out


def save_artifact(path: Path, tensors: Mapping[str, torch.Tensor], cfg: Config, *, step: int,
                  control_quantiles: list[list[float]] | None = None, training: dict[str, Any] | None = None,
                  part_configs: Mapping[str, dict] | None = None, created: str | None = None,
                  kit_map: KitMap | None = None) -> Path:
    """Write tensors (namespaced by part) and metadata atomically to path (a .safetensors file).

    part_configs: {part: config dict} for parts another run trained (e.g. the VAE of a latent
    diffusion model); parts not named there were trained with cfg. created: when the model was made
    (default now); a model written again (Artifact.save) keeps its own. kit_map: the map of its kit
    (kickmodel.kitmap), whose latents must be this model's (ValueError otherwise)."""
    from .families import get_family

    controls = list(cfg.controls)
    if controls and (control_quantiles is None or len(control_quantiles) != len(controls)):
        raise ValueError("an artifact with controls needs one quantile table per control")
    family = get_family(cfg.family)
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in tensors.items()}
    by_part = split_parts(tensors)
    names = family.part_names(cfg, {p: from_dict(c) for p, c in (part_configs or {}).items()})
    if set(by_part) != set(names):
        raise ValueError(f"this {family.name} model has parts {', '.join(names)}, got {', '.join(by_part)}")
    parts = {p: {"config": dict((part_configs or {}).get(p) or cfg.to_dict()), "sha256": part_hash(by_part[p])}
             for p in names}
    if kit_map is not None:
        configs = {p: from_dict(dict((part_configs or {}).get(p) or cfg.to_dict())) for p in names}
        dim = family.map_latent_dim(configs)
        if dim is None:
            raise ValueError(f"a {family.name} model has no latent space to map (its family has no encoder)")
        if kit_map.latent_dim != dim:
            raise ValueError(f"the kit map's latents have {kit_map.latent_dim} numbers, this model's have {dim}")
    meta = {
        FORMAT_KEY: str(FORMAT_VERSION),
        "family": cfg.family,
        "config": cfg.to_json(),
        "parts": json.dumps(parts, sort_keys=True),
        "sample_rate": str(cfg.data.sample_rate),
        "length": str(cfg.data.length),
        "controls": json.dumps(controls),
        "control_quantiles": json.dumps(control_quantiles or []),
        "training": json.dumps(training or {}, allow_nan=False),
        "step": str(int(step)),
        "created": created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "software": f"kickserver {__version__}",
    }
    if kit_map is not None:
        map_tensors, meta[KITMAP_KEY] = kit_map.to_stored()
        tensors.update({k: torch.from_numpy(v) for k, v in map_tensors.items()})
    for key, value in meta.items():  # what the reader refuses is never written: it would be a model that cannot load
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_META_VALUE:
            fix = ("map fewer kicks, or give them shorter names" if key == KITMAP_KEY
                   else "this is a bug: please report it")
            raise ArtifactError(f"{path}: metadata {key!r} would take {size} bytes, more than the {MAX_META_VALUE} an "
                                f"artifact may hold, so it would not load; nothing written ({fix})")
    atomic_write_bytes(Path(path), st_save(tensors, metadata=meta))
    return Path(path)


class Artifact:
    """A loaded, validated artifact: metadata, part configs and CPU tensors (namespaced by part)."""

    def __init__(self, path: Path, meta: dict[str, str], tensors: dict[str, torch.Tensor], cfg: Config,
                 part_configs: dict[str, Config] | None = None, part_hashes: dict[str, str] | None = None,
                 kit_map: KitMap | None = None) -> None:
        self.path = Path(path)
        self.meta = meta
        self.tensors = tensors
        self.config = cfg
        self.family = cfg.family
        self.part_configs = dict(part_configs or {})
        self.part_hashes = dict(part_hashes or {})
        self.controls: list[str] = _meta_value(meta, "controls", "[]")
        self.control_quantiles: list[list[float]] = _meta_value(meta, "control_quantiles", "[]")
        self.training: dict[str, Any] = _meta_value(meta, "training", "{}")
        self.step = int(meta.get("step", "0"))
        self.format_version = int(meta.get(FORMAT_KEY, FORMAT_VERSION))
        self.kit_map = kit_map  # its kit's map (kickmodel.kitmap), or None; save() writes what is set here

    @classmethod
    def in_memory(cls, name: str, tensors: Mapping[str, torch.Tensor], cfg: Config, *, step: int = 0,
                  control_quantiles: list[list[float]] | None = None,
                  part_configs: Mapping[str, Config] | None = None,
                  training: dict[str, Any] | None = None) -> Artifact:
        """An artifact that was never written (a training run's preview samples), or not yet (`save`)."""
        meta = {"controls": json.dumps(list(cfg.controls)), "control_quantiles": json.dumps(control_quantiles or []),
                "step": str(step), FORMAT_KEY: str(FORMAT_VERSION), "training": json.dumps(training or {})}
        return cls(Path(f"{name}.safetensors"), meta, dict(tensors), cfg, dict(part_configs or {}))

    def save(self, path: Path) -> Path:
        """Write this artifact to path (atomically) with save_artifact: the same tensors, config, part configs,
        step, control quantiles, training record, creation time (when it has one) and kit map (kit_map: set it to add
        or drop one); `software` is this one's."""
        return save_artifact(path, self.tensors, self.config, step=self.step,
                             control_quantiles=self.control_quantiles or None, training=self.training,
                             part_configs={p: c.to_dict() for p, c in self.part_configs.items()},
                             created=self.meta.get("created"), kit_map=self.kit_map)

    @property
    def name(self) -> str:
        return self.path.name.removesuffix(".safetensors")

    def config_of(self, part: str) -> Config:
        return self.part_configs.get(part, self.config)

    def part_tensors(self, part: str) -> dict[str, torch.Tensor]:
        head = part + "."
        return {k[len(head):]: v for k, v in self.tensors.items() if k.startswith(head)}

    def load_part(self, module: torch.nn.Module, part: str) -> torch.nn.Module:
        """Load the part's weights into module (strict); ArtifactError names the first misfit."""
        state = self.part_tensors(part)
        want = module.state_dict()
        for k, v in want.items():
            if k not in state:
                raise ArtifactError(f"{self.path}: part {part} lacks tensor {k}")
            if tuple(state[k].shape) != tuple(v.shape):
                raise ArtifactError(f"{self.path}: tensor {part}.{k} has shape {tuple(state[k].shape)}, "
                                    f"its config needs {tuple(v.shape)}")
        extra = sorted(set(state) - set(want))
        if extra:
            raise ArtifactError(f"{self.path}: part {part} has tensors its config does not use ({extra[0]}, ...)")
        module.load_state_dict(state, strict=True)
        return module


# ----------------------------------------------------------------------------------------------
# reading


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """The whole file, opened once (no links followed at the last component, regular files only)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except OSError as e:
        if Path(path).is_dir():
            raise ArtifactError(f"{path}: is a folder; give an artifact file (NAME.safetensors)") from None
        raise ArtifactError(f"{path}: cannot open ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ArtifactError(f"{path}: is a folder; give an artifact file (NAME.safetensors)")
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise ArtifactError(f"{path}: {st.st_size / (1 << 20):.0f} MB is larger than the {max_bytes >> 20} MB "
                                "an artifact may be")
        chunks, total = [], 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            total += len(b)
            if total > max_bytes:
                raise ArtifactError(f"{path}: grew past {max_bytes >> 20} MB while being read")
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_header(data: bytes, path: Path) -> tuple[dict[str, str], dict[str, dict]]:
    """(metadata, {tensor: {"dtype", "shape", "data_offsets"}}) of a safetensors file's bytes, bounded."""
    # safetensors: an 8-byte little-endian header length, then the JSON header's "{". Only when that
    # "{" is missing is a leading 0x80 (pickle protocol) or "PK" (torch.save's zip) a diagnosis.
    if data[8:9] != b"{" and (data[:1] == b"\x80" or data[:2] == b"PK"):
        raise ArtifactError(f"{path}: looks like a pickle/zip (torch.save) file; only safetensors artifacts are served")
    if len(data) < 10:
        raise ArtifactError(f"{path}: not a readable safetensors file (only {len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_BYTES or 8 + n > len(data):
        raise ArtifactError(f"{path}: not a readable safetensors file (header length {n} does not fit)")
    try:
        header = safejson.parse(data[8:8 + n], max_bytes=MAX_HEADER_BYTES)
    except safejson.BadJSON as e:
        raise ArtifactError(f"{path}: not a readable safetensors file (header: {e})") from None
    if not isinstance(header, dict):
        raise ArtifactError(f"{path}: not a readable safetensors file (header is not a table)")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ArtifactError(f"{path}: its metadata is not a table of strings")
    for k, v in meta.items():
        if len(v) > MAX_META_VALUE:
            raise ArtifactError(f"{path}: metadata {k[:40]!r} is {len(v)} characters long (at most {MAX_META_VALUE})")
    for k, v in header.items():
        if not (isinstance(v, dict) and isinstance(v.get("shape"), list) and isinstance(v.get("dtype"), str)):
            raise ArtifactError(f"{path}: tensor {str(k)[:80]!r} has no dtype and shape")
    return meta, header


def read_metadata(path: Path) -> dict[str, str]:
    """The metadata table alone (for listing models): reads at most the header."""
    return read_header(path)[0]


def read_header(path: Path) -> tuple[dict[str, str], dict[str, dict]]:
    """(metadata, tensor table) of a safetensors file, reading at most its (bounded) header."""
    path = Path(path)
    try:
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK)) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ArtifactError(f"{path}: not a regular file")
            head = fh.read(8)
            if len(head) < 8:
                raise ArtifactError(f"{path}: not a readable safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise ArtifactError(f"{path}: not a readable safetensors file (header length {n})")
            data = head + fh.read(n)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot open ({e.strerror or e})") from None
    return parse_header(data, path)


def _meta_value(meta: Mapping[str, str], key: str, default: str) -> Any:
    """A JSON value of the metadata table (bounded: kickmodel.safejson); BadJSON with the reason."""
    return safejson.parse(meta.get(key, default), max_bytes=MAX_META_VALUE)


def _json_meta(meta: dict[str, str], key: str, default: str, path: Path) -> Any:
    try:
        return _meta_value(meta, key, default)
    except safejson.BadJSON as e:
        raise ArtifactError(f"{path}: metadata {key} is {e}") from None


def _check_quantiles(q: Any, controls: list[str], path: Path) -> None:
    if not controls:
        return
    if not (isinstance(q, list) and len(q) == len(controls)):
        raise ArtifactError(f"{path}: missing control quantiles")
    for name, row in zip(controls, q):
        ok = isinstance(row, list) and 2 <= len(row) <= 1025 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in row)
        if not ok or any(b <= a for a, b in zip(row, row[1:])):
            raise ArtifactError(f"{path}: the quantile table of control {name} is not an increasing list of numbers")


def _validate(meta: dict[str, str], header: dict[str, dict], path: Path
              ) -> tuple[str, Config, dict[str, Config], dict[str, str]]:
    """Everything that can be checked before a tensor is decoded: format, family, configs (the run's and
    each part's), the family's size limits, and the tensors' names, shapes and dtypes against what the
    configs build on the meta device. Returns (format version, config, part configs, part hashes)."""
    from .families import get_family
    from .families.base import expected_shapes

    version = meta.get(FORMAT_KEY)
    if version is None:
        raise ArtifactError(f"{path}: no {FORMAT_KEY} in its metadata; not a kickserver artifact")
    if version not in READABLE_VERSIONS:
        raise ArtifactError(f"{path}: format version {version[:20]} is not supported "
                            f"(this kickserver reads {', '.join(READABLE_VERSIONS)})")
    try:
        family = get_family(meta.get("family", ""))
        cfg = from_json(meta.get("config", ""))
    except ConfigError as e:
        raise ArtifactError(f"{path}: bad config in metadata ({e})") from None
    if cfg.family != family.name:
        raise ArtifactError(f"{path}: metadata family {family.name} disagrees with its config ({cfg.family})")

    if version == "1":  # one part, un-namespaced
        header = {f"denoiser.{k}": v for k, v in header.items()}
        parts_meta: dict[str, Any] = {"denoiser": {"config": cfg.to_dict()}}
    else:
        parts_meta = _json_meta(meta, "parts", "{}", path)
        if not isinstance(parts_meta, dict):
            raise ArtifactError(f"{path}: metadata parts is not a table")
    extra = sorted(set(parts_meta) - set(family.parts))
    if extra:
        raise ArtifactError(f"{path}: part {str(extra[0])[:40]} is not one of family {family.name}'s")
    part_configs: dict[str, Config] = {}
    part_hashes: dict[str, str] = {}
    for p in family.parts:
        if p not in parts_meta:
            continue
        entry = parts_meta[p]
        try:
            if not isinstance(entry, dict):
                raise ConfigError("not a table")
            pc = from_dict(entry.get("config"))
        except ConfigError as e:
            raise ArtifactError(f"{path}: bad config of part {p} ({e})") from None
        part_configs[p] = pc
        if isinstance(entry.get("sha256"), str):
            part_hashes[p] = entry["sha256"]
    names = family.part_names(cfg, part_configs)
    missing = [p for p in names if p not in parts_meta]
    if missing:
        raise ArtifactError(f"{path}: part {missing[0]} is missing (this {family.name} model needs "
                            f"{', '.join(names)})")
    extra = sorted(set(parts_meta) - set(names))
    if extra:
        raise ArtifactError(f"{path}: part {extra[0]} is not one of this {family.name} model's")
    try:
        want = expected_shapes(family, part_configs)
    except ConfigError as e:
        raise ArtifactError(f"{path}: refused before loading: {e}") from None
    if version != "1":
        header = _check_map_header(meta, header, family, {p: part_configs.get(p, cfg) for p in names}, path)

    for k, shape in want.items():
        if k not in header:
            raise ArtifactError(f"{path}: tensor {k} is missing")
        info = header[k]
        if tuple(info["shape"]) != shape:
            raise ArtifactError(f"{path}: tensor {k} has shape {tuple(info['shape'])}, its config needs {shape}")
        if info["dtype"] not in FLOAT_DTYPES:
            raise ArtifactError(f"{path}: tensor {k} has dtype {str(info['dtype'])[:10]}, not a float")
    extra_t = sorted(set(header) - set(want))
    if extra_t:
        raise ArtifactError(f"{path}: tensor {extra_t[0][:100]} is not used by its config")

    controls = _json_meta(meta, "controls", "[]", path)
    if controls != list(cfg.controls):
        raise ArtifactError(f"{path}: metadata controls {str(controls)[:80]} disagree with its config")
    _check_quantiles(_json_meta(meta, "control_quantiles", "[]", path), controls, path)
    if not isinstance(_json_meta(meta, "training", "{}", path), dict):
        raise ArtifactError(f"{path}: metadata training is not a table")
    if not meta.get("step", "0").isdigit():
        raise ArtifactError(f"{path}: metadata step is not a number")
    return version, cfg, part_configs, part_hashes


def _check_map_header(meta: dict[str, str], header: dict[str, dict], family: Any, configs: Mapping[str, Config],
                      path: Path) -> dict[str, dict]:
    """The kit map's tensors (kitmap.*) checked by name, shape and dtype against this model's latent size, before any
    is decoded; returns the header without them. No map at all passes."""
    shapes = {k[len(KITMAP_PREFIX):]: v["shape"] for k, v in header.items() if k.startswith(KITMAP_PREFIX)}
    if not shapes and KITMAP_KEY not in meta:
        return header
    try:
        if KITMAP_KEY not in meta:
            raise KitMapError(f"its tensors have no {KITMAP_KEY} metadata")
        KitMap.check_shapes(shapes, family.map_latent_dim(configs))
    except KitMapError as e:
        raise ArtifactError(f"{path}: kit map: {e}") from None
    for k in shapes:
        if header[KITMAP_PREFIX + k]["dtype"] not in FLOAT_DTYPES:
            raise ArtifactError(f"{path}: kit map: tensor {KITMAP_PREFIX}{k} has dtype "
                                f"{str(header[KITMAP_PREFIX + k]['dtype'])[:10]}, not a float")
    return {k: v for k, v in header.items() if not k.startswith(KITMAP_PREFIX)}


def _read_map(meta: dict[str, str], tensors: dict[str, torch.Tensor], family: Any, configs: Mapping[str, Config],
              path: Path) -> KitMap | None:
    """The kit map of a decoded artifact (its tensors taken out of `tensors`), every value checked; None without."""
    mine = {k[len(KITMAP_PREFIX):]: tensors.pop(k) for k in [k for k in tensors if k.startswith(KITMAP_PREFIX)]}
    if not mine and KITMAP_KEY not in meta:
        return None
    try:
        parsed = _meta_value(meta, KITMAP_KEY, "{}")
    except safejson.BadJSON as e:
        raise ArtifactError(f"{path}: kit map: its metadata {KITMAP_KEY} is {e}") from None
    try:
        return KitMap.from_stored({k: v.to(torch.float32).numpy() for k, v in mine.items()}, parsed,
                                  family.map_latent_dim(configs))
    except KitMapError as e:
        raise ArtifactError(f"{path}: kit map: {e}") from None


def check_artifact(path: Path) -> None:
    """Whether an artifact would load, reading only its header (for listing models): raises ArtifactError."""
    meta, header = read_header(Path(path))
    _validate(meta, header, Path(path))


def load_artifact(path: Path, *, max_bytes: int | None = None) -> Artifact:
    """Read and validate an artifact; raises ArtifactError naming the file and the reason."""
    path = Path(path)
    data = _read_bounded(path, max_bytes or MAX_ARTIFACT_BYTES)
    meta, header = parse_header(data, path)
    version, cfg, part_configs, part_hashes = _validate(meta, header, path)
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise ArtifactError(f"{path}: cannot read tensors ({e})") from None
    del data
    if version == "1":
        tensors = {f"denoiser.{k}": v for k, v in tensors.items()}
    from .families import get_family

    family = get_family(cfg.family)
    kit_map = None if version == "1" else _read_map(
        meta, tensors, family, {p: part_configs.get(p, cfg) for p in family.part_names(cfg, part_configs)}, path)
    tensors = {k: v.to(torch.float32) for k, v in tensors.items()}
    for k, v in tensors.items():
        if not bool(torch.isfinite(v).all()):
            raise ArtifactError(f"{path}: tensor {k} holds NaN or inf")
    by_part = split_parts(tensors)
    for p, h in part_hashes.items():
        if part_hash(by_part.get(p, {})) != h:
            raise ArtifactError(f"{path}: part {p} does not match its recorded content hash (the file was changed "
                                "or its parts were mixed)")
    return Artifact(path, meta, tensors, cfg, part_configs, part_hashes, kit_map)
