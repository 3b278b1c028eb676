"""A recorded OSC exchange with the real daemon over every route: what the daemon answered, datagram by datagram.

    python tests/kickserver/osc_exchange.py            # record tests/fixtures/osc_exchange.json anew
    python tests/kickserver/osc_exchange.py --check    # replay it and say which replies differ

One daemon (the shipped kick-synth model, which has samplers, dials, controls in units and a kit map; the fixture
waveform model to swap to) on loopback with fixed settings, and a fixed script: ping, status, models, controls,
generate (count, seeds, dials, units, steps, samplers, ids), variation, interpolate, map, near, locate, model select,
and refusals (junk, malformed OSC, bundles, bad and out-of-range arguments, unknown routes, busy). Every step is sent
from one socket and followed by a /kick/ping on it: the replies up to that ping's pong are the step's (a step that
queues kicks first waits for `expect` replies, which come from the worker after the pong could).

What legitimately varies between runs is normalised in each reply (`normalise`): the temporary folder's path and the
resident memory (and a time-stamped file name's stamp and -N, were the daemon run with name_pattern kick_{time}_{label};
by default a kick's name says its sound, kick_Eb1_clicky_1.wav, the same in every run, and is recorded as it is).
Everything else, type tags and padding included, must stay byte for byte (tests/kickserver/test_osc_exchange.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/, for daemon_util

from daemon_util import REPO, models_folder, start_daemon  # noqa: E402

from kickserver.client import Conversation, build_message, parse_replies  # noqa: E402
from kickserver.ratelimit import KEY_ENV, ReturnPaths  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "osc_exchange.json"
KICK_SYNTH = REPO / "kickserver" / "models" / "kick-synth.safetensors"
WAVEFORM = REPO / "tests" / "fixtures" / "models" / "waveform-small-2026-12-03.safetensors"
SOURCE = REPO / "tests" / "fixtures" / "kicks" / "samples_bd_fat.flac"
# the token key, so the tokens are the same in every run (kickserver.ratelimit.KEY_ENV); --return-proof all makes the
# recording client (127.0.0.1) prove its return path before it gets the kit map
PROOF_KEY = "00" * 32
SETTINGS = ["--return-proof", "all", "--max-steps", "50", "--queue-limit", "8", "--client-queue-limit", "6",
            "--max-batch", "4", "--reply-burst-kb", "1024"]
STEP_TIMEOUT = 120.0  # a step's replies; only reached when the daemon does not answer as recorded


def raw(address: bytes, tags: bytes, payload: bytes = b"") -> bytes:
    """A message written by hand (tags this server refuses, broken framing): OSC strings padded with NULs."""
    def pad(b: bytes) -> bytes:
        return b + b"\0" * (4 - len(b) % 4)

    return pad(address) + pad(tags) + payload


def bundle(*elements: bytes) -> bytes:
    return b"#bundle\0" + b"\0" * 7 + b"\1" + b"".join(struct.pack(">i", len(e)) + e for e in elements)


def msg(address: str, *args: Any) -> bytes:
    return build_message(address, args)


TOKEN = ReturnPaths(key=bytes.fromhex(PROOF_KEY)).token("127.0.0.1")
G = "/kick/generate"
V = "/kick/variation"
I_ = "/kick/interpolate"
N = "/kick/near"


def script() -> list[tuple[str, bytes, int]]:
    """(what it is, the datagram, replies to wait for before the ping barrier) in order."""
    s: list[tuple[str, bytes, int]] = [
        ("ping", msg("/kick/ping"), 1),
        ("status", msg("/kick/status"), 0),
        ("models", msg("/kick/models"), 1),  # it may wait for the loader's checks
        ("controls", msg("/kick/controls"), 0),
        ("controls ranges", msg("/kick/controls", "ranges"), 0),
        ("generate one", msg(G, "seed", 1, "id", 1), 1),
        ("generate two with dials", msg(G, 2, "seed", 10, "id", 2, "decay", 0.7, "pitch", 0.3, "click", 0.5), 2),
        ("generate in units", msg(G, "seed", 20, "id", 3, "pitch_hz", 50.0, "decay_s", 0.4, "click_db", -30.0), 1),
        ("generate a note", msg(G, "seed", 21, "id", 17, "note", "G1", "decay", 0.4), 1),
        ("generate a note and pitch_hz", msg(G, "note", 33, "pitch_hz", 55.0, "id", 18), 0),
        ("generate steps and sampler", msg(G, "seed", 30, "id", 4, "steps", 3, "sampler", "ddim"), 1),
        ("generate, server id", msg(G, "seed", 40, "steps", 2, "sampler", "ddpm"), 1),
        ("generate count key, Pd floats", msg(G, "seed", 60.0, "count", 3.0, "id", 6, "decay", 1), 3),
        ("generate over max_batch", msg(G, 6, "seed", 70, "id", 7, "steps", 4), 6),
        ("variation", msg(V, "src.flac", "seed", 7, "strength", 0.3, "id", 8), 1),
        ("variation at 0, source key", msg(V, "source", "src.flac", "seed", 8, "strength", 0, "id", 9), 1),
        ("variation two with units", msg(V, "src.flac", "count", 2, "seed", 9, "pitch_hz", 60.0, "id", 10), 2),
        ("interpolate seeds", msg(I_, "a", 1, "b", 2, "count", 3, "id", 11), 3),
        ("interpolate seed to file", msg(I_, "a", 1, "b", "src.flac", "t", 0.25, "id", 12, "steps", 4), 1),
        ("interpolate default count, server id", msg(I_, "a", 3, "b", 4, "sampler", "ddim", "click", 0.2), 5),
        ("map, not proved", msg("/kick/map"), 0),
        ("proof: ask", msg("/kick/proof"), 0),
        ("proof: a wrong token", msg("/kick/proof", (TOKEN + 1) % (1 << 24)), 0),
        ("proof: the token (no reply)", msg("/kick/proof", TOKEN), 0),
        ("map", msg("/kick/map"), 0),
        ("near", msg(N, 0.5, 0.5, "seed", 5, "count", 2, "id", 13), 2),
        ("near spread and a dial (ignored)", msg(N, 0.2, 0.8, "spread", 0.5, "seed", 6, "pitch", 0.9, "id", 14), 1),
        ("near with a unit", msg(N, 0.7, 0.3, "seed", 7, "pitch_hz", 55.0, "id", 15), 1),
        ("near ints, server id", msg(N, 0, 1, "seed", 16, "steps", 3), 1),
        ("locate", msg("/kick/locate", "src.flac"), 1),
        ("kit", msg("/kick/kit", "seed", 5, "layers", 2, "robins", 2, "note", "A1", "id", 16), 1),
        ("kit from a source, a key",
         msg("/kick/kit", "source", "src.flac", "robins", 3, "layers", 1, "key", "Am", "seed", 9), 1),
        # refusals: not OSC (no reply), malformed OSC, bundles
        ("junk", b"hello world!", 0),
        ("a lone slash", b"/\0\0\0", 0),
        ("no type tags", b"/kick/ping\0\0xyz\0", 0),
        ("an unsupported type tag", raw(b"/kick/generate", b",c", b"\0\0\0a"), 0),
        ("a blob", msg(G, "id", 40, "seed", ("b", b"xx")), 0),
        ("a bool and a nil", msg(G, True, None), 0),
        ("int64 and float64", msg(G, "seed", ("h", 80), "id", ("h", 41), "decay", ("d", 0.25)), 1),
        ("a bundle", bundle(msg("/kick/ping"), msg("/kick/controls"), msg(G, "foo", 1), msg(G, "bar", 2)), 1),
        ("a nested bundle", bundle(bundle(msg("/kick/controls")), b"junk"), 0),
        ("an empty bundle", bundle(), 0),
        ("a bundle of 33", bundle(*[msg("/kick/ping")] * 33), 0),
        ("a broken bundle", b"#bundle\0" + b"\0" * 8 + b"\0\0\0\x09", 0),
        ("unknown route", msg("/kick/gen", 1), 0),
        ("unknown route, long", msg("/kick/" + "x" * 80), 0),
        # bad arguments
        ("generate keys without values", msg(G, "foo", "bar"), 0),
        ("generate count 0", msg(G, 0), 0),
        ("generate count 17", msg(G, 17, "id", 42), 0),
        ("generate count twice", msg(G, 2, "count", 2), 0),
        ("generate odd pairs", msg(G, "seed"), 0),
        ("generate key twice", msg(G, "seed", 1, "seed", 2), 0),
        ("generate key not a string", msg(G, 1, 2, 3), 0),
        ("generate seed -1", msg(G, "seed", -1, "id", 43), 0),
        ("generate seed 1.5", msg(G, "seed", 1.5), 0),
        ("generate seed + count past int32", msg(G, 2, "seed", 2**31 - 1), 0),
        ("generate steps 0", msg(G, "steps", 0), 0),
        ("kit layers 9", msg("/kick/kit", "layers", 9, "id", 44), 0),
        ("kit robins 0", msg("/kick/kit", "robins", 0, "id", 45), 0),
        ("kit a note that is not one", msg("/kick/kit", "note", "H2", "id", 46), 0),
        ("kit a note past pitch_hz", msg("/kick/kit", "note", 100, "id", 47), 0),
        ("kit note and pitch_hz", msg("/kick/kit", "note", "A1", "pitch_hz", 55.0, "id", 48), 0),
        ("kit a source outside the roots", msg("/kick/kit", "source", "/etc/passwd", "id", 49), 0),
        ("generate steps 51", msg(G, "steps", 51, "id", 44), 0),
        ("generate unknown sampler", msg(G, "sampler", "euler"), 0),
        ("generate dial 1.5", msg(G, "decay", 1.5), 0),
        ("generate dial nan", msg(G, "decay", float("nan")), 0),
        ("generate dial inf", msg(G, "decay", float("inf"), "id", 45), 0),
        ("generate dial a string", msg(G, "pitch", "high"), 0),
        ("generate unit out of range", msg(G, "pitch_hz", 300.0, "id", 46), 0),
        ("generate unit beside its dial", msg(G, "pitch", 0.5, "pitch_hz", 50.0), 0),
        ("generate unknown key", msg(G, "colour", 1), 0),
        ("generate a variation key", msg(G, "strength", 0.5), 0),
        ("generate id a string", msg(G, "id", "x"), 0),
        ("generate id -5", msg(G, "id", -5), 0),
        ("generate long string", msg(G, "sampler", "d" * 300, "id", 47), 0),
        ("generate NUL in string", msg(G, "sampler", "dd\0im"), 0),
        ("generate 65 arguments", msg(G, *([1] * 65)), 0),
        ("ping with an argument", msg("/kick/ping", 1), 0),
        ("status with arguments", msg("/kick/status", "x", 2), 0),
        ("model without a name", msg("/kick/model"), 0),
        ("model not a name", msg("/kick/model", "../etc"), 0),
        ("model name too long", msg("/kick/model", "m" * 129), 0),
        ("model not there", msg("/kick/model", "nope"), 0),
        ("variation without a source", msg(V), 0),
        ("variation empty source", msg(V, "", "id", 48), 0),
        ("variation missing file", msg(V, "missing.wav", "id", 49), 0),
        ("variation outside the roots", msg(V, "/etc/hostname"), 0),
        ("variation dot-dot", msg(V, "../src.flac"), 0),
        ("variation not a sound file", msg(V, "notes.txt", "id", 50), 0),
        ("variation strength 2", msg(V, "src.flac", "strength", 2.0), 0),
        ("variation spread", msg(V, "src.flac", "spread", 0.1), 0),
        ("interpolate without b", msg(I_, "a", 1, "id", 51), 0),
        ("interpolate positional", msg(I_, 5, "a", 1), 0),
        ("interpolate t and count", msg(I_, "a", 1, "b", 2, "t", 0.5, "count", 3), 0),
        ("interpolate t 2", msg(I_, "a", 1, "b", 2, "t", 2.0), 0),
        ("interpolate a -1", msg(I_, "a", -1, "b", 2), 0),
        ("interpolate a 1.5", msg(I_, "a", 1.5, "b", 2), 0),
        ("interpolate a empty", msg(I_, "a", "", "b", 2), 0),
        ("interpolate ddpm", msg(I_, "a", 1, "b", 2, "sampler", "ddpm", "id", 52), 0),
        ("interpolate missing file end", msg(I_, "a", "src.flac", "b", "gone.wav", "id", 53), 0),
        ("interpolate count 17", msg(I_, "a", 1, "b", 2, "count", 17), 0),
        ("interpolate unknown key", msg(I_, "a", 1, "b", 2, "strength", 0.1), 0),
        ("near without y", msg(N, 0.5), 0),
        ("near x a string", msg(N, "x", 0.5), 0),
        ("near x 2", msg(N, 2.0, 0.5, "id", 54), 0),
        ("near spread 2", msg(N, 0.5, 0.5, "spread", 2.0), 0),
        ("near strength", msg(N, 0.5, 0.5, "strength", 0.1), 0),
        ("locate without a source", msg("/kick/locate"), 0),
        ("locate two sources", msg("/kick/locate", "a.wav", "b.wav"), 0),
        ("locate missing file", msg("/kick/locate", "missing.wav"), 0),
        ("locate empty", msg("/kick/locate", ""), 0),
        ("map with an argument", msg("/kick/map", 1), 0),
        ("controls with an argument", msg("/kick/controls", "x"), 0),
        ("models with an argument", msg("/kick/models", 1), 0),
        ("busy: over the host's limit", msg(G, 7, "id", 55), 0),
        ("busy: over the queue's limit", msg(G, 9, "id", 56), 0),
        ("busy: a kit priced as its hits", msg("/kick/kit", "layers", 4, "robins", 2, "id", 50), 0),
        # another model: no map, no units
        ("select the waveform model", msg("/kick/model", "waveform"), 1),
        ("status after the swap", msg("/kick/status"), 0),
        ("controls of the waveform model", msg("/kick/controls"), 0),
        ("control ranges of the waveform model", msg("/kick/controls", "ranges"), 0),
        ("a note it does not take", msg(G, "note", "A1", "id", 62), 0),
        ("map without one", msg("/kick/map"), 0),
        ("near without a map", msg(N, 0.5, 0.5, "id", 57), 0),
        ("locate without a map", msg("/kick/locate", "src.flac"), 0),
        ("a unit it does not take", msg(G, "pitch_hz", 50.0, "id", 58), 0),
        ("a kit's note it does not take", msg("/kick/kit", "note", "A1", "id", 61), 0),
        ("generate on the waveform model", msg(G, "seed", 3, "steps", 2, "id", 59, "click", 0.9), 1),
        ("interpolate on the waveform model", msg(I_, "a", 1, "b", 2, "t", 0.0, "steps", 2, "id", 60), 1),
        ("select it again", msg("/kick/model", "waveform"), 0),
        ("back to kick-synth", msg("/kick/model", "kick-synth"), 1),
        ("controls after the swap back", msg("/kick/controls"), 0),
        ("status at the end", msg("/kick/status"), 0),
    ]
    return s


# ------------------------------------------------------------------ normalising


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (4 - len(b) % 4)


def encode(address: str, tags: str, args: list[Any]) -> bytes:
    """An OSC message from its parts, written here (not by the code under test): i, f, s only, as replies are."""
    out = _pad(address.encode()) + _pad(("," + tags).encode())
    for tag, a in zip(tags, args, strict=True):
        if tag == "i":
            out += struct.pack(">i", a)
        elif tag == "f":
            out += struct.pack(">f", a)
        elif tag == "s":
            out += _pad(a.encode())
        else:
            raise ValueError(f"a reply carries the type tag {tag!r}")
    return out


def _tags(data: bytes) -> str:
    start = (data.index(b"\0") // 4 + 1) * 4
    end = data.index(b"\0", start)
    return data[start + 1:end].decode()


def normalise(data: bytes, roots: list[str]) -> bytes:
    """The datagram with what varies between runs replaced: the temporary folder (any of `roots`) by $TMP, a
    time-stamped file name's stamp by STAMP (and its -N suffix dropped), a memory figure by N. Unchanged bytes when
    none occurs."""
    replies = parse_replies(data)
    if len(replies) != 1 or replies[0][0] == "<not OSC>":
        return data
    address, args = replies[0]
    changed = False
    out = []
    for a in args:
        if isinstance(a, str):
            b = a
            for r in roots:
                b = b.replace(r, "$TMP")
            b = re.sub(r"kick_\d{8}-\d{6}_([^/]*?)(-\d+)?\.wav", r"kick_STAMP_\1.wav", b)
            b = re.sub(r"RSS \d+ MB", "RSS N MB", b)
            b = re.sub(r"(reserved|peak|used|of) \d+ MB", r"\1 N MB", b)
            changed |= b != a
            a = b
        out.append(a)
    if not changed:
        return data
    return encode(address, _tags(data), out)


def show(data: bytes) -> str:
    """A datagram for a person: address and arguments, or its length when it is not one message."""
    replies = parse_replies(data)
    if len(replies) != 1 or replies[0][0] == "<not OSC>":
        return f"<{len(data)} bytes>"
    address, args = replies[0]
    return " ".join([address] + [repr(a) for a in args])


# ------------------------------------------------------------------ running


def prepare(tmp: Path) -> tuple[Path, Path]:
    """(models folder, out folder): kick-synth and the waveform model; a source file and a text file in out."""
    models = models_folder(tmp / "models")
    shutil.copy2(KICK_SYNTH, models / "kick-synth.safetensors")
    shutil.copy2(WAVEFORM, models / "waveform.safetensors")
    out = tmp / "out"
    out.mkdir()
    shutil.copy2(SOURCE, out / "src.flac")
    (out / "notes.txt").write_text("not a sound\n")
    return models, out


def run(tmp: Path, steps: list[tuple[str, bytes, int]]) -> tuple[list[dict[str, Any]], list[bytes], list[bytes]]:
    """Start the daemon in tmp and send every step: ([{what, sent, expect, replies (hex), shown}], then every reply
    but the pongs as the client got it and as the reply port got it, normalised)."""
    tmp = Path(tmp)
    models, out = prepare(tmp)
    roots = sorted({str(tmp), os.path.realpath(tmp)}, key=len, reverse=True)
    record = []
    got_all: list[bytes] = []
    seen_all: list[bytes] = []
    with start_daemon(tmp, models, model="kick-synth", out_dir=out, extra_args=SETTINGS,
                      env={KEY_ENV: PROOF_KEY}) as d, \
            d.client().open() as conv, d.reply_listener() as listener:
        assert conv.sock.getsockname()[1] != d.reply_port
        copies = Conversation(listener, conv.addr)
        # pongs to the pings that start_daemon sent while the daemon started may still reach the reply port: skip
        # every datagram there up to the refusal of a request sent now
        _sync(conv, copies, "sync.wav")
        for what, data, expect in steps:
            conv.send(data)
            got = _read(conv, expect)
            conv.send(msg("/kick/ping"))  # the barrier: the step's replies are those before its pong
            got += _read(conv, pongs=1)
            # the copies sent to the reply port: another thread's replies may come between a reply to the client and
            # its copy (the worker's, the loader's), so they are compared as a whole, not step by step
            seen_all += _read(copies, pongs=1 + sum(map(_is_pong, got)))
            got = [normalise(g, roots) for g in got]
            got_all += got
            record.append({"what": what, "sent": data.hex(), "expect": expect, "replies": [g.hex() for g in got],
                           "shown": [show(g) for g in got]})
        seen_all += _sync(conv, copies, "end.wav")
        got_all = [g for g in got_all if not _is_pong(g)]
        seen_all = [n for g in seen_all if not _is_pong(n := normalise(g, roots))]
        # a thread preempted between a reply's two sends may send the copy later still: wait for what is missing
        while Counter(got_all) - Counter(seen_all) and (dg := copies.datagram(STEP_TIMEOUT)) is not None:
            if not _is_pong(dg):
                seen_all.append(normalise(dg, roots))
    return record, got_all, seen_all


def _sync(conv: Conversation, copies: Conversation, name: str) -> list[bytes]:
    """Refuse /kick/locate name and read its refusal on both sockets; what the reply port got before it."""
    conv.send(msg("/kick/locate", name))
    conv.datagram(STEP_TIMEOUT)
    before = []
    while (dg := copies.datagram(STEP_TIMEOUT)) is not None and name.encode() not in dg:
        before.append(dg)
    return before


def _read(conv: Conversation, expect: int = 0, *, pongs: int = 0) -> list[bytes]:
    """`expect` datagrams, or (pongs) every datagram up to the pongs-th /kick/pong, which is dropped."""
    got: list[bytes] = []
    while pongs or len(got) < expect:
        dg = conv.datagram(STEP_TIMEOUT)
        if dg is None:
            return got + [b"<timed out>"]
        if pongs and _is_pong(dg):
            pongs -= 1
            if not pongs:
                return got
        got.append(dg)
    return got


def _is_pong(data: bytes) -> bool:
    return parse_replies(data)[0][0] == "/kick/pong"


def load() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def recorded_steps() -> list[tuple[str, bytes, int]]:
    """The script as recorded in the fixture: (what, datagram, expect)."""
    return [(s["what"], bytes.fromhex(s["sent"]), s["expect"]) for s in load()["steps"]]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    with tempfile.TemporaryDirectory(prefix="osc-exchange-") as tmp:
        record, got, seen = run(Path(tmp), recorded_steps() if check else script())
    if sorted(got) != sorted(seen):
        print("the reply port did not get a copy of every reply")
        return 1
    if check:
        want = load()["steps"]
        bad = [(w["what"], w["shown"], g["shown"]) for w, g in zip(want, record, strict=True)
               if w["replies"] != g["replies"]]
        for what, w, g in bad:
            print(f"{what}:\n  recorded {w}\n  now      {g}")
        return 1 if bad else 0
    FIXTURE.write_text(json.dumps({"about": "tests/kickserver/osc_exchange.py: the daemon's replies over every route",
                                   "settings": SETTINGS, "steps": record}, indent=1) + "\n")
    print(f"recorded {len(record)} steps, {sum(len(r['replies']) for r in record)} replies in {FIXTURE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
