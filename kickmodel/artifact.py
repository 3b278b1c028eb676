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

This module is the file format and knows no family: it reads a file bounded (opened once, read whole, at most
MAX_ARTIFACT_BYTES; header and metadata sizes capped), checks what the format itself says (version, every
metadata value's JSON and type, control quantiles, float tensors, part hashes, finite values) and hands back a
`Stored` file: its metadata, tensor table and config tables as plain JSON types, tensors decoded only on request.
What a family says of a file -- its config parsed strictly, its parts, the tensors' names and shapes compared with
what that config builds on the meta device before any tensor is decoded, the kit map's latent size -- is read by
kickmodel.loading, the one family-aware reader (load_artifact, check_artifact, save_artifact, load_generator).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from . import __version__, safejson
from .config import Config
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
MAX_CONFIG_BYTES = 1 << 20  # a config's JSON (a few KB), as an artifact's metadata value may be at most
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


def write_artifact(path: Path, tensors: Mapping[str, torch.Tensor], cfg: Config, *, step: int,
                   control_quantiles: list[list[float]] | None = None, training: dict[str, Any] | None = None,
                   part_configs: Mapping[str, dict] | None = None, created: str | None = None,
                   kit_map: KitMap | None = None) -> Path:
    """Write tensors (namespaced by part) and metadata atomically to path (a .safetensors file): the format's half
    of a save. Which parts a model has and how large its kit map's latents are is its family's word, checked
    before this by kickmodel.loading.save_artifact (or Artifact.save, with what the loader recorded).

    part_configs: {part: config dict} for parts another run trained (e.g. the VAE of a latent
    diffusion model); parts not named there were trained with cfg. created: when the model was made
    (default now); a model written again (Artifact.save) keeps its own. kit_map: the map of its kit
    (kickmodel.kitmap)."""
    controls = list(cfg.controls)
    if controls and (control_quantiles is None or len(control_quantiles) != len(controls)):
        raise ValueError("an artifact with controls needs one quantile table per control")
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in tensors.items()}
    by_part = split_parts(tensors)
    parts = {p: {"config": dict((part_configs or {}).get(p) or cfg.to_dict()), "sha256": part_hash(t)}
             for p, t in sorted(by_part.items())}
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


def check_family_word(name: str, family: str, tensors: Mapping[str, torch.Tensor], kit_map: KitMap | None,
                      part_names: tuple[str, ...] | None, map_dim: int | None) -> None:
    """What a writer checks of its family's word before writing (ValueError: the loader would refuse the file): the
    tensors' parts are the ones a model of its config has (part_names; None: not known), a kit map's latents are
    this model's size (map_dim; 0: its family has no encoder; None: not known, so a map cannot be checked)."""
    if part_names is not None:
        have = sorted(split_parts(tensors))
        if have != sorted(part_names):
            raise ValueError(f"this {family} model has parts {', '.join(part_names)}, got {', '.join(have)}")
    if kit_map is not None:
        if map_dim is None:
            raise ValueError(f"{name}: the size of this model's latents is not known here, so its kit map cannot "
                             "be checked; load it with kickmodel.loading.load_artifact, or save it with "
                             "kickmodel.loading.save_artifact")
        if map_dim == 0:
            raise ValueError(f"a {family} model has no latent space to map (its family has no encoder)")
        if kit_map.latent_dim != map_dim:
            raise ValueError(f"the kit map's latents have {kit_map.latent_dim} numbers, this model's have {map_dim}")


class Artifact:
    """A loaded, validated artifact: metadata, part configs and CPU tensors (namespaced by part)."""

    def __init__(self, path: Path, meta: dict[str, str], tensors: dict[str, torch.Tensor], cfg: Config,
                 part_configs: dict[str, Config] | None = None, part_hashes: dict[str, str] | None = None,
                 kit_map: KitMap | None = None, *, part_names: tuple[str, ...] | None = None,
                 map_dim: int | None = None) -> None:
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
        # what its family says, recorded by the reader that knew it (kickmodel.loading): the parts a model of its
        # config has (None: not known here) and the size of its kit map's latents (0: its family has no encoder;
        # None: not known here)
        self.part_names = part_names
        self.map_dim = map_dim
        self.render_cost: Any = None  # what one kick costs (its family's estimate, when its reader made one)
        self.name = self.path.name.removesuffix(".safetensors")

    @classmethod
    def in_memory(cls, name: str, tensors: Mapping[str, torch.Tensor], cfg: Config, *, step: int = 0,
                  control_quantiles: list[list[float]] | None = None,
                  part_configs: Mapping[str, Config] | None = None,
                  training: dict[str, Any] | None = None, part_names: tuple[str, ...] | None = None,
                  map_dim: int | None = None) -> Artifact:
        """An artifact that was never written (a training run's preview samples), or not yet (`save`); part_names and
        map_dim: its family's word (kickmodel.loading.family_record), which `save` then holds it to."""
        meta = {"controls": json.dumps(list(cfg.controls)), "control_quantiles": json.dumps(control_quantiles or []),
                "step": str(step), FORMAT_KEY: str(FORMAT_VERSION), "training": json.dumps(training or {})}
        return cls(Path(f"{name}.safetensors"), meta, dict(tensors), cfg, dict(part_configs or {}),
                   part_names=part_names, map_dim=map_dim)

    def save(self, path: Path) -> Path:
        """Write this artifact to path (atomically): the same tensors, config, part configs, step, control quantiles,
        training record, creation time (when it has one) and kit map (kit_map: set it to add or drop one);
        `software` is this one's. What the loader refuses is not written: parts other than its family's, a map
        whose latents are not this model's (ValueError)."""
        check_family_word(self.name, self.family, self.tensors, self.kit_map, self.part_names, self.map_dim)
        return write_artifact(path, self.tensors, self.config, step=self.step,
                             control_quantiles=self.control_quantiles or None, training=self.training,
                             part_configs={p: c.to_dict() for p, c in self.part_configs.items()},
                             created=self.meta.get("created"), kit_map=self.kit_map)

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


