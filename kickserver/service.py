"""`kickserver install-service`: write the systemd unit for this virtual environment and tell systemd about it.

    kickserver install-service [--dry-run] [--config FILE] [--env-file FILE] [--unit-dir DIR] [-- DAEMON ARGS]
    sudo kickserver install-service --system --user-name NAME [...]

The unit is rendered from the template shipped in the package (kickserver/systemd_units/, a copy of the
repository's systemd/ folder; a test keeps the two identical): ExecStart= becomes this venv's `kickserver serve`
(or `<this python> -m kickserver serve`) with --config and the extra arguments, EnvironmentFile= the given file,
User= the given account (--system). It is written atomically (temp file, fsync, rename) to
~/.config/systemd/user/kickserver.service (--system: /etc/systemd/system/), then `systemctl [--user]
daemon-reload` runs; if systemctl is missing or fails (no user bus, e.g. over plain ssh or in a container) the
unit is still written and a note says what to run. It finishes by printing the `enable --now` and
`loginctl enable-linger` commands; it never enables or starts anything itself.
"""

from __future__ import annotations

import argparse
import getpass
import importlib.resources
import os
import re
import shutil
import site
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from kickmodel.fsutil import atomic_write_bytes

UNIT_NAME = "kickserver.service"
TEMPLATES = {"user": "kickserver.service", "system": "kickserver-system.service"}
PACKAGE_UNIT_DIR = "systemd_units"  # inside the kickserver package
REPO_UNIT_DIR = Path(__file__).resolve().parents[1] / "systemd"  # the canonical copies, in a source checkout
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
SYSTEMCTL_TIMEOUT_S = 60


# ------------------------------------------------------------ templates


def load_template(kind: str) -> str:
    """The unit template for 'user' or 'system': the packaged copy, else the source checkout's systemd/."""
    name = TEMPLATES[kind]
    try:
        res = importlib.resources.files("kickserver").joinpath(PACKAGE_UNIT_DIR, name)
        if res.is_file():
            return res.read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        pass
    path = REPO_UNIT_DIR / name
    if path.is_file():
        return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"unit template {name} is neither in the kickserver package ({PACKAGE_UNIT_DIR}/) "
                            f"nor in {REPO_UNIT_DIR}: reinstall kickserver")


# ------------------------------------------------------------ rendering

_PLAIN_ARG = re.compile(r"[A-Za-z0-9_@%$+=:,./-]+")


def escape_specifiers(text: str) -> str:
    """Literal text for a unit file value: '%' starts a specifier (%h, %E), so it is doubled."""
    return text.replace("%", "%%")


def quote_arg(arg: str) -> str:
    """One argument of an Exec*= command line, literal: no specifier or $VARIABLE expansion, spaces kept."""
    if "\n" in arg or "\0" in arg:
        raise ValueError(f"argument {arg!r} contains a newline or NUL; systemd cannot take it")
    text = escape_specifiers(arg).replace("$", "$$")
    if _PLAIN_ARG.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def command_line(argv: Sequence[str]) -> str:
    return " ".join(quote_arg(a) for a in argv)


def render_unit(template: str, *, exec_argv: Sequence[str], env_file: str | None = None,
                user: str | None = None, environment: dict[str, str] | None = None,
                header: str = "") -> str:
    """The template with [Service] ExecStart=, EnvironmentFile=, User= (and Group=) filled in.

    exec_argv: the daemon's command line (argv[0] absolute); ` $KICKSERVER_ARGS` is appended so the
    environment file can still add options. env_file: None keeps the template's (%E/kickserver/kickserver.env).
    user: for the system unit; Group= is dropped so systemd uses that user's primary group.
    environment: extra Environment= lines (e.g. PYTHONPATH for a source checkout). header: comment lines that
    replace the template's leading comment. Each replaced key must appear exactly once in [Service]; a template
    that breaks that is an error.
    """
    if not exec_argv or not os.path.isabs(exec_argv[0]):
        raise ValueError(f"ExecStart needs an absolute executable, got {list(exec_argv)!r}")
    replace: dict[str, str | None] = {"ExecStart": command_line(exec_argv) + " $KICKSERVER_ARGS"}
    if env_file is not None:
        replace["EnvironmentFile"] = "-" + escape_specifiers(env_file)
    if user is not None:
        replace["User"] = escape_specifiers(user)
        replace["Group"] = None
    seen = dict.fromkeys(replace, 0)
    out: list[str] = []
    section = ""
    last_env_index = -1
    lines = template.splitlines()
    if header:  # the header replaces the template's own leading comment (how to install it by hand)
        while lines and not lines[0].lstrip().startswith("["):
            lines.pop(0)
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped
        elif section == "[Service]" and "=" in stripped and not stripped.startswith(("#", ";")):
            key = stripped.split("=", 1)[0].strip()
            if key in replace:
                seen[key] += 1
                if replace[key] is not None:
                    out.append(f"{key}={replace[key]}")
                continue
            if key == "Environment":
                last_env_index = len(out)
        out.append(line)
    bad = sorted(k for k, n in seen.items() if n != 1 and not (k == "Group" and n == 0))
    if bad:
        raise ValueError(f"unit template: expected exactly one {', '.join(bad)}= line in [Service]")
    if environment:
        if last_env_index < 0:
            raise ValueError("unit template: no Environment= line in [Service] to add variables after")
        extra = [f"Environment={quote_arg(f'{k}={v}')}" for k, v in environment.items()]
        out[last_env_index + 1:last_env_index + 1] = extra
    text = "\n".join(out) + "\n"
    if header:
        text = "".join(f"# {h}\n" if h else "#\n" for h in header.splitlines()) + "\n" + text
    return text


