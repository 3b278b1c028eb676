"""The reliability suite: attacks and faults against a real daemon over real UDP, and every kick asked for answered.

Each case records what it did in a Tally: requests sent (datagrams, counted where they are sent), faults
injected (files swapped, FIFOs, devices, junk datagrams, a full disk, forged bursts...), kicks asked for
(in requests that carried an id) and kicks lost (asked for, never answered by /kick/done or /kick/error).
Requests sent only to poll the daemon (/kick/status while waiting) are not counted. README.md's
reliability table shows these figures: `python bench/reliability_table.py` runs this file with the slow
cases and rewrites the table, and the last test here checks the table against the tallies of the cases
that ran, so the table cannot drift from what the tests do.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from daemon_util import (
    REPO,
    big_header_artifact,
    broken_artifacts,
    build_message,
    daemon_env,
    free_udp_port,
    make_artifact,
    models_folder,
    parse_replies,
    root_conftest,
    start_daemon,
)

from kickserver import state
from kickserver.daemon import SHUTDOWN_BUDGET_S
from kickserver.logs import MAX_MESSAGE
from kickserver.writer import LEDGER

STEPS = 2


# ---------------------------------------------------------------- bookkeeping


@dataclass
class Tally:
    case: str
    what: str = ""
    requests: int = 0
    faults: int = 0
    kicks: int = 0
    lost: int = 0


TALLIES: list[Tally] = []


@pytest.fixture
def tally(request):
    doc = (request.function.__doc__ or "").strip().split("\n\n")[0]
    t = Tally(request.node.name, " ".join(doc.split()))
    yield t
    TALLIES.append(t)


class Client:
    """One UDP client (its own source port: its own queue in the daemon) that counts what it sends and gets."""

    def __init__(self, d, tally: Tally, host: str = "127.0.0.1") -> None:
        self.d, self.t = d, tally
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.sock.bind((host, 0))
        self.asked: dict[int, int] = {}  # id -> replies expected
        self.answers: dict[int, list] = {}  # id -> replies got
        self.replies: list[tuple[float, str, list]] = []
        self.bytes_in = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes, *, fault: bool = False) -> None:
        self.t.requests += 1
        self.t.faults += int(fault)
        self.sock.sendto(data, (self.d.host, self.d.port))

    def send(self, address: str, *args, fault: bool = False) -> None:
        self.send_raw(build_message(address, args), fault=fault)

    def ask(self, address: str, *args, id: int, count: int = 1, replies: int | None = None) -> None:
        """A generate/variation with an id: `replies` answers expected (default: count)."""
        self.asked[id] = count if replies is None else replies
        self.t.kicks += count
        self.send(address, *args, "id", id)

    def poll(self, address: str, *args) -> list:
        """A request that is not counted (waiting for the daemon), answered on this socket."""
        self.sock.sendto(build_message(address, args), (self.d.host, self.d.port))
        return self.receive(1, 5.0, only=address)

    def receive(self, n: int, timeout: float, only: str | None = None) -> list:
        got: list = []
        deadline = time.monotonic() + timeout
        while len(got) < n and (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                break
            except ConnectionRefusedError:
                continue
            self.bytes_in += len(data)
            for a, p in parse_replies(data):
                self.replies.append((time.monotonic(), a, p))
                if a in ("/kick/done", "/kick/error") and p and p[0] in self.asked:
                    self.answers.setdefault(p[0], []).append((a, p))
                if only is None or a == only:
                    got.append((a, p))
        return got

    def wait_all(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.missing() and (left := deadline - time.monotonic()) > 0:
            self.receive(1, left)

    def missing(self) -> int:
        return sum(max(0, n - len(self.answers.get(i, []))) for i, n in self.asked.items())

    def settle(self) -> None:
        """Record kicks lost; a second answer to a kick is a failure too."""
        self.wait_all()
        self.t.lost += self.missing()
        extra = {i: len(self.answers.get(i, [])) - n for i, n in self.asked.items()
                 if len(self.answers.get(i, [])) > n}
        assert not extra, f"answered more than once: {extra}"


def _kick(path: Path, freq: float, rate: int = 44100, seconds: float = 0.2) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (0.8 * np.sin(2 * np.pi * freq * t) * np.exp(-t * 25)).astype(np.float32), rate, subtype="FLOAT")
    return path


def _prepared(path: Path) -> np.ndarray:
    """What a variation at strength 0 gives back for the file: prepared, finished, not filtered again."""
    from kickmodel.clips import prepare_audio, read_audio
    from kickmodel.config import DataConfig
    from kickmodel.dsp import finish_kick

    clip, _ = prepare_audio(*read_audio(path), DataConfig(length=4096), highpass=False)
    return finish_kick(clip, 44100, highpass_hz=0)


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1])


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, tiny_artifact):
    return models_folder(tmp_path_factory.mktemp("rel-models"), tiny_artifact)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, models_dir):
    """One daemon for the cases that need nothing special: /dev is a read root (for the device case)."""
    tmp = tmp_path_factory.mktemp("rel")
    roots = tmp / "roots"
    roots.mkdir()
    with start_daemon(tmp, models_dir, model="tiny",
                      extra_args=["--read-root", str(roots), "--read-root", "/dev"]) as d:
        d.tmp, d.roots = tmp, roots
        yield d
        long_lines = [ln for ln in d.stderr_text().splitlines() if len(ln) > MAX_MESSAGE + 80]
        assert not long_lines, long_lines[:2]


def _busy_with_a_batch(c: Client, d, steps: int = 40) -> None:
    """Occupy the worker with one batch of 8 slow kicks (about 1.5 s on the tiny model) from client c."""
    c.ask("/kick/generate", 8, "steps", steps, id=900, count=8)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        (_, p), = c.poll("/kick/status")
        if p[2] >= 8:
            return
        time.sleep(0.01)
    raise AssertionError("the worker never started the batch")


def _queued(c: Client, n: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        (_, p), = c.poll("/kick/status")
        if p[2] >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"never {n} kicks queued")


# ---------------------------------------------------------------- variation sources


@pytest.mark.parametrize("swap", ["symlink", "fifo"])
def test_source_swapped_after_the_check(shared, tally, tmp_path, swap):
    """A variation's source is replaced by a link to an outside file, or by a FIFO, after the request was
    accepted: the worker reads the file it checked (strength 0 gives it back) and never blocks."""
    d = shared
    src = _kick(d.out_dir / f"mine-{swap}.wav", 55.0)
    outside = _kick(tmp_path / "outside.wav", 700.0)
    want, other = _prepared(src), _prepared(outside)
    a, b = Client(d, tally), Client(d, tally)
    try:
        _busy_with_a_batch(a, d)
        b.ask("/kick/variation", src.name, "strength", 0.0, id=1)
        _queued(b, 9)  # accepted: opened and checked, waiting behind the batch
        os.unlink(src)
        if swap == "symlink":
            src.symlink_to(outside)
        else:
            os.mkfifo(src)
        tally.faults += 1
        assert a.receive(1, 0.05) == [], "the batch ended before the swap: the race was not exercised"
        b.wait_all(timeout=20)
        a.wait_all(timeout=20)
        (kind, p), = b.answers[1]
        assert kind == "/kick/done", p
        got, _ = sf.read(p[1], dtype="float64")
        assert _corr(got, want) > 0.99 and abs(_corr(got, other)) < 0.5
    finally:
        for c in (a, b):
            c.settle()
            c.close()
        src.unlink(missing_ok=True)
    assert d.alive()


def test_fifos_devices_and_folders_are_refused_at_once(shared, tally):
    """A FIFO, /dev/zero (under a read root) and a folder named like a kick are refused at once; the daemon
    goes on answering."""
    d = shared
    fifo = d.out_dir / "pipe.wav"
    os.mkfifo(fifo)
    folder = d.out_dir / "dir.wav"
    folder.mkdir()
    c = Client(d, tally)
    try:
        for i, (source, why) in enumerate([("pipe.wav", "is a FIFO"), ("/dev/zero", "is a device"),
                                           ("dir.wav", "is a folder")]):
            t0 = time.monotonic()
            c.ask("/kick/variation", source, id=10 + i, replies=1)
            tally.faults += 1
            c.wait_all(timeout=5)
            (kind, p), = c.answers[10 + i]
            assert kind == "/kick/error" and why in p[1], p
            assert time.monotonic() - t0 < 2.0
        c.send("/kick/ping")
        assert [a for a, _ in c.receive(1, 5)] == ["/kick/pong"]
    finally:
        c.settle()
        c.close()
        fifo.unlink()
        folder.rmdir()


def test_a_sibling_folder_sharing_the_output_folders_name_is_outside(shared, tally):
    """`out-evil` beside `out`: an absolute path there, and a link from out to it, are refused."""
    d = shared
    evil = d.out_dir.parent / (d.out_dir.name + "-evil")
    evil.mkdir(exist_ok=True)
    secret = _kick(evil / "secret.wav", 300.0)
    link = d.out_dir / "to-evil.wav"
    link.symlink_to(secret)
    c = Client(d, tally)
    try:
        for i, (source, why) in enumerate([(str(secret), "under a read root"), ("to-evil.wav", "links out")]):
            c.ask("/kick/variation", source, "strength", 0.0, id=20 + i, replies=1)
            tally.faults += 1
            c.wait_all(timeout=5)
            (kind, p), = c.answers[20 + i]
            assert kind == "/kick/error" and why in p[1], p
    finally:
        c.settle()
        c.close()
        link.unlink()


# ---------------------------------------------------------------- fairness (item 3)


def _fairness(d, tally, *, requests: int, count: int, steps: int) -> None:
    a, b = Client(d, tally), Client(d, tally)
    stop = threading.Event()

    def drain_a():  # A's replies are read (and time-stamped) as they arrive, not after B's
        while not stop.is_set():
            a.receive(10**6, 0.05)

    reader = threading.Thread(target=drain_a, daemon=True)
    try:
        queued = 0
        for i in range(requests):
            accepted = queued + count <= 32  # the per-host limit (32) refuses the rest at once: one reply
            queued += count if accepted else 0
            a.ask("/kick/generate", count, "steps", steps, id=100 + i, count=count, replies=count if accepted else 1)
        # A and B share 127.0.0.1 and so its 32-kick limit (kickserver.fair_queue): A leaves room for B's one kick
        # however far the worker has got (with A at 32, B was answered busy once, under load, as it should be)
        assert queued < 32
        tally.faults += 1  # one client's flood
        reader.start()
        _queued(b, 8)
        b.ask("/kick/generate", "steps", STEPS, id=1)
        t0 = time.monotonic()
        b.wait_all(timeout=60)
        waited = time.monotonic() - t0
        time.sleep(0.1)
        (kind, _), = b.answers[1]
        assert kind == "/kick/done"
        b_done_at = next(t for t, k, _ in b.replies if k == "/kick/done")
        a_done_before = sum(1 for t, k, _ in list(a.replies) if k == "/kick/done" and t <= b_done_at)
        deadline = time.monotonic() + 120
        while a.missing() and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        reader.join(5)
        a_done = sum(1 for _, k, _ in a.replies if k == "/kick/done")
        assert a_done == queued
        assert a_done_before <= 16, f"B waited for {a_done_before} of A's kicks ({waited:.1f} s)"
    finally:
        stop.set()
        if reader.is_alive():
            reader.join(5)
        for c in (a, b):
            c.settle()
            c.close()


def test_one_client_cannot_starve_another(shared, tally):
    """Client A queues 2 x /kick/generate 15 (steps 12), B (another program on the same machine) asks for one kick:
    B is answered after at most two of A's batches, not after A's 30 kicks."""
    _fairness(shared, tally, requests=2, count=15, steps=12)


def test_four_ports_of_one_host_cannot_crowd_out_another_host(shared, tally):
    """Four sockets of 127.0.0.1 each send 2 x /kick/generate 16 (steps 12); they share that host's 32
    kicks (6 requests busy) instead of filling all 64, and a kick asked for from 127.0.0.2 is accepted and answered
    after at most the batch running and one more (it waited for 40 of the flood's kicks)."""
    d = shared
    ports = [Client(d, tally) for _ in range(4)]
    b = Client(d, tally, host="127.0.0.2")
    stop = threading.Event()

    def drain():  # the flood's replies are read (and time-stamped) as they arrive
        while not stop.is_set():
            for c in ports:
                c.receive(10**6, 0.01)

    reader = threading.Thread(target=drain, daemon=True)
    try:
        for rep in range(2):
            for i, c in enumerate(ports):
                c.ask("/kick/generate", 16, "steps", 12, id=200 + 10 * i + rep, count=16)
        tally.faults += 1  # one host's flood from four ports
        reader.start()
        _queued(b, 8)
        b.ask("/kick/generate", "steps", STEPS, id=1)
        b.wait_all(timeout=60)
        (kind, p), = b.answers[1]
        assert kind == "/kick/done", p
        b_done_at = next(t for t, k, _ in b.replies if k == "/kick/done")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(
                len(c.answers.get(i, [])) < (1 if _busy(c, i) else 16) for c in ports for i in c.asked):
            time.sleep(0.05)
        stop.set()
        reader.join(5)
        for c in ports:  # a refused request gets one answer, `busy`
            for i in c.asked:
                if _busy(c, i):
                    c.asked[i] = 1
        busy = sum(_busy(c, i) for c in ports for i in c.asked)
        a_done_before = sum(1 for c in ports for t, k, _ in c.replies if k == "/kick/done" and t <= b_done_at)
        assert a_done_before <= 16, f"127.0.0.2 waited for {a_done_before} of 127.0.0.1's kicks"
        assert busy == 6, [c.answers for c in ports]
    finally:
        stop.set()
        if reader.is_alive():
            reader.join(5)
        for c in [*ports, b]:
            c.settle()
            c.close()


def _busy(c: Client, id: int) -> bool:
    got = c.answers.get(id, [])
    return bool(got) and got[0][0] == "/kick/error" and str(got[0][1][1]).startswith("busy")


@pytest.mark.slow
def test_one_client_cannot_starve_another_long(shared, tally):
    """The field report: 4 x /kick/generate 15 steps 200 from one client (2 accepted, 2 busy), then another
    client's single kick."""
    _fairness(shared, tally, requests=4, count=15, steps=200)


# ---------------------------------------------------------------- type tags (item 5)


@pytest.mark.parametrize("tags,payload", [(b"Z", b""), (b"iZ", struct.pack(">i", 3)), (b"r", b"\1\2\3\4")],
                         ids=[",Z", ",iZ 3", ",r"])
def test_unknown_type_tags_refuse_the_message(shared, tally, tags, payload):
    """`,Z`, `,iZ 3` and `,r` (RGBA) refuse the whole message with one /kick/error; no kick is made."""
    d = shared
    before = set(d.out_dir.glob("kick_*.wav"))
    head = b"/kick/generate\0\0"
    tagstr = b"," + tags + b"\0"
    tagstr += b"\0" * (-len(tagstr) % 4)
    c = Client(d, tally)
    try:
        c.send_raw(head + tagstr + payload, fault=True)
        got = c.receive(2, 1.5)
        # the reason is as long as 5x the datagram allows (both copies): "unsupported tag 'Z'" for the shortest
        assert [a for a, _ in got] == ["/kick/error"] and got[0][1][1].startswith("unsupported "), got
        assert f"tag {tags.decode()[-1]!r}" in got[0][1][1], got
        assert set(d.out_dir.glob("kick_*.wav")) == before
    finally:
        c.close()


# ---------------------------------------------------------------- reflection and amplification (item 4)


def _pending_bytes(sock: socket.socket) -> int:
    """The bytes of every datagram that arrives on sock (a timeout set) until it stays quiet for that long."""
    n = 0
    while True:
        try:
            n += len(sock.recvfrom(65536)[0])
        except TimeoutError:
            return n


def _bundle(*elements: bytes, timetag: bytes = b"\0" * 7 + b"\1") -> bytes:
    return b"#bundle\0" + timetag + b"".join(struct.pack(">i", len(e)) + e for e in elements)


def test_junk_datagrams_are_never_answered_and_bundles_get_at_most_one_error(shared, tally):
    """Random non-OSC datagrams get no reply at all; a bundle's junk elements get none; a bundle of bad
    messages gets one /kick/error; an empty bundle one; a bundle of 40 messages one (none run)."""
    d = shared
    rng = random.Random(7)
    ping = build_message("/kick/ping", [])
    bad = build_message("/kick/nope", [])
    c = Client(d, tally)
    try:
        sent = 0
        for _ in range(200):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
            if junk[:1] == b"/" or junk[:1] == b"#":
                junk = b"x" + junk
            c.send_raw(junk, fault=True)
            sent += len(junk)
        assert c.receive(1, 1.0) == [] and c.bytes_in == 0, "a non-OSC datagram was answered"
        c.send_raw(_bundle(b"JUNK", b"MORE", b"xxxx"), fault=True)
        assert c.receive(1, 1.0) == []
        for data, want, why in [(_bundle(bad, bad, ping), ["/kick/error", "/kick/pong"], "unknown address"),
                                (_bundle(), ["/kick/error"], "empty bundle"),
                                (_bundle(*[ping] * 40), ["/kick/error"], "at most 32 messages")]:
            c.send_raw(data, fault=True)
            got = c.receive(len(want) + 1, 1.5)
            assert sorted(a for a, _ in got) == want, got
            assert why in next(p[1] for a, p in got if a == "/kick/error")
    finally:
        c.close()
    assert d.wait_for_log("that are not OSC", timeout=5)


def test_reply_budget_bounds_what_a_forged_source_can_draw(tmp_path, models_dir, tally):
    """With a 4 KB budget (1 KB/s), 300 /kick/models and /kick/status draw at most the budget; another
    address is still answered, and accepted kicks are always answered. --allow 0.0.0.0/0 is warned about."""
    with start_daemon(tmp_path, models_dir, model="tiny",
                      extra_args=["--host", "0.0.0.0", "--allow", "0.0.0.0/0", "--reply-burst-kb", "4",
                                  "--reply-rate-kb", "1"]) as d:
        listener = d.reply_listener()
        listener.settimeout(0.2)
        flood, other = Client(d, tally), Client(d, tally, host="127.0.0.2")
        try:
            t0 = time.monotonic()
            for i in range(300):
                flood.send("/kick/models" if i % 2 else "/kick/status", fault=True)
            flood.receive(10**6, 1.5)
            elapsed = time.monotonic() - t0
            copies = _pending_bytes(listener)
            drawn = flood.bytes_in + copies
            assert 0 < drawn <= 4096 + 1024 * elapsed + 512, (drawn, elapsed)
            assert d.wait_for_log("over its reply budget", timeout=5)
            assert d.wait_for_log("--allow 0.0.0.0/0 serves every address", timeout=1)
            other.send("/kick/ping")
            assert [a for a, _ in other.receive(1, 5)] == ["/kick/pong"]
            for _ in range(60):  # spend what has refilled meanwhile, then ask at once: the budget is empty
                flood.send("/kick/status", fault=True)
            flood.ask("/kick/generate", 3, "steps", STEPS, id=5, count=3)
            flood.wait_all(timeout=20)
            assert [a for a, _ in flood.answers[5]] == ["/kick/done"] * 3
        finally:
            for c in (flood, other):
                c.settle()
                c.close()
            listener.close()


@pytest.mark.slow
def test_reply_budget_under_a_long_flood(tmp_path, models_dir, tally):
    """20,000 forged /kick/models at full speed for about 10 s, default budget: the replies stay within
    128 KB + 32 KB/s, and a kick asked for meanwhile by another address is answered."""
    with start_daemon(tmp_path, models_dir, model="tiny") as d:
        flood, other = Client(d, tally), Client(d, tally, host="127.0.0.2")
        try:
            stop = threading.Event()
            t0 = time.monotonic()

            def drain():
                while not stop.is_set():
                    flood.receive(10**6, 0.2)

            th = threading.Thread(target=drain, daemon=True)
            th.start()
            for i in range(20000):
                flood.send("/kick/models", fault=True)
                if i % 200 == 199:
                    time.sleep(0.1)
            other.ask("/kick/generate", "steps", STEPS, id=1)
            other.wait_all(timeout=30)
            stop.set()
            th.join(5)
            elapsed = time.monotonic() - t0
            assert flood.bytes_in * 2 <= 128 * 1024 + 32 * 1024 * elapsed + 8192, (flood.bytes_in, elapsed)
        finally:
            for c in (flood, other):
                c.settle()
                c.close()


def test_many_other_addresses_never_refill_a_spent_reply_budget(tmp_path, models_dir, tally):
    """With an 8 KB budget (1 KB/s), 127.0.0.1 spends its budget, 4,100 datagrams from other loopback
    addresses follow (more than the 4,096 budgets kept), and 127.0.0.1 asks again: it gets no fresh burst (it did:
    eviction forgot the spent budget), all it draws stays within 8 KB + 1 KB/s."""
    with start_daemon(tmp_path, models_dir, model="tiny",
                      extra_args=["--reply-burst-kb", "8", "--reply-rate-kb", "1"]) as d:
        victim, listener = Client(d, tally), d.reply_listener()
        listener.settimeout(0.2)
        try:
            t0 = time.monotonic()
            for _ in range(100):
                victim.send("/kick/status", fault=True)
            victim.receive(10**6, 0.5)
            spent = victim.bytes_in
            ping = build_message("/kick/ping", [])
            for i in range(4100):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.bind((f"127.1.{i // 250}.{i % 250 + 1}", 0))
                    s.sendto(ping, (d.host, d.port))
                tally.requests += 1
            tally.faults += 1
            for _ in range(100):
                victim.send("/kick/status", fault=True)
            victim.receive(10**6, 0.5)
            elapsed = time.monotonic() - t0
            copies = _pending_bytes(listener)
            drawn = victim.bytes_in + copies
            assert spent > 3000, spent  # the first flood was answered until the budget ran out
            assert drawn <= 8192 + 1024 * elapsed + 200, (drawn, spent, elapsed)
        finally:
            victim.close()
            listener.close()


MALFORMED = [b"/\0\0\0", b"/kick/generate\0\0,Z\0\0", b"/kick/generate\0\0,iZ\0" + struct.pack(">i", 3),
             b"/kick/generate\0\0,i\0\0", b"/\xff\xfe\0", b"/x\0\0,\0\0\0",
             b"/kick/generat\0\0\0,\0\0\0", b"#bundle\0" + b"\0" * 7 + b"\1",
             b"#bundle\0" + b"\0" * 7 + b"\1" + struct.pack(">i", 4) + b"/\0\0\0"]


def test_a_malformed_datagram_draws_at_most_five_times_its_size(shared, tally):
    """`/\\0\\0\\0` (4 bytes) drew 320 bytes of replies (both copies) and a `,Z` message 12x its size;
    now every reply to a malformed datagram (an unknown type tag, a broken argument or address, an unknown
    address, an empty bundle) is at most 5x the datagram, counting both copies, or there is none."""
    d = shared
    c = Client(d, tally, host="127.0.0.3")  # an address with a full budget of its own
    copy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    copy.bind(("127.0.0.3", d.reply_port))
    copy.settimeout(0.05)
    try:
        ratios = {}
        for data in MALFORMED:
            before = c.bytes_in
            c.send_raw(data, fault=True)
            got = c.receive(2, 0.5)
            out = c.bytes_in - before
            out += _pending_bytes(copy)
            ratios[data[:24]] = (out / len(data), [p[1] for a, p in got])
            assert all(a == "/kick/error" for a, _ in got), got
        assert all(r <= 5 for r, _ in ratios.values()), ratios
        assert any(got for _, got in ratios.values()), "nothing was answered at all"
    finally:
        c.close()
        copy.close()


# ---------------------------------------------------------------- a full disk (item 6)


@pytest.fixture
def small_disk(tmp_path):
    mnt = Path(tempfile.mkdtemp(prefix="ks-full-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip() or r.returncode}): needs root or "
                    "CAP_SYS_ADMIN; the writer's ENOSPC path is also covered by test_writer.py")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        mnt.rmdir()


def test_a_full_disk_answers_every_kick_with_the_reason_and_recovers(tmp_path, models_dir, tally, small_disk):
    """The output folder is a 160 KB tmpfs: kicks fill it, every later one gets `no space left in <folder>`
    with one log line each and no traceback or temp file; freeing space makes writing work again."""
    with start_daemon(tmp_path, models_dir, model="tiny", out_dir=small_disk) as d:
        c = Client(d, tally)
        try:
            full = 0
            for i in range(40):
                c.ask("/kick/generate", 2, "steps", STEPS, id=i, count=2)
                c.wait_all(timeout=20)
                full += sum(1 for a, _ in c.answers[i] if a == "/kick/error")
                if full >= 4:
                    break
            tally.faults += 1
            errors = [p for i in c.answers for a, p in c.answers[i] if a == "/kick/error"]
            assert len(errors) >= 4 and all(p[1].endswith(f"no space left in {small_disk}") for p in errors), errors
            log = d.stderr_text()
            assert log.count("no space left in") == len(errors), log
            for needle in ("Traceback", "AssertionError", "cffi", "Exception ignored"):
                assert needle not in log, log
            # no temp file left (the retention ledger, on by default with its disk budget, is no temp file)
            assert [f for f in os.listdir(small_disk) if f.startswith(".") and f != LEDGER] == []
            for f in sorted(small_disk.glob("kick_*.wav"))[:4]:
                f.unlink()
            c.ask("/kick/generate", "steps", STEPS, id=99)
            c.wait_all(timeout=20)
            assert [a for a, _ in c.answers[99]] == ["/kick/done"]
        finally:
            c.settle()
            c.close()


# ---------------------------------------------------------------- small ones (item 7)


def test_a_250_character_model_name_is_refused_clearly(shared, tally):
    """`/kick/model` with a 250-character name is refused with a reason (it said `internal error: OSError`)."""
    c = Client(shared, tally)
    try:
        c.send("/kick/model", "m" * 250, fault=True)
        (a, p), = c.receive(1, 5)
        assert (a, p[1]) == ("/kick/error", "a model name has at most 128 characters; got 250")
    finally:
        c.close()


# ---------------------------------------------------------------- a fresh install (item 8)


def _wait_status(d, name: str, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = d.send("/kick/status", timeout=2)
        if got and got[0][1][0] == name:
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"{name} not served within {timeout} s:\n{d.stderr_text()}")


def test_fresh_install_serves_a_model_exported_later(tmp_path, tally):
    """The models folder does not exist yet: the daemon creates it, serves the bundled model, and a model
    exported there later (atomically) is served within 5 s, without SIGHUP."""
    models = tmp_path / "share" / "kickserver" / "models"
    with start_daemon(tmp_path, models, pin=False) as d:
        assert models.is_dir() and d.wait_for_log("created the models folder", timeout=1)
        assert _wait_status(d, "default", 5) < 5
        art = make_artifact(tmp_path / "mine.safetensors", seed=5)
        tmp = models / ".mine.safetensors.part"
        shutil.copyfile(art, tmp)
        os.replace(tmp, models / "mine.safetensors")
        tally.faults += 1
        waited = _wait_status(d, "mine", 5)
    print(f"served after {waited:.2f} s")


def test_a_restart_serves_the_model_chosen_last(tmp_path, tiny_artifact, tally):
    """/kick/model other, restart (no --model): other serves again; --model tiny still pins tiny."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    shutil.copyfile(make_artifact(tmp_path / "other.safetensors", seed=6), models / "other.safetensors")
    with start_daemon(tmp_path, models, pin=False) as d:
        (a, p), = d.send("/kick/model", "other", timeout=20)
        tally.requests += 1
        assert (a, p) == ("/kick/model", ["other"])
    assert state.read_last_model(models) == "other"
    tally.faults += 1  # the restart
    with start_daemon(tmp_path, models, pin=False) as d:
        assert _wait_status(d, "other", 2) < 2 and d.wait_for_log("the model that served last", timeout=1)
    with start_daemon(tmp_path, models, model="tiny") as d:
        assert _wait_status(d, "tiny", 2) < 2


# ---------------------------------------------------------------- listing (item 2)


def test_models_lists_only_artifacts_that_load(tmp_path, tiny_artifact, tally):
    """An artifact whose weights do not fit its config, and one whose config does not parse, present before
    the start: /kick/models leaves them out (it listed them: their format and family looked fine)."""
    import torch
    from safetensors.torch import load_file, save_file

    from kickmodel.artifact import read_metadata

    models = models_folder(tmp_path / "models", tiny_artifact)
    tensors = load_file(str(tiny_artifact))
    first = sorted(tensors)[0]
    tensors[first] = torch.zeros(tuple(s + 1 for s in tensors[first].shape))
    save_file(tensors, str(models / "shape.safetensors"), metadata=read_metadata(tiny_artifact))
    meta = read_metadata(tiny_artifact) | {"config": read_metadata(tiny_artifact)["config"].replace('"widths"', '"x"')}
    save_file(load_file(str(tiny_artifact)), str(models / "config.safetensors"), metadata=meta)
    tally.faults += 2
    with start_daemon(tmp_path, models, model="tiny") as d:
        (a, names), = d.send("/kick/models")
        tally.requests += 1
    assert a == "/kick/models" and sorted(names) == ["default", "tiny"], names


PROBE_PINGS = 200


def test_models_lists_what_loads_and_checking_never_stalls_the_daemon(tmp_path, tiny_artifact, tally):
    """Present at start, seven artifacts whose headers pass but that do not load (truncated, no weights,
    a hash mismatch, NaN, inf, overlapping offsets, a short file) and ten that load but carry 7.6 MB headers:
    /kick/models lists exactly what loads, and /kick/ping every 20 ms meanwhile is answered in 0.1 s (median), 0.5 s
    at worst (the seven were listed, and the first listing held the receive loop for seconds)."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    broken = broken_artifacts(tiny_artifact, models)
    for i in range(10):
        big_header_artifact(tiny_artifact, models / f"big{i}.safetensors", seed=i)
    tally.faults += len(broken) + 10
    loadable = sorted(["default", "tiny"] + [f"big{i}" for i in range(10)])
    with start_daemon(tmp_path, models, model="tiny") as d:
        pings: list[float] = []
        stop = threading.Event()

        def pinger():  # a fixed count (>= 4 s of probing), so the table's request count does not hang on timing
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind(("127.0.0.1", 0))
                s.settimeout(10)
                for _ in range(PROBE_PINGS):
                    if stop.is_set():
                        break
                    t = time.monotonic()
                    s.sendto(build_message("/kick/ping", []), (d.host, d.port))
                    try:
                        s.recvfrom(65536)
                        pings.append(time.monotonic() - t)
                    except TimeoutError:
                        pings.append(10.0)
                    time.sleep(0.02)

        th = threading.Thread(target=pinger, daemon=True)
        th.start()
        try:
            c = Client(d, tally)
            c.send("/kick/models")
            (a, first), = c.receive(1, 15, only="/kick/models")
            assert not set(first) & set(broken), first
            assert d.wait_for_log("checked 17 model(s) for /kick/models: 10 load, 7 do not", timeout=60), \
                d.stderr_text()
            c.send("/kick/models")
            (a, names), = c.receive(1, 5, only="/kick/models")
            c.close()
            assert sorted(names) == loadable, names
            th.join(60)
        finally:
            stop.set()
            th.join(15)
        assert len(pings) == PROBE_PINGS
        tally.requests += len(pings)
        pings.sort()
        assert pings[len(pings) // 2] <= 0.1 and pings[-1] <= 0.5, (pings[len(pings) // 2], pings[-5:])
        log = d.stderr_text()
        assert all(log.count(f"refused model {n}.safetensors") == 1 for n in broken), log


# ---------------------------------------------------------------- systemd and SIGHUP (item 15)


@pytest.fixture
def notify(tmp_path):
    path = Path(tempfile.mkdtemp(prefix="ks-notify-")) / "n.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(0.1)
    got: list[tuple[float, dict]] = []
    stop = threading.Event()
    hooks: list = []

    def listen():
        while not stop.is_set():
            try:
                data = sock.recv(4096)
            except (TimeoutError, OSError):
                continue
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            got.append((time.monotonic(), fields))
            for hook in list(hooks):
                hook(fields)

    th = threading.Thread(target=listen, daemon=True)
    th.start()
    yield str(path), got, hooks
    stop.set()
    th.join(2)
    sock.close()
    shutil.rmtree(path.parent, ignore_errors=True)


def test_sighup_sends_ready_only_once_the_reloaded_model_serves(tmp_path, models_dir, tally, notify):
    """Under a pretend systemd: STATUS= follows the kicks (at most once a second); SIGHUP with nothing
    changed reloads nothing and sends RELOADING=1 then READY=1; SIGHUP to another model sends READY=1 only
    once it serves; a changed thread count is logged as needing a restart."""
    address, got, hooks = notify
    cfg = tmp_path / "kick.toml"
    cfg.write_text('model = "default"\nthreads = 1\n')  # in the file, not on the command line (SIGHUP keeps that)
    with start_daemon(tmp_path, models_dir, config=cfg, env={"NOTIFY_SOCKET": address}, pin=False,
                      threads=None) as d:
        if "OMP_WAIT_POLICY" not in os.environ:  # idle OpenMP threads sleep (bench/contention.py says why)
            assert d.wait_for_log("OMP_WAIT_POLICY=PASSIVE", timeout=1)
        c = Client(d, tally)
        try:
            t0 = time.monotonic()
            for i in range(4):
                c.ask("/kick/generate", 2, "steps", STEPS, id=i, count=2)
                c.wait_all(timeout=20)
                time.sleep(0.3)
            time.sleep(1.3)
            statuses = [f["STATUS"] for t, f in got if t >= t0 and set(f) == {"STATUS"}]
            assert statuses and statuses[-1].endswith("8 kicks, 0 queued"), statuses
            assert len(statuses) <= time.monotonic() - t0 + 1, statuses

            def sighup(expect_model: str) -> tuple[list, list]:
                seen_at_ready: list = []

                def on_ready(fields):  # the moment READY=1 arrives: which model serves?
                    if fields.get("READY") == "1":
                        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                            s.bind(("127.0.0.1", 0))
                            s.sendto(build_message("/kick/status", []), (d.host, d.port))
                            s.settimeout(5)
                            seen_at_ready.append(parse_replies(s.recvfrom(65536)[0])[0][1][0])

                hooks.append(on_ready)
                t = time.monotonic()
                d.signal(signal.SIGHUP)
                tally.faults += 1
                deadline = time.monotonic() + 20
                while not seen_at_ready and time.monotonic() < deadline:
                    time.sleep(0.05)
                hooks.remove(on_ready)
                order = [k for tt, f in got if tt >= t for k in ("RELOADING", "READY") if f.get(k) == "1"]
                assert order == ["RELOADING", "READY"], order
                assert seen_at_ready == [expect_model], (seen_at_ready, d.stderr_text())
                return order, seen_at_ready

            loads = d.stderr_text().count("loaded model")
            sighup("default")
            assert d.wait_for_log("model default unchanged; not reloading it", timeout=2)
            assert d.stderr_text().count("loaded model") == loads  # nothing was reloaded
            cfg.write_text('model = "tiny"\nthreads = 1\n')
            sighup("tiny")
            cfg.write_text('model = "tiny"\nthreads = 2\n')
            sighup("tiny")
            assert d.wait_for_log("SIGHUP: threads changed; that takes a restart", timeout=2)
        finally:
            c.settle()
            c.close()


def test_the_pin_follows_kick_model_and_sighup_goes_back(tmp_path, tiny_artifact, tally):
    """Pinned to tiny: after /kick/model other, a new other.safetensors is swapped in and a new
    tiny.safetensors is not; SIGHUP goes back to tiny, the configured model; its models line is clipped."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    shutil.copyfile(make_artifact(tmp_path / "other.safetensors", seed=8), models / "other.safetensors")
    for i in range(40):  # a long listing for the SIGHUP log line
        os.link(models / "other.safetensors", models / f"{'x' * 100}-{i:02d}.safetensors")

    def drop(name: str, seed: int) -> None:
        art = make_artifact(tmp_path / f"new-{name}.safetensors", seed=seed)
        shutil.copyfile(art, models / f".{name}.part")
        os.replace(models / f".{name}.part", models / f"{name}.safetensors")
        tally.faults += 1

    with start_daemon(tmp_path, models, model="tiny") as d:
        (a, p), = d.send("/kick/model", "other", timeout=20)
        tally.requests += 1
        assert (a, p) == ("/kick/model", ["other"])
        swaps = d.stderr_text().count("now serving model")
        drop("tiny", 9)
        assert d.wait_for_log("still serving the pinned model other", timeout=10), d.stderr_text()
        assert d.stderr_text().count("now serving model") == swaps
        drop("other", 10)
        deadline = time.monotonic() + 10
        while d.stderr_text().count("now serving model other") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert d.stderr_text().count("now serving model other") == 2, d.stderr_text()
        d.signal(signal.SIGHUP)
        tally.faults += 1
        assert _wait_status(d, "tiny", 10) < 10
        assert d.wait_for_log("SIGHUP: config re-read", timeout=10)
        line = next(ln for ln in d.stderr_text().splitlines() if "SIGHUP: config re-read" in ln)
        assert len(line) < MAX_MESSAGE + 80 and line.endswith("more characters]"), line


# ---------------------------------------------------------------- SIGTERM at any moment


@pytest.fixture(scope="module")
def slow_models(tmp_path_factory):
    """A models folder: `a`, the bundled model, and `big`, a 117 MB latent-diffusion model (base preset, random
    weights) whose load takes seconds on one CPU thread."""
    folder = tmp_path_factory.mktemp("slow-models")
    shutil.copyfile(REPO / "kickserver" / "models" / "default.safetensors", folder / "a.safetensors")
    root_conftest().make_tiny_artifact(folder / "big.safetensors", family="latent_diffusion", preset_name="base")
    return folder


@contextlib.contextmanager
def _spawned(tmp_path: Path, models: Path, model: str, threads: int = 1):
    """(process, log, port) of `kickserver serve`, not waited for (start_daemon waits until it answers); killed on
    the way out if still running."""
    port, reply_port = free_udp_port(), free_udp_port()
    cfg = tmp_path / f"empty-{port}.toml"
    cfg.write_text("")
    log = tmp_path / f"daemon-{port}.log"
    args = [sys.executable, "-m", "kickserver", "serve", "--config", str(cfg), "--device", "cpu", "--threads",
            str(threads), "--host", "127.0.0.1", "--port", str(port), "--reply-port", str(reply_port), "--out",
            str(tmp_path / "out"), "--models", str(models), "--model", model]
    with open(log, "wb") as f:
        proc = subprocess.Popen(args, cwd=str(REPO), env=daemon_env(), stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT)
    try:
        yield proc, log, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _wait_for(proc: subprocess.Popen, log: Path, needle: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in log.read_text(errors="replace"):
        assert proc.poll() is None, f"exited {proc.returncode} before {needle!r}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {needle!r} within {timeout:.0f} s:\n{log.read_text()}"
        time.sleep(0.005)


def _stops_cleanly(proc: subprocess.Popen, log: Path) -> float:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
    took = time.monotonic() - t0
    text = log.read_text(errors="replace")
    assert rc == 0, f"exit {rc} ({took:.2f} s after SIGTERM):\n{text}"
    for needle in ("terminate called", "Traceback", "Fatal Python error"):
        assert needle not in text, text
    return took


def _held_to_the_budget(log: Path, took: float) -> None:
    """The shutdown budget, held on the daemon's own clock as its `stopped after X s` line reports it, not on this
    process's wall clock from SIGTERM to exit (took; _stops_cleanly's 30 s wait is the hang detector): on the loaded
    2-core box that took 10.9 s and failed a "< 10 s" bound once, scheduling and the interpreter's teardown with torch
    loaded included. Before the daemon serves there is no such line: exit 0 is what is held."""
    own = re.findall(r"stopped after (\d+\.\d+) s", log.read_text(errors="replace"))
    print(f"SIGTERM to exit {took:.2f} s; the daemon's own shutdown {own[-1] if own else '-'} s")
    if own:
        assert float(own[-1]) <= SHUTDOWN_BUDGET_S + 1.5, (own[-1], took)  # the budget, then the receive loop's join


@pytest.mark.parametrize("moment", ["kickserver 0", "INFO kickserver: device cpu", "serving a on udp"],
                         ids=["first log line", "start-up load", "checking the folder"])
def test_sigterm_during_start_up_exits_zero(tmp_path, slow_models, tally, moment):
    """SIGTERM right after the first log line (torch still importing: the signal killed the process,
    exit -15), during the start-up load of the served model, and once serving while the folder's other model
    (117 MB) is being checked: exit 0, no abort, within the shutdown budget."""
    with _spawned(tmp_path, slow_models, "a") as (proc, log, _):
        _wait_for(proc, log, moment)
        tally.faults += 1
        took = _stops_cleanly(proc, log)
    _held_to_the_budget(log, took)


@pytest.mark.parametrize("delay", [0.0, 0.2, 0.5])
def test_sigterm_during_a_hot_swap_exits_zero(tmp_path, slow_models, tally, delay):
    """/kick/model big (a load of seconds in the loader thread), then SIGTERM: the process aborted
    ("terminate called without an active exception", 4 of 4 on one thread) when it exited with the load still
    running; now it exits 0."""
    with _spawned(tmp_path, slow_models, "a") as (proc, log, port):
        _wait_for(proc, log, "serving a on udp")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            s.sendto(build_message("/kick/model", ["big"]), ("127.0.0.1", port))
            tally.requests += 1
            _wait_for(proc, log, "loading model big on request")
        time.sleep(delay)
        tally.faults += 1
        took = _stops_cleanly(proc, log)
    _held_to_the_budget(log, took)


# ---------------------------------------------------------------- the README's table (keep last)

README = REPO / "README.md"
TABLE_START, TABLE_END = "<!-- reliability-table:start -->", "<!-- reliability-table:end -->"


def readme_rows() -> dict[str, list[str]]:
    text = README.read_text()
    body = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)]
    rows = {}
    for line in body.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_readme_table_matches_the_suite():
    """Every case of this file has a row in README.md's table, and the figures of every case that ran in
    this session are the ones in the table (write them with bench/reliability_table.py --readme)."""
    out = os.environ.get("KICK_RELIABILITY_JSON")
    if out:
        Path(out).write_text(json.dumps([asdict(t) for t in TALLIES], indent=1) + "\n")
        return
    tree = ast.parse(Path(__file__).read_text())
    cases = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
             and f.name != "test_readme_table_matches_the_suite"}
    rows = readme_rows()
    assert {re.sub(r"\[.*\]$", "", name) for name in rows} == cases, "README table vs the cases in this file"
    for t in TALLIES:
        assert t.case in rows, f"{t.case} has no row in README.md"
        assert rows[t.case][2:6] == [str(t.faults), str(t.requests), str(t.kicks), str(t.lost)], (
            f"README.md's row for {t.case} says {rows[t.case][2:6]}, the test did faults={t.faults} "
            f"requests={t.requests} kicks={t.kicks} lost={t.lost}: run python bench/reliability_table.py --readme")
    assert all(r[5] == "0" for r in rows.values()), "a kick was lost"

