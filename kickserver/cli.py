"""`kickserver`: serve kicks over OSC, send one OSC message, or render kicks without a socket.

    kickserver                                   # = kickserver serve, with the config file's settings
    kickserver serve --device cuda --out ~/Music/kickserver --model default
    kickserver send /kick/generate 2 seed 7 decay 0.8        # prints the replies
    kickserver send /kick/status
    kickserver render --n 8 --out /tmp/kicks --seed 100
    kickserver install-service                   # a systemd user unit (see kickserver.service)

Options of `serve` can also be set in a TOML config (`--config FILE`, default
~/.config/kickserver/config.toml if present); the command line wins over the file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kickmodel.config import OUTPUT_SAMPLE_RATES, SEED_LIMIT

from . import __version__
from .config import CAPTURE_MODES, ServerConfig, ServerConfigError, default_config_path, load_config

SERVE_OPTIONS = ("host", "port", "reply_port", "out", "models", "model", "device", "sample_rate", "allow",
                 "read_roots", "max_files", "max_mb", "name_pattern", "queue_limit", "client_queue_limit", "max_batch",
                 "max_steps", "steps", "threads", "log_level", "reply_rate_kb", "reply_burst_kb", "return_proof",
                 "render_capture")

# `kickserver send`'s default wait: SEND_BASE_S + SEND_PER_KICK_STEP_S x count x steps (steps: the request's, else
# SEND_DEFAULT_STEPS, a margin over the bundled model's 10). One kick-step costs 0.03 s on a 2-core CPU alone and
# up to 1.2 s while another process loads the cores; kicks land one by one, so each /kick/done also
# moves the deadline to at least SEND_BASE_S + SEND_PER_KICK_STEP_S x steps from then.
SEND_BASE_S = 10.0
SEND_CLOCK = time.monotonic  # the clock send's waits and deadlines read (its tests run it on a scripted one)
SEND_PER_KICK_STEP_S = 0.25
SEND_DEFAULT_STEPS = 25
MAX_MAP_PARTS = 4096  # /kick/map's parts a send waits for at most (a map holds at most 4096 kicks)


def _setup_logging(level: str = "info") -> None:
    from .logs import setup

    setup(level)  # one line per event, messages clipped (logs.py)


def _add_model_options(p: argparse.ArgumentParser, **kw: Any) -> None:
    """kw: e.g. default=argparse.SUPPRESS for a subcommand's copies (see build_parser)."""
    p.add_argument("--models", metavar="DIR", help="models folder (default ~/.local/share/kickserver/models)", **kw)
    p.add_argument("--model", metavar="NAME",
                   help="artifact <models>/NAME.safetensors; 'default' is the bundled model", **kw)
    p.add_argument("--device", metavar="DEV", help="auto (CUDA if present, else CPU), cpu, cuda or cuda:N", **kw)
    p.add_argument("--sample-rate", dest="sample_rate", type=int, choices=OUTPUT_SAMPLE_RATES,
                   help="sample rate of the written WAV files (default 44100)", **kw)
    p.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (0: torch's default)", **kw)
    p.add_argument("--config", metavar="FILE", help=f"TOML config (default {default_config_path()} if present)",
                   **kw)
    p.add_argument("--log-level", dest="log_level", choices=("debug", "info", "warning", "error"), **kw)


def _serve_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="UDP port for requests (default 9000)")
    p.add_argument("--reply-port", dest="reply_port", type=int,
                   help="replies also go to the sender's IP at this port (default 9001; Max's [udpreceive])")
    p.add_argument("--out", metavar="DIR", help="the DAW folder kicks are written to (default ~/Music/kickserver)")
    _add_model_options(p)
    p.add_argument("--allow", nargs="+", metavar="CIDR",
                   help="networks served when bound beyond loopback (others are dropped and logged)")
    p.add_argument("--read-root", dest="read_roots", action="append", metavar="DIR",
                   help="folder whose files /kick/variation may read by absolute path (repeatable)")
    p.add_argument("--max-files", dest="max_files", type=int, metavar="N",
                   help="keep at most N generated kicks in --out (oldest removed first)")
    p.add_argument("--max-mb", dest="max_mb", type=float, metavar="MB",
                   help="keep generated kicks in --out under MB megabytes, oldest removed first (default 1024; "
                        "0: no budget)")
    p.add_argument("--name-pattern", dest="name_pattern", metavar="PATTERN",
                   help="how kick files are named: fields {note} {word} {label} {cents} {time}, {label} required "
                        "(default kick_{note}_{word}_{label}: kick_A1_short_5513.wav; kick_{time}_{label}: the old "
                        "kick_<YYYYmmdd-HHMMSS>_<seed>.wav)")
    p.add_argument("--queue-limit", dest="queue_limit", type=int, metavar="N",
                   help="kicks that may wait; past that requests get 'busy' (default 64)")
    p.add_argument("--client-queue-limit", dest="client_queue_limit", type=int, metavar="N",
                   help="kicks one host (source address, all its ports together) may have waiting (default 32)")
    p.add_argument("--reply-rate-kb", dest="reply_rate_kb", type=float, metavar="KB",
                   help="reply budget per source address, KB per second (default 32)")
    p.add_argument("--return-proof", dest="return_proof", choices=("network", "all", "off"),
                   help="sources that must prove they receive replies (/kick/proof) to get the kit map, their own "
                        "reply budget and their own queue share: network (all but loopback; default), all, off")
    p.add_argument("--reply-burst-kb", dest="reply_burst_kb", type=float, metavar="KB",
                   help="reply budget per source address, largest burst in KB (default 128)")
    p.add_argument("--max-batch", dest="max_batch", type=int, metavar="N",
                   help="kicks generated together on the device (default 8)")
    p.add_argument("--max-steps", dest="max_steps", type=int, metavar="N",
                   help="largest steps a request may ask for (default 200; up to 1000 for benchmarks)")
    p.add_argument("--steps", dest="steps", type=int, metavar="N",
                   help="sampler steps when a request names none (default 0: the model's; e.g. 10 on a CPU)")
    p.add_argument("--render-capture", dest="render_capture", choices=CAPTURE_MODES,
                   help="run the networks eagerly (off), under torch.compile (compile) or CUDA graphs (graphs); "
                        "auto (default): graphs on CUDA, off on the CPU. Warmed up at each load; a capture that "
                        "fails falls back to eager, logged once")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kickserver", description="Generate kick drums on request (OSC over UDP) into a DAW's folder.",
        epilog="With no command, `serve` runs. Every serve option can also be set in the TOML config.")
    parser.add_argument("--version", action="version", version=f"kickserver {__version__}")
    _serve_parser(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # The subcommand's copies of the options default to "not given" (SUPPRESS): argparse copies every
    # attribute of a subparser's namespace over the top level's, so a None default would erase
    # `kickserver --port 9100 serve`'s port.
    s = sub.add_parser("serve", help="run the daemon (the default)", description="Run the daemon until SIGTERM.",
                       argument_default=argparse.SUPPRESS)
    _serve_parser(s)
    snd = sub.add_parser("send", help="send one OSC message and print the replies",
                         description="Send one OSC message and print the replies, one per line. Arguments are "
                                     "typed by their look (7 int, 0.5 float, else string); force a type with "
                                     "i:, f: or s: (e.g. s:7). It stops at the first /kick/error for the request "
                                     "(exit 1) or once every expected reply arrived (exit 0).")
    snd.add_argument("address", help="e.g. /kick/generate")
    snd.add_argument("args", nargs=argparse.REMAINDER, help="message arguments")
    snd.add_argument("--host", default=argparse.SUPPRESS, help="daemon address (default 127.0.0.1)")
    snd.add_argument("--port", type=int, default=argparse.SUPPRESS, help="daemon port (default 9000)")
    snd.add_argument("--timeout", type=float, metavar="S",
                     help=f"seconds to wait for all replies (default {SEND_BASE_S:g} + {SEND_PER_KICK_STEP_S:g} per "
                          f"kick per step, steps {SEND_DEFAULT_STEPS} unless given; each kick that lands extends it)")
    snd.add_argument("--expect", type=int, help="replies to wait for (default: the request's count, else 1)")
    r = sub.add_parser("render", help="write kicks to a folder without a socket",
                       description="Write kicks with the model straight into a folder (no daemon, no socket).")
    r.add_argument("--n", type=int, default=8, help="number of kicks (default 8)")
    r.add_argument("--out", metavar="DIR", default=argparse.SUPPRESS, help="folder (default: the config's out)")
    _add_model_options(r, default=argparse.SUPPRESS)
    r.add_argument("--seed", type=int, help="first seed (default random); kick i gets seed + i")
    r.add_argument("--steps", type=int, default=argparse.SUPPRESS,
                   help="sampling steps (default: the config's steps, else the model's)")
    r.add_argument("--sampler", help="sampler (default the model's)")
    r.add_argument("--control", action="append", default=[], metavar="NAME=VALUE",
                   help="a control value 0..1, e.g. decay=0.8 (repeatable)")
    r.add_argument("--batch", type=int, default=8, help="kicks generated together (default 8)")
    r.add_argument("--kit", metavar="LAYERSxROBINS", help="write one kit folder instead (as /kick/kit), e.g. 8x4")
    r.add_argument("--note", help="with --kit: the note it is tuned to (A1, 33), on a model that takes pitch_hz")
    r.add_argument("--key", help="with --kit: the song's key (Am, F#), tuning the kit to its tonic")
    sub.add_parser("install-service", help="install a systemd user unit for the daemon", add_help=False)
    return parser


# ------------------------------------------------------------------ serve


def _overrides(ns: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(ns, k, None) for k in SERVE_OPTIONS if getattr(ns, k, None) is not None}


def _load_settings(ns: argparse.Namespace, overrides: dict[str, Any]) -> tuple[ServerConfig, Path | None] | None:
    """The settings (config file, then command line) with logging set up from them; None after logging why not."""
    try:
        cfg, path = load_config(ns.config, overrides)
    except ServerConfigError as e:
        _setup_logging()
        logging.getLogger("kickserver").error("%s", e)
        return None
    _setup_logging(cfg.log_level)
    return cfg, path


def _catch_signals() -> tuple[threading.Event, threading.Event]:
    """SIGTERM/SIGINT and SIGHUP as events, from now on: importing the daemon (torch) takes seconds, and a signal
    meanwhile killed the process (exit -15, or SIGHUP's default: ended) instead of stopping it cleanly.
    The daemon keeps these events and re-installs its own handlers that set them."""
    stop, hup = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: hup.set())
    return stop, hup


