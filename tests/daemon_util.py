"""Run a real kickserver daemon in a subprocess and talk to it over UDP (for tests), through kickserver.client.

    from daemon_util import start_daemon      # tests/ is on sys.path (conftest.py lives there)
    with start_daemon(tmp_path, models_dir) as d:          # waits until /kick/ping answers
        replies = d.send("/kick/generate", "steps", 2, expect=1)
        assert replies[0][0] == "/kick/done"

Arguments to `send` are typed the python-osc way (int -> i, float -> f, str -> s, bool -> T/F,
None -> N); a tuple `(tag, value)` forces a type tag, e.g. `("d", 0.5)` or `("h", 2**40)`.
Every socket wait has a timeout: nothing here can hang a test run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pythonosc.osc_message import OscMessage

from kickserver.client import Client, Reply, build_message, parse_replies, receive

REPO = Path(__file__).resolve().parents[1]


def models_folder(folder: Path, *artifacts: Path) -> Path:
    """A fresh models folder holding copies of the given artifacts (tests may add or break files in it)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for a in artifacts:
        shutil.copy2(a, folder / Path(a).name)
    return folder


def root_conftest():
    """tests/conftest.py as a module, reached by file path: `from conftest import ...` is ambiguous once
    several test folders have their own conftest.py."""
    import importlib.util

    name = "_kickserver_tests_root_conftest"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "conftest.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def make_artifact(path: Path, seed: int = 0, family: str = "waveform_diffusion") -> Path:
    """tests/conftest.py's make_tiny_artifact (random weights, tiny preset) for any family."""
    return root_conftest().make_tiny_artifact(Path(path), seed=seed, family=family)


def _rewrite(src: Path, dst: Path, edit) -> Path:
    """dst: src's safetensors bytes with edit(header, data) -> (header, data) applied (header re-serialised)."""
    import json
    import struct

    raw = Path(src).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header, data = edit(json.loads(raw[8:8 + n]), bytearray(raw[8 + n:]))
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    Path(dst).write_bytes(struct.pack("<Q", len(head)) + head + bytes(data))
    return Path(dst)


