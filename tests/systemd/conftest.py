"""Fixtures for the systemd tests: `systemd-analyze verify` as a function returning the problems it found."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def systemd_analyze() -> str:
    exe = shutil.which("systemd-analyze") or shutil.which("systemd-analyze", path="/usr/bin:/bin")
    if exe is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    return exe


@pytest.fixture
def verify_unit(systemd_analyze: str, tmp_path_factory) -> Callable[..., list[str]]:
    """verify_unit(path, user=False) -> problems found by `systemd-analyze [--user] verify` (empty: clean).

    verify exits 0 on warnings such as an unknown key, so any output line naming the unit counts as a problem.
    User mode needs a runtime directory; a private XDG_RUNTIME_DIR gives it one without a user session.
    """

    def run(path: Path, user: bool = False) -> list[str]:
        env = dict(os.environ)
        cmd = [systemd_analyze]
        if user:
            runtime = tmp_path_factory.mktemp("xdg-runtime")
            runtime.chmod(0o700)
            env["XDG_RUNTIME_DIR"] = str(runtime)
            cmd.append("--user")
        cmd += ["verify", "--man=no", str(path)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        out = (r.stdout + r.stderr).strip()
        if user and r.returncode != 0 and "Failed to initialize manager" in out:
            pytest.skip(f"systemd-analyze --user cannot run here: {out}")
        problems = [ln for ln in out.splitlines() if path.name in ln or path.stem in ln]
        if r.returncode != 0:
            problems.append(f"exit status {r.returncode}: {out}")
        return problems

    return run