@dataclass(frozen=True)
class Reading:
    """What a family-aware reader (kickmodel.loading) made of a Stored file before any tensor is decoded: the run's
    config and each part's, parsed; the parts a model of them has; the size of its kit map's latents (None: its family
    has no encoder); what one kick costs to render (the family's estimate, kept for its generator)."""

    config: Config
    part_configs: dict[str, Config]
    part_names: tuple[str, ...]
    map_dim: int | None
    render_cost: Any = None


def read_artifact(path: Path, reader: Callable[[Stored], Reading], *, max_bytes: int | None = None) -> Artifact:
    """Read a file (bounded), check it as the format says, let `reader` say what its family makes of it (raising
    ArtifactError with the reason; nothing is decoded before it has said), then decode it into an Artifact."""
    stored = read_stored(path, max_bytes=max_bytes)
    return stored.load(reader(stored))


class Stored:
    """An artifact file read as the format says, nothing of it yet trusted to a family: metadata, the tensor table
    (namespaced by part; a format 1 file's under `denoiser.`), the kit map's table apart, and the config tables as
    plain JSON types. `decode()` decodes the tensors (read_stored only: a header read has no data)."""

    def __init__(self, path: Path, version: str, meta: dict[str, str], header: dict[str, dict],
                 map_header: dict[str, dict], config: dict[str, Any], parts: dict[str, dict[str, Any]],
                 data: bytes | None) -> None:
        self.path = path
        self.version = version
        self.meta = meta
        self.header = header
        self.map_header = map_header  # kitmap.* entries, names without the prefix ({} without a map)
        self.config = config  # the run's config table (kickmodel.loading parses it with its family)
        self.parts = parts  # {part: {"config": table, "sha256": hex or absent}}
        self._data = data
        self.family: str = meta.get("family", "")
        self.controls: list[str] = _json_meta(meta, "controls", "[]", path)
        self.has_map = bool(map_header) or KITMAP_KEY in meta

    @property
    def decodable(self) -> bool:
        """Whether the tensors were read (read_stored) and not yet decoded; a header read has none."""
        return self._data is not None

    @property
    def part_hashes(self) -> dict[str, str]:
        return {p: e["sha256"] for p, e in self.parts.items() if isinstance(e.get("sha256"), str)}

    def map_meta(self) -> Any:
        """The kit map's metadata table (parsed JSON); ArtifactError when it is not JSON."""
        try:
            return _meta_value(self.meta, KITMAP_KEY, "{}")
        except safejson.BadJSON as e:
            raise ArtifactError(f"{self.path}: kit map: its metadata {KITMAP_KEY} is {e}") from None

    def load(self, reading: Reading) -> Artifact:
        """The Artifact: tensors decoded (decode) with what its reader read (the configs parsed, what its family says
        of parts, latent size and cost recorded), its kit map read."""
        tensors, map_tensors = self.decode()
        art = Artifact(self.path, self.meta, tensors, reading.config, reading.part_configs, self.part_hashes,
                       part_names=reading.part_names, map_dim=reading.map_dim or 0)
        art.render_cost = reading.render_cost
        if self.has_map and self.version != "1":
            try:
                art.kit_map = KitMap.from_stored(map_tensors, self.map_meta(), reading.map_dim)
            except KitMapError as e:
                raise ArtifactError(f"{self.path}: kit map: {e}") from None
        return art

    def decode(self) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
        """(the model's tensors as float32, namespaced by part; the kit map's as float32 arrays, names without the
        prefix). Every value finite, every recorded part hash matched; ArtifactError naming the first that is not."""
        if self._data is None:
            raise ArtifactError(f"{self.path}: only its header was read")
        try:
            tensors = st_load(self._data)
        except (SafetensorError, ValueError, RuntimeError) as e:
            raise ArtifactError(f"{self.path}: cannot read tensors ({e})") from None
        self._data = None
        if self.version == "1":
            tensors = {f"denoiser.{k}": v for k, v in tensors.items()}
        mine = {k[len(KITMAP_PREFIX):]: tensors.pop(k) for k in [k for k in tensors if k.startswith(KITMAP_PREFIX)]}
        tensors = {k: v.to(torch.float32) for k, v in tensors.items()}
        for k, v in tensors.items():
            if not bool(torch.isfinite(v).all()):
                raise ArtifactError(f"{self.path}: tensor {k} holds NaN or inf")
        by_part = split_parts(tensors)
        for p, h in self.part_hashes.items():
            if part_hash(by_part.get(p, {})) != h:
                raise ArtifactError(f"{self.path}: part {p} does not match its recorded content hash (the file was "
                                    "changed or its parts were mixed)")
        return tensors, {k: v.to(torch.float32).numpy() for k, v in mine.items()}


