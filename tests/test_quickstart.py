"""quickstart.sh's KICKSERVER_TORCH=cpu switch, run against a stand-in virtual environment whose `python` records
what it is asked to do (no network, no real install). The real CPU index (download.pytorch.org) is not reachable
from the development machine: what is checked here is which pip commands run, in which order, with which pins."""

from __future__ import annotations

import http.server
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from daemon_util import REPO
from packaging.requirements import Requirement
from packaging.version import Version

QUICKSTART = REPO / "quickstart.sh"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

FAKE_PYTHON = """#!/usr/bin/env bash
# a stand-in interpreter: log the arguments; answer the torch probe with $FAKE_TORCH (none: import fails); a pip
# install from an index fails as pip does when it cannot reach it if $FAKE_INDEX_FAILS is set; the index probe
# (urllib) runs in the real interpreter, against the loopback URL a test gives
printf '%s\\n' "$*" >> "$FAKE_LOG"
if [ "$1" = -c ]; then
  case "$2" in *urlopen*) exec "$REAL_PYTHON" "$@" ;; esac
  [ "$FAKE_TORCH" = none ] && exit 1
  echo "$FAKE_TORCH"
fi
if [ "$1 $2 $3" = "-m pip install" ] && [ -n "${FAKE_INDEX_FAILS:-}" ]; then
  case "$*" in *--index-url*)
    echo "ERROR: Cannot install torch==2.11.0 because these package versions have conflicting dependencies." >&2
    echo "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/..." >&2
    exit 1 ;;
  esac
fi
exit 0
"""


def run_quickstart(tmp_path: Path, torch: str, switch: str | None, cmd: str = "serve",
                   env_extra: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> tuple[int, list[str], str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KICKSERVER_TORCH", "KICKSERVER_TORCH_INDEX")}
    env.update({"VIRTUAL_ENV": str(venv), "FAKE_LOG": str(log), "FAKE_TORCH": torch, "REAL_PYTHON": sys.executable})
    if switch is not None:
        env["KICKSERVER_TORCH"] = switch
    env.update(env_extra or {})
    r = subprocess.run(["bash", str(QUICKSTART), cmd, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return r.returncode, calls, r.stderr


def pip_installs(calls: list[str]) -> list[list[str]]:
    return [shlex.split(c)[2:] for c in calls if c.startswith("-m pip install")]


@pytest.mark.parametrize("args,served", [((), "--model default"), (("--port", "9100"), "--model default --port 9100"),
                                         (("--model", "mine"), "--model mine"), (("--model=mine",), "--model=mine")])
def test_serve_serves_the_bundled_model_it_names_and_says_so(tmp_path, args, served):
    """`./quickstart.sh serve` ("the bundled model") once served a half-trained export the daemon
    remembered from its models folder. It pins the bundled model (--model default) and says so, unless the options
    name a model themselves."""
    rc, calls, err = run_quickstart(tmp_path, torch="cpu", switch=None, args=args)
    assert rc == 0, err
    assert calls[-1] == f"-m kickserver serve {served}", calls[-1]
    said = "serving the bundled model (kickserver serve --model default" in err
    assert said == served.startswith("--model default"), err


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
    assert not any(CPU_INDEX in c for c in calls)  # the only `-c` is the probe for an installed torch
    assert calls[-1].startswith("-m pytest")


def has_nvidia() -> bool:
    return shutil.which("nvidia-smi") is not None or os.path.exists("/dev/nvidia0")


def test_a_first_default_install_says_what_it_downloads_and_shows_progress(tmp_path):
    """With no torch yet the default install pulls torch's CUDA build (about 4.7 GB): said before pip starts, with
    the CPU switch where there is no NVIDIA GPU, and pip not silenced (it was -q for minutes)."""
    rc, calls, err = run_quickstart(tmp_path / "fresh", torch="none", switch=None)
    assert rc == 0, err
    (project,) = pip_installs(calls)
    assert "-q" not in project, project
    assert "4.7 GB" in err, err
    if has_nvidia():
        assert "KICKSERVER_TORCH=cpu" not in err, err
    else:
        assert "no NVIDIA GPU found" in err and "KICKSERVER_TORCH=cpu" in err, err
    # a refresh (torch already there) stays quiet and says nothing
    rc, calls, err = run_quickstart(tmp_path / "again", torch="gpu", switch=None)
    assert rc == 0, err
    (project,) = pip_installs(calls)
    assert "-q" in project and "GB" not in err, (project, err)


def closed_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: a connection is refused


def test_an_unreachable_cpu_index_is_said_in_one_line(tmp_path):
    """pip reports an index it cannot reach as a resolver error (ResolutionImpossible); quickstart probes the index
    and says what happened and what to do. The index is a loopback URL (KICKSERVER_TORCH_INDEX): nothing else is
    contacted."""
    index = f"http://127.0.0.1:{closed_loopback_port()}/whl/cpu"
    rc, calls, err = run_quickstart(tmp_path, torch="none", switch="cpu",
                                    env_extra={"KICKSERVER_TORCH_INDEX": index, "FAKE_INDEX_FAILS": "1"})
    assert rc == 1, err
    (torch_args,) = pip_installs(calls)  # the project is not installed over a half-done switch
    assert torch_args[torch_args.index("--index-url") + 1] == index and "-q" not in torch_args
    (line,) = [ln for ln in err.splitlines() if ln.startswith("quickstart:")]
    assert f"the CPU wheel index {index} could not be reached" in line, err
    assert "without KICKSERVER_TORCH=cpu" in line and "KICKSERVER_TORCH_INDEX" in line, line


def test_a_reachable_index_that_fails_is_not_called_unreachable(tmp_path):
    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html></html>")

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Index)
    server.timeout = 5
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
        rc, calls, err = run_quickstart(tmp_path, torch="none", switch="cpu",
                                        env_extra={"KICKSERVER_TORCH_INDEX": index, "FAKE_INDEX_FAILS": "1"})
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=5)
    assert rc == 1 and "could not be reached" not in err and f"CPU build from {index} failed" in err, err


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
