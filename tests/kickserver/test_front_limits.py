"""Bounds held through a running daemon: what one request may cost the receive loop, what a forged
source may draw, who gets a fair share, what a message without type tags may do, how much the output folder may
hold, and how much memory forged sources may take.

The receive loop's work is counted by tests/kickserver/probe_daemon.py, injected from outside the daemon (the same
counters on the code before each fix, which these tests failed): encodes, kit-map encodings, stats and listings of
files per datagram. Bounds are on those counts, never on the wall clock; loops are bounded and stop by themselves;
loopback only.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

from daemon_util import build_message, models_folder, parse_replies, start_daemon, wait_until


def probe(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _sock() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def ask(d, sock: socket.socket, address: str, *args, n: int = 1, timeout: float = 10.0) -> list:
    """Send one message from sock; the replies to it (up to n, or until timeout)."""
    sock.sendto(build_message(address, args), (d.host, d.port))
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n and (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data, _ = sock.recvfrom(65536)
        except TimeoutError:
            break
        got += parse_replies(data)
    return got


# ---------------------------------------------------------------- item 1: /kick/models with a full folder


def test_models_listing_costs_the_receive_loop_the_same_whatever_the_folder_holds(tmp_path, tiny_artifact):
    """40 artifacts that load, with 120-character names (more than one datagram holds), beside 4,200
    junk artifacts (more than the 4,096 verdicts the loader kept): 20 /kick/models each cost the receive loop at most
    one encode and two stats (it rebuilt the reply once per name dropped, 9 encodes here, and stat'ed every file of
    the folder: 8,000+), and listing again never checks an artifact again (the evicted verdicts were re-checked by
    every listing, over and over)."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    loadable = [f"a{i:03d}" + "x" * 116 for i in range(40)]
    for name in loadable:
        shutil.copy(tiny_artifact, models / f"{name}.safetensors")
    for i in range(4200):
        (models / f"junk{i:05d}.safetensors").write_bytes(b"not an artifact")
    out = tmp_path / "probe.json"
    with start_daemon(tmp_path, models, model="tiny", probe=out, ready_timeout=120,
                      extra_args=["--reply-burst-kb", "4096"]) as d:
        s = _sock()
        try:
            def listed() -> bool:
                got = ask(d, s, "/kick/models", timeout=5)
                return bool(got) and got[0][0] == "/kick/models" and loadable[0] in got[0][1]
            assert d.wait_for_log("model(s) for /kick/models:", timeout=240), d.stderr_text()[-3000:]
            assert wait_until(listed, timeout=60), d.stderr_text()[-3000:]
            time.sleep(1.0)  # let the loader finish what the listings asked of it
            before = probe(out)
            for _ in range(20):
                (address, names), = ask(d, s, "/kick/models")
                assert address == "/kick/models" and names[:2] == loadable[:2], names[:3]
            assert wait_until(lambda: probe(out).get("datagrams", 0) >= before["datagrams"] + 20)
            time.sleep(1.0)
            after = probe(out)
        finally:
            s.close()
    per_request = {k: (after[k] - before[k]) / 20 for k in ("builds", "fs")}
    assert per_request["builds"] <= 1 and per_request["fs"] <= 2, (per_request, after)
    assert after["validations"] == before["validations"], (before, after)
    assert after["validations"] <= 4096 + 41, after


# ---------------------------------------------------------------- item 2: /kick/map of a 4,096-kick map


def _mapped_model(folder: Path, n: int) -> Path:
    """A tiny mel-VAE serving a made-up kit map of n kicks with long names (tests/kickserver/test_kit_map_osc)."""
    from daemon_util import make_artifact
    from test_kit_map_osc import tiny_kit

    from kickmodel.loading import load_artifact

    folder.mkdir(parents=True, exist_ok=True)
    plain = make_artifact(folder / "plain.safetensors", seed=2, family="mel_vae")
    art = load_artifact(plain)
    art.kit_map = tiny_kit(art.config_of("vae").vae.latent_dim, n)
    art.save(folder / "mapped.safetensors")
    plain.unlink()
    return folder


def test_a_refused_kit_map_costs_the_receive_loop_no_encoding(tmp_path):
    """A 4,096-kick map (within the documented limit) is 320 KB of replies, over the default reply
    burst: 40 /kick/map from one address are all refused, and the map is encoded at most once for all of them (it
    was encoded whole for every request before the budget refused it: 40 encodings, 28-60 ms of the receive loop
    each)."""
    models = _mapped_model(tmp_path / "models", 4096)
    out = tmp_path / "probe.json"
    with start_daemon(tmp_path, models, model="mapped", probe=out, ready_timeout=120) as d:
        s = _sock()
        try:
            for _ in range(40):
                (address, (named, why)), = ask(d, s, "/kick/map")
                assert address == "/kick/error" and "the kit map is" in why, why
        finally:
            s.close()
        assert wait_until(lambda: probe(out).get("datagrams", 0) >= 41)
        got = probe(out)
    print(f"receive-loop CPU per datagram: {1000 * got['cpu_s'] / got['datagrams']:.2f} ms, "
          f"at most {1000 * got['max_cpu_s']:.2f} ms")
    assert got["map_encodes"] <= 1, got