def _config_table(text: str, path: Path, what: str) -> dict[str, Any]:
    try:
        value = safejson.parse(text, max_bytes=MAX_CONFIG_BYTES)
    except safejson.BadJSON as e:
        raise ArtifactError(f"{path}: bad config {what}(config is {e})") from None
    if not isinstance(value, dict):
        raise ArtifactError(f"{path}: bad config {what}(config: expected a table, got {type(value).__name__})")
    return value


def _stored(meta: dict[str, str], header: dict[str, dict], path: Path, data: bytes | None) -> Stored:
    """What the format checks before any tensor is decoded: version, the config and parts tables, the controls,
    quantiles, training record and step, and that every tensor is a float."""
    version = meta.get(FORMAT_KEY)
    if version is None:
        raise ArtifactError(f"{path}: no {FORMAT_KEY} in its metadata; not a kickserver artifact")
    if version not in READABLE_VERSIONS:
        raise ArtifactError(f"{path}: format version {version[:20]} is not supported "
                            f"(this kickserver reads {', '.join(READABLE_VERSIONS)})")
    config = _config_table(meta.get("config", ""), path, "in metadata ")
    if version == "1":  # one part, un-namespaced
        header = {f"denoiser.{k}": v for k, v in header.items()}
        parts: dict[str, Any] = {"denoiser": {"config": config}}
    else:
        parts = _json_meta(meta, "parts", "{}", path)
        if not isinstance(parts, dict):
            raise ArtifactError(f"{path}: metadata parts is not a table")
        for p, entry in parts.items():
            if not isinstance(entry, dict):
                raise ArtifactError(f"{path}: bad config of part {str(p)[:40]} (not a table)")
            if entry.get("config") is not None and not isinstance(entry.get("config"), dict):
                raise ArtifactError(f"{path}: bad config of part {str(p)[:40]} (config: expected a table)")
    map_header = {k[len(KITMAP_PREFIX):]: v for k, v in header.items() if k.startswith(KITMAP_PREFIX)}
    header = {k: v for k, v in header.items() if not k.startswith(KITMAP_PREFIX)}
    if map_header and KITMAP_KEY not in meta:
        raise ArtifactError(f"{path}: kit map: its tensors have no {KITMAP_KEY} metadata")
    for k, info in map_header.items():
        if info["dtype"] not in FLOAT_DTYPES:
            raise ArtifactError(f"{path}: kit map: tensor {KITMAP_PREFIX}{k} has dtype {str(info['dtype'])[:10]}, "
                                "not a float")
    for k, info in header.items():
        if info["dtype"] not in FLOAT_DTYPES:
            raise ArtifactError(f"{path}: tensor {k[:100]} has dtype {str(info['dtype'])[:10]}, not a float")
    stored = Stored(path, version, meta, header, map_header, config, parts, data)
    if not (isinstance(stored.controls, list) and all(isinstance(c, str) for c in stored.controls)):
        raise ArtifactError(f"{path}: metadata controls is not a list of names")
    _check_quantiles(_json_meta(meta, "control_quantiles", "[]", path), stored.controls, path)
    if not isinstance(_json_meta(meta, "training", "{}", path), dict):
        raise ArtifactError(f"{path}: metadata training is not a table")
    if not meta.get("step", "0").isdigit():
        raise ArtifactError(f"{path}: metadata step is not a number")
    return stored


def read_stored(path: Path, *, max_bytes: int | None = None) -> Stored:
    """The whole file read (bounded) and checked as the format says; its tensors decode on `decode()`."""
    path = Path(path)
    data = _read_bounded(path, max_bytes or MAX_ARTIFACT_BYTES)
    meta, header = parse_header(data, path)
    return _stored(meta, header, path, data)


def read_stored_header(path: Path) -> Stored:
    """Only the (bounded) header read and checked as the format says (for listing models); nothing to decode."""
    meta, header = read_header(Path(path))
    return _stored(meta, header, Path(path), None)
