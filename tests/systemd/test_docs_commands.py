"""The commands docs/systemd.md gives are ones that work: it once told users `pip install kickserver`,
which is not published.

Every shell block is read command by command (continuation lines joined, comments dropped, `&&` chains split):
- `pip install` installs kickserver from a path (a checkout), never by name from an index;
- `kickserver ...` (any venv's) parses with the real argument parsers (install-service's own);
- a venv's `bin/pip` or `bin/kickserver` belongs to a venv the same block created;
- any other program is one of the system tools the page is about (a new one must be added here on purpose).
The page's prose is checked for `pip install kickserver` too."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from daemon_util import REPO

from kickserver import cli, service

DOC = REPO / "docs" / "systemd.md"
SYSTEM_TOOLS = {"systemctl", "journalctl", "loginctl", "machinectl", "useradd", "usermod", "rm", "mkdir", "cp",
                "tee", "echo", "systemd-analyze", "nvidia-smi", "git", "cd", "chown", "install"}
PIP_VALUE_OPTIONS = {"--index-url", "-i", "--extra-index-url", "-r", "--requirement", "-c", "--constraint", "--target",
                     "-t", "-w", "--wheel-dir"}
CHECKOUT = "/path/to/kickserver"  # the placeholder the page uses for the user's checkout


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", text, re.M | re.S)


def commands(block: str) -> list[list[str]]:
    """Each command of a block as words (environment assignments and sudo dropped; `$(...)` one word, `$(...)`)."""
    out: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(re.sub(r"\$\([^)]*\)", "$(...)", line), comments=True)
        cmd: list[str] = []
        for w in words + ["&&"]:
            if w in ("&&", "||", ";"):
                while cmd and (cmd[0] == "sudo" or re.fullmatch(r"[A-Z_]+=.*", cmd[0])):
                    cmd = cmd[1:]
                if cmd:
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
    return out


def all_commands() -> list[tuple[int, list[str]]]:
    return [(i, c) for i, block in enumerate(shell_blocks(DOC.read_text())) for c in commands(block)]


def test_the_page_has_commands_to_check():
    progs = {Path(c[0]).name for _, c in all_commands()}
    assert {"pip", "kickserver", "systemctl"} <= progs, progs


def test_kickserver_is_never_installed_by_name():
    text = DOC.read_text()
    assert not re.search(r"pip3? install +(--\S+ +)*kickserver\b", text), "kickserver is not on PyPI"
    pips = [c for _, c in all_commands() if Path(c[0]).name in ("pip", "pip3") and c[1:2] == ["install"]]
    assert pips, "the page must say how to install"
    for c in pips:
        targets = [w for i, w in enumerate(c[2:], 2) if not w.startswith("-") and c[i - 1] not in PIP_VALUE_OPTIONS]
        for t in targets:
            if "==" in t:  # a pinned dependency (torch's CPU build), from an index the command names
                assert "--index-url" in c, c
                continue
            assert t.startswith(("/", ".", "~")), f"{shlex.join(c)}: installs {t!r} by name, not from a checkout"
    # the placeholder names a checkout: this repository is one (pyproject.toml for the kickserver project)
    assert any(CHECKOUT in w for c in pips for w in c), "the install lines name the checkout as " + CHECKOUT
    assert 'name = "kickserver"' in (REPO / "pyproject.toml").read_text()


def test_venv_commands_belong_to_a_venv_the_page_creates():
    """...and a wheel installed is one the same block built from the checkout."""
    for block in shell_blocks(DOC.read_text()):
        made: set[str] = set()
        wheels: set[str] = set()
        for c in commands(block):
            if c[:3] in (["python3", "-m", "venv"], ["python", "-m", "venv"]):
                made.add(c[3])
            m = re.fullmatch(r"(.+)/bin/(pip|kickserver|python)", c[0])
            if m:
                assert m.group(1) in made, f"{shlex.join(c)}: {m.group(1)} is not made in this block"
            if Path(c[0]).name == "pip" and c[1] == "wheel":
                assert c[-1] == CHECKOUT and "-w" in c, c
                wheels.add(c[c.index("-w") + 1])
            if Path(c[0]).name == "pip" and c[1] == "install":
                for w in c[2:]:
                    if w.endswith(".whl"):
                        assert str(Path(w).parent) in wheels, f"{shlex.join(c)}: no wheel is built there in this block"


@pytest.mark.parametrize("cmd", [c for _, c in all_commands() if Path(c[0]).name == "kickserver"],
                         ids=lambda c: shlex.join(c)[:60])
def test_kickserver_commands_parse(cmd):
    args = cmd[1:]
    try:
        if args[:1] == ["install-service"]:
            rest = args[1:]
            if "--" in rest:  # install-service hands what follows `--` to `kickserver serve`
                rest, serve = rest[:rest.index("--")], rest[rest.index("--") + 1:]
                cli.build_parser().parse_args(serve)
            ns = service.build_parser().parse_args(rest)
            assert not (ns.system and not ns.user_name), "--system needs --user-name"
        else:
            cli.build_parser().parse_args(args)
    except SystemExit as e:
        pytest.fail(f"{shlex.join(cmd)} does not parse (exit {e.code})")


def test_every_other_program_is_a_known_system_tool():
    for _, c in all_commands():
        prog = Path(c[0]).name
        if prog in ("pip", "pip3", "kickserver", "python", "python3"):
            continue
        assert prog in SYSTEM_TOOLS, f"{shlex.join(c)}: {prog} is not a checked command (add it on purpose)"
