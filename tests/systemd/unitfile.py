"""Reading unit files in tests: a small parser that keeps repeated keys, time spans, Exec command lines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNIT_DIR = REPO / "systemd"

Unit = dict[str, list[tuple[str, str]]]


def parse_unit(text: str) -> Unit:
    """Sections -> [(key, value), ...] in order, repeated keys kept (configparser would merge them).

    Follows systemd.syntax(7) as far as these units need: '#'/';' comments, [Section] headers, Key=Value,
    a trailing backslash continues the line.
    """
    unit: Unit = {}
    section = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line.startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.setdefault(section, [])
            continue
        assert section is not None, f"key outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not Key=Value: {line!r}"
        unit[section].append((key.strip(), value.strip()))
    return unit


def values(unit: Unit, section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def value(unit: Unit, section: str, key: str) -> str | None:
    """The effective (last) value of key, or None if unset."""
    vs = values(unit, section, key)
    return vs[-1] if vs else None


_TIME_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1, "sec": 1, "second": 1, "seconds": 1,
               "m": 60, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600}


def seconds(span: str) -> float:
    """A systemd time span ('30', '5s', '1min 30s', 'infinity') in seconds."""
    span = span.strip()
    if span == "infinity":
        return float("inf")
    if re.fullmatch(r"\d+(\.\d+)?", span):
        return float(span)
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", span):
        total += float(num) * _TIME_UNITS[unit]
    return total


def exec_argv(command: str) -> list[str]:
    """An Exec*= value split into words, with its prefixes (-, +, @, :, !) removed from the first."""
    words = shlex.split(command)
    words[0] = words[0].lstrip("-+@:!")
    return words