def broken_artifacts(src: Path, folder: Path) -> dict[str, str]:
    """Seven copies of the artifact src in folder that pass every check of the header (format, family, configs,
    tensor names, shapes and dtypes) but do not load: {model name: what is wrong}."""
    import struct

    def tensors(h):
        return sorted((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][0])

    def at(h, i):  # the byte offset, in the data, of a float in the middle of the i-th tensor
        b, e = h[tensors(h)[i]]["data_offsets"]
        return b + ((e - b) // 2) // 4 * 4

    def put(value):
        def edit(h, d):
            o = at(h, 3)
            d[o:o + 4] = struct.pack("<f", value)
            return h, d
        return edit

    def flip(h, d):
        d[at(h, 3)] ^= 1  # the lowest mantissa bit of one weight: finite, but not what was hashed
        return h, d

    def overlap(h, d):  # a tensor's bytes also serve the next tensor of the same size
        names = tensors(h)
        size = {k: h[k]["data_offsets"][1] - h[k]["data_offsets"][0] for k in names}
        a, b = next((a, b) for a, b in zip(names, names[1:]) if size[a] == size[b])
        h[b]["data_offsets"] = list(h[a]["data_offsets"])
        return h, d

    def past_end(h, d):  # the last tensor ends beyond the file
        last = tensors(h)[-1]
        return h, d[:h[last]["data_offsets"][0]] + d[h[last]["data_offsets"][0]:-4]

    kinds = {
        "truncated": ("cut in the middle of its weights", lambda h, d: (h, d[: len(d) // 2])),
        "noweights": ("no weights at all, only the header", lambda h, d: (h, bytearray())),
        "hashmismatch": ("a weight changed after its part's hash was recorded", flip),
        "nanweight": ("a NaN weight", put(float("nan"))),
        "infweight": ("an inf weight", put(float("inf"))),
        "overlapping": ("two tensors share the same bytes (overlapping data offsets)", overlap),
        "shortdata": ("its last tensor runs 4 bytes past the end of the file", past_end),
    }
    for name, (_, edit) in kinds.items():
        _rewrite(src, Path(folder) / f"{name}.safetensors", edit)
    return {name: why for name, (why, _) in kinds.items()}


def big_header_artifact(src: Path, dst: Path, seed: int = 0, mb: float = 7.6) -> Path:
    """A copy of src that loads but whose header is about `mb` MB of extra metadata (within the reader's bounds:
    at most 1 MB a value, 8 MB in all): slow to parse."""
    per = 950_000
    pad = {f"pad{i}": chr(ord("a") + (seed + i) % 26) * per for i in range(max(1, round(mb * 1e6 / per)))}

    def edit(h, d):
        h["__metadata__"] = {**h["__metadata__"], **pad}
        return h, d

    return _rewrite(src, dst, edit)


def wait_until(cond, timeout: float = 10.0) -> bool:
    """Poll cond() until it holds (True) or timeout seconds pass (False): a condition with a deadline, not a sleep."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port that was free a moment ago (bind to 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class DaemonProc:
    """A running `python -m kickserver serve`; a context manager that stops it on exit."""

    def __init__(self, proc: subprocess.Popen, *, host: str, port: int, reply_port: int, out_dir: Path,
                 models_dir: Path, stderr_path: Path, args: Sequence[str]) -> None:
        self.proc = proc
        self.host = host
        self.port = port
        self.reply_port = reply_port
        self.out_dir = out_dir
        self.models_dir = models_dir
        self.stderr_path = stderr_path
        self.args = list(args)
        self.returncode: int | None = None

    # ------------------------------------------------------------- talking
    def client(self) -> Client:
        """The daemon as kickserver.client sees it, sending from loopback."""
        return Client(self.host, self.port, bind=("127.0.0.1", 0))

    def socket(self) -> socket.socket:
        """A fresh client UDP socket bound to a free loopback port (caller closes it)."""
        return self.client().open().sock

    def send_raw(self, data: bytes, *, expect: int = 1, timeout: float = 10.0) -> list[Reply]:
        """Send one datagram from a fresh socket; return the replies to that socket."""
        return self.client().send_raw(data, expect=expect, timeout=timeout)

    def send(self, address: str, *args: Any, expect: int = 1, timeout: float = 10.0) -> list[Reply]:
        """Send one message and wait for `expect` replies (or `timeout` s); return what came."""
        return self.client().send(address, *args, expect=expect, timeout=timeout)

    def reply_listener(self) -> socket.socket:
        """A socket bound to the daemon's reply port, as Max's [udpreceive] would be (caller closes)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", self.reply_port))
        return s

    # ------------------------------------------------------------- state
    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, needle: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.stderr_text():
                return True
            if self.proc.poll() is not None:
                return needle in self.stderr_text()
            time.sleep(0.05)
        return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait up to timeout, then SIGKILL. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.returncode = self.proc.returncode
        return self.returncode

    def __enter__(self) -> DaemonProc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()


def daemon_env(env: dict | None = None) -> dict:
    e = dict(os.environ)
    e.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    e["PYTHONPATH"] = str(REPO) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.pop("NOTIFY_SOCKET", None)
    e.pop("WATCHDOG_USEC", None)
    if env:
        e.update(env)
    return e


def start_daemon(tmp_path: Path, models_dir: Path, *, extra_args: Sequence[str] = (), env: dict | None = None,
                 model: str | None = None, out_dir: Path | None = None, ready_timeout: float = 60.0,
                 config: Path | None = None, pin: bool = True, threads: int | None = 1,
                 probe: Path | None = None) -> DaemonProc:
    """Start `python -m kickserver serve` on free loopback ports and wait until it answers /kick/ping.

    model: the artifact name to serve; default the stem of the first *.safetensors in models_dir.
    pin=False: no --model at all (the daemon chooses, and swaps in every new artifact), as on a fresh install.
    threads=None: no --threads (the config file or the daemon's default decides).
    probe: run it under tests/kickserver/probe_daemon.py, which writes the receive loop's work counters to that file.
    The daemon's stderr goes to <tmp_path>/daemon-<port>.log (read it with .stderr_text()).
    """
    tmp_path = Path(tmp_path)
    models_dir = Path(models_dir)
    out_dir = Path(out_dir) if out_dir is not None else tmp_path / "out"
    if model is None:
        found = sorted(models_dir.glob("*.safetensors"))
        model = found[0].name.removesuffix(".safetensors") if found else "default"
    port, reply_port = free_udp_port(), free_udp_port()
    while reply_port == port:
        reply_port = free_udp_port()
    args = [sys.executable, "-m", "kickserver", "serve", "--device", "cpu"]
    args += ["--threads", str(threads)] if threads is not None else []
    args += ["--host", "127.0.0.1", "--port", str(port), "--reply-port", str(reply_port),
            "--out", str(out_dir), "--models", str(models_dir)] + (["--model", model] if pin else [])
    # an explicit --config (or an empty one) so a developer's ~/.config/kickserver/config.toml never leaks in
    if config is None:
        config = tmp_path / f"config-{port}.toml"
        config.write_text("")
    args[4:4] = ["--config", str(config)]
    args += list(extra_args)
    if probe is not None:
        args[1:3] = [str(REPO / "tests" / "kickserver" / "probe_daemon.py")]
        env = {**(env or {}), "KICK_PROBE": str(probe)}
    stderr_path = tmp_path / f"daemon-{port}.log"
    with open(stderr_path, "wb") as errf:
        proc = subprocess.Popen(args, cwd=str(REPO), env=daemon_env(env), stdin=subprocess.DEVNULL,
                                stdout=errf, stderr=subprocess.STDOUT)
    d = DaemonProc(proc, host="127.0.0.1", port=port, reply_port=reply_port, out_dir=out_dir, models_dir=models_dir,
                   stderr_path=stderr_path, args=args)
    return wait_ready(d, ready_timeout)


def wait_ready(d: DaemonProc, ready_timeout: float = 60.0) -> DaemonProc:
    """d once it answers /kick/ping; RuntimeError with its log if it exits or stays silent (it is then stopped)."""
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            if d.proc.poll() is not None:
                raise RuntimeError(f"kickserver exited with {d.proc.returncode} before answering:\n{d.stderr_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kickserver did not answer /kick/ping within {ready_timeout:.0f} s:\n"
                                   f"{d.stderr_text()}")
            replies = d.send("/kick/ping", timeout=0.5)
            if any(a == "/kick/pong" for a, _ in replies):
                return d
    except BaseException:
        d.terminate(timeout=5)
        raise


__all__ = ["DaemonProc", "OscMessage", "Reply", "build_message", "daemon_env", "free_udp_port", "make_artifact",
           "models_folder", "parse_replies", "receive", "start_daemon", "wait_ready"]