# ---------------------------------------------------------------- item 8: senders outside --allow


class _ForgedSocket:
    """recvfrom() yields `n` datagrams from n different addresses of 10.0.0.0/8, then stops the loop."""

    def __init__(self, front, n: int) -> None:
        self.front, self.n, self.i = front, n, 0

    def recvfrom(self, size: int):
        if self.i >= self.n:
            self.front.receiving.clear()
            raise TimeoutError
        self.i += 1
        return build_message("/kick/ping", []), (f"10.{self.i >> 16 & 255}.{self.i >> 8 & 255}.{self.i & 255}", 9)


def test_senders_outside_allow_cannot_grow_the_daemons_memory(caplog):
    """Bound beyond loopback with --allow 192.168.1.0/24, 20,000 datagrams from 20,000 forged
    addresses outside it are dropped, and the table of dropped senders stays within 4,096 addresses (it kept every
    one: 2 M forged addresses took 182 MB) and the log within 1,000 first lines and one line per 1,000 after. (The
    receive loop itself, fed by a socket that forges sources: a test may only use loopback, which --allow always
    serves.)"""
    import logging
    from types import SimpleNamespace

    from kickserver.config import ServerConfig
    from kickserver.frontend import FrontEnd

    cfg = ServerConfig(host="0.0.0.0", allow=["192.168.1.0/24"])
    front = FrontEnd(SimpleNamespace(cfg=cfg))
    front.sock = _ForgedSocket(front, 20_000)
    front.receiving.set()
    with caplog.at_level(logging.WARNING, logger="kickserver"):
        front.receive_loop()
    assert front.sock.i == 20_000
    assert len(front._dropped) <= 4096, len(front._dropped)
    lines = [r for r in caplog.records if "not in --allow" in r.getMessage() or "outside --allow" in r.getMessage()]
    assert len(lines) <= 1000 + 20, len(lines)


# ---------------------------------------------------------------- item 5: type tags, and a disk budget by default


