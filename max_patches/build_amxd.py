#!/usr/bin/env python3
"""Build the Max for Live devices (kickserver.amxd, kickserver-audition.amxd) from their patchers (.maxpat).

The .maxpat is the source: edit it in Max (or by hand), then run

    python max_patches/build_amxd.py            # rewrite every .amxd in DEVICES
    python max_patches/build_amxd.py --check    # exit 1 if any .amxd is missing or out of date (CI)
    python max_patches/build_amxd.py --maxpat X.maxpat [--amxd X.amxd]   # one patcher (default: X.amxd beside it)

An .amxd is a sequence of chunks, each a 4-byte ASCII tag, a little-endian uint32 size and that many
bytes (the layout Ableton's maxdevtools `maxdiff/amxd_textconv.py` reads):

    ampf  4 bytes   device type: "mmmm" MIDI effect, "aaaa" audio effect, "iiii" instrument
    meta  4 bytes   zeros (what public writers put there)
    ptch  n bytes   the patcher JSON, UTF-8, NUL-terminated

kickserver.amxd only speaks OSC, so it is a MIDI effect (MIDI passes through it untouched); a MIDI effect has
no audio output, so the last kick is played by kickserver-audition.amxd, an audio effect. The patcher bytes are
embedded exactly as they are in the .maxpat, so the two files cannot drift apart unnoticed.

Max writes a `project` object into a device's patcher whose `amxdtype` is the same 4 bytes as the ampf
chunk, read as a big-endian integer (1835887981 = "mmmm", 1633771873 = "aaaa", 1768515945 = "iiii"; see
Ableton/maxdevtools' test devices). The device type is taken from it (or --type), and a patcher whose
amxdtype disagrees with --type is refused. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script from a checkout

from kickmodel.fsutil import atomic_write_bytes  # noqa: E402

DEFAULT_MAXPAT = HERE / "kickserver.maxpat"
DEFAULT_AMXD = HERE / "kickserver.amxd"
# every device built here: (patcher, device); the device type of each comes from its patcher's project.amxdtype
DEVICES = ((DEFAULT_MAXPAT, DEFAULT_AMXD),
           (HERE / "kickserver-audition.maxpat", HERE / "kickserver-audition.amxd"))

DEVICE_TYPES = {"midi": b"mmmm", "audio": b"aaaa", "instrument": b"iiii"}
META = b"\0\0\0\0"


def chunk(tag: bytes, data: bytes) -> bytes:
    """One chunk: 4-byte tag, little-endian uint32 size, data."""
    if len(tag) != 4:
        raise ValueError(f"chunk tag must be 4 bytes, got {tag!r}")
    return tag + struct.pack("<I", len(data)) + data


def check_patcher(patcher: bytes) -> dict:
    """The parsed patcher; ValueError if the bytes are not a Max patcher (JSON with a 'patcher' object)."""
    try:
        doc = json.loads(patcher.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a Max patcher (JSON): {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("patcher"), dict):
        raise ValueError("not a Max patcher: the top-level object has no 'patcher' object")
    return doc


def amxdtype(kind: bytes) -> int:
    """The project block's amxdtype for an ampf device kind (b"mmmm" -> 1835887981)."""
    return int.from_bytes(kind, "big")


def project_device_type(doc: dict) -> str | None:
    """The device type the patcher's project.amxdtype names, None if it has no project block.
    ValueError if the block is malformed or names no known type."""
    project = doc["patcher"].get("project")
    if project is None:
        return None
    value = project.get("amxdtype") if isinstance(project, dict) else None
    for name, kind in DEVICE_TYPES.items():
        if isinstance(value, int) and not isinstance(value, bool) and value == amxdtype(kind):
            return name
    known = ", ".join(f"{amxdtype(k)} ({n})" for n, k in DEVICE_TYPES.items())
    raise ValueError(f"project.amxdtype must be one of {known}, got {value!r}")


