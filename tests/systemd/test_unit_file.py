"""The shipped units: the policy fields the daemon relies on, CUDA-safe hardening, and `systemd-analyze verify`."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from unitfile import REPO, UNIT_DIR, exec_argv, parse_unit, seconds, value, values

from kickserver import service

USER_UNIT = UNIT_DIR / "kickserver.service"
SYSTEM_UNIT = UNIT_DIR / "kickserver-system.service"
BOTH = pytest.mark.parametrize("unit_path", [USER_UNIT, SYSTEM_UNIT], ids=["user", "system"])

# Settings that hide /dev/nvidia* or break CUDA's JIT: none may be switched on.
CUDA_BREAKERS = {"PrivateDevices": "yes", "MemoryDenyWriteExecute": "yes", "ProtectClock": "yes"}
# What the daemon's sockets need: sd_notify (AF_UNIX) and OSC (AF_INET, AF_INET6); nothing else.
ADDRESS_FAMILIES = {"AF_UNIX", "AF_INET", "AF_INET6"}
# Sandboxing that only a system manager applies (a user manager fails on the first, ignores the rest
# without PrivateUsers=yes): set in the system unit, absent from the user unit.
SYSTEM_ONLY = {"CapabilityBoundingSet": "", "ProtectHostname": "yes", "ProtectProc": "invisible",
               "PrivateMounts": "yes", "RemoveIPC": "yes"}
# `systemd-analyze security --offline=true [--user]` overall exposure, measured on these units with systemd 252
# (docs/systemd.md): before the units were hardened, 6.2 (system unit) and 8.0 (user unit as the user manager sees it).
EXPOSURE_AT_MOST = {"system": 3.5, "user": 7.8}
TRUE = {"yes", "true", "on", "1"}


def load(path: Path):
    return parse_unit(path.read_text(encoding="utf-8"))


@BOTH
def test_notify_watchdog_and_restart_policy(unit_path):
    u = load(unit_path)
    svc = "Service"
    assert value(u, svc, "Type") == "notify"
    assert value(u, svc, "NotifyAccess") == "main"  # only the daemon itself, not a stray child, may say READY
    wd = seconds(value(u, svc, "WatchdogSec") or "0")
    assert 10 <= wd <= 120, f"WatchdogSec={wd}: long enough for a busy CPU, short enough to notice a hang"
    # A crash (SIGKILL, SIGSEGV, non-zero exit) and a watchdog timeout are all "failure": restarted.
    assert value(u, svc, "Restart") == "on-failure"
    restart = seconds(value(u, svc, "RestartSec") or "0.1")
    assert 1 <= restart <= 30, f"RestartSec={restart}: let the GPU free its memory, do not keep users waiting"
    assert "SIGKILL" not in " ".join(values(u, svc, "SuccessExitStatus")), "a kill must count as a failure"
    assert "SIGKILL" not in " ".join(values(u, svc, "RestartPreventExitStatus"))
    # a crash loop ends: StartLimitBurst restarts fit inside StartLimitIntervalSec, then the unit stays failed
    burst = int(value(u, "Unit", "StartLimitBurst") or 5)
    interval = seconds(value(u, "Unit", "StartLimitIntervalSec") or "10")
    assert burst * restart < interval
    assert seconds(value(u, svc, "TimeoutStopSec") or "90") >= 10, "time to finish the kick being written"
    assert seconds(value(u, svc, "TimeoutStartSec") or "90") >= 60, "torch + CUDA + model load on a cold disk"
    assert value(u, svc, "KillMode") in (None, "mixed", "control-group")


@BOTH
def test_reload_is_sighup_to_the_main_process(unit_path):
    argv = exec_argv(value(load(unit_path), "Service", "ExecReload"))
    assert Path(argv[0]).name == "kill"
    assert argv[1:] == ["-HUP", "$MAINPID"]


@BOTH
def test_environment_file_is_optional_and_feeds_the_command_line(unit_path):
    u = load(unit_path)
    env_files = values(u, "Service", "EnvironmentFile")
    assert len(env_files) == 1 and env_files[0].startswith("-"), "a missing file must not stop the service"
    assert env_files[0].endswith("/kickserver/kickserver.env")
    start = value(u, "Service", "ExecStart")
    assert start.split()[-1] == "$KICKSERVER_ARGS", "unbraced: split into words, zero words when empty"
    assert start.split()[1] == "serve"
    assert "KICKSERVER_ARGS=" in values(u, "Service", "Environment"), "a default, so it is never unset"
    assert "PYTHONUNBUFFERED=1" in values(u, "Service", "Environment"), "log lines reach the journal at once"


@BOTH
def test_hardening_leaves_cuda_working(unit_path):
    u = load(unit_path)
    for key, bad in CUDA_BREAKERS.items():
        assert (value(u, "Service", key) or "no").lower() not in TRUE, f"{key}={bad} breaks CUDA"
    assert not values(u, "Service", "DeviceAllow"), "DeviceAllow= makes an allow-list without /dev/nvidia*"
    assert value(u, "Service", "DevicePolicy") in (None, "auto")
    assert not values(u, "Service", "SystemCallFilter")
    assert value(u, "Service", "NoNewPrivileges") == "yes"
    # the comments say why the CUDA breakers are absent, so nobody "hardens" them back in
    text = unit_path.read_text(encoding="utf-8")
    comments = "\n".join(ln for ln in text.splitlines() if ln.lstrip().startswith("#"))
    for key in ("PrivateDevices", "MemoryDenyWriteExecute"):
        assert key in comments
    # NoNewPrivileges stops CUDA's setuid nvidia-modprobe: the unit creates the device nodes outside the sandbox,
    # and a box without NVIDIA's tools still starts ("-" ignores the missing binary)
    pre = [exec_argv(v) + [v] for v in values(u, "Service", "ExecStartPre")]
    assert any(p[0].endswith("/nvidia-modprobe") and p[-1].startswith(("-+", "+-")) for p in pre)


def test_user_unit_fits_the_user_manager():
    u = load(USER_UNIT)
    assert value(u, "Install", "WantedBy") == "default.target"
    assert value(u, "Service", "User") is None
    assert not values(u, "Unit", "After") and not values(u, "Unit", "Wants"), "network-online.target is system-only"
    # file-system sandboxing needs user namespaces (PrivateUsers=yes) in a user unit: not set, so not used
    if (value(u, "Service", "PrivateUsers") or "no") not in TRUE:
        for key in ("ProtectSystem", "ProtectHome", "PrivateTmp", "ReadWritePaths"):
            assert value(u, "Service", key) is None, f"{key}= does nothing in a user unit without PrivateUsers="


def test_system_unit_runs_as_a_dedicated_user_with_the_same_policy():
    user, system = load(USER_UNIT), load(SYSTEM_UNIT)
    assert value(system, "Install", "WantedBy") == "multi-user.target"
    assert value(system, "Service", "User")
    assert (value(system, "Service", "User") or "") not in ("root", "0")
    for key in ("Type", "NotifyAccess", "WatchdogSec", "Restart", "RestartSec", "TimeoutStartSec", "TimeoutStopSec",
                "KillMode", "ExecReload", "EnvironmentFile", "NoNewPrivileges", "RestrictAddressFamilies",
                "ExecStartPre", "UMask"):
        assert values(system, "Service", key) == values(user, "Service", key), key
    for key in ("StartLimitIntervalSec", "StartLimitBurst"):
        assert values(system, "Unit", key) == values(user, "Unit", key), key
    assert value(system, "Service", "ProtectSystem") in ("full", "true", "yes")
    assert value(system, "Service", "PrivateTmp") == "yes"


@pytest.mark.parametrize("name", sorted(service.TEMPLATES.values()))
def test_packaged_copy_matches_the_repository(name):
    """A pip-installed kickserver renders from kickserver/systemd_units/: it must be the same text as systemd/."""
    packaged = REPO / "kickserver" / service.PACKAGE_UNIT_DIR / name
    assert packaged.read_bytes() == (UNIT_DIR / name).read_bytes(), (
        f"{packaged} drifted from systemd/{name}; systemd/ is the source: "
        f"cp systemd/{name} kickserver/{service.PACKAGE_UNIT_DIR}/")
    assert service.load_template("user" if name == "kickserver.service" else "system") == packaged.read_text()


def test_packaged_units_are_package_data():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, a dependency there (pyproject.toml), is the same parser
        import tomli as tomllib
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = data["tool"]["setuptools"]["package-data"]["kickserver"]
    for name in service.TEMPLATES.values():
        rel = f"{service.PACKAGE_UNIT_DIR}/{name}"
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), (
            f"pyproject.toml [tool.setuptools.package-data] kickserver needs \"{service.PACKAGE_UNIT_DIR}/*.service\"")


def _render(kind: str, tmp_path: Path) -> Path:
    """The template rendered as install-service would, with ExecStart on a real executable (verify checks it)."""
    text = service.render_unit(service.load_template(kind), exec_argv=[sys.executable, "-m", "kickserver", "serve"],
                               user="kickserver" if kind == "system" else None, header="test render")
    path = tmp_path / kind / service.UNIT_NAME
    path.parent.mkdir()
    path.write_text(text)
    return path


@pytest.mark.parametrize("kind", ["user", "system"])
def test_systemd_analyze_verify_accepts_the_units(kind, tmp_path, verify_unit):
    path = _render(kind, tmp_path)
    assert verify_unit(path) == []
    if kind == "user":
        assert verify_unit(path, user=True) == [], "as the user manager loads it"


def test_verify_helper_catches_mistakes(tmp_path, verify_unit):
    """Guards the guard: verify exits 0 on an unknown key, the helper must still report it."""
    path = _render("user", tmp_path)
    path.write_text(path.read_text().replace("[Service]\n", "[Service]\nWatchdogSecs=30\n"))
    problems = verify_unit(path)
    assert any("WatchdogSecs" in p for p in problems), problems
    path.write_text(path.read_text().replace(sys.executable, str(tmp_path / "no-such-python")))
    assert any("no-such-python" in p for p in verify_unit(path))


# ---------------------------------------------------------------- hardening: the systemd-analyze security score


def _comment_above(unit_path: Path, key: str) -> str:
    """The comment line(s) directly above `key=` in the [Service] section ('' if none)."""
    lines = unit_path.read_text(encoding="utf-8").splitlines()
    (i,) = [n for n, ln in enumerate(lines) if ln.startswith(f"{key}=")]
    above = []
    while i > 0 and lines[i - 1].startswith("#"):
        i -= 1
        above.insert(0, lines[i])
    return "\n".join(above)


@BOTH
def test_sockets_are_limited_to_what_the_daemon_opens(unit_path):
    u = load(unit_path)
    (families,) = values(u, "Service", "RestrictAddressFamilies")
    assert set(families.split()) == ADDRESS_FAMILIES, families
    assert "AF_NETLINK" in _comment_above(unit_path, "RestrictAddressFamilies"), "say why netlink is left out"


def test_system_unit_drops_capabilities_and_namespaces_what_cuda_does_not_need():
    u = load(SYSTEM_UNIT)
    for key, want in SYSTEM_ONLY.items():
        assert values(u, "Service", key) == [want], f"{key}={want!r} expected in the system unit"
        assert _comment_above(SYSTEM_UNIT, key), f"{key}= needs a comment saying why"
    # hides /proc/driver/nvidia and /proc/cpuinfo: left out, and the comments say so
    assert value(u, "Service", "ProcSubset") is None
    comments = "\n".join(ln for ln in SYSTEM_UNIT.read_text(encoding="utf-8").splitlines() if ln.startswith("#"))
    assert "ProcSubset=pid" in comments and "SystemCallFilter=" in comments
    assert value(u, "Service", "UMask") == "0022" and _comment_above(SYSTEM_UNIT, "UMask")


def test_user_unit_keeps_to_what_a_user_manager_can_do():
    u = load(USER_UNIT)
    if (value(u, "Service", "PrivateUsers") or "no") not in TRUE:
        for key in SYSTEM_ONLY:
            assert value(u, "Service", key) is None, f"{key}= fails or does nothing in a user unit"
    assert value(u, "Service", "KeyringMode") == "private" and _comment_above(USER_UNIT, "KeyringMode")
    comments = "\n".join(ln for ln in USER_UNIT.read_text(encoding="utf-8").splitlines() if ln.startswith("#"))
    assert "CapabilityBoundingSet=" in comments, "say why the user unit has no CapabilityBoundingSet="


_EXPOSURE_RE = re.compile(r"Overall exposure level for (\S+): (\d+(?:\.\d+)?) ")


def exposure(systemd_analyze: str, path: Path, runtime_dir: Path | None = None) -> float:
    """The overall exposure `systemd-analyze security --offline=true` gives a unit file (skip where it cannot run)."""
    env = dict(os.environ)
    cmd = [systemd_analyze, "security", "--offline=true", "--no-pager"]
    if runtime_dir is not None:
        runtime_dir.mkdir(mode=0o700, exist_ok=True)
        runtime_dir.chmod(0o700)
        env["XDG_RUNTIME_DIR"] = str(runtime_dir)
        cmd.append("--user")
    r = subprocess.run([*cmd, str(path)], capture_output=True, text=True, env=env, timeout=60)
    out = r.stdout + r.stderr
    if "--offline" in out and ("unrecognized" in out or "Unknown option" in out):
        pytest.skip(f"this systemd-analyze has no --offline (systemd >= 250 needed): {out.strip()[:200]}")
    if "Failed to initialize manager" in out:
        pytest.skip(f"systemd-analyze {'--user ' if runtime_dir else ''}security cannot run here: {out.strip()[:200]}")
    m = _EXPOSURE_RE.search(out)
    assert m and m.group(1) == path.name, f"no overall exposure for {path.name} in:\n{out}"
    return float(m.group(2))


@pytest.mark.parametrize("kind", ["system", "user"])
def test_security_exposure_is_at_most_the_measured_figure(kind, systemd_analyze, tmp_path):
    path = SYSTEM_UNIT if kind == "system" else USER_UNIT
    score = exposure(systemd_analyze, path, tmp_path / "xdg-runtime" if kind == "user" else None)
    assert score <= EXPOSURE_AT_MOST[kind], f"{path.name}: exposure {score} > {EXPOSURE_AT_MOST[kind]}"


def test_exposure_helper_sees_a_weaker_unit(systemd_analyze, tmp_path):
    """Guards the guard: the same system unit without its new hardening scores worse than the limit."""
    text = SYSTEM_UNIT.read_text(encoding="utf-8")
    for key in SYSTEM_ONLY:
        text = re.sub(rf"^{key}=.*\n", "", text, flags=re.M)
    weaker = tmp_path / SYSTEM_UNIT.name
    weaker.write_text(text)
    assert exposure(systemd_analyze, weaker) > EXPOSURE_AT_MOST["system"]
