"""The daemon: load and warm the model, bind UDP, serve OSC until SIGTERM.

Threads: the receive loop (parse, validate, enqueue, reply; never waits on the model), the worker
(owns the model), the model loader (validates and loads new artifacts beside the current one) and
watchdog's observer. The main thread only waits for signals: SIGTERM/SIGINT stop, SIGHUP re-reads
the config and rescans the models folder.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import logging
import math
import os
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kickmodel.config import SAMPLE_RATES
from kickmodel.descriptors import UNIT_CONTROLS
from kickmodel.generator import Cancelled, StepPolicy
from kickmodel.generator import Near as MapPoint

from . import __version__, osc_api, state
from .config import ServerConfig, ServerConfigError, load_config
from .ratelimit import ReplyBudget
from .reload import (
    BUNDLED,
    DEFAULT_NAME,
    ModelLoader,
    ModelNotFound,
    list_models,
    record_verdict,
    resolve_model,
    verdict,
    warm_up,
)
from .sources import SourceError, open_source
from .worker import End, Job, Worker
from .writer import KickWriter

log = logging.getLogger("kickserver")

RECV_BUFFER = 4 << 20  # ask for a large socket buffer so a burst of requests is not dropped by the kernel
SHUTDOWN_BUDGET_S = 8.0
STATUS_INTERVAL_S = 1.0  # STATUS= updates as kicks are made, at most this often
# A malformed datagram's refusal (osc_api.Malformed, an empty bundle) is at most this many bytes per byte of the
# datagram, counting every copy sent (source port and reply port), or there is none: a forger draws at most this
# factor times what it sends (issue 22: a 4-byte `/\0\0\0` drew 320 bytes). 5, not less: a 16-byte message to
# a mistyped address (/kick/gen) is still told "unknown address".
REFUSAL_GAIN = 5
# /kick/models lists only what loads: an artifact not checked yet (new, or changed) is checked in the loader thread,
# and the reply waits for that check, at most MODELS_WAIT_S (then it lists what is checked); at most
# MAX_LISTING_WAITERS replies wait (beyond that, one is answered at once with what is checked)
MODELS_WAIT_S = 5.0
MAX_LISTING_WAITERS = 64

# Why the served model serves: logged at each start and swap, and the last argument of /kick/status
WHY_PINNED_FLAG = "pinned by --model"
WHY_PINNED_CONFIG = "pinned by model in the config"
WHY_CHOSEN = "chosen by /kick/model"
WHY_REMEMBERED = "remembered from the last run"
WHY_NEWEST = "newest in the models folder"
WHY_FOLDER_DEFAULT = "default.safetensors in the models folder"
WHY_BUNDLED = "bundled default"


def _is_loopback_host(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Server:
    def __init__(self, cfg: ServerConfig, *, config_arg: str | None = None,
                 overrides: dict[str, Any] | None = None, config_path: Path | None = None,
                 stop: threading.Event | None = None, hup: threading.Event | None = None) -> None:
        """stop, hup: events the caller's early signal handlers set before this module (torch) was imported
        (cli.cmd_serve), so a SIGTERM during start-up is not lost."""
        self.cfg = cfg
        self.config_arg = config_arg
        self.overrides = dict(overrides or {})
        self.config_path = config_path
        self.sock: socket.socket | None = None
        self.worker: Worker | None = None
        self.loader: ModelLoader | None = None
        self.notifier: Any = None
        self._stop = stop if stop is not None else threading.Event()
        self._hup = hup if hup is not None else threading.Event()
        self._receiving = threading.Event()
        self._ids = itertools.count(0)  # server-assigned ids: -2, -3, ... (see _next_id)
        self._dropped: dict[str, int] = {}
        self._junk: dict[str, int] = {}
        self._refused = 0
        self._rng = random.Random()
        self._model_path: Path | None = None
        self._model_sig: tuple[int, int] | None = None  # (mtime_ns, size) of the served model's file when loaded
        self._model_why = ""  # why it serves (WHY_*): the log and /kick/status say it
        self._state: state.StateFile | None = None
        self._settling: _Settled | None = None  # a SIGHUP's model load, until it is swapped in or failed
        self._status_sent = (0.0, "")
        self._listings: list[tuple[float, Callable[[bytes], None]]] = []  # /kick/models replies waiting for checks
        self._listings_lock = threading.Lock()
        self.budget = ReplyBudget(cfg.reply_rate_kb * 1024, cfg.reply_burst_kb * 1024)
        self.device: Any = None

    # ------------------------------------------------------------ start-up
    def run(self) -> int:
        self._install_signals()
        self.notifier = _make_notifier()
        cfg = self.cfg
        import torch

        from kickmodel.artifact import ArtifactError
        from kickmodel.loading import load_generator, resolve_device

        # The worker thread runs the network on cfg.threads CPU threads (torch's default when 0); start-up,
        # warm-up and reloads run on one, so that only one OpenMP thread team ever exists (measured: with a
        # second team, a 50-step kick took 4.1 s instead of 1.4 s on 2 cores; docs/daemon.md).
        worker_threads = cfg.threads or torch.get_num_threads()
        torch.set_num_threads(1)
        log.info("generating on %d CPU thread%s (%s; OMP_WAIT_POLICY=%s)", worker_threads,
                 "" if worker_threads == 1 else "s", "--threads" if cfg.threads else "all cores",
                 os.environ.get("OMP_WAIT_POLICY", "unset"))
        try:
            self.device = resolve_device(cfg.device)
        except RuntimeError as e:
            log.error("%s", e)
            return 2
        if cfg.device == "auto":
            log.info("device auto: %s (%s)", self.device,
                     "CUDA is available" if self.device.type == "cuda" else "no CUDA device found")
        else:
            log.info("device %s", self.device)
        _ensure_folder(cfg.models_dir)
        self._state = state.StateFile(cfg.models_dir)
        try:
            path, name, self._model_why = self._startup_model(cfg)
        except ModelNotFound as e:
            log.error("%s", e)
            return 2
        # bind before loading the model: a second daemon on the same port fails at once, not after the load
        try:
            self.sock = self._bind()
        except OSError as e:
            hint = (": another kickserver (or another program) has this port; stop it (systemctl --user stop "
                    "kickserver) or choose another --port") if e.errno == errno.EADDRINUSE else ""
            log.error("cannot bind UDP %s:%d: %s%s", cfg.host, cfg.port, e.strerror or e, hint)
            return 2
        try:
            t0 = time.perf_counter()
            try:
                gen = load_generator(path, self.device)
            except ArtifactError as e:
                if self._model_why != WHY_REMEMBERED:
                    raise
                # a broken memory (the remembered file is now truncated or invalid) must not keep the daemon down
                log.warning("the model that served last (%s) does not load (%s); serving the configured one",
                            name, str(e).replace(str(path) + ": ", ""))
                record_verdict(path, False)  # and the newest-valid choice below passes it over
                path, name = resolve_model(cfg.models_dir, cfg.model)
                self._model_why = self._configured_why(cfg, path, name)
                t0 = time.perf_counter()
                gen = load_generator(path, self.device)
        except (ArtifactError, ModelNotFound) as e:
            log.error("%s", e)
            return self._close_socket(2)
        if self._stop.is_set():  # SIGTERM during the load: no warm-up
            log.info("stopped during start-up")
            return self._close_socket(0)
        self._model_path, self._model_sig = path, _signature(path)
        self._state.write_last_model(name)
        try:
            warm = warm_up(gen, cancel=self._stop.is_set)
        except Cancelled:
            log.info("stopped during start-up")
            return self._close_socket(0)
        log.info("loaded model %s (%s) from %s in %.2f s (warm-up %.2f s; %d Hz, %d samples, %s)", name,
                 gen.family, path, time.perf_counter() - t0, warm, gen.sample_rate, gen.length,
                 f"default {gen.default_steps} steps {gen.default_sampler}" if gen.samplers else "one pass")
        log.info("serving %s: %s%s", name, self._model_why, _pin_hint(cfg, self._model_why))
        if self._stop.is_set():
            return self._close_socket(0)
        try:
            writer = KickWriter(cfg.out_dir, cfg.sample_rate, max_files=cfg.max_files, max_mb=cfg.max_mb)
        except OSError as e:
            log.error("cannot use the output folder %s: %s", cfg.out_dir, e.strerror or e)
            return self._close_socket(2)
        self.worker = Worker(gen, name, writer, sample_rate=cfg.sample_rate, queue_limit=cfg.queue_limit,
                             client_limit=cfg.client_queue_limit, max_batch=cfg.max_batch,
                             software=f"kickserver {__version__}", threads=worker_threads,
                             policy=_step_policy(cfg), capture=cfg.render_capture)
        self.worker.start()
        # --model pins what is served: a new artifact in the folder is listed, not swapped in
        self.loader = ModelLoader(self.device, self._on_model_loaded, self._on_model_failed, pinned=cfg.model)
        self.loader.on_checked = self._answer_listings
        self.loader.start()
        if self._model_sig is not None:
            record_verdict(path, True, self._model_sig)  # it loads: listed without another check
        self.loader.check_folder(cfg.models_dir)  # the others are checked in the loader thread (/kick/models)
        self.loader.watch(cfg.models_dir)  # never raises: falls back to polling, or to no live reload
        if self.loader.models_dir is not None and path.parent == cfg.models_dir and self._model_sig is not None:
            self.loader.last_seen[path] = self._model_sig
        recv = threading.Thread(target=self._receive_loop, name="kick-receive", daemon=True)
        self._receiving.set()
        recv.start()
        if not _is_loopback_host(cfg.host) and not cfg.allow:
            log.warning("bound to %s but no --allow networks: only loopback clients are served", cfg.host)
        _warn_open_allow(cfg)
        log.info("serving %s on udp %s:%d (replies also to port %d), writing to %s", name, cfg.host, cfg.port,
                 cfg.reply_port, cfg.out_dir)
        self._ready()
        self.notifier.start_watchdog(alive=lambda: self.worker is not None and self.worker._thread.is_alive())
        while not self._stop.is_set():
            self._stop.wait(0.2)
            if self._hup.is_set():
                self._hup.clear()
                try:
                    self._reload_config()
                except Exception as e:  # noqa: BLE001 - a failed reload must not end serving (nor skip STOPPING=1)
                    log.error("SIGHUP: reload failed (%s: %s); serving on with what was loaded", type(e).__name__, e,
                              exc_info=log.isEnabledFor(logging.DEBUG))
                    self._settling = None
                    self._ready()
            if self._settling is not None and self._settling.event.is_set():
                self._settling = None
                self._ready()  # the reloaded model serves (or its load failed): the reload is over
            elif self._settling is None:
                self._update_status()
            self._answer_listings(time.monotonic() - MODELS_WAIT_S)
        return self._shutdown(recv)

    def _startup_model(self, cfg: ServerConfig) -> tuple[Path, str, str]:
        """What to serve at start, and why (WHY_*): the configured model; with none configured, the one that
        served last (if its file is still there), else resolve_model's choice."""
        if cfg.model is None:
            last = state.read_last_model(cfg.models_dir)
            if last is not None:
                try:
                    path, name = resolve_model(cfg.models_dir, last, fall_back=False)
                except ModelNotFound:
                    log.info("the model that served last (%s) is gone; choosing another", last)
                else:
                    log.info("serving %s, the model that served last", name)
                    return path, name, WHY_REMEMBERED
        path, name = resolve_model(cfg.models_dir, cfg.model)
        return path, name, self._configured_why(cfg, path, name)

    def _configured_why(self, cfg: ServerConfig, path: Path, name: str) -> str:
        """Why resolve_model's choice for the configured model (cfg.model, None when unpinned) serves."""
        if cfg.model is not None and name == cfg.model:
            return WHY_PINNED_FLAG if "model" in self.overrides else WHY_PINNED_CONFIG
        if path == BUNDLED:
            return WHY_BUNDLED
        return WHY_FOLDER_DEFAULT if name == DEFAULT_NAME else WHY_NEWEST

    def _close_socket(self, rc: int) -> int:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        return rc

    def _bind(self) -> socket.socket:
        cfg = self.cfg
        info = socket.getaddrinfo(cfg.host, cfg.port, type=socket.SOCK_DGRAM)
        family, _, _, _, addr = info[0]
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
        except OSError:
            pass
        s.bind(addr)
        s.settimeout(0.2)
        return s

    def _status_line(self) -> str:
        w = self.worker
        if w is None:
            return "starting"
        return (f"serving {w.model_name} on {w.device}, OSC {self.cfg.host}:{self.cfg.port}, {w.generated} kicks, "
                f"{w.queued} queued")

    def _ready(self) -> None:
        line = self._status_line()
        self.notifier.ready(line)
        self._status_sent = (time.monotonic(), line)

    def _update_status(self) -> None:
        """STATUS= as kicks are made: when the line changed, at most once every STATUS_INTERVAL_S."""
        line = self._status_line()
        t, last = self._status_sent
        if line != last and time.monotonic() - t >= STATUS_INTERVAL_S:
            self.notifier.status(line)
            self._status_sent = (time.monotonic(), line)

    # ------------------------------------------------------------ signals
    def _install_signals(self) -> None:
        def stop(signum: int, _frame: Any) -> None:
            self._stop.set()

        def hup(_signum: int, _frame: Any) -> None:
            self._hup.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, hup)

    def _shutdown(self, recv: threading.Thread) -> int:
        t0 = time.monotonic()
        log.info("shutting down")
        self.notifier.stopping("shutting down")
        self._receiving.clear()
        if self.worker is not None:
            self.worker.stop()  # cancels the batch on the device; the kick being written still lands
        if self.loader is not None:  # a load in progress stops at its next step; wait for it (issue 22)
            if not self.loader.stop(timeout=max(0.5, SHUTDOWN_BUDGET_S - (time.monotonic() - t0))):
                log.error("the model loader did not finish in time; exiting anyway")
        recv.join(timeout=1.0)
        if self.worker is not None:
            if not self.worker.join(timeout=max(0.5, SHUTDOWN_BUDGET_S - (time.monotonic() - t0))):
                log.error("the worker did not finish in time; exiting anyway")
        self.notifier.stop_watchdog()
        if self.sock is not None:
            self.sock.close()
        log.info("stopped after %.2f s (%d kicks generated)", time.monotonic() - t0,
                 self.worker.generated if self.worker else 0)
        return 0

    def unfinished(self) -> list[str]:
        """The threads that may run torch and are still running (after run(): past the shutdown budget)."""
        left = []
        if self.loader is not None and self.loader.alive:
            left.append("the model loader")
        if self.worker is not None and self.worker._thread.is_alive():
            left.append("the worker")
        return left

    def _reload_config(self) -> None:
        """SIGHUP: re-read the config, apply what can change live, rescan the models folder.

        RELOADING=1 first; READY=1 once it is over: at once when the served model stays, else when the
        reloaded model has been swapped in (or its load failed), from the main loop."""
        self.notifier.reloading("re-reading config")
        try:
            new, path = load_config(self.config_arg, self.overrides)
        except ServerConfigError as e:
            log.error("SIGHUP: config not reloaded: %s", e)
            self._ready()
            return
        old = self.cfg
        restart = [k for k in ("host", "port", "device", "threads") if getattr(old, k) != getattr(new, k)]
        if restart:
            log.warning("SIGHUP: %s changed; that takes a restart", ", ".join(restart))
            for k in restart:
                setattr(new, k, getattr(old, k))
        w = self.worker
        assert w is not None and self.loader is not None
        if (new.out_dir, new.sample_rate, new.max_files, new.max_mb) != (
                old.out_dir, old.sample_rate, old.max_files, old.max_mb):
            try:  # the worker swaps writer and rate together, between batches (kickserver.worker: set_output)
                w.set_output(new.out_dir, new.sample_rate, max_files=new.max_files, max_mb=new.max_mb)
            except OSError as e:
                log.error("SIGHUP: cannot use the output folder %s (%s); keeping %s", new.out_dir, e, old.out_dir)
                new.out, new.sample_rate = old.out, old.sample_rate
        w.queue_limit, w.client_limit, w.max_batch = new.queue_limit, new.client_queue_limit, new.max_batch
        w.policy = _step_policy(new)
        w.capture = new.render_capture  # for the next model loaded
        self.budget.rate, self.budget.burst = new.reply_rate_kb * 1024, new.reply_burst_kb * 1024
        logging.getLogger().setLevel(new.log_level.upper())
        self.cfg, self.config_path = new, path
        _warn_open_allow(new)
        self.loader.pinned = new.model
        if new.models_dir != old.models_dir:
            _ensure_folder(new.models_dir)
            self._state = state.StateFile(new.models_dir)
        self.loader.watch(new.models_dir)
        self.loader.check_folder(new.models_dir)
        settling = None
        try:
            mpath, name = resolve_model(new.models_dir, new.model)
        except ModelNotFound as e:
            log.error("SIGHUP: %s; keeping %s", e, w.model_name)
        else:
            if name != w.model_name or mpath != self._model_path or _signature(mpath) != self._model_sig:
                settling = _Settled(self._configured_why(new, mpath, name))
                self.loader.request(mpath, name, settling)
            else:
                log.info("SIGHUP: model %s unchanged; not reloading it", name)
        log.info("SIGHUP: config re-read%s; models: %s", f" from {path}" if path else "",
                 ", ".join(list_models(new.models_dir, check_later=self.loader.check_later)) or "none")
        if settling is None:
            self._ready()
        else:
            self._settling = settling  # READY=1 from the main loop once the model serves

    # ------------------------------------------------------------ model hand-over
    def _on_model_loaded(self, gen: Any, name: str, path: Path, reply: Callable[[bytes], None] | None) -> None:
        if gen.sample_rate not in SAMPLE_RATES:  # pragma: no cover - config validation already
            self._on_model_failed(f"model {name} has an unusable sample rate", reply)
            return
        assert self.worker is not None and self.loader is not None
        chosen = reply is not None and not isinstance(reply, _Settled)  # by /kick/model, not by SIGHUP
        if chosen and self.loader.pinned is not None:
            self.loader.pinned = name  # the user chose this one: follow its file from now on (until SIGHUP)
        sig = self.loader.last_seen.get(path) or _signature(path)
        if isinstance(reply, _Settled):
            why = reply.why
        elif chosen:
            why = WHY_CHOSEN
        elif self.loader.pinned is None:
            why = WHY_NEWEST  # a new artifact in the folder of an unpinned daemon
        else:
            why = self._model_why  # a new version of the pinned model's own file: pinned as before

        def swapped() -> None:  # in the worker thread, once gen serves
            self._model_path, self._model_sig, self._model_why = path, sig, why
            log.info("serving %s: %s%s", name, why, _pin_hint(self.cfg, why))
            if self._state is not None:
                self._state.write_last_model(name)

        self.worker.offer_model(gen, name, reply, on_swap=swapped)

    def _on_model_failed(self, reason: str, reply: Callable[[bytes], None] | None) -> None:
        if reply is not None:
            reply(osc_api.error(osc_api.NO_ID, reason))

    # ------------------------------------------------------------ receiving
    def _allowed(self, ip: str) -> bool:
        if _is_loopback_host(self.cfg.host):
            return True
        try:
            addr = ipaddress.ip_address(ip.split("%")[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if addr.is_loopback:
            return True
        return any(addr in net for net in self.cfg.allow_networks if addr.version == net.version)

    def _replier(self, addr: tuple, *, work: bool = False, paid: bool = False) -> Callable[[bytes], None]:
        """Replies to a request from addr: to its source port and to the reply port at its IP.

        Every reply is charged to the IP's reply budget (ratelimit.py): an immediate one is dropped when the
        budget cannot pay for it; one answering accepted work (work=True: a kick, a model load) always goes;
        paid=True: the caller has charged the budget already (a reply of several datagrams, all or none)."""
        targets = [addr]
        if addr[1] != self.cfg.reply_port:
            targets.append((addr[0], self.cfg.reply_port) + tuple(addr[2:]))
        sock, budget, ip = self.sock, self.budget, addr[0]

        def reply(data: bytes) -> None:
            n = len(data) * len(targets)
            if paid:
                pass
            elif work:
                budget.charge(ip, n)
            elif not budget.take(ip, n):
                dropped = budget.dropped.get(ip, 0)
                if dropped == 1 or dropped % 1000 == 0:
                    log.warning("dropped %d repl%s to %s: over its reply budget (%g KB/s, bursts of %g KB)", dropped,
                                "y" if dropped == 1 else "ies", ip, budget.rate / 1024, budget.burst / 1024)
                return
            for t in targets:
                try:
                    sock.sendto(data, t)
                except OSError as e:
                    log.debug("reply to %s failed: %s", t, e)

        return reply

    def _receive_loop(self) -> None:
        assert self.sock is not None
        while self._receiving.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError as e:  # e.g. ICMP port unreachable from an earlier reply
                if not self._receiving.is_set():
                    break
                log.debug("receive: %s", e)
                continue
            if not self._allowed(addr[0]):
                n = self._dropped.get(addr[0], 0) + 1
                self._dropped[addr[0]] = n
                if n == 1 or n % 1000 == 0:
                    log.warning("dropped %d datagram(s) from %s: not in --allow", n, addr[0])
                continue
            try:
                self._handle_datagram(data, addr)
            except Exception as e:  # noqa: BLE001 - a handler never takes the server down
                log.error("request from %s failed: %s: %s", addr[0], type(e).__name__, e,
                          exc_info=log.isEnabledFor(logging.DEBUG))
                self._replier(addr)(osc_api.error(osc_api.NO_ID, f"internal error: {type(e).__name__}"))

    def _handle_datagram(self, data: bytes, addr: tuple) -> None:
        """One datagram: no reply at all unless it is OSC; at most one /kick/error for it (a bundle's messages
        are answered one by one, but only its first refusal is); none for a bundle's elements that are not OSC."""
        try:
            dg = osc_api.split_datagram(data)
        except osc_api.NotOSC as e:
            n = self._junk.get(addr[0], 0) + 1
            self._junk[addr[0]] = n
            if len(self._junk) > 4096:
                self._junk.pop(next(iter(self._junk)))
            if n == 1 or n % 1000 == 0:
                log.warning("ignored %d datagram(s) from %s that are not OSC (%s, %d bytes); not answered", n,
                            addr[0], e, len(data))
            return
        copies = 1 if addr[1] == self.cfg.reply_port else 2  # as _replier sends them
        reply = _OneError(self._replier(addr), limit=REFUSAL_GAIN * len(data) // copies)
        if dg.dropped:
            total = len(dg.messages) + dg.dropped
            log.info("refused a bundle of %d messages from %s", total, addr[0])
            reply(osc_api.error(osc_api.NO_ID, f"a bundle may hold at most {osc_api.MAX_BUNDLE_MESSAGES} "
                                               f"messages; this one holds {total}, none was run"))
            return
        if dg.junk:
            log.info("ignored %d element(s) of a bundle from %s that are not OSC", dg.junk, addr[0])
        if dg.bundle and not dg.messages:
            if not dg.junk:
                reply.refuse(osc_api.Malformed("an empty bundle: nothing to do", ("empty bundle",)))
            return
        for raw in dg.messages:
            try:
                address, params = osc_api.decode_message(raw)
            except osc_api.RequestError as e:
                log.info("refused a message from %s: %s", addr[0], e.reason)
                reply.refuse(e)
                continue
            self._handle_message(address, params, addr, reply)

    def _limits(self) -> osc_api.Limits:
        assert self.worker is not None
        gen = self.worker.gen
        # a one-pass model takes any steps and sampler and ignores them (clients may send them to any model)
        samplers = tuple(gen.samplers) or None
        max_steps = min(self.cfg.max_steps, gen.max_steps) if gen.samplers else self.cfg.max_steps
        # controls in units (pitch_hz ...) that this model takes, with their ranges; the others are refused by name
        units = tuple(osc_api.UnitControl(u, *gen.unit_range(u)) for u in gen.unit_controls)  # this model's ranges
        return osc_api.Limits(controls=tuple(gen.controls), samplers=samplers, max_steps=max_steps, units=units,
                              other_units=tuple(u for u in UNIT_CONTROLS if u not in gen.unit_controls))

    def _handle_message(self, address: str, args: list, addr: tuple, reply: _OneError) -> None:
        try:
            osc_api.dispatch(self, address, args, self._limits(), addr, reply)  # osc_api.ROUTES picks the handler
        except osc_api.RequestError as e:
            log.info("refused %s: %s", osc_api.clip(str(address), 60), e.reason)
            reply.refuse(e)

    # ------------------------------------------------------------ handlers (osc_api.Handlers)
    def ping(self, req: osc_api.Ping, addr: tuple, reply: Callable[[bytes], None]) -> None:
        reply(osc_api.pong(__version__))

    def status(self, req: osc_api.Status, addr: tuple, reply: Callable[[bytes], None]) -> None:
        w = self.worker
        assert w is not None
        reply(osc_api.status(w.model_name, w.device, w.queued, w.generated, self._model_why, w.resident()))

    def models(self, req: osc_api.Models, addr: tuple, reply: Callable[[bytes], None]) -> None:
        """What loads: a new or changed artifact is checked in the loader thread (never here, so this loop never
        waits), and the reply waits for those checks (see MODELS_WAIT_S)."""
        assert self.loader is not None
        unchecked: list[Path] = []

        def later(path: Path) -> None:
            unchecked.append(path)
            self.loader.check_later(path)

        names = list_models(self.cfg.models_dir, check_later=later)
        if unchecked:
            with self._listings_lock:
                waits = len(self._listings) < MAX_LISTING_WAITERS
                if waits:
                    self._listings.append((time.monotonic(), reply))
            if waits:
                if all(verdict(p) is not None or not p.is_file() for p in unchecked):
                    self._answer_listings()  # checked meanwhile, perhaps before the loader could see this reply
                return
        reply(osc_api.models(names))

    def _answer_listings(self, before: float | None = None) -> None:
        """Answer the /kick/models replies waiting (those that began before `before`, when given): the loader
        thread calls it once no check is left, the main loop for those that waited MODELS_WAIT_S."""
        with self._listings_lock:
            go = [r for t, r in self._listings if before is None or t < before]
            self._listings = [(t, r) for t, r in self._listings if before is not None and t >= before]
        if not go:
            return
        try:
            data = osc_api.models(list_models(self.cfg.models_dir, check_later=self.loader.check_later))
        except Exception as e:  # noqa: BLE001 - called from the main loop and the loader thread: never raise there
            log.error("cannot list the models (%s: %s)", type(e).__name__, e)
            data = osc_api.error(osc_api.NO_ID, "cannot list the models; see the daemon's log")
        for reply in go:
            reply(data)

    def controls(self, req: osc_api.Controls, addr: tuple, reply: Callable[[bytes], None]) -> None:
        assert self.worker is not None
        gen = self.worker.gen
        # the dials, then the units, then whether it has a kit map
        reply(osc_api.controls(tuple(gen.controls) + tuple(gen.unit_controls), gen.kit_map is not None))

    # ------------------------------------------------------------ the kit map (issue 25)
    def _no_map(self) -> str | None:
        """Why the serving model has no kit map, naming it; None when it has one."""
        assert self.worker is not None
        gen, name = self.worker.gen, self.worker.model_name
        if gen.kit_map is not None:
            return None
        why = gen.kit_map_missing or "it stores none"
        return why if f"model {name} " in why else f"model {name} has no kit map: {why}"

    def kit_map(self, req: osc_api.KitMap, addr: tuple, reply: Callable[[bytes], None]) -> None:
        """The serving model's map: its points in parts, then the axes' labels, all or none: the datagrams are
        charged to the address's reply budget together, so a client never gets half a map (a map over the budget is
        refused saying how large it is and what to change)."""
        missing = self._no_map()
        km = self.worker.gen.kit_map if self.worker is not None else None
        if missing is not None or km is None:
            reply(osc_api.error(osc_api.NO_ID, missing or "no kit map"))
            return
        datagrams = osc_api.kit_map(km.points, km.names) + [osc_api.map_axes(km.axes, km.n)]
        copies = 1 if addr[1] == self.cfg.reply_port else 2  # as _replier sends them
        total = sum(len(d) for d in datagrams) * copies
        if not self.budget.take(addr[0], total):
            kb, burst = total / 1024, self.budget.burst / 1024
            wait = (total - max(0.0, self.budget.tokens(addr[0]))) / max(1.0, self.budget.rate)
            fix = (f"raise reply_burst_kb in the config to at least {math.ceil(kb)}" if total > self.budget.burst
                   else f"ask again in {math.ceil(wait)} s")
            log.info("refused /kick/map from %s: %.0f KB is over its reply budget", addr[0], kb)
            reply(osc_api.error(osc_api.NO_ID, f"the kit map is {kb:.1f} KB of replies ({len(datagrams)} datagrams "
                                               f"x {copies}), more than your address's reply budget holds now "
                                               f"({burst:g} KB at most); {fix}"))
            return
        send = self._replier(addr, paid=True)
        for data in datagrams:
            send(data)

    def near(self, req: osc_api.Near, addr: tuple, reply: Callable[[bytes], None]) -> None:
        """Kicks from a point of the map, queued as /kick/generate's are (limits, batching, shutdown). The dials are
        taken and ignored: a kick from the map is the map's latent decoded as it is (kickmodel.generator.map_latents);
        controls in units stay, for a family that sets them on the decoded kick (kick synth)."""
        self._enqueue(req, addr, reply)

    def locate(self, req: osc_api.Locate, addr: tuple, reply: Callable[[bytes], None]) -> None:
        """Where a file's kick lies on the map: the file opened and checked here (as a variation's source), decoded,
        encoded and placed by the worker, which owns the model; queued as one kick."""
        assert self.worker is not None
        missing = self._no_map()
        if missing is not None:
            reply(osc_api.error(osc_api.NO_ID, missing))
            return
        try:
            source = open_source(req.source, self.cfg.out_dir, self.cfg.read_root_dirs)
        except SourceError as e:
            log.info("refused locate: %s", e)
            reply(osc_api.error(osc_api.NO_ID, str(e)))
            return
        job = Job(id=osc_api.NO_ID, seeds=[osc_api.NO_SEED], reply=self._replier(addr, work=True), source=source,
                  client=addr[:2], locate=req.source)
        self._submit(job, osc_api.NO_ID, reply)

    def select_model(self, req: osc_api.SelectModel, addr: tuple, reply: Callable[[bytes], None]) -> None:
        w = self.worker
        assert w is not None and self.loader is not None
        try:
            # no stand-in: a name that is not there is refused, naming those that are, and the served one stays
            path, name = resolve_model(self.cfg.models_dir, req.name, fall_back=False,
                                       check_later=self.loader.check_later)
        except ModelNotFound as e:
            reply(osc_api.error(osc_api.NO_ID, str(e)))
            return
        if name == w.model_name and path == self._model_path:
            reply(osc_api.model(name))
        else:
            log.info("loading model %s on request", name)
            self.loader.request(path, name, self._replier(addr, work=True))

    def generate(self, req: osc_api.Generate, addr: tuple, reply: Callable[[bytes], None]) -> None:
        self._enqueue(req, addr, reply)  # /kick/generate and /kick/variation (and /kick/near: self.near)

    def interpolate(self, req: osc_api.Interpolate, addr: tuple, reply: Callable[[bytes], None]) -> None:
        self._enqueue_interpolation(req, addr, reply)

    def _next_id(self) -> int:
        """A server-assigned id: -2, -3, ... down to int32's minimum, then -2 again. Clients choose ids >= 0 and
        -1 means "no id", so the two can never be mistaken for each other."""
        return -2 - next(self._ids) % (2**31 - 1)

    def _enqueue(self, req: osc_api.Generate, addr: tuple, reply: Callable[[bytes], None]) -> None:
        assert self.worker is not None
        named = req.id if req.id is not None else osc_api.NO_ID  # what a refusal carries (README: one rule)
        source, near, controls = None, None, dict(req.controls)
        if isinstance(req, osc_api.Near):
            missing = self._no_map()
            if missing is not None:
                log.info("refused near %d: %s", named, missing)
                reply(osc_api.error(named, missing))
                return
            near = MapPoint(req.x, req.y, req.spread)
            controls = {k: v for k, v in controls.items() if k in self.worker.gen.unit_controls}  # dials: ignored
        elif isinstance(req, osc_api.Variation):
            try:
                source = open_source(req.source, self.cfg.out_dir, self.cfg.read_root_dirs)
            except SourceError as e:
                log.info("refused variation %d: %s", named, e)
                reply(osc_api.error(named, str(e)))
                return
        base = req.seed if req.seed is not None else osc_api.pick_seed(self._rng, req.count)
        id = req.id if req.id is not None else self._next_id()
        job = Job(id=id, seeds=[base + i for i in range(req.count)], reply=self._replier(addr, work=True),
                  steps=req.steps, sampler=req.sampler, controls=controls, source=source,
                  strength=req.strength if isinstance(req, osc_api.Variation) else 0.5, client=addr[:2], near=near)
        self._submit(job, named, reply)

    def _submit(self, job: Job, named: int, reply: Callable[[bytes], None]) -> None:
        """Queue a job; a refusal (busy, shutting down) carries the id its request named (else -1), not the
        server-assigned one: those are for kicks actually queued."""
        assert self.worker is not None
        refused = self.worker.submit(job)
        if refused is not None:
            job.close()
            self._refused += 1
            if not refused.startswith("busy") or self._refused % 100 == 1:
                log.info("refused request %d: %s (%d refused so far)", named, refused, self._refused)
            reply(osc_api.error(named, refused))

    def _enqueue_interpolation(self, req: osc_api.Interpolate, addr: tuple, reply: Callable[[bytes], None]) -> None:
        """Queue a morph: each end that names a file is opened and checked here, once (as a variation's source;
        decoded later by the worker). A sampler the model cannot morph with is refused at once."""
        assert self.worker is not None
        named = req.id if req.id is not None else osc_api.NO_ID  # what a refusal carries (README: one rule)
        gen = self.worker.gen
        sampler = gen.settings(req.steps, req.sampler, self.worker.policy).sampler
        usable = tuple(gen.interpolation_samplers)  # diffusion families: the samplers that can morph
        if sampler is not None and usable and sampler not in usable:
            log.info("refused interpolation %d: sampler %s", named, sampler)
            reply(osc_api.error(named, f"interpolation needs a deterministic sampler ({' or '.join(usable)}), "
                                       f"not {sampler}"))
            return
        ends: list[End] = []
        for key, end in (("a", req.a), ("b", req.b)):
            if isinstance(end, int):
                ends.append(End(seed=end))
                continue
            try:
                ends.append(End(source=open_source(end, self.cfg.out_dir, self.cfg.read_root_dirs)))
            except SourceError as e:
                for opened in ends:
                    if opened.source is not None:
                        opened.source.close()
                log.info("refused interpolation %d: %s: %s", named, key, e)
                reply(osc_api.error(named, f"{key}: {e}"))
                return
        id = req.id if req.id is not None else self._next_id()
        job = Job(id=id, seeds=[req.reply_seed(i) for i in range(req.count)], reply=self._replier(addr, work=True),
                  steps=req.steps, sampler=req.sampler, controls=dict(req.controls), client=addr[:2],
                  ends=(ends[0], ends[1]), ts=list(req.ts))
        self._submit(job, named, reply)


class _OneError:
    """A reply function that lets through at most one /kick/error (a datagram's one refusal); others pass.

    `refuse` answers a refusal: a malformed one (osc_api.Malformed) in at most `limit` bytes, the datagram's
    REFUSAL_GAIN share, shortening its reason to fit or sending nothing."""

    def __init__(self, reply: Callable[[bytes], None], limit: int | None = None) -> None:
        self._reply = reply
        self._errors = 0
        self.limit = limit

    def refuse(self, e: osc_api.RequestError) -> None:
        if isinstance(e, osc_api.Malformed) and self.limit is not None:
            data = osc_api.refusal(e, self.limit)
            if data is None:
                log.debug("not answered: its refusal would be over %d bytes a copy", self.limit)
                return
        else:
            data = osc_api.error(e.id, e.reason)
        self(data)

    def __call__(self, data: bytes) -> None:
        if data.startswith(ERROR_PREFIX):
            self._errors += 1
            if self._errors > 1:
                return
        self._reply(data)


ERROR_PREFIX = osc_api.ERROR.encode() + b"\0"


class _Settled:
    """The reply target of a SIGHUP's model load: sends nothing, records that the load is over (swapped in,
    failed, or superseded), so READY=1 can follow; `why` the reloaded model serves."""

    def __init__(self, why: str) -> None:
        self.event = threading.Event()
        self.why = why

    def __call__(self, _data: bytes) -> None:
        self.event.set()


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _pin_hint(cfg: ServerConfig, why: str) -> str:
    """For a model an unpinned daemon chose itself: how to keep one (a newer export would replace it)."""
    if why in (WHY_NEWEST, WHY_REMEMBERED, WHY_FOLDER_DEFAULT, WHY_BUNDLED) and cfg.model is None:
        return (f" (no --model: a newer artifact in {cfg.models_dir} replaces it; keep one with --model NAME, "
                f"e.g. --model default, or model = \"NAME\" in the config)")
    return ""


def _ensure_folder(models_dir: Path) -> None:
    """Create the models folder (parents too) so a fresh install watches it from the start."""
    if models_dir.is_dir():
        return
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        log.warning("cannot create the models folder %s (%s); new models there are not seen until SIGHUP",
                    models_dir, e.strerror or e)
    else:
        log.info("created the models folder %s", models_dir)


def _step_policy(cfg: ServerConfig) -> StepPolicy:
    """--steps (0: the model's own default) and --max-steps, as the generator's settings take them."""
    return StepPolicy(default=cfg.steps, cap=cfg.max_steps)


def _warn_open_allow(cfg: ServerConfig) -> None:
    if _is_loopback_host(cfg.host):
        return  # only loopback can reach the socket: the allow list does not matter
    for net in cfg.allow_networks:
        if net.prefixlen == 0:
            log.warning("--allow %s serves every address on the network: anyone who reaches udp port %d can make "
                        "kicks, fill %s and, with a forged source address, aim replies at a third party (bounded "
                        "by the reply budget); allow only your LAN (e.g. 192.168.1.0/24)", net, cfg.port,
                        cfg.out_dir)


def _make_notifier() -> Any:
    try:
        from .notify import Notifier
    except ImportError:  # pragma: no cover - notify.py ships with the package
        log.warning("kickserver.notify is missing; not notifying systemd")

        class _Null:
            def __getattr__(self, _name: str) -> Callable[..., None]:
                return lambda *a, **k: None

        return _Null()
    return Notifier()


def serve(cfg: ServerConfig, **kw: Any) -> int:
    server = Server(cfg, **kw)
    rc = server.run()
    left = server.unfinished()
    if left:
        # Tearing the interpreter down while another thread runs torch aborts the process ("terminate called
        # without an active exception", SIGABRT, not exit 0: issue 22). Past the shutdown budget, leave without it:
        # every file is written by rename, so nothing is left half-done.
        log.warning("exiting while %s still runs", " and ".join(left))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc
