"""Every `kickserver serve` option through a running daemon, not only on the component it configures.

--max-steps was once tested on the Worker alone and never reached the daemon. Here each option of SERVE_OPTIONS
(= each key of ServerConfig) is given to a real `python -m kickserver serve`, once on the command line and once
in the TOML config, and its effect is seen from outside: in a reply, a WAV file, the output folder or the log.
COVERAGE names, for every key, the tests that do so; test_every_option_is_covered fails when a key is added
without an entry there.

Loopback only: the daemon binds 127.0.0.2 or 127.0.0.3. Every socket wait has a deadline; no fixed sleeps.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from daemon_util import (
    REPO,
    DaemonProc,
    build_message,
    daemon_env,
    free_udp_port,
    make_artifact,
    models_folder,
    parse_replies,
    start_daemon,
    wait_ready,
)

from kickserver import osc_api
from kickserver.cli import SERVE_OPTIONS, build_parser
from kickserver.config import ServerConfig

pytestmark = pytest.mark.timeout(180)

HERE = "test_serve_options.py"
MAIN = f"{HERE}::test_every_option_through_the_daemon"  # parametrized: command line, config file

# key -> the tests that give it to a running daemon and see its effect (file::function, under tests/kickserver).
COVERAGE: dict[str, tuple[str, ...]] = {
    "host": (MAIN,),  # answered at 127.0.0.2 / .3, not at 127.0.0.1
    "port": (MAIN,),
    "reply_port": (MAIN, "test_osc_roundtrip.py::test_reply_types_sizes_and_reply_port"),
    "out": (MAIN,),
    "models": (MAIN, "test_reliability.py::test_fresh_install_serves_a_model_exported_later"),
    "model": (MAIN, "test_reliability.py::test_a_restart_serves_the_model_chosen_last"),
    "device": (MAIN, f"{HERE}::test_device_reaches_the_daemon"),
    "sample_rate": (MAIN,),  # the WAV's rate and length
    # Loopback clients are always served and a 127.0.0.0/8 bind is loopback, so from loopback (the only address
    # tests may send to) the filter itself cannot be seen: the daemon refusing a bad network (both ways) shows
    # the key reaches it, and test_config_server's test_allow_list checks the filter's decisions on the server.
    "allow": (f"{HERE}::test_allow_reaches_the_daemon", "test_config_server.py::test_allow_list"),
    "read_roots": (MAIN, "test_osc_roundtrip.py::test_variation_paths_refused"),
    "max_files": (MAIN, f"{HERE}::test_retention_the_other_way"),  # MAIN: command line; the other: config
    "max_mb": (MAIN, f"{HERE}::test_retention_the_other_way"),  # MAIN: config; the other: command line
    "name_pattern": (MAIN, "test_kick_names.py::test_name_pattern_brings_back_the_time_based_names",
                     "test_kick_names.py::test_a_bad_name_pattern_is_refused_at_start_naming_the_field_the_reason_and_"
                     "the_fix"),  # the names of the kicks written
    "queue_limit": (MAIN,),
    "client_queue_limit": (MAIN,),
    "max_batch": (MAIN,),  # the worker's debug line per batch
    "max_steps": (MAIN, "test_serve_steps.py::test_max_steps_caps_an_artifacts_own_default_through_the_daemon",
                  "test_serve_steps.py::test_server_default_steps_and_the_cap_reload_on_sighup"),
    "steps": (MAIN, "test_config_server.py::test_server_steps_fill_in_for_requests_that_name_none",
              "test_serve_steps.py::test_server_default_steps_and_the_cap_reload_on_sighup"),
    "threads": (MAIN, f"{HERE}::test_threads_reach_the_worker",
                "test_reliability.py::test_sighup_sends_ready_only_once_the_reloaded_model_serves"),
    "log_level": (MAIN,),  # debug lines appear
    # graphs on the CPU: refused by kickmodel.capture, logged once per load (start and hot swap)
    "render_capture": (MAIN, "test_render_capture.py::test_graphs_on_the_cpu_fall_back_to_eager_logged_once_per_load"),
    "reply_rate_kb": (MAIN, "test_reliability.py::test_reply_budget_bounds_what_a_forged_source_can_draw"),
    "reply_burst_kb": (MAIN, "test_reliability.py::test_reply_budget_bounds_what_a_forged_source_can_draw"),
    "return_proof": ("test_front_limits.py::test_the_kit_map_goes_only_to_a_proven_return_path_and_unproven_replies_"
                     "share_one_budget",
                     "test_front_limits.py::test_forged_addresses_share_one_queue_share_and_cannot_starve_a_proven_client"),
}

WAYS = ("command line", "config file")
FLOOD = 100  # /kick/status requests against the reply budget


# ---------------------------------------------------------------- the guard


def _serve_flags() -> dict[str, Any]:
    """dest -> argparse action of `kickserver serve` (the subcommand's parser)."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {a.dest: a for a in sub.choices["serve"]._actions if a.dest not in ("help", "config")}


def _test_functions(file: str) -> set[str]:
    tree = ast.parse((Path(__file__).parent / file).read_text())
    return {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}


def test_every_option_is_covered():
    """A key added to SERVE_OPTIONS, ServerConfig or the serve parser without a daemon test in COVERAGE fails
    here; so does a flag the parser takes that never reaches the config (the shape of the --max-steps bug)."""
    fields = {f.name for f in dataclasses.fields(ServerConfig)}
    assert set(SERVE_OPTIONS) == fields, "SERVE_OPTIONS and ServerConfig must list the same keys"
    flags = set(_serve_flags())
    assert not sorted(flags - set(SERVE_OPTIONS)), "serve flags not in SERVE_OPTIONS are never applied"
    assert not sorted(set(SERVE_OPTIONS) - flags), "SERVE_OPTIONS keys without a serve flag"
    missing = sorted(fields - set(COVERAGE))
    assert not missing, f"no daemon test listed in COVERAGE for {missing}: add one here and list it"
    assert not sorted(set(COVERAGE) - fields), "COVERAGE lists keys that are gone"
    for key, tests in COVERAGE.items():
        assert tests, key
        for t in tests:
            file, _, name = t.partition("::")
            assert name in _test_functions(file), f"{key}: {t} does not exist"


# ---------------------------------------------------------------- running a daemon from settings


def _toml(settings: dict[str, Any]) -> str:
    lines = []
    for k, v in settings.items():
        if v is None:
            continue
        text = json.dumps(v) if isinstance(v, (str, list)) else repr(v)  # JSON strings are TOML basic strings
        lines.append(f"{k} = {text}")
    return "\n".join(lines) + "\n"


def _argv(settings: dict[str, Any]) -> list[str]:
    """The settings as `kickserver serve` flags, spelled as the parser spells them."""
    flags = _serve_flags()
    argv: list[str] = []
    for k, v in settings.items():
        if v is None:
            continue
        action = flags[k]
        flag = action.option_strings[-1]
        if isinstance(v, list):
            if action.nargs == "+":
                argv += [flag, *v]
            else:  # action="append"
                for item in v:
                    argv += [flag, item]
        else:
            argv += [flag, str(v)]
    return argv


def launch(tmp_path: Path, settings: dict[str, Any], way: str, ready_timeout: float = 60.0) -> DaemonProc:
    """`kickserver serve` with every setting on the command line (and an empty config) or in the config file
    (and no flags); returns once it answers /kick/ping at settings' host and port."""
    config = tmp_path / "kickserver.toml"
    config.write_text(_toml(settings) if way == "config file" else "")
    args = [sys.executable, "-m", "kickserver", "serve", "--config", str(config)]
    args += _argv(settings) if way == "command line" else []
    stderr_path = tmp_path / "daemon.log"
    with open(stderr_path, "wb") as errf:
        proc = subprocess.Popen(args, cwd=str(REPO), env=daemon_env(), stdin=subprocess.DEVNULL, stdout=errf,
                                stderr=subprocess.STDOUT)
    d = DaemonProc(proc, host=settings["host"], port=settings["port"], reply_port=settings["reply_port"],
                   out_dir=Path(settings["out"]), models_dir=Path(settings["models"]), stderr_path=stderr_path,
                   args=args)
    return wait_ready(d, ready_timeout)


# ---------------------------------------------------------------- what is seen from outside


def hold_loopback_port() -> socket.socket:
    """A socket bound to 127.0.0.1 at a free port, held open: the daemon under test binds another loopback
    address at that port, and nothing else on the machine can take 127.0.0.1 at it meanwhile (CI machines run
    other jobs; a port merely free a moment ago was once answered by someone else's OSC server)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def ping_reaches_holder(holder: socket.socket, timeout: float = 2.0) -> bool:
    """A /kick/ping sent to 127.0.0.1 at the held port arrives at the holder and nothing answers it. Had the
    daemon bound 127.0.0.1 or 0.0.0.0 at that port, its bind would have failed on the held port instead."""
    port = holder.getsockname()[1]
    ping = build_message("/kick/ping", ())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.connect(("127.0.0.1", port))
        me = s.getsockname()
        s.send(ping)
        holder.settimeout(timeout)
        got, sender = holder.recvfrom(65536)
        s.settimeout(0.5)
        try:
            s.recv(65536)
            return False
        except (ConnectionRefusedError, TimeoutError):
            pass
    return got == ping and sender == me


def one(d: DaemonProc, address: str, *args: Any, timeout: float = 10.0) -> tuple[str, list]:
    replies = d.send(address, *args, timeout=timeout)
    assert len(replies) == 1, (address, args, replies, d.stderr_text())
    return replies[0]


def log_lines(d: DaemonProc) -> list[str]:
    return d.stderr_text().splitlines()


def batch_sizes(d: DaemonProc) -> list[int]:
    """The worker's debug line per batch: 'DEBUG kickserver.worker: batch of N (...)'."""
    return [int(m.group(1)) for ln in log_lines(d) if (m := re.match(r"DEBUG kickserver\.worker: batch of (\d+) ", ln))]


def model_shape(d: DaemonProc) -> tuple[int, int]:
    """(sample rate, samples) the served model makes, from the daemon's 'loaded model' line."""
    m = re.search(r"loaded model .*; (\d+) Hz, (\d+) samples", d.stderr_text())
    assert m, d.stderr_text()
    return int(m.group(1)), int(m.group(2))


def check_retention(out: Path, paths: list[Path], max_mb: float | None) -> None:
    """Of these kicks (written in this order, in the batches of one request) the newest two are kept and the
    oldest is removed; with max_mb, because a third would not fit (each kick's file is about 14 kB)."""
    want = {p.name for p in paths[-2:]}
    assert wait_for_kicks(out, want) == want
    if max_mb is not None:
        sizes = [(out / name).stat().st_size for name in want]
        assert sum(sizes) <= max_mb * 1e6 < sum(sizes) + max(sizes), sizes


def wait_for_kicks(out: Path, want: set[str], timeout: float = 10.0) -> set[str]:
    """The kick files in out once they are `want` (pruning follows the batch's replies), or at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        now = {p.name for p in out.glob("kick_*.wav")}
        if now == want or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def write_source(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(4096) / 44100
    sf.write(path, 0.8 * np.sin(2 * np.pi * 60 * t) * np.exp(-t * 20), 44100, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, tiny_artifact) -> Path:
    """A models folder with tiny and other: --model other must pick other over tiny and the bundled default."""
    folder = models_folder(tmp_path_factory.mktemp("models"), tiny_artifact)
    make_artifact(folder / "other.safetensors", seed=1)
    return folder


# ---------------------------------------------------------------- every option, both ways


@pytest.mark.parametrize("way", WAYS)
def test_every_option_through_the_daemon(tmp_path, two_models, way):
    """All serve options at once, not at their defaults, either all as flags or all in the config file; each
    one's effect seen in the replies, the WAV files, the output folder or the log."""
    host = "127.0.0.2" if way == "command line" else "127.0.0.3"  # loopback, but not 127.0.0.1
    holder = hold_loopback_port()
    port, reply_port = holder.getsockname()[1], free_udp_port()
    while reply_port == port:
        reply_port = free_udp_port()
    root = tmp_path / "samples"
    s: dict[str, Any] = {
        "host": host, "port": port, "reply_port": reply_port, "out": str(tmp_path / "kicks"),
        "models": str(two_models), "model": "other", "device": "cpu", "sample_rate": 48000,
        "allow": ["198.51.100.0/24"], "read_roots": [str(root)],
        # retention: one limit each way here, the other in test_retention_the_other_way
        "max_files": 2 if way == "command line" else None, "max_mb": 0.03 if way == "config file" else None,
        "name_pattern": "kick_{time}_{label}",
        "queue_limit": 5, "client_queue_limit": 3, "max_batch": 2, "max_steps": 3, "steps": 2, "threads": 2,
        "log_level": "debug", "reply_rate_kb": 0.01, "reply_burst_kb": 5.0, "render_capture": "graphs",
        "return_proof": "network",  # its effect: test_front_limits.py (COVERAGE)
    }
    assert set(s) == set(SERVE_OPTIONS)
    out = Path(s["out"])
    t_start = time.monotonic()
    with holder, launch(tmp_path, s, way) as d:
        # host, port: answered at host:port (launch waited for that), not bound at 127.0.0.1:port
        assert ping_reaches_holder(holder), "a ping to 127.0.0.1 at --port did not reach the test's own socket"
        assert d.wait_for_log(f"on udp {host}:{port} (replies also to port {reply_port}), writing to {out}",
                              timeout=5), d.stderr_text()  # logged just after the socket starts answering

        # reply_port: a copy of each reply goes to the sender's address at reply_port
        with d.reply_listener() as listener:
            listener.settimeout(5)
            assert one(d, "/kick/ping")[0] == "/kick/pong"
            assert parse_replies(listener.recvfrom(65536)[0])[0][0] == "/kick/pong"

        # models, model, device, threads
        why = "pinned by --model" if way == "command line" else "pinned by model in the config"
        status = one(d, "/kick/status")[1]
        assert status[:2] == ["other", "cpu"] and status[4] == why, status
        # render_capture: graphs asked, refused on the CPU, said once
        assert d.wait_for_log("model other (waveform_diffusion): render capture off (asked graphs); fell back to "
                              "eager: CUDA graphs need a CUDA device", timeout=10), d.stderr_text()
        (a, names) = one(d, "/kick/models")
        assert a == "/kick/models" and {"other", "tiny"} <= set(names), names
        assert "INFO kickserver: device cpu" in log_lines(d), d.stderr_text()  # auto says "device auto: ..."
        assert "generating on 2 CPU threads (--threads" in d.stderr_text()

        # queue_limit, client_queue_limit, max_steps: refused at once (nothing is queued yet)
        (a, p) = one(d, "/kick/generate", 4, "id", 1)
        assert a == "/kick/error" and p[1].startswith("busy") and p[1].endswith("(limit 3 per address)"), p
        (a, p) = one(d, "/kick/generate", 6, "id", 2)
        assert a == "/kick/error" and p[1].startswith("busy") and p[1].endswith("(limit 5)"), p
        (a, p) = one(d, "/kick/generate", "steps", 4, "id", 3)
        assert a == "/kick/error" and p[1] == "steps must be within 1..3, got 4", p

        # three kicks in one request: max_batch 2 makes two batches; steps 2 by default; 48 kHz; into out
        replies = d.send("/kick/generate", 3, "seed", 10, "id", 4, expect=3, timeout=60)
        assert [(a, p[0], p[2]) for a, p in replies] == [("/kick/done", 4, seed) for seed in (10, 11, 12)], replies
        paths = [Path(p[1]) for _, p in replies]
        assert all(path.parent == out for path in paths), paths
        # name_pattern: the time-based names
        stamped = [re.fullmatch(rf"kick_\d{{8}}-\d{{6}}_{seed}\.wav", p.name) for p, seed in zip(paths, (10, 11, 12))]
        assert all(stamped), paths
        # log_level debug: the worker's debug line per batch is there
        assert d.wait_for_log("batch of 1 ", timeout=10), d.stderr_text()
        assert batch_sizes(d) == [2, 1], d.stderr_text()

        # max_files (command line) / max_mb (config file): the oldest kick was removed
        check_retention(out, paths, s["max_mb"])
        rate, samples = model_shape(d)
        for path in paths[1:]:
            info = sf.info(str(path))
            assert info.samplerate == 48000
            assert abs(info.frames - samples * 48000 / rate) < 1.5, (info.frames, samples, rate)  # resampled
            comment = sf.SoundFile(str(path)).copy_metadata()["comment"]
            assert "model=other" in comment.split() and "steps=2" in comment.split(), comment

        # read_roots: a variation's source outside out is read only under a read root
        (a, p) = one(d, "/kick/variation", str(write_source(root / "mine.wav")), "strength", 0.3, "id", 5,
                     timeout=60)
        assert a == "/kick/done", p
        (a, p) = one(d, "/kick/variation", str(write_source(tmp_path / "elsewhere" / "mine.wav")), "id", 6)
        assert a == "/kick/error" and "read root" in p[1], p

        # reply_rate_kb, reply_burst_kb (last: it spends this address's budget for immediate replies)
        status_bytes = 2 * len(osc_api.status("other", "cpu", 0, 0, why))  # to the source port and the reply port
        with d.socket() as c:
            for _ in range(FLOOD):
                c.sendto(build_message("/kick/status", ()), (host, port))
            c.sendto(build_message("/kick/generate", ("id", 77)), (host, port))  # a kick's reply always goes
            got: list[str] = []
            deadline = time.monotonic() + 60
            while "/kick/done" not in got and time.monotonic() < deadline:
                c.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    got += [a for a, _ in parse_replies(c.recvfrom(65536)[0])]
                except (TimeoutError, ConnectionRefusedError):
                    pass
        elapsed = time.monotonic() - t_start  # the budget cannot have refilled for longer than this
        answered = got.count("/kick/status")
        assert "/kick/done" in got, (got, d.stderr_text())
        assert 0 < answered < FLOOD, answered
        assert answered * status_bytes <= 5.0 * 1024 + 0.01 * 1024 * elapsed, (answered, elapsed)
        assert d.wait_for_log("over its reply budget (0.01 KB/s, bursts of 5 KB)", timeout=5), d.stderr_text()


@pytest.mark.parametrize("way", WAYS)
def test_retention_the_other_way(tmp_path, tiny_artifact, way):
    """--max-mb on the command line, max_files in the config file (the main test gives them the other way)."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    config = tmp_path / "kickserver.toml"
    config.write_text("max_files = 2\n" if way == "config file" else "")
    extra = ["--max-mb", "0.03", "--sample-rate", "48000"] if way == "command line" else ["--sample-rate", "48000"]
    with start_daemon(tmp_path, models, extra_args=extra, config=config) as d:
        replies = d.send("/kick/generate", 3, "seed", 20, "steps", 1, expect=3, timeout=60)
        assert [a for a, _ in replies] == ["/kick/done"] * 3, replies
        check_retention(d.out_dir, [Path(p[1]) for _, p in replies], 0.03 if way == "command line" else None)


def os_threads(d: DaemonProc) -> int:
    return len(list(Path(f"/proc/{d.proc.pid}/task").iterdir()))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc/<pid>/task (Linux)")
def test_threads_reach_the_worker(tmp_path, tiny_artifact):
    """--threads 3 gives the worker a team of 3 CPU threads: the process runs 2 OS threads more than with
    --threads 1 (the log line alone comes from the setting, not from the worker)."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    counts = {}
    for n in (1, 3):
        (tmp_path / f"t{n}").mkdir()
        with start_daemon(tmp_path / f"t{n}", models, threads=n) as d:
            (a, p), = d.send("/kick/generate", "steps", 1, timeout=60)
            assert a == "/kick/done", p
            counts[n] = os_threads(d)
    assert counts[3] - counts[1] >= 2, counts


def refused_at_start(tmp_path: Path, models: Path, way: str, key: str, value: Any) -> subprocess.CompletedProcess:
    """`kickserver serve` with key = value (as a flag or in the config file), expected to stop by itself."""
    config = tmp_path / "kickserver.toml"
    config.write_text(_toml({key: value}) if way == "config file" else "")
    args = [sys.executable, "-m", "kickserver", "serve", "--config", str(config), "--host", "127.0.0.2", "--port",
            str(free_udp_port()), "--models", str(models), "--out", str(tmp_path / "out")]
    args += _argv({key: value}) if way == "command line" else []
    if key != "device":
        args += ["--device", "cpu"]
    return subprocess.run(args, cwd=REPO, env=daemon_env(), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("way", WAYS)
def test_allow_reaches_the_daemon(tmp_path, tiny_artifact, way):
    """From loopback the allow list has no visible effect (loopback is always served); what the daemon does
    with it that loopback can see: a network that is not one stops it at start, naming the option."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    r = refused_at_start(tmp_path, models, way, "allow", ["192.168.1.0/24", "not-a-network"])
    assert r.returncode == 2, r.stderr
    assert "allow: 'not-a-network' is not a network" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("way", WAYS)
def test_device_reaches_the_daemon(tmp_path, tiny_artifact, way):
    """On a machine without CUDA, auto and cpu both give the CPU: the device the daemon asks torch for shows
    where it differs, with a CUDA device that is not there (none at all, or not 99 of them)."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    r = refused_at_start(tmp_path, models, way, "device", "cuda:99")
    assert r.returncode == 2, r.stderr
    assert "device 'cuda:99' asked for, but" in r.stderr and "Traceback" not in r.stderr