# ------------------------------------------------------------ this installation


def venv_bin_dir() -> Path:
    """The bin/ folder of the running interpreter's environment (not resolved: a venv's python is a symlink)."""
    return Path(os.path.abspath(sys.executable)).parent


def daemon_argv(config: Path | None, extra: Sequence[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """(ExecStart argv, extra Environment=, notes) for running this installation's daemon."""
    notes: list[str] = []
    env: dict[str, str] = {}
    script = venv_bin_dir() / "kickserver"
    if script.is_file() and os.access(script, os.X_OK):
        argv = [str(script), "serve"]
    else:
        argv = [os.path.abspath(sys.executable), "-m", "kickserver", "serve"]
        src = Path(__file__).resolve().parents[1]
        if src not in _site_dirs():
            # a source checkout (or a --target install) that python finds only through the current directory
            # or PYTHONPATH: hand the service the same path
            env["PYTHONPATH"] = str(src)
            notes.append(f"kickserver is imported from {src}, outside {sys.prefix}'s site-packages: the unit "
                         f"adds it to PYTHONPATH (`{sys.executable} -m pip install {src}` installs it into the venv "
                         "and makes the service independent of that folder)")
    if config is not None:
        argv += ["--config", str(config)]
    argv += list(extra)
    return argv, env, notes


def _site_dirs() -> set[Path]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return {Path(d).resolve() for d in dirs}


def user_unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "systemd" / "user"


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write text to path so that readers see the old file or the whole new one (systemd wants it readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def daemon_reload(system: bool) -> tuple[bool, str]:
    """Run `systemctl [--user] daemon-reload`; (ok, message). Never raises."""
    cmd = ["systemctl"] + ([] if system else ["--user"]) + ["daemon-reload"]
    exe = shutil.which("systemctl")
    if exe is None:
        return False, f"systemctl not found: skipped `{' '.join(cmd)}` (run it where systemd manages this user)"
    try:
        r = subprocess.run([exe, *cmd[1:]], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=SYSTEMCTL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"`{' '.join(cmd)}` could not run ({e}); run it yourself"
    if r.returncode != 0:
        why = " ".join((r.stderr or r.stdout or "").split())[:300] or f"exit status {r.returncode}"
        hint = "" if system else " (no user bus? log in normally, or `export XDG_RUNTIME_DIR=/run/user/$(id -u)`)"
        return False, f"`{' '.join(cmd)}` failed: {why}{hint}; run it again before enabling the unit"
    return True, f"ran `{' '.join(cmd)}`"


# ------------------------------------------------------------ command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kickserver install-service",
        description="Write the systemd unit for this virtual environment and run daemon-reload. "
                    "Arguments after `--` are passed to `kickserver serve`.")
    p.add_argument("--dry-run", action="store_true", help="print the unit and what would be done; write nothing")
    p.add_argument("--system", action="store_true",
                   help="a system unit in /etc/systemd/system running as --user-name (needs root)")
    p.add_argument("--user-name", metavar="NAME", help="the account the system unit runs as (with --system)")
    p.add_argument("--config", metavar="FILE", type=Path,
                   help="the daemon's config file (default: the daemon reads ~/.config/kickserver/config.toml "
                        "if it exists)")
    p.add_argument("--unit-dir", metavar="DIR", type=Path,
                   help=f"where to write {UNIT_NAME} (default: ~/.config/systemd/user, --system: {SYSTEM_UNIT_DIR})")
    p.add_argument("--env-file", metavar="FILE", type=Path,
                   help="optional environment file (KICKSERVER_ARGS, CUDA_VISIBLE_DEVICES, ...); default "
                        "~/.config/kickserver/kickserver.env, --system: /etc/kickserver/kickserver.env")
    return p


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["install-service"]:
        args_in = args_in[1:]
    extra: list[str] = []
    if "--" in args_in:
        i = args_in.index("--")
        args_in, extra = args_in[:i], args_in[i + 1:]
    parser = build_parser()
    a = parser.parse_args(args_in)
    if a.system and not a.user_name:
        parser.error("--system needs --user-name NAME (the account the service runs as)")
    if a.user_name and not a.system:
        parser.error("--user-name only applies to --system (a user unit runs as the user who installs it)")
    if a.user_name and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*\$?", a.user_name):
        parser.error(f"--user-name {a.user_name!r} is not a valid user name")
    kind = "system" if a.system else "user"

    notes: list[str] = []
    if not a.system and hasattr(os, "geteuid") and os.geteuid() == 0:
        notes.append("running as root: this is a user unit for root's own service manager; for a service "
                     "account use --system --user-name NAME")
    config = Path(os.path.abspath(os.path.expanduser(a.config))) if a.config else None
    if config is not None and not config.is_file():
        notes.append(f"{config} does not exist yet: the daemon will refuse to start until it does")
    env_file = str(Path(os.path.abspath(os.path.expanduser(a.env_file)))) if a.env_file else None
    try:
        exec_argv, environment, more = daemon_argv(config, extra)
        notes += more
        version = _version()
        header = (f"Written by `kickserver install-service` (kickserver {version}) from {TEMPLATES[kind]}.\n"
                  "Re-run it after moving the venv; put local changes in a drop-in "
                  f"(`systemctl {'' if a.system else '--user '}edit kickserver`).")
        text = render_unit(load_template(kind), exec_argv=exec_argv, env_file=env_file,
                           user=a.user_name if a.system else None, environment=environment, header=header)
    except (OSError, ValueError) as e:
        print(f"kickserver install-service: {e}", file=sys.stderr)
        return 1
    unit_dir = Path(os.path.abspath(os.path.expanduser(a.unit_dir))) if a.unit_dir else (
        SYSTEM_UNIT_DIR if a.system else user_unit_dir())
    unit_path = unit_dir / UNIT_NAME
    reload_cmd = "systemctl daemon-reload" if a.system else "systemctl --user daemon-reload"

    if a.dry_run:
        print(f"# --dry-run: would write {unit_path}:")
        print(text, end="")
        print(f"# --dry-run: would then run `{reload_cmd}`")
    else:
        try:
            old = unit_path.read_text(encoding="utf-8") if unit_path.is_file() else None
            write_atomic(unit_path, text)
        except OSError as e:
            hint = " (a system unit needs root: sudo)" if a.system and isinstance(e, PermissionError) else ""
            print(f"kickserver install-service: cannot write {unit_path}: {e.strerror or e}{hint}", file=sys.stderr)
            return 1
        state = "wrote" if old is None else "unchanged" if old == text else "updated"
        print(f"{state} {unit_path}")
        ok, msg = daemon_reload(a.system)
        print(msg if ok else f"note: {msg}")
    for n in notes:
        print(f"note: {n}")
    print(_next_steps(a.system))
    return 0


def _next_steps(system: bool) -> str:
    if system:
        return ("Next:\n"
                "  sudo systemctl enable --now kickserver   # start now and at boot\n"
                "  journalctl -u kickserver -f              # logs (the first lines say cuda or cpu)\n"
                "  systemctl status kickserver              # STATUS= shows the model and the device")
    user = _login_name()
    return ("Next:\n"
            "  systemctl --user enable --now kickserver   # start now and with your session\n"
            f"  loginctl enable-linger {user}{' ' * max(1, 20 - len(user))}# start at boot, without logging in\n"
            "  journalctl --user -u kickserver -f         # logs (the first lines say cuda or cpu)\n"
            "  systemctl --user status kickserver         # STATUS= shows the model and the device")


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "$USER"


def _version() -> str:
    try:
        from kickserver import __version__
        return str(__version__)
    except Exception:  # the version is decoration in a comment; never fail the install over it
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
