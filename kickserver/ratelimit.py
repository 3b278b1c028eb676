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

At most MAX_ADDRESSES buckets are kept, so forged sources cannot exhaust memory, and forgetting a bucket must
never hand its address a fresh burst (4,100 datagrams from other loopback addresses evicted a spent
bucket, and its address drew 401,600 B in 1.3 s against a cap of 173,740 B). So only a bucket that is full
again is forgotten (a fresh one would be the same), the least recently used first (of the EVICT_SCAN oldest).
When none of those is full -- more than MAX_ADDRESSES addresses drew replies in the last few seconds, which
only a forged flood does -- a new address gets no bucket of its own: its replies draw on one bucket shared by
all such addresses (same rate and burst), and an address given a bucket of its own later starts with no more
than that shared bucket holds. Every address's replies thus stay within burst + rate x time, always.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from itertools import islice

RATE = 32 * 1024  # bytes per second per source address
BURST = 128 * 1024
MAX_ADDRESSES = 4096
EVICT_SCAN = 8  # buckets looked at (oldest first) for one that is full again and may be forgotten
# Sources that have not proved their return path (ReturnPaths) draw immediate replies from their own bucket and, all
# together, from one pooled bucket of POOLED x the rate and burst (bounded per address only, 300
# forged sources drew 37.5 MB for 100.8 KB)
POOLED = 4


class Counts:
    """How many datagrams each address sent of one kind (dropped outside --allow, not OSC), for the log's "the first,
    then every 1000th" lines: at most `limit` addresses, the least recently seen forgotten first, so forged sources
    cannot grow the daemon's memory (the table of senders outside --allow kept every address, and 2 M
    forged ones took 182 MB). `total` counts every datagram, so the log can speak of a flood in one line per 1000."""

    def __init__(self, limit: int = MAX_ADDRESSES) -> None:
        self.limit = int(limit)
        self._n: OrderedDict[str, int] = OrderedDict()
        self.total = 0

    def add(self, key: str) -> int:
        """Count one more for key; its count now."""
        n = self._n.pop(key, 0) + 1
        self._n[key] = n
        while len(self._n) > self.limit:
            self._n.popitem(last=False)
        self.total += 1
        return n

    def get(self, key: str, default: int = 0) -> int:
        return self._n.get(key, default)

    def __len__(self) -> int:
        return len(self._n)


KEY_ENV = "KICKSERVER_PROOF_KEY"  # hex: the token key instead of a random one (tests/kickserver/osc_exchange.py)


class ReturnPaths:
    """Addresses that proved they receive what the daemon sends them.

    A UDP source address can be forged; a reply to it reaches whoever owns it. An address proves its return path by
    echoing a token that only a reply sent to it carried (`/kick/proof` answers `/kick/proof <token>`; a refused
    `/kick/map` answers `/kick/map/proof <token>`; the client sends `/kick/proof <token>` back). The token is a keyed
    hash of the address (HMAC-SHA256 with a key drawn at start, its first 24 bits, so Pd's and Max's float32 hold it
    exactly): nothing is stored for an address until it proves, and guessing one takes 8 M datagrams on average.
    At most `max_addresses` proven addresses are kept (the least recently seen forgotten first: it proves again)."""

    def __init__(self, max_addresses: int = MAX_ADDRESSES, key: bytes | None = None) -> None:
        if key is None and os.environ.get(KEY_ENV):  # recorded tests only: it makes every token predictable
            key = bytes.fromhex(os.environ[KEY_ENV])
        self._key = key if key is not None else os.urandom(32)
        self.max_addresses = int(max_addresses)
        self._proven: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def token(self, ip: str) -> int:
        return int.from_bytes(hmac.new(self._key, ip.encode(), hashlib.sha256).digest()[:3], "big")

    def prove(self, ip: str, token: int) -> bool:
        """Whether token is ip's; if so ip is proven from now on."""
        if not hmac.compare_digest(self.token(ip).to_bytes(3, "big"), int(token).to_bytes(3, "big")):
            return False
        with self._lock:
            self._proven[ip] = None
            self._proven.move_to_end(ip)
            while len(self._proven) > self.max_addresses:
                self._proven.popitem(last=False)
        return True

    def proven(self, ip: str) -> bool:
        with self._lock:
            if ip not in self._proven:
                return False
            self._proven.move_to_end(ip)
            return True

    def __len__(self) -> int:
        return len(self._proven)


class ReplyBudget:
    """Token buckets of reply bytes, one per destination IP; thread-safe."""

    def __init__(self, rate: float = RATE, burst: float = BURST, *, max_addresses: int = MAX_ADDRESSES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.max_addresses = int(max_addresses)
        self._clock = clock
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # ip -> [tokens, last refill time]
        self._shared = [self.burst, clock()]  # the bucket of addresses that found no room for their own
        self._pooled = [POOLED * self.burst, clock()]  # all the addresses that have not proved their return path
        self._lock = threading.Lock()
        self.dropped: dict[str, int] = {}

    def _refill(self, b: list[float], now: float) -> list[float]:
        b[0] = min(self.burst, b[0] + (now - b[1]) * self.rate)
        b[1] = now
        return b

    def _bucket(self, ip: str) -> list[float]:
        """ip's bucket, refilled to now; the shared bucket when the table has no room (see the module doc)."""
        now = self._clock()
        b = self._buckets.get(ip)
        if b is not None:
            self._buckets.move_to_end(ip)
            return self._refill(b, now)
        shared = self._refill(self._shared, now)
        while len(self._buckets) >= self.max_addresses:
            if not self._forget_a_full_bucket(now):
                return shared
        b = [shared[0], now]  # a whole burst unless the shared bucket was drawn on lately
        self._buckets[ip] = b
        return b

    def _forget_a_full_bucket(self, now: float) -> bool:
        """Drop the least recently used of the EVICT_SCAN oldest buckets that is full again (forgetting it gives
        nobody anything); False if none is."""
        for ip, b in islice(self._buckets.items(), EVICT_SCAN):
            if b[0] + (now - b[1]) * self.rate >= self.burst:
                del self._buckets[ip]
                return True
        return False

    def take(self, ip: str, nbytes: int, *, pooled: bool = False) -> bool:
        """Charge nbytes if the bucket holds them (True); otherwise charge nothing and count a drop (False).
        pooled: ip has not proved its return path, so the pooled bucket of all such addresses must hold them too."""
        with self._lock:
            b = self._bucket(ip)
            p = None
            if pooled:
                p = self._pooled
                now = self._clock()
                p[0] = min(POOLED * self.burst, p[0] + (now - p[1]) * POOLED * self.rate)
                p[1] = now
            if b[0] >= nbytes and (p is None or p[0] >= nbytes):
                b[0] -= nbytes
                if p is not None:
                    p[0] -= nbytes
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
