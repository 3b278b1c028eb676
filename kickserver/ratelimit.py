"""Reply budgets per source address: a token bucket of reply bytes, so the daemon cannot be used as a UDP reflector.

UDP source addresses can be forged: whoever can reach the daemon's port can make it send replies to a third
party (the forged address, at its source port and at the reply port). Every reply datagram is charged to
its destination IP's bucket (both copies), which refills at `rate` bytes per second up to `burst` bytes:

- Immediate replies (pong, status, models, model, every refusal, `busy`) are sent only when the bucket holds
  their size; otherwise they are dropped and counted (logged the first time, then every 1000th).
- Replies to accepted work (`/kick/done`, a kick's `/kick/error`, the outcome of a model load) are always
  sent and charged, possibly below zero: their number is bounded by the queue limits, and a client must
  never lose a kick's answer. A bucket in debt answers nothing immediate until it has refilled.

The defaults (RATE 32 KB/s, BURST 128 KB) never touch a real controller: a burst of 500 requests is about
80 KB of replies. A forger gets at most 128 KB, then 32 KB/s, whatever the request-to-reply size ratio.
At most MAX_ADDRESSES buckets are kept (least recently used evicted), so forged sources cannot exhaust memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

RATE = 32 * 1024  # bytes per second per source address
BURST = 128 * 1024
MAX_ADDRESSES = 4096


class ReplyBudget:
    """Token buckets of reply bytes, one per destination IP; thread-safe."""

    def __init__(self, rate: float = RATE, burst: float = BURST, *, max_addresses: int = MAX_ADDRESSES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.max_addresses = int(max_addresses)
        self._clock = clock
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # ip -> [tokens, last refill time]
        self._lock = threading.Lock()
        self.dropped: dict[str, int] = {}

    def _bucket(self, ip: str) -> list[float]:
        now = self._clock()
        b = self._buckets.get(ip)
        if b is None:
            b = [self.burst, now]
            self._buckets[ip] = b
            while len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)
        else:
            b[0] = min(self.burst, b[0] + (now - b[1]) * self.rate)
            b[1] = now
            self._buckets.move_to_end(ip)
        return b

    def take(self, ip: str, nbytes: int) -> bool:
        """Charge nbytes if the bucket holds them (True); otherwise charge nothing and count a drop (False)."""
        with self._lock:
            b = self._bucket(ip)
            if b[0] >= nbytes:
                b[0] -= nbytes
                return True
            self.dropped[ip] = self.dropped.get(ip, 0) + 1
            if len(self.dropped) > self.max_addresses:
                self.dropped.pop(next(iter(self.dropped)))
            return False

    def charge(self, ip: str, nbytes: int) -> None:
        """Charge nbytes whatever the bucket holds (at most one burst into debt)."""
        with self._lock:
            b = self._bucket(ip)
            b[0] = max(-self.burst, b[0] - nbytes)

    def tokens(self, ip: str) -> float:
        with self._lock:
            return self._bucket(ip)[0]