def cmd_serve(ns: argparse.Namespace) -> int:
    stop, hup = _catch_signals()
    overrides = _overrides(ns)
    loaded = _load_settings(ns, overrides)
    if loaded is None:
        return 2
    cfg, path = loaded
    log = logging.getLogger("kickserver")
    log.info("kickserver %s%s", __version__, f" (config {path})" if path else "")
    # Before torch (and its OpenMP runtime) is imported: worker threads that wait for work sleep instead of
    # spinning. Spinning threads on a busy desktop made one kick take 6-16 s instead of 0.5-1 s on 2 cores
    # (bench/contention.py, docs/daemon.md). A value set in the environment is kept.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from .daemon import serve

    if stop.is_set():
        log.info("stopped during start-up")
        return 0
    return serve(cfg, config_arg=ns.config, overrides=overrides, config_path=path, stop=stop, hup=hup)


# ------------------------------------------------------------------ send


def _typed(arg: str) -> tuple[str, Any]:
    if len(arg) > 2 and arg[1] == ":" and arg[0] in "ifs":
        tag, text = arg[0], arg[2:]
        return tag, int(text) if tag == "i" else float(text) if tag == "f" else text
    try:
        return "i", int(arg)
    except ValueError:
        pass
    try:
        return "f", float(arg)
    except ValueError:
        return "s", arg


