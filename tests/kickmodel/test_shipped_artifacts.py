"""Every artifact the repository ships is pure data: its metadata names no path of the machine that made it
(a file travels; that machine's folders do not, and fine-tuning it must not need them)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kickmodel.artifact import read_metadata

REPO = Path(__file__).resolve().parents[2]
# an absolute path (/x, C:\x or C:/x) or a home-dir one (~, ~user/), alone or inside a longer text
MACHINE_PATH = re.compile(r"(?:^|[\s\"'=:,;(\[])(?:/[\w.@+-]|~[\w.-]*(?:/|$)|[A-Za-z]:[\\/])")


def shipped_artifacts() -> list[Path]:
    """The *.safetensors files git tracks (the bundled model, test fixtures); a tree without git: the same
    folders searched."""
    try:
        out = subprocess.run(["git", "ls-files", "*.safetensors"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout
        return [REPO / line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for d in ("kickserver", "tests") for p in (REPO / d).rglob("*.safetensors"))


def strings(value: Any) -> list[str]:
    """Every string in a metadata value: the value itself, and when it is JSON, every key and string in it."""
    try:
        tree = json.loads(value)
    except (TypeError, ValueError):
        return [value]
    found = [value] if not isinstance(tree, (dict, list)) else []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            found += [str(k) for k in node]
            todo += list(node.values())
        elif isinstance(node, list):
            todo += node
        elif isinstance(node, str):
            found.append(node)
    return found


def machine_paths(meta: dict[str, str]) -> list[str]:
    """'key: text' for each metadata string that looks like an absolute or home-dir path."""
    return [f"{k}: {s[:120]}" for k, v in meta.items() for s in strings(v) + [k] if MACHINE_PATH.search(s)]


def test_the_scan_knows_a_machine_path_when_it_sees_one():
    meta = {"config": json.dumps({"vae": {"path": "/work/art/dec-f.safetensors"}}),
            "training": json.dumps({"sources": ["~/Samples/909"], "run": "runs/ld1", "split": [{"name": "a.flac"}],
                                    "win": "C:\\Users\\me\\kicks", "note": "trained in /tmp/kit101 on a laptop"}),
            "software": "kickserver 0.1.0", "created": "2026-12-04T13:53:06Z", "step": "2319"}
    assert len(machine_paths(meta)) == 4  # the vae path, ~/Samples, C:\Users, the note; a run name is not one


def test_the_repository_ships_artifacts():
    names = {p.relative_to(REPO).as_posix() for p in shipped_artifacts()}
    assert "kickserver/models/default.safetensors" in names, names


@pytest.mark.parametrize("path", shipped_artifacts(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_shipped_artifact_names_a_path_of_the_machine_that_made_it(path):
    found = machine_paths(read_metadata(path))
    assert not found, f"{path.relative_to(REPO)} names paths of the machine that made it: {found}"
