"""quickstart.sh's KICKSERVER_TORCH=cpu switch, run against a stand-in virtual environment whose `python` records
what it is asked to do (no network, no real install). The real CPU index (download.pytorch.org) is not reachable
from the development machine: what is checked here is which pip commands run, in which order, with which pins."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from daemon_util import REPO
from packaging.requirements import Requirement
from packaging.version import Version

QUICKSTART = REPO / "quickstart.sh"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

FAKE_PYTHON = """#!/usr/bin/env bash
# a stand-in interpreter: log the arguments; answer the torch probe with $FAKE_TORCH (none: import fails)
printf '%s\\n' "$*" >> "$FAKE_LOG"
if [ "$1" = -c ]; then
  [ "$FAKE_TORCH" = none ] && exit 1
  echo "$FAKE_TORCH"
fi
exit 0
"""


def run_quickstart(tmp_path: Path, torch: str, switch: str | None, cmd: str = "serve") -> tuple[int, list[str], str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if k != "KICKSERVER_TORCH"}
    env.update({"VIRTUAL_ENV": str(venv), "FAKE_LOG": str(log), "FAKE_TORCH": torch})
    if switch is not None:
        env["KICKSERVER_TORCH"] = switch
    r = subprocess.run(["bash", str(QUICKSTART), cmd], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return r.returncode, calls, r.stderr


def pip_installs(calls: list[str]) -> list[list[str]]:
    return [shlex.split(c)[2:] for c in calls if c.startswith("-m pip install")]


def test_cpu_switch_installs_the_cpu_wheels_before_the_project(tmp_path):
    rc, calls, err = run_quickstart(tmp_path, torch="none", switch="cpu")
    assert rc == 0, err
    installs = pip_installs(calls)
    assert len(installs) == 2, calls
    torch_args, project_args = installs
    assert torch_args[torch_args.index("--index-url") + 1] == CPU_INDEX
    assert "--force-reinstall" not in torch_args
    assert any(a.startswith("-e") for a in project_args), "the project comes after torch, so pip keeps the CPU build"
    assert calls[-1].startswith("-m kickserver serve")


def test_cpu_switch_replaces_a_cuda_build_and_leaves_a_cpu_build(tmp_path):
    rc, calls, err = run_quickstart(tmp_path / "gpu", torch="gpu", switch="cpu")
    assert rc == 0, err
    (torch_args, _project) = pip_installs(calls)
    assert {"--force-reinstall", "--no-deps"} <= set(torch_args) and CPU_INDEX in torch_args
    assert "replacing the CUDA build" in err
    rc, calls, err = run_quickstart(tmp_path / "cpu", torch="cpu", switch="cpu")
    assert rc == 0, err
    assert len(pip_installs(calls)) == 1, "a CPU build is already there: only the project is installed"


def test_without_the_switch_nothing_changes(tmp_path):
    rc, calls, err = run_quickstart(tmp_path, torch="none", switch=None, cmd="test")
    assert rc == 0, err
    (project,) = pip_installs(calls)
    assert CPU_INDEX not in project and not any(c.startswith("-c") for c in calls)
    assert calls[-1].startswith("-m pytest")


def test_an_unknown_switch_value_is_refused(tmp_path):
    rc, calls, err = run_quickstart(tmp_path, torch="none", switch="cuda12")
    assert rc == 2 and "KICKSERVER_TORCH must be cpu" in err and "cuda12" in err
    assert not pip_installs(calls)


def test_cpu_pins_satisfy_the_project_dependencies():
    """The versions quickstart asks the CPU index for are the ones pyproject.toml allows (as +cpu builds)."""
    tomllib = pytest.importorskip("tomllib")
    deps = {Requirement(d).name: Requirement(d) for d in
            tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    text = QUICKSTART.read_text()
    pins = text[text.index("TORCH_PINS=(") + len("TORCH_PINS=("):].split(")")[0].replace('"', "").split()
    assert [p.split("==")[0] for p in pins] == ["torch", "torchaudio"]
    for pin in pins:
        name, version = pin.split("==")
        assert deps[name].specifier.contains(Version(version + "+cpu")), (pin, str(deps[name]))
    assert CPU_INDEX in text