def _count_and_steps(address: str, args: list[tuple[str, Any]]) -> tuple[int, int | None]:
    """The kicks a /kick/generate, /kick/variation or /kick/interpolate asks for and its steps (None: not given).
    An interpolation makes one kick for `t`, `count` for `count`, and osc_api.INTERPOLATE_DEFAULT_COUNT with
    neither."""
    from . import osc_api

    if address not in ("/kick/generate", "/kick/variation", osc_api.INTERPOLATE, "/kick/near"):
        return 1, None
    vals = [v for _, v in args]
    count, steps = 1, None
    if address == osc_api.INTERPOLATE:
        keys = vals[0::2]
        count = 1 if "t" in keys else osc_api.INTERPOLATE_DEFAULT_COUNT
    if address == "/kick/generate" and vals and not isinstance(vals[0], str):
        count = max(1, int(vals[0]))
    for i in range(len(vals) - 1):
        if vals[i] == "count" and not isinstance(vals[i + 1], str):
            count = max(1, int(vals[i + 1]))
        elif vals[i] == "steps" and not isinstance(vals[i + 1], str):
            steps = max(1, int(vals[i + 1]))
    return count, steps


def send_timeout(count: int, steps: int | None) -> float:
    """Default seconds `send` waits for `count` kicks of `steps` sampling steps (None: not given)."""
    return SEND_BASE_S + SEND_PER_KICK_STEP_S * max(1, count) * (steps or SEND_DEFAULT_STEPS)


