"""sd_notify without a library: tell systemd (Type=notify) that the daemon is ready, alive, reloading or stopping.

The protocol (sd_notify(3)): one AF_UNIX datagram of newline-separated KEY=VALUE lines, sent to the socket
named by $NOTIFY_SOCKET. A leading "@" names a socket in the abstract namespace (the "@" becomes a NUL byte).
Outside systemd (no $NOTIFY_SOCKET) every call is a no-op, so the daemon calls these unconditionally:

    notifier = Notifier()
    notifier.extend_timeout(120_000_000)        # optional: a slow model load asks for more start time
    ...load the model, bind the socket...
    notifier.ready(status="serving tiny on cuda:0, OSC 127.0.0.1:9000")
    notifier.start_watchdog()                   # WATCHDOG=1 every WATCHDOG_USEC/2, from a daemon thread
    ...on SIGTERM:
    notifier.stopping()
    notifier.stop_watchdog()

systemd arms the unit's watchdog when READY=1 arrives (or at the first WATCHDOG=1, whichever comes first), so
starting the pings right after READY=1 is enough; before that, TimeoutStartSec= (and EXTEND_TIMEOUT_USEC=) apply.
A failed send never raises into the caller: it is logged once (one line on stderr) until a send works again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

SEND_TIMEOUT_S = 2.0


def _socket_address(value: str | None) -> bytes | None:
    """$NOTIFY_SOCKET as a sendto() address: a filesystem path, or "@name" -> b"\\0name"; None if unusable."""
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + os.fsencode(value[1:])
    if value.startswith("/"):
        return os.fsencode(value)
    return None  # vsock: and relative paths are not supported (systemd only hands out the two forms above)


def _watchdog_usec(env: Mapping[str, str]) -> int | None:
    """WATCHDOG_USEC if it is meant for this process (WATCHDOG_PID unset or ours), else None."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid:
        try:
            if int(pid) != os.getpid():
                return None
        except ValueError:
            return None
    return usec


def _one_line(text: str) -> str:
    """STATUS= and friends are single lines: a newline would start a new KEY=VALUE field."""
    return " ".join(str(text).split())


class Notifier:
    """Sends sd_notify messages to $NOTIFY_SOCKET; every method is a no-op when that is unset.

    Thread-safe: the watchdog thread and the daemon's threads share one socket under a lock.
    """

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self._raw_address = env.get("NOTIFY_SOCKET") or ""
        self._address = _socket_address(self._raw_address)
        if self._raw_address and self._address is None:
            log.warning("NOTIFY_SOCKET=%r is not a path or @abstract name; not notifying systemd",
                        self._raw_address)
        self.watchdog_usec: int | None = _watchdog_usec(env) if self._address else None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._failing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        """True when running under a service manager that asked for notifications."""
        return self._address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings (half of WATCHDOG_USEC), or None when systemd set no watchdog for us."""
        return self.watchdog_usec / 2e6 if self.watchdog_usec else None

    # ------------------------------------------------------------ sending
    def notify(self, *fields: str) -> bool:
        """Send the given KEY=VALUE fields as one datagram. True if it was sent; never raises."""
        if self._address is None or not fields:
            return False
        data = "\n".join(fields).encode("utf-8", "replace")
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                    # a wedged manager with a full queue must not block the daemon (or its shutdown) for long
                    self._sock.settimeout(SEND_TIMEOUT_S)
                self._sock.sendto(data, self._address)
            except OSError as e:
                if not self._failing:  # one line per run of failures, not one per watchdog ping
                    log.warning("cannot notify systemd at NOTIFY_SOCKET=%s: %s", self._raw_address,
                                e.strerror or e)
                self._failing = True
                return False
            if self._failing:
                log.info("notifying systemd at NOTIFY_SOCKET=%s works again", self._raw_address)
            self._failing = False
            return True

    def ready(self, status: str = "") -> bool:
        """READY=1: start-up is finished (the model is warm and the OSC socket answers)."""
        return self.notify("READY=1", *([f"STATUS={_one_line(status)}"] if status else []))

    def status(self, text: str) -> bool:
        """STATUS=...: one line shown by `systemctl status` (e.g. 'serving tiny on cpu (no GPU found)')."""
        return self.notify(f"STATUS={_one_line(text)}")

    def reloading(self, status: str = "") -> bool:
        """RELOADING=1: a reload began (send ready() when it is done). MONOTONIC_USEC as systemd >= 253 wants."""
        fields = ["RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}"]
        return self.notify(*fields, *([f"STATUS={_one_line(status)}"] if status else []))

    def stopping(self, status: str = "") -> bool:
        """STOPPING=1: shutdown began (in-flight work is being finished)."""
        return self.notify("STOPPING=1", *([f"STATUS={_one_line(status)}"] if status else []))

    def extend_timeout(self, usec: int) -> bool:
        """EXTEND_TIMEOUT_USEC=usec: the current start/stop phase needs this much more time, from now."""
        return self.notify(f"EXTEND_TIMEOUT_USEC={int(usec)}")

    def watchdog(self) -> bool:
        """One WATCHDOG=1 ping."""
        return self.notify("WATCHDOG=1")

    # ------------------------------------------------------------ watchdog thread
    def start_watchdog(self, alive: Callable[[], bool] | None = None) -> bool:
        """Ping WATCHDOG=1 now and then every WATCHDOG_USEC/2 from a daemon thread. True if the thread runs.

        alive: optional health check called before each ping; when it returns False (or raises) the ping is
        skipped, so a wedged worker lets systemd's watchdog fire and Restart=on-failure restart the service.
        No-op when systemd set no watchdog for this process (WATCHDOG_USEC unset, or WATCHDOG_PID not ours).
        """
        interval = self.watchdog_interval
        if interval is None:
            return False
        if self._thread is not None and self._thread.is_alive():
            return True
        self._stop.clear()
        self._thread = threading.Thread(target=self._watchdog_loop, args=(interval, alive),
                                        name="sd-watchdog", daemon=True)
        self._thread.start()
        return True

    def _watchdog_loop(self, interval: float, alive: Callable[[], bool] | None) -> None:
        next_at = time.monotonic()
        was_healthy = True
        while not self._stop.is_set():
            healthy, why = True, ""
            if alive is not None:
                try:
                    healthy = bool(alive())
                except Exception as e:  # a broken health check must not kill the thread silently
                    healthy, why = False, f" ({type(e).__name__}: {e})"
            if healthy:
                self.watchdog()
            elif was_healthy:  # once per unhealthy spell: the journal then says why systemd killed us
                log.error("health check failed%s: no more watchdog pings; systemd will restart the service", why)
            was_healthy = healthy
            # a fixed schedule (not sleep(interval) after each send) so pings do not drift late
            next_at += interval
            now = time.monotonic()
            if next_at < now:
                next_at = now + interval
            self._stop.wait(next_at - now)

    def stop_watchdog(self, timeout: float = 2.0) -> None:
        """Stop the ping thread (at the end of shutdown; pings until then are harmless)."""
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    def close(self) -> None:
        """Stop the watchdog thread and close the socket."""
        self.stop_watchdog()
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


__all__ = ["Notifier"]