def build_amxd(patcher: bytes, device_type: str | None = None) -> bytes:
    """The .amxd bytes for the patcher JSON `patcher` (as read from a .maxpat).

    device_type: midi, audio or instrument; None: the one the patcher's project.amxdtype names, else midi."""
    doc = check_patcher(patcher)
    declared = project_device_type(doc)
    if device_type is None:
        device_type = declared or "midi"
    try:
        kind = DEVICE_TYPES[device_type]
    except KeyError:
        raise ValueError(f"device type must be one of {', '.join(DEVICE_TYPES)}, got {device_type!r}") from None
    if declared is not None and declared != device_type:
        raise ValueError(f"project.amxdtype says {declared} device ({amxdtype(DEVICE_TYPES[declared])}), "
                         f"asked for {device_type}")
    return chunk(b"ampf", kind) + chunk(b"meta", META) + chunk(b"ptch", patcher + b"\0")


def read_chunks(data: bytes) -> list[tuple[str, bytes]]:
    """The (tag, data) chunks of an .amxd; ValueError if the layout is broken."""
    out: list[tuple[str, bytes]] = []
    pos = 0
    while pos < len(data):
        if pos + 8 > len(data):
            raise ValueError(f"truncated chunk header at byte {pos}")
        tag = data[pos:pos + 4]
        (size,) = struct.unpack("<I", data[pos + 4:pos + 8])
        start, end = pos + 8, pos + 8 + size
        if end > len(data):
            raise ValueError(f"chunk {tag!r} at byte {pos} claims {size} bytes, only {len(data) - start} left")
        try:
            name = tag.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError(f"chunk tag at byte {pos} is not ASCII: {tag!r}") from None
        out.append((name, data[start:end]))
        pos = end
    return out


def patcher_from_amxd(data: bytes) -> bytes:
    """The patcher JSON bytes inside an .amxd (without the trailing NUL)."""
    for tag, body in read_chunks(data):
        if tag == "ptch":
            return body[:-1] if body.endswith(b"\0") else body
    raise ValueError("no ptch chunk")


def write_atomic(path: Path, data: bytes) -> None:
    """Write a temp file beside `path`, then rename it over `path` (keeping its mode, else 0644)."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    atomic_write_bytes(path, data, mode)


def build_one(maxpat: Path, amxd: Path, device_type: str | None, check: bool) -> int:
    """Build (or, with check, compare) one device: 0 done, 1 missing or out of date, 2 the patcher is refused."""
    try:
        want = build_amxd(maxpat.read_bytes(), device_type)
    except (OSError, ValueError) as e:
        print(f"build_amxd: {maxpat}: {e}", file=sys.stderr)
        return 2
    if check:
        try:
            have = amxd.read_bytes()
        except FileNotFoundError:
            print(f"build_amxd: {amxd} is missing; run: python max_patches/{Path(__file__).name}", file=sys.stderr)
            return 1
        if have != want:
            print(f"build_amxd: {amxd} is out of date with {maxpat.name}; "
                  f"run: python max_patches/{Path(__file__).name}", file=sys.stderr)
            return 1
        print(f"build_amxd: {amxd.name} matches {maxpat.name}")
        return 0
    write_atomic(amxd, want)
    kind = next(n for n, k in DEVICE_TYPES.items() if want[8:12] == k)
    print(f"build_amxd: wrote {amxd} ({len(want)} bytes, {kind} device)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--maxpat", type=Path,
                   help="one patcher to embed (default: every device here: " +
                        ", ".join(m.name for m, _ in DEVICES) + ")")
    p.add_argument("--amxd", type=Path, help="the device to write for --maxpat (default: its name with .amxd)")
    p.add_argument("--type", choices=sorted(DEVICE_TYPES),
                   help="Live device type (default: the patcher's project.amxdtype, else midi)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if an .amxd is missing or differs")
    args = p.parse_args(argv)
    if args.amxd is not None and args.maxpat is None:
        p.error("--amxd goes with --maxpat")
    pairs = [(args.maxpat, args.amxd or args.maxpat.with_suffix(".amxd"))] if args.maxpat else list(DEVICES)
    return max(build_one(maxpat, amxd, args.type, args.check) for maxpat, amxd in pairs)


if __name__ == "__main__":
    sys.exit(main())