def show(value: Any) -> str:
    """A reply argument as `send` prints it: a string in double quotes (escaped as JSON), so a reason or a path with
    spaces never runs into the next field and a string "7" never reads as the int 7; a float as the shortest decimal
    of its float32 (0.3, not 0.30000001192092896); an int as it is; a blob as Python's bytes literal."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        from kickmodel.wavfile import exact

        return exact(value)
    return repr(value) if isinstance(value, (bytes, bytearray)) else str(value)


def _given_id(args: list[tuple[str, Any]]) -> int | None:
    vals = [v for _, v in args]
    for i in range(len(vals) - 1):
        if vals[i] == "id" and isinstance(vals[i + 1], int) and not isinstance(vals[i + 1], bool):
            return vals[i + 1]
    return None


_IS_IT_RUNNING = ("is kickserver running (systemctl --user status kickserver)? is the port right (send --port, "
                  "the daemon's --port)?")


def cmd_send(ns: argparse.Namespace) -> int:
    """Send one message; print each reply as it comes. Exit 0 when every expected reply arrived, 1 at the first
    /kick/error for this request (or when the wait runs out), 2 for a bad argument."""
    from .client import NOT_OSC, build_message, parse_replies

    try:
        args = [_typed(a) for a in ns.args]
    except ValueError as e:
        print(f"kickserver send: bad argument ({e})", file=sys.stderr)
        return 2
    if ns.timeout is not None and not (0 < ns.timeout < float("inf")):
        print(f"kickserver send: --timeout must be a positive number of seconds, got {ns.timeout:g}", file=sys.stderr)
        return 2
    count, steps = _count_and_steps(ns.address, args)
    expect = ns.expect if ns.expect is not None else count
    # an explicit --timeout is a fixed limit; the default grows with the work asked for and with progress
    timeout = ns.timeout if ns.timeout is not None else send_timeout(count, steps)
    per_kick = None if ns.timeout is not None else send_timeout(1, steps)
    ours = {_given_id(args)} - {None}  # request ids that are this request's (learnt from /kick/done too)
    host = ns.host if ns.host is not None else "127.0.0.1"
    port = ns.port if ns.port is not None else 9000
    got = 0
    started = SEND_CLOCK()
    with open_conversation(host, port) as conv:
        conv.send(build_message(ns.address, args))
        deadline = started + timeout
        while got < expect:
            try:
                data = conv.datagram(deadline - SEND_CLOCK(), refused_raises=True)
            except ConnectionRefusedError:
                print(f"kickserver send: nothing listens on {host}:{port}: {_IS_IT_RUNNING}", file=sys.stderr)
                return 1
            if data is None:
                break
            msgs = parse_replies(data)
            if msgs and msgs[0][0] == NOT_OSC:
                print(f"<not OSC: {len(data)} bytes>")
                continue
            for address, params in msgs:
                print(" ".join([address] + [show(p) for p in params]), flush=True)
                if address == "/kick/map" and ns.expect is None and len(params) > 1 and isinstance(params[1], int):
                    expect = max(expect, min(params[1], MAX_MAP_PARTS) + 1)  # its parts, then /kick/map/axes
                rid = params[0] if params and isinstance(params[0], int) else None
                if address == "/kick/error":
                    if not ours or rid in ours or rid == -1:
                        # this request was refused or a kick of it failed: nothing more is worth waiting for
                        return 1
                    continue  # an error about another request (an id this one does not have)
                got += 1
                if address == "/kick/done" and rid is not None:
                    ours.add(rid)
                    if per_kick is not None:
                        deadline = max(deadline, SEND_CLOCK() + per_kick)
    if got == 0:
        print(f"kickserver send: no reply from {host}:{port} within {SEND_CLOCK() - started:.0f} s: "
              f"{_IS_IT_RUNNING} (or --timeout to wait longer)", file=sys.stderr)
        return 1
    if got < expect:
        print(f"kickserver send: {got} of {expect} replies within {SEND_CLOCK() - started:.0f} s "
              f"(--timeout to wait longer)", file=sys.stderr)
        return 1
    return 0


def open_conversation(host: str, port: int):
    """The exchange `send` talks through (kickserver.client.Conversation; its tests put a scripted daemon here)."""
    from .client import Client

    return Client(host, port).open()


# ------------------------------------------------------------------ render


def cmd_render(ns: argparse.Namespace) -> int:
    overrides = _overrides(ns)
    overrides.pop("out", None)
    overrides.pop("steps", None)  # render's own --steps (up to the generator's limit), not the server's
    loaded = _load_settings(ns, overrides)
    if loaded is None:
        return 2
    cfg = loaded[0]
    log = logging.getLogger("kickserver")
    import random

    import torch

    from kickmodel.artifact import ArtifactError
    from kickmodel.generator import StepPolicy
    from kickmodel.loading import load_generator, resolve_device
    from kickmodel.offline import render_kicks

    from .reload import ModelNotFound, resolve_model
    from .writer import KickWriter, WriteError

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    controls: dict[str, float] = {}
    for c in ns.control:
        k, sep, v = c.partition("=")
        try:
            controls[k] = float(v)
        except ValueError:
            sep = ""
        if not sep:
            log.error("--control %r is not NAME=VALUE", c)
            return 2
    if ns.n < 1 or ns.batch < 1:
        log.error("--n and --batch must be >= 1")
        return 2
    try:
        device = resolve_device(cfg.device)
        path, name = resolve_model(cfg.models_dir, cfg.model)
        gen = load_generator(path, device)
    except (RuntimeError, ModelNotFound, ArtifactError) as e:
        log.error("%s", e)
        return 2
    out = ns.out if ns.out is not None else cfg.out
    import os

    writer = KickWriter(os.path.expanduser(out), cfg.sample_rate, max_files=cfg.max_files, max_mb=cfg.max_mb,
                        name_pattern=cfg.name_pattern)
    base = ns.seed if ns.seed is not None else random.randrange(0, SEED_LIMIT - ns.n)
    # render's --steps goes up to the generator's own limit (an offline run asks for what it wants), so no cap
    try:  # resolved and checked once: steps out of range or an unknown sampler end here
        chosen = gen.settings(getattr(ns, "steps", None), ns.sampler, StepPolicy(default=cfg.steps))
    except ValueError as e:
        log.error("%s", e)
        return 2
    t0 = time.perf_counter()
    if ns.kit is not None or ns.note is not None or ns.key is not None:
        return _render_kit(ns, gen, chosen, controls, base, writer, cfg.sample_rate, name)
    kicks = render_kicks(gen, first_seed=base, n=ns.n, controls=controls, settings=chosen, write=writer.write,
                         sample_rate=cfg.sample_rate, batch=ns.batch, software=f"kickserver {__version__}")
    try:
        for p in kicks:
            print(p, flush=True)
    except ValueError as e:
        log.error("%s", e)
        return 2
    except WriteError as e:
        log.error("%s", e)
        return 1
    writer.prune()
    log.info("rendered %d kicks with %s on %s in %.2f s", ns.n, name, device, time.perf_counter() - t0)
    return 0


def _render_kit(ns: argparse.Namespace, gen: Any, settings: Any, controls: dict[str, float], seed: int,
                writer: Any, sample_rate: int, name: str) -> int:
    """`render --kit LxR [--note N | --key K]`: the daemon's /kick/kit job (jobs.Kit: the generator's kit mode, gen.kit,
    one folder by kickserver.kitfiles written with writer, a KickWriter, in its ledger) run here, batch by batch,
    without the queue; prints the folder, then applies the folder's retention as the daemon does."""
    import re

    from kickmodel.descriptors import UNIT_CONTROLS

    from . import jobs, osc_api

    log = logging.getLogger("kickserver")
    m = re.fullmatch(r"(\d+)x(\d+)", ns.kit or "")
    args: list[Any] = ["seed", seed] + [x for k, v in controls.items() for x in (k, v)]
    args += (["layers", int(m[1]), "robins", int(m[2])] if m else []) + (["note", ns.note] if ns.note else [])
    args += ["key", ns.key] if ns.key else []
    units = tuple(osc_api.UnitControl(u, *gen.unit_range(u)) for u in gen.unit_controls)
    limits = osc_api.Limits(controls=tuple(gen.controls), units=units, max_steps=10**6,
                            other_units=tuple(u for u in UNIT_CONTROLS if u not in gen.unit_controls))
    try:
        if m is None:
            raise osc_api.RequestError(f"--kit {ns.kit!r}: give LAYERSxROBINS, e.g. 8x4 (layers 1..8, robins 1..4)")
        req = osc_api.parse(osc_api.KIT, args, limits)
    except osc_api.RequestError as e:
        log.error("%s", e.reason)
        return 2
    said: list[Any] = []
    job = jobs.Kit(id=0, seeds=[seed] * (req.layers * req.robins), answer=said.append, controls=dict(req.controls),
                   settings=settings, layers=req.layers, robins=req.robins, pitch_hz=req.pitch_hz, key=req.key)
    kicks = job.kicks()
    for i in range(0, len(kicks), max(1, ns.batch)):
        batch = kicks[i:i + ns.batch]
        try:
            audio = job.render(gen, batch, 0, sample_rate, lambda: False)
        except Exception as e:  # noqa: BLE001 - the model's refusal, said as the daemon says it
            log.error("%s", job.refusal(e))
            return 1
        for k, a in zip(batch, audio, strict=True):
            job.deliver(k, a, writer, sample_rate, name)
    if not said or not isinstance(said[-1], jobs.KitDone):
        log.error("%s", said[-1].reason if said else "no kit written")
        return 1
    print(said[-1].folder, flush=True)
    writer.prune()
    return 0


# ------------------------------------------------------------------ entry


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "install-service":
        try:
            from .service import main as service_main
        except ImportError as e:
            print(f"kickserver install-service is not available ({e})", file=sys.stderr)
            return 2
        return int(service_main(argv[1:]) or 0)
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command == "send":
        return cmd_send(ns)
    if ns.command == "render":
        return cmd_render(ns)
    return cmd_serve(ns)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