def test_work_needs_type_tags_and_the_output_folder_has_a_disk_budget_by_default(tmp_path, tiny_artifact):
    """A 16-byte /kick/generate without a type tag string made a kick (8,400x its size on disk), and
    retention was off unless configured. Now it is refused with one short /kick/error and makes nothing, while
    /kick/ping without one is still answered; with no retention option the output folder has a budget (the ledger
    is kept), and a prune says in the log what it removed, from where, and what it keeps."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models, model="tiny") as d:
        s = _sock()
        try:
            s.sendto(b"/kick/generate\0\0", (d.host, d.port))
            s.settimeout(5)
            data, _ = s.recvfrom(65536)
            (address, (named, why)), = parse_replies(data)
            assert address == "/kick/error" and named == -1 and "type tag" in why, why
            assert len(data) <= 5 * 16 // 2, len(data)
            s.sendto(b"/kick/ping\0\0", (d.host, d.port))
            data, _ = s.recvfrom(65536)
            assert parse_replies(data)[0][0] == "/kick/pong"
            (address, _), = ask(d, s, "/kick/generate", "steps", 2, timeout=60)
            assert address == "/kick/done"
        finally:
            s.close()
        kicks = sorted(d.out_dir.glob("kick_*.wav"))
        assert len(kicks) == 1, kicks
        assert wait_until(lambda: (d.out_dir / ".kickserver-ledger.json").is_file(), timeout=10), \
            "no disk budget by default: retention off"
    with start_daemon(tmp_path, models, model="tiny", extra_args=["--max-mb", "0.03"]) as d:
        s = _sock()
        try:
            for seed in (1, 2, 3):
                (address, _), = ask(d, s, "/kick/generate", "steps", 2, "seed", seed, timeout=60)
                assert address == "/kick/done"
        finally:
            s.close()
        assert d.wait_for_log("retention removed", timeout=10), d.stderr_text()
        line = next(x for x in d.stderr_text().splitlines() if "retention removed" in x)
        assert str(d.out_dir) in line and "kick_" in line and "under 0.03 MB (max_mb" in line, line


# ---------------------------------------------------------------- item 3: reflection; item 4: fair shares


def _bound(n: int, first: int = 2) -> list[socket.socket]:
    """n sockets on 127.0.0.<first>.. (other loopback addresses stand for forged sources on a LAN bind)."""
    socks = []
    for i in range(first, first + n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind((f"127.0.0.{i}", 0))
        socks.append(s)
    return socks


def _drain(socks: list[socket.socket], quiet: float = 1.0) -> list[bytes]:
    """Every datagram the sockets hold, until none came for `quiet` seconds (bounded: at most 100,000)."""
    import selectors

    got: list[bytes] = []
    with selectors.DefaultSelector() as sel:
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        while len(got) < 100_000:
            ready = sel.select(quiet)
            if not ready:
                break
            for key, _ in ready:
                got.append(key.fileobj.recv(65536))
    return got


def test_the_kit_map_goes_only_to_a_proven_return_path_and_unproven_replies_share_one_budget(tmp_path):
    """With --return-proof all (loopback standing for a LAN bind): 30 addresses that never echo a
    token ask /kick/map once each and get one /kick/map/proof each, at most 5 bytes out per byte in, both copies
    counted (each got the whole map: 372x its request); a wrong token is refused; 40 such addresses asking
    /kick/status 40 times each draw replies within one pooled budget (4 x a 40 KB burst) in all, not what each
    address's budget holds (all of the 500 KB asked for); a client that echoes its token (kickserver.client does)
    gets the whole map, even after the flood spent the pooled budget."""
    models = _mapped_model(tmp_path / "models", 200)
    args = ["--return-proof", "all", "--reply-burst-kb", "40", "--reply-rate-kb", "0.001"]
    with start_daemon(tmp_path, models, model="mapped", extra_args=args, ready_timeout=120) as d:
        forged = _bound(30)
        try:
            sent = 0
            for s in forged:
                data = build_message("/kick/map", [])
                s.sendto(data, (d.host, d.port))
                sent += len(data)
            got = _drain(forged)
        finally:
            for s in forged:
                s.close()
        replies = [parse_replies(g)[0] for g in got]
        assert {a for a, _ in replies} == {"/kick/map/proof"} and len(replies) == 30, replies[:3]
        assert 2 * sum(map(len, got)) <= 5 * sent, (sum(map(len, got)), sent)

        with d.socket() as s:  # a wrong token: refused
            (address, (token,)), = ask(d, s, "/kick/proof")
            (address, (_, why)), = ask(d, s, "/kick/proof", (token + 1) % (1 << 24))
            assert address == "/kick/error" and "wrong token" in why, why

        flood = _bound(40, first=40)
        try:
            for _ in range(40):
                for s in flood:
                    s.sendto(build_message("/kick/status", []), (d.host, d.port))
            got = _drain(flood)
        finally:
            for s in flood:
                s.close()
        drawn = 2 * sum(map(len, got))
        assert 0 < drawn <= 4 * 40 * 1024 + 4096, drawn
        replies = d.send("/kick/map", expect=1000, timeout=5)
        parts = replies[0][1][1]
        assert [a for a, _ in replies].count("/kick/map") == parts and replies[-1][0] == "/kick/map/axes", \
            [a for a, _ in replies]


def test_forged_addresses_share_one_queue_share_and_cannot_starve_a_proven_client(tmp_path, tiny_artifact):
    """With --return-proof all: 16 addresses that never prove themselves each ask for 16 kicks;
    a client that proved its address then asks for one kick: it is accepted (it was busy 40 of 42 times: 16
    addresses held 16 shares and filled the queue) and answered after at most the batch running and one batch of
    theirs (kicks made meanwhile, counted by /kick/status), while they together hold one share (32 kicks) and are
    told so in their busy replies."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    args = ["--return-proof", "all", "--max-batch", "4"]
    with start_daemon(tmp_path, models, model="tiny", extra_args=args) as d:
        flood = _bound(16)
        mine = _sock()
        try:
            for s in flood:
                s.sendto(build_message("/kick/generate", [16, "steps", 8]), (d.host, d.port))
            (address, (token,)), = ask(d, mine, "/kick/proof")
            assert address == "/kick/proof"
            mine.sendto(build_message("/kick/proof", [token]), (d.host, d.port))
            (_, status), = ask(d, mine, "/kick/status")
            queued, made_before = status[2], status[3]
            assert queued <= 32, status
            mine.sendto(build_message("/kick/generate", ["steps", 2, "id", 7]), (d.host, d.port))
            got = []
            deadline = time.monotonic() + 120
            while not got and time.monotonic() < deadline:
                mine.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    data, _ = mine.recvfrom(65536)
                except TimeoutError:
                    break
                got = [r for r in parse_replies(data) if r[0] in ("/kick/done", "/kick/error")]
            assert got and got[0][0] == "/kick/done" and got[0][1][0] == 7, got
            (_, status), = ask(d, mine, "/kick/status")
            made_meanwhile = status[3] - made_before - 1
            assert made_meanwhile <= 3 * 4, (made_before, status)
            busy = [parse_replies(g)[0] for g in _drain(flood, quiet=0.5)]
        finally:
            for s in flood + [mine]:
                s.close()
        refusals = [r for r in busy if r[0] == "/kick/error"]
        assert refusals and all("have not proved their address" in r[1][1] for r in refusals), refusals[:2]
