"""Find, decode, clean and cache a folder of one-shot kicks as fixed-length, onset-aligned clips.

    prepared = prepare(["~/samples/kicks"], DataConfig(), Path("runs/x/cache"))
    train_idx, val_idx = prepared.split(cfg.val_fraction)
    batch = torch.from_numpy(prepared.audio[train_idx[:16]])

Every clip is mono float32 at `cfg.sample_rate`, exactly `cfg.length` samples, its transient at
sample 0 (after a 0.5 ms pre-roll), DC removed, peak at `cfg.peak_db` dBFS, faded out at the end.
Files that cannot be used are skipped with one log line each and listed in `PreparedSet.skipped`. A file that
hits twice (a loop, a flam: kickmodel.dsp.first_hit_only) is kept to its first hit, with a log line:
a model learns what its clips hold, and one-shots are what it should make.

The cache is `<cache_dir>/audio.f32` (raw float32, row-major [N, length]) and `manifest.json`
(written last). It is reused only when the input files (path, size, mtime, sha256) and the
DataConfig (except `val_fraction`, which does not change the clips) are identical.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from kickmodel import safejson
from kickmodel.clips import AUDIO_EXTENSIONS, MAX_SAMPLES, BadAudio, check_header, load_clip
from kickmodel.config import DataConfig
from kickmodel.dsp import CUT_BEFORE_MS, first_hit_only
from kickmodel.fsutil import atomic_write, clean_stale_temp_files

CACHE_VERSION = 3  # 2: a clip that hits twice is cut to its first hit (first_hit_only); 3: at its second attack's
# own sample (5 ms frames are 220 samples at 44.1 kHz, not 220.5: the old cut ended up to a millisecond late)
AUDIO_FILE = "audio.f32"
MANIFEST_FILE = "manifest.json"
SIDECAR_SUFFIXES = frozenset({".asd", ".reapeaks", ".reapindex"})
# DataConfig fields that do not change the decoded clips, so changing them keeps the cache
_NOT_IN_CACHE_KEY = ("val_fraction",)


class NoUsableAudio(Exception):
    """prepare() found no usable file."""


# ----------------------------------------------------------------------------------------------
# scanning


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


MAX_SCAN_DEPTH = 64  # folders below a given folder that scan_audio walks at most (deeper ones: one log line)
MAX_SCAN_FOLDERS = 100_000  # real folders walked at most in one scan (more: ScanLimit, a one-line error)


class ScanLimit(ValueError):
    """scan_audio met more folders than MAX_SCAN_FOLDERS (the message names the bound and the fix)."""


def scan_audio(paths: Iterable[str | Path], log: Callable[[str], None] | None = None) -> list[Path]:
    """Audio files under `paths` (folders, recursively, or single files): sorted, resolved, no duplicates.

    Hidden files and folders (".x", AppleDouble "._x.wav") and DAW sidecars (*.asd, *.reapeaks)
    are skipped. A path that does not exist raises FileNotFoundError. Links to folders are followed, but each real
    folder (device and inode) is walked once: a link back to a folder above (which made the walk endless)
    is left out, and so is anything deeper than MAX_SCAN_DEPTH, each with one log line; more than MAX_SCAN_FOLDERS
    folders raises ScanLimit.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: set[Path] = set()
    seen: set[tuple[int, int]] = set()  # (st_dev, st_ino) of every folder walked
    revisits: list[str] = []
    too_deep: list[str] = []
    for p in paths:
        p = Path(p).expanduser()
        if not p.exists():
            raise FileNotFoundError(f"no such file or folder: {p}")
        if p.is_file():
            if p.suffix.lower() in AUDIO_EXTENSIONS:
                found.add(p.resolve())
            continue
        stack = [(p, 0)]
        while stack:
            folder, depth = stack.pop()
            try:
                st = folder.stat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                revisits.append(str(folder))
                continue
            if len(seen) >= MAX_SCAN_FOLDERS:
                raise ScanLimit(f"more than {MAX_SCAN_FOLDERS} folders under {', '.join(map(str, paths))}: give the "
                                "folder that holds the kicks (a link to a large tree, or to /, would be walked whole)")
            seen.add((st.st_dev, st.st_ino))
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for e in entries:
                if _is_hidden(e.name):
                    continue
                try:
                    is_dir = e.is_dir(follow_symlinks=True)
                except OSError:
                    continue
                if is_dir:
                    if depth + 1 > MAX_SCAN_DEPTH:
                        too_deep.append(e.path)
                    else:
                        stack.append((Path(e.path), depth + 1))
                    continue
                suffix = os.path.splitext(e.name)[1].lower()
                if suffix in SIDECAR_SUFFIXES or suffix not in AUDIO_EXTENSIONS:
                    continue
                f = Path(e.path)
                if f.is_file():
                    found.add(f.resolve())
    if log is not None and revisits:
        log(f"scan: {len(revisits)} folder(s) left out, already walked (a link back to a folder above, or a second "
            f"link to one): {', '.join(revisits[:3])}{' ...' if len(revisits) > 3 else ''}")
    if log is not None and too_deep:
        log(f"scan: {len(too_deep)} folder(s) deeper than {MAX_SCAN_DEPTH} levels left out: "
            f"{', '.join(too_deep[:3])}{' ...' if len(too_deep) > 3 else ''}")
    return sorted(found)


# ----------------------------------------------------------------------------------------------
# the prepared set and its cache


@dataclass
class PreparedSet:
    audio: np.ndarray  # read-only np.memmap float32 [N, length]
    manifest: list[dict]  # per clip: source, sha256, duration (s), size, mtime_ns
    skipped: list[tuple[str, str]]  # (path, reason)
    config: DataConfig
    cache_dir: Path

    def __len__(self) -> int:
        return int(self.audio.shape[0])

    def split(self, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
        """(train, validation) index arrays, deterministic by content, with velocity layers and
        near-copies on one side (`trainer.split.split_indices`, which says how)."""
        from trainer.split import split_indices

        return split_indices(self.audio, self.manifest, val_fraction, self.config.sample_rate)

    def groups(self, idx) -> list[np.ndarray]:
        """The clips of `idx` as groups of velocity layers and near-copies, each an int64 array of indices into
        the set, sorted: the whole set's groups (`trainer.split.group_clips`, what the split keeps on one side;
        grouping a subset alone could differ, a layer series being judged against the set's size), cut to idx."""
        from trainer.split import group_clips

        keep = set(int(i) for i in idx)
        whole = group_clips(np.asarray(self.audio), self.manifest, self.config.sample_rate)
        return [g for g in (np.array([i for i in grp if i in keep], dtype=np.int64) for grp in whole) if len(g)]

    def describe_split(self, train_idx, val_idx) -> dict[str, list[dict[str, str]]]:
        """{"train": [{"name", "sha256"}, ...], "heldout": [...]}: the files on each side (for an artifact)."""
        from trainer.split import describe_split

        return describe_split(self.manifest, train_idx, val_idx)


def default_cache_dir(paths: list[str | Path] | str | Path, cfg: DataConfig) -> Path:
    """The prepared-data cache `kicktrain prepare` and `kicktrain fit` share for these folders and clip
    settings: $XDG_CACHE_HOME/kicktrain/prepared/<key> (~/.cache when unset). The cache itself checks
    every file's fingerprint, so a changed folder is rebuilt, not trusted."""
    roots = [Path(p).expanduser().resolve() for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    key = json.dumps({"roots": sorted(str(r) for r in roots), "config": _cache_key_config(cfg)}, sort_keys=True)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kicktrain" / "prepared" / hashlib.sha256(key.encode()).hexdigest()[:16]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# the largest file that can hold MAX_SAMPLES samples: 64-bit floats, plus as much again for metadata chunks. A larger
# file is skipped from its size, before it is read (a 10.6 GB sparse file was hashed in full first: 47 s)
MAX_FILE_BYTES = MAX_SAMPLES * 8 * 2


def header_problem(path: Path, size: int) -> str | None:
    """Why a file cannot be a clip, judged from its size and header alone (kickmodel.clips.check_header's bounds),
    before it is hashed or decoded; None when it may be (a header soundfile cannot read is left to load_clip, which
    says why, reading no more than the header either)."""
    if size > MAX_FILE_BYTES:
        return f"{size / 1e6:.0f} MB; a kick file is at most {MAX_FILE_BYTES / 1e6:.0f} MB"
    try:
        info = sf.info(str(path))
        check_header(info.frames, info.samplerate, info.channels)
    except BadAudio as e:
        return str(e)
    except Exception:  # noqa: BLE001 -- unreadable headers: load_clip gives the reason
        return None
    return None


def _fingerprint(path: Path) -> tuple[dict, str | None]:
    """(the file's fingerprint, why it cannot be used from its header or None). The header is checked first: a file
    refused there is not hashed (its sha256 is None; size and mtime still tell the cache when it changes)."""
    st = path.stat()
    problem = header_problem(path, int(st.st_size))
    return ({"source": str(path), "size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
             "sha256": None if problem else sha256_file(path)}, problem)


def _cache_key_config(cfg: DataConfig) -> dict:
    d = dataclasses.asdict(cfg)
    for k in _NOT_IN_CACHE_KEY:
        d.pop(k, None)
    return json.loads(json.dumps(d))  # plain JSON types (tuples -> lists) so comparisons with the file work


MAX_MANIFEST_BYTES = 256 << 20  # a manifest entry is about 300 bytes: some 800,000 files


def _read_manifest(cache_dir: Path) -> dict | None:
    try:
        return safejson.read(cache_dir / MANIFEST_FILE, max_bytes=MAX_MANIFEST_BYTES)
    except (OSError, ValueError):
        return None


def _why_rebuild(old: dict | None, inputs: list[dict], cfg: DataConfig, cache_dir: Path) -> str | None:
    """None when the cache can be used as it is, else the reason to rebuild."""
    if old is None:
        return "no cache" if not (cache_dir / MANIFEST_FILE).exists() else "manifest unreadable"
    if old.get("version") != CACHE_VERSION:
        return f"cache format {old.get('version')} is not {CACHE_VERSION}"
    old_cfg = old.get("config_key", {})
    new_cfg = _cache_key_config(cfg)
    if old_cfg != new_cfg:
        changed = sorted(k for k in set(old_cfg) | set(new_cfg) if old_cfg.get(k) != new_cfg.get(k))
        return f"data config changed ({', '.join(changed)})"
    old_inputs = {d["source"]: d for d in old.get("inputs", [])}
    new_inputs = {d["source"]: d for d in inputs}
    added = set(new_inputs) - set(old_inputs)
    removed = set(old_inputs) - set(new_inputs)
    modified = [s for s in set(new_inputs) & set(old_inputs) if new_inputs[s] != old_inputs[s]]
    if added or removed or modified:
        parts = [f"{len(v)} {k}" for k, v in (("added", added), ("removed", removed), ("changed", modified)) if v]
        return "files changed: " + ", ".join(parts)
    shape = old.get("shape")
    audio = cache_dir / AUDIO_FILE
    if not isinstance(shape, list) or len(shape) != 2 or not audio.exists():
        return "audio cache missing"
    if audio.stat().st_size != shape[0] * shape[1] * 4:
        return "audio cache has the wrong size"
    return None


def _open(cache_dir: Path, manifest: dict, cfg: DataConfig) -> PreparedSet:
    n, length = manifest["shape"]
    if n > 0:
        audio = np.memmap(cache_dir / AUDIO_FILE, dtype=np.float32, mode="r", shape=(n, length))
    else:
        audio = np.zeros((0, length), dtype=np.float32)
        audio.flags.writeable = False
    return PreparedSet(audio=audio, manifest=manifest["clips"], skipped=[tuple(s) for s in manifest["skipped"]],
                       config=cfg, cache_dir=cache_dir)


def _no_usable(paths: list[Path], n_files: int, n_skipped: int) -> NoUsableAudio:
    where = ", ".join(str(p) for p in paths)
    return NoUsableAudio(f"no usable audio in {where}: {n_files} audio file(s) found, {n_skipped} skipped")


def prepare(paths: list[str | Path], cfg: DataConfig, cache_dir: Path,
            log: Callable[[str], None] = print) -> PreparedSet:
    """Scan, decode and cache every usable file under `paths`; see the module docstring."""
    roots = [Path(p).expanduser() for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    clean_stale_temp_files(cache_dir)  # left by a crash mid-write
    files = scan_audio(roots, log=log)
    if not files:
        raise _no_usable(roots, 0, 0)
    inputs, problems = map(list, zip(*(_fingerprint(f) for f in files), strict=True))

    old = _read_manifest(cache_dir)
    why = _why_rebuild(old, inputs, cfg, cache_dir)
    if why is None:
        assert old is not None
        for src, reason in old["skipped"]:
            log(f"skipped {src}: {reason}")
        n = old["shape"][0]
        if n == 0:
            raise _no_usable(roots, len(files), len(old["skipped"]))
        log(f"using cached {n} clips from {len(files)} files ({len(old['skipped'])} skipped) -> {cache_dir}")
        return _open(cache_dir, old, cfg)
    log(f"rebuilding cache: {why}")

    # clips of unchanged files can be copied from the old cache when the clip settings are the same
    reusable: dict[str, int] = {}
    old_audio = None
    if (old is not None and old.get("version") == CACHE_VERSION and old.get("config_key") == _cache_key_config(cfg)
            and isinstance(old.get("shape"), list) and (cache_dir / AUDIO_FILE).exists()
            and (cache_dir / AUDIO_FILE).stat().st_size == old["shape"][0] * old["shape"][1] * 4
            and old["shape"][0] > 0):
        reusable = {c["sha256"]: i for i, c in enumerate(old["clips"])}
        old_audio = np.fromfile(cache_dir / AUDIO_FILE, dtype=np.float32).reshape(old["shape"])

    rows: list[np.ndarray] = []
    clips: list[dict] = []
    skipped: list[tuple[str, str]] = []
    old_clips = {c["sha256"]: c for c in old["clips"]} if old_audio is not None else {}
    n_reused = 0
    for f, fp, problem in zip(files, inputs, problems, strict=True):
        if problem is not None:
            log(f"skipped {f}: {problem}")
            skipped.append((str(f), problem))
            continue
        if old_audio is not None and fp["sha256"] in reusable:
            rows.append(np.array(old_audio[reusable[fp["sha256"]]]))
            duration = float(old_clips[fp["sha256"]]["duration"])
            n_reused += 1
        else:
            try:
                clip, duration = load_clip(f, cfg)
            except BadAudio as e:
                reason = str(e)
            except (OSError, RuntimeError, ValueError) as e:  # anything else a decoder may raise
                reason = f"unreadable: {e}"
            else:
                reason = ""
            if reason:
                log(f"skipped {f}: {reason}")
                skipped.append((str(f), reason))
                continue
            clip, at_ms = first_hit_only(clip, cfg.sample_rate)
            if not np.isnan(at_ms[0]):
                log(f"{f}: hits again at {at_ms[0]:.0f} ms (a loop or a flam?): using its first hit only, faded out "
                    f"{CUT_BEFORE_MS:g} ms before the second")
            rows.append(clip)
        clips.append({"source": fp["source"], "sha256": fp["sha256"], "duration": duration,
                      "size": fp["size"], "mtime_ns": fp["mtime_ns"]})

    audio = np.stack(rows).astype(np.float32, copy=False) if rows else np.zeros((0, cfg.length), np.float32)
    manifest = {
        "version": CACHE_VERSION,
        "shape": [int(audio.shape[0]), int(cfg.length)],
        "dtype": "float32",
        "config": json.loads(json.dumps(dataclasses.asdict(cfg))),
        "config_key": _cache_key_config(cfg),
        "inputs": inputs,
        "clips": clips,
        "skipped": [list(s) for s in skipped],
    }
    # invalidate first: a crash between the two writes must not pair an old manifest with new audio
    try:
        (cache_dir / MANIFEST_FILE).unlink()
    except FileNotFoundError:
        pass
    atomic_write(cache_dir / AUDIO_FILE, lambda fh: fh.write(np.ascontiguousarray(audio).tobytes()))
    atomic_write(cache_dir / MANIFEST_FILE, lambda fh: fh.write(json.dumps(manifest, indent=1).encode()))
    if not clips:
        raise _no_usable(roots, len(files), len(skipped))
    reused = f", {n_reused} reused" if n_reused else ""
    log(f"prepared {len(clips)} clips from {len(files)} files ({len(skipped)} skipped{reused}) -> {cache_dir}")
    return _open(cache_dir, manifest, cfg)
