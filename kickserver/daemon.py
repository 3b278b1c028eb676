"""The daemon's lifecycle: load and warm the model, bind UDP, serve OSC until SIGTERM; SIGHUP re-reads the config.

Threads: the receive loop (kickserver.frontend: parse, validate, enqueue, reply; never waits on the model), the
worker (kickserver.worker: owns the model), the model loader (kickserver.reload: validates and loads new artifacts
beside the current one) and watchdog's observer. The main thread only waits for signals: SIGTERM/SIGINT stop,
SIGHUP re-reads the config and rescans the models folder. Which model serves, and why, is kickserver.catalog's.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kickmodel.generator import Cancelled, StepPolicy

from . import __version__
from .catalog import WHY_CHOSEN, WHY_REMEMBERED, Catalog, Settled, failed, pin_hint, signature
from .config import ServerConfig, ServerConfigError, load_config
from .frontend import MODELS_WAIT_S, FrontEnd, is_loopback_host
from .jobs import Answer, warm_up
from .reload import ModelLoader, ModelNotFound, list_models, record_verdict, resolve_model
from .worker import Worker
from .writer import KickWriter

log = logging.getLogger("kickserver")

SHUTDOWN_BUDGET_S = 8.0
STATUS_INTERVAL_S = 1.0  # STATUS= updates as kicks are made, at most this often


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
        self.worker: Worker | None = None
        self.loader: ModelLoader | None = None
        self.catalog: Catalog | None = None
        self.front = FrontEnd(self)
        self.notifier: Any = None
        self._stop = stop if stop is not None else threading.Event()
        self._hup = hup if hup is not None else threading.Event()
        self._settling: Settled | None = None  # a SIGHUP's model load, until it is swapped in or failed
        self._status_sent = (0.0, "")
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
        self.catalog = catalog = Catalog(cfg, self.overrides)
        try:
            path, name, why = catalog.startup()
        except ModelNotFound as e:
            log.error("%s", e)
            return 2
        # bind before loading the model: a second daemon on the same port fails at once, not after the load
        try:
            self.front.bind()
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
                if why not in (WHY_REMEMBERED, WHY_CHOSEN):  # at start, chosen is remembered too
                    raise
                # a broken memory (the remembered file is now truncated or invalid) must not keep the daemon down
                log.warning("the model that served last (%s) does not load (%s); serving the configured one",
                            name, str(e).replace(str(path) + ": ", ""))
                record_verdict(path, False)  # and the newest-valid choice below passes it over
                path, name = resolve_model(cfg.models_dir, cfg.model)
                why = catalog.configured_why(cfg, path, name)
                t0 = time.perf_counter()
                gen = load_generator(path, self.device)
        except (ArtifactError, ModelNotFound) as e:
            log.error("%s", e)
            return self._closed(2)
        if self._stop.is_set():  # SIGTERM during the load: no warm-up
            log.info("stopped during start-up")
            return self._closed(0)
        catalog.serves(path, name, why, signature(path))
        try:
            warm = warm_up(gen, cancel=self._stop.is_set)
        except Cancelled:
            log.info("stopped during start-up")
            return self._closed(0)
        log.info("loaded model %s (%s) from %s in %.2f s (warm-up %.2f s; %d Hz, %d samples, %s)", name,
                 gen.family, path, time.perf_counter() - t0, warm, gen.sample_rate, gen.length,
                 f"default {gen.default_steps} steps {gen.default_sampler}" if gen.samplers else "one pass")
        log.info("serving %s: %s%s", name, why, pin_hint(cfg, why))
        if self._stop.is_set():
            return self._closed(0)
        try:
            writer = KickWriter(cfg.out_dir, cfg.sample_rate, max_files=cfg.max_files, max_mb=cfg.max_mb,
                                name_pattern=cfg.name_pattern)
        except OSError as e:
            log.error("cannot use the output folder %s: %s", cfg.out_dir, e.strerror or e)
            return self._closed(2)
        self.worker = Worker(gen, name, writer, sample_rate=cfg.sample_rate, queue_limit=cfg.queue_limit,
                             client_limit=cfg.client_queue_limit, max_batch=cfg.max_batch,
                             software=f"kickserver {__version__}", threads=worker_threads,
                             policy=_step_policy(cfg), capture=cfg.render_capture)
        self.worker.start()
        # --model pins what is served, and so does a remembered /kick/model choice: a new artifact in the folder is
        # listed, not swapped in
        self.loader = ModelLoader(self.device, self._hand_over, failed, pinned=cfg.model or catalog.held())
        self.loader.on_checked = self.front.routes.answer_listings
        self.loader.start()
        if catalog.sig is not None:
            record_verdict(path, True, catalog.sig)  # it loads: listed without another check
        self.loader.check_folder(cfg.models_dir)  # the others are checked in the loader thread (/kick/models)
        self.loader.watch(cfg.models_dir)  # never raises: falls back to polling, or to no live reload
        if self.loader.models_dir is not None and path.parent == cfg.models_dir and catalog.sig is not None:
            self.loader.last_seen[path] = catalog.sig
        recv = threading.Thread(target=self.front.receive_loop, name="kick-receive", daemon=True)
        self.front.receiving.set()
        recv.start()
        if not is_loopback_host(cfg.host) and not cfg.allow:
            log.warning("bound to %s but no --allow networks: only loopback clients are served", cfg.host)
        _warn_open_allow(cfg)
        # READY=1 (and the line below) once the worker's warm-up and render capture are done, so "ready" means a kick
        # is answered at a kick's speed: under --render-capture compile on the CPU READY came 3.8 s after the start
        # and the first kick 68.5 s after. Requests that come meanwhile are queued.
        from kickmodel.capture import resolve_mode

        if not self.worker.warm.is_set() and resolve_mode(cfg.render_capture, self.device) != "off":
            log.info("capturing the render (%s) before serving: the first kicks wait for it", cfg.render_capture)
        while not self.worker.warm.wait(0.2):
            if self._stop.is_set():
                return self._shutdown(recv)
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
            self.front.routes.answer_listings(time.monotonic() - MODELS_WAIT_S)
        return self._shutdown(recv)

    def _closed(self, rc: int) -> int:
        self.front.close()
        return rc

    def _hand_over(self, gen: Any, name: str, path: Path, answer: Answer | None) -> None:
        """The loader's new model (the loader thread): to the worker, why it serves decided by the catalog."""
        assert self.worker is not None and self.loader is not None and self.catalog is not None
        self.catalog.hand_over(self.worker, self.loader, gen, name, path, answer)

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
        self.front.receiving.clear()
        if self.worker is not None:
            self.worker.stop()  # cancels the batch on the device; the kick being written still lands
        if self.loader is not None:  # a load in progress stops at its next step; wait for it
            if not self.loader.stop(timeout=max(0.5, SHUTDOWN_BUDGET_S - (time.monotonic() - t0))):
                log.error("the model loader did not finish in time; exiting anyway")
        recv.join(timeout=1.0)
        if self.worker is not None:
            if not self.worker.join(timeout=max(0.5, SHUTDOWN_BUDGET_S - (time.monotonic() - t0))):
                log.error("the worker did not finish in time; exiting anyway")
        self.notifier.stop_watchdog()
        self.front.close()
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
        if (new.out_dir, new.sample_rate, new.max_files, new.max_mb, new.name_pattern) != (
                old.out_dir, old.sample_rate, old.max_files, old.max_mb, old.name_pattern):
            try:  # the worker swaps writer and rate together, between batches (kickserver.worker: set_output)
                w.set_output(new.out_dir, new.sample_rate, max_files=new.max_files, max_mb=new.max_mb,
                             name_pattern=new.name_pattern)
            except OSError as e:
                log.error("SIGHUP: cannot use the output folder %s (%s); keeping %s", new.out_dir, e, old.out_dir)
                new.out, new.sample_rate = old.out, old.sample_rate
        w.set_limits(new.queue_limit, new.client_queue_limit, new.max_batch)
        w.policy = _step_policy(new)
        w.capture = new.render_capture  # for the next model loaded
        self.front.budget.rate, self.front.budget.burst = new.reply_rate_kb * 1024, new.reply_burst_kb * 1024
        logging.getLogger().setLevel(new.log_level.upper())
        self.cfg, self.config_path = new, path
        _warn_open_allow(new)
        # the configured model wins; with none, a /kick/model choice holds (on the same models folder)
        held = self.catalog.held() if new.model is None and new.models_dir == old.models_dir else None
        self.loader.pinned = new.model or held
        self.catalog.set_config(new)
        self.loader.watch(new.models_dir)
        self.loader.check_folder(new.models_dir)
        settling = None
        try:
            mpath, name = resolve_model(new.models_dir, new.model or held)
        except ModelNotFound as e:
            log.error("SIGHUP: %s; keeping %s", e, w.model_name)
        else:
            if self.catalog.changed(mpath, name, w.model_name):
                why = WHY_CHOSEN if held and name == held else self.catalog.configured_why(new, mpath, name)
                settling = Settled(why)
                self.loader.request(mpath, name, settling)
            else:
                log.info("SIGHUP: model %s unchanged; not reloading it", name)
        log.info("SIGHUP: config re-read%s; models: %s", f" from {path}" if path else "",
                 ", ".join(list_models(new.models_dir, check_later=self.loader.check_later)) or "none")
        if settling is None:
            self._ready()
        else:
            self._settling = settling  # READY=1 from the main loop once the model serves


def _step_policy(cfg: ServerConfig) -> StepPolicy:
    """--steps (0: the model's own default) and --max-steps, as the generator's settings take them."""
    return StepPolicy(default=cfg.steps, cap=cfg.max_steps)


def _warn_open_allow(cfg: ServerConfig) -> None:
    if is_loopback_host(cfg.host):
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
        # without an active exception", SIGABRT, not exit 0). Past the shutdown budget, leave without it:
        # every file is written by rename, so nothing is left half-done.
        log.warning("exiting while %s still runs", " and ".join(left))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc
