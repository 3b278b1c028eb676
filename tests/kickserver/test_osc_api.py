"""Parsing and reply building without a socket."""

from __future__ import annotations

import pytest

from kickserver import osc_api
from kickserver.osc_api import Controls, Generate, Interpolate, Limits, RequestError, Variation, parse

LIM = Limits(controls=("decay", "pitch"), max_steps=200)


def test_addresses_constant():
    assert osc_api.ADDRESSES == ("/kick/ping", "/kick/generate", "/kick/variation", "/kick/status", "/kick/models",
                                 "/kick/model", "/kick/interpolate", "/kick/controls", "/kick/map", "/kick/near",
                                 "/kick/locate", "/kick/proof", "/kick/kit")
    assert {"/kick/controls", "/kick/map", "/kick/map/axes", "/kick/locate"} <= set(osc_api.REPLY_ADDRESSES)


def test_interpolate_forms():
    lim = Limits(controls=("decay",), samplers=("ddim", "ddpm", "dpmpp_2m"))
    r = parse("/kick/interpolate", ["a", 7, "b", "k.wav", "decay", 0.2, "id", 3.0, "steps", 4], lim)
    assert r == Interpolate(id=3, a=7, b="k.wav", ts=[0, 0.25, 0.5, 0.75, 1], steps=4, controls={"decay": 0.2})
    assert [r.reply_seed(i) for i in range(5)] == [7, -1, -1, -1, -1]  # b is a file: no seed makes its kick
    r = parse("/kick/interpolate", ["b", 9.0, "a", "/x/k.wav", "t", 1], lim)  # Pd's floats; an int t
    assert (r.a, r.b, r.ts, r.reply_seed(0)) == ("/x/k.wav", 9, [1.0], 9)
    assert parse("/kick/interpolate", ["a", 1, "b", 2, "count", 1], lim).ts == [0.5]
    assert parse("/kick/interpolate", ["a", 1, "b", 2, "count", 16], lim).ts == [i / 15 for i in range(16)]
    r = parse("/kick/interpolate", ["a", 1, "b", 2, "count", 3], lim)
    assert r.ts == [0.0, 0.5, 1.0] and [r.reply_seed(i) for i in range(3)] == [1, -1, 2]
    assert parse("/kick/interpolate", ["a", 0, "b", 2**31 - 1, "t", 0.0], lim).reply_seed(0) == 0


@pytest.mark.parametrize("args,needle", [
    (["a", 1], "needs b"),
    (["a", 1, "b", 2, "t", 0.5, "count", 2], "not both"),
    (["a", True, "b", 2], "unsupported type"),
    (["a", 2.5, "b", 2], "a must be a seed"),
    (["a", float("inf"), "b", 2], "a must be a seed"),
    (["a", 1, "b", 2**31], "b as a seed must be within"),
    (["a", "", "b", 2], "a is an empty file name"),
    (["a", 1, "b", 2, "strength", 0.5], "unknown key 'strength'"),
    (["a", 1, "b", 2, "sampler", "euler"], "unknown sampler"),
    (["a", 1, "b", 2, "a", 3], "given twice"),
])
def test_interpolate_refusals_echo_the_id(args, needle):
    with pytest.raises(RequestError, match=needle) as e:
        parse("/kick/interpolate", args + ["id", 8], Limits(samplers=("ddim",)))
    assert e.value.id == 8


def test_controls_request_and_reply():
    assert parse("/kick/controls", [], LIM) == Controls()
    with pytest.raises(RequestError, match="takes no arguments"):
        parse("/kick/controls", ["decay"], LIM)
    assert osc_api.controls(["decay", "pitch"], True) == osc_api.build(
        "/kick/controls", [("s", "decay"), ("s", "pitch"), ("s", "map")])
    assert osc_api.controls([], False) == osc_api.build("/kick/controls", [("s", "no-map")])
    many = osc_api.controls([f"control{i}" + "x" * 60 for i in range(100)], False)
    assert len(many) <= osc_api.MAX_DATAGRAM and many.rstrip(b"\0").endswith(b"no-map")  # the word stays last


def test_near_and_locate_requests():
    """/kick/near x y then key/value pairs; /kick/locate one source; /kick/map nothing."""
    lim = Limits(controls=("decay",), samplers=("ddim",))
    r = parse("/kick/near", [0.25, 1, "count", 3.0, "spread", 0, "seed", 4, "id", 2, "decay", 0.5, "steps", 3], lim)
    assert r == osc_api.Near(id=2, count=3, seed=4, steps=3, controls={"decay": 0.5}, x=0.25, y=1.0, spread=0.0)
    assert parse("/kick/near", [0, 0.5], lim).spread == osc_api.NEAR_DEFAULT_SPREAD == 0.2
    with pytest.raises(RequestError, match="x must be within 0..1, got 1.5") as e:
        parse("/kick/near", [1.5, 0.5, "id", 3], lim)
    assert e.value.id == 3
    with pytest.raises(RequestError, match="sampler"):
        parse("/kick/near", [0.5, 0.5, "sampler", "euler"], lim)
    assert parse("/kick/locate", ["k.wav"], lim) == osc_api.Locate("k.wav")
    assert parse("/kick/map", [], lim) == osc_api.KitMap()
    with pytest.raises(RequestError, match="takes no arguments"):
        parse("/kick/map", [1], lim)


def test_map_replies_split_under_the_datagram_limit_and_axes_read_their_correlations():
    names = [f"{i:04d}" + "n" * (i % 61) for i in range(700)]
    points = [(i / 700, 1 - i / 700) for i in range(700)]
    datagrams = osc_api.kit_map(points, names)
    assert len(datagrams) > 1 and all(len(d) <= osc_api.MAX_DATAGRAM for d in datagrams)
    got = []
    for part, d in enumerate(datagrams, start=1):
        address, args = osc_api.decode_message(d)
        assert address == "/kick/map" and args[:2] == [part, len(datagrams)]
        got += args[2:]
    assert got[2::3] == names
    # as full as the limit allows: each part but the last would overflow with the next point
    sizes = [len(d) for d in datagrams[:-1]]
    assert min(sizes) > osc_api.MAX_DATAGRAM - 3 * 80
    label = osc_api.axis_label
    assert label({"decay": 0.5, "pitch": -0.6, "click": None}, 100) == "lower pitch ->"
    assert label({"decay": 0.31, "pitch": 0.1, "click": 0.0}, 100) == "longer decay ->"
    assert label({"decay": 0.29, "pitch": 0.1, "click": -0.2}, 100) == "mixed"  # under 0.3
    assert label({"decay": 0.4, "pitch": 0.1, "click": 0.2}, 20) == "mixed"  # under 2 / sqrt(20) = 0.45: chance
    assert label({"decay": None, "pitch": None, "click": -0.9}, 30) == "less click ->"
    assert label({"decay": None, "pitch": None, "click": None}, 30) == "mixed"


def test_generate_forms():
    assert parse("/kick/generate", [], LIM) == Generate()
    assert parse("/kick/generate", [3.0, "decay", 1, "id", 5], LIM) == Generate(id=5, count=3,
                                                                               controls={"decay": 1.0})
    assert parse("/kick/generate", ["count", 2, "seed", 0, "steps", 200, "sampler", "ddpm"], LIM) == Generate(
        count=2, seed=0, steps=200, sampler="ddpm")
    with pytest.raises(RequestError, match="seed \\+ count"):
        parse("/kick/generate", [2, "seed", 2**31 - 1], LIM)


def test_variation_forms():
    assert parse("/kick/variation", ["k.wav"], LIM) == Variation(source="k.wav")
    v = parse("/kick/variation", ["source", "k.wav", "strength", 1, "pitch", 0.5], LIM)
    assert (v.source, v.strength, v.controls) == ("k.wav", 1.0, {"pitch": 0.5})
    with pytest.raises(RequestError) as e:
        parse("/kick/variation", ["k.wav", "id", 4, "strength", float("nan")], LIM)
    assert e.value.id == 4


def test_max_steps_follows_the_server_option():
    assert parse("/kick/generate", ["steps", 1000], Limits(max_steps=1000)).steps == 1000


def test_models_reply_fits_one_datagram():
    data = osc_api.models([f"model-{i:03d}-" + "x" * 40 for i in range(200)])
    assert len(data) <= osc_api.MAX_DATAGRAM
    assert data.startswith(b"/kick/models\0")


@pytest.mark.parametrize("address,args", [
    ("/kick/generate", ["id", 7, "decay", b"\x00blob"]),  # a blob: unsupported type
    ("/kick/generate", ["decay", None, "id", 7]),  # nil before the id
    ("/kick/generate", [2, "sampler", "x" * 300, "id", 7.0]),  # a long string; the id as a Pd float
    ("/kick/variation", ["k.wav", "id", 7, "strength", True]),
    ("/kick/variation", ["x" * 300, "id", 7]),
])
def test_type_and_length_refusals_echo_the_id(address, args):
    with pytest.raises(RequestError) as e:
        parse(address, args, LIM)
    assert e.value.id == 7, e.value.reason


def test_refusals_without_a_usable_id_use_minus_one():
    for args in (["decay", None], ["id", "x" * 300], ["id", None, "seed", 1]):
        with pytest.raises(RequestError) as e:
            parse("/kick/generate", args, LIM)
        assert e.value.id == osc_api.NO_ID


# ---------------------------------------------------------------- datagrams, type tags, ids, seeds


def _msg(address: bytes, tags: bytes, payload: bytes = b"") -> bytes:
    def pad(b: bytes) -> bytes:
        b += b"\0"
        return b + b"\0" * (-len(b) % 4)

    return pad(address) + pad(b"," + tags) + payload


def _bundle(*elements: bytes) -> bytes:
    return b"#bundle\0" + b"\0" * 7 + b"\1" + b"".join(len(e).to_bytes(4, "big") + e for e in elements)


@pytest.mark.parametrize("tags,payload", [
    (b"Z", b""),  # python-osc drops unknown tags: a kick was made from ",Z"
    (b"iZ", (3).to_bytes(4, "big")),  # ... and three from ",iZ 3"
    (b"c", b"\0\0\0A"),  # char
    (b"r", b"\1\2\3\4"),  # RGBA: python-osc would hand it on as an int
    (b"m", b"\0\x90\x40\x7f"),  # MIDI
    (b"t", b"\0" * 8),  # time tag
    (b"[i]", (1).to_bytes(4, "big")),  # an array
    (b"S", b"abc\0"),  # symbol
    (b"I", b""),  # impulse
])
def test_unknown_type_tags_refuse_the_whole_message(tags, payload):
    with pytest.raises(RequestError, match="unsupported OSC type tag") as e:
        osc_api.decode_message(_msg(b"/kick/generate", tags, payload))
    assert e.value.id == osc_api.NO_ID


def test_accepted_type_tags_decode():
    assert osc_api.decode_message(_msg(b"/kick/ping", b"")) == ("/kick/ping", [])
    assert osc_api.decode_message(b"/kick/ping\0\0") == ("/kick/ping", [])  # no type tag string at all
    data = _msg(b"/kick/generate", b"ifsdh", (2).to_bytes(4, "big") + bytes.fromhex("3f000000") + b"id\0\0"
                + bytes.fromhex("3fd0000000000000") + (7).to_bytes(8, "big"))
    assert osc_api.decode_message(data) == ("/kick/generate", [2, 0.5, "id", 0.25, 7])
    # decoded by python-osc, then refused by parse with the request's id (see test_type_and_length_refusals...)
    address, args = osc_api.decode_message(_msg(b"/kick/generate", b"sisN", b"id\0\0" + (7).to_bytes(4, "big")
                                                + b"seed\0\0\0\0"))
    with pytest.raises(RequestError) as e:
        parse(address, args, LIM)
    assert e.value.id == 7 and "unsupported type" in e.value.reason


@pytest.mark.parametrize("data", [b"/kick/generate\0\0xyz\0", b"/kick/generate\0\0,i\0\0\0\0", b"/no-terminator"])
def test_malformed_messages_are_one_request_error(data):
    with pytest.raises(RequestError):
        osc_api.decode_message(data)


def test_split_datagram():
    ping = _msg(b"/kick/ping", b"")
    assert osc_api.split_datagram(ping).messages == [ping]
    for junk in (b"", b"hello there\n", b"\x00\x01", b"#bundle\0", b"#bundle\0" + b"\0" * 8 + b"\0\0\0\x09" + ping):
        with pytest.raises(osc_api.NotOSC):
            osc_api.split_datagram(junk)
    empty = osc_api.split_datagram(_bundle())
    assert empty.bundle and empty.messages == [] and empty.junk == 0
    nested = osc_api.split_datagram(_bundle(ping, _bundle(ping, b"JUNK"), b"xxxx"))
    assert nested.messages == [ping, ping] and nested.junk == 2
    big = osc_api.split_datagram(_bundle(*[ping] * (osc_api.MAX_BUNDLE_MESSAGES + 5)))
    assert len(big.messages) == osc_api.MAX_BUNDLE_MESSAGES and big.dropped == 5
    deep = ping
    for _ in range(osc_api.MAX_BUNDLE_DEPTH + 3):
        deep = _bundle(deep)
    assert osc_api.split_datagram(deep).messages == []  # too deep: junk, never recursed into without end


def test_client_ids_are_non_negative_so_server_ids_cannot_collide():
    with pytest.raises(RequestError, match="id must be within 0..2147483647"):
        parse("/kick/generate", ["id", -2], LIM)
    assert parse("/kick/generate", ["id", 0], LIM).id == 0


def test_server_seeds_stay_below_2_to_the_24():
    import random

    import numpy as np

    rng = random.Random(1)
    for count in (1, 16):
        firsts = [osc_api.pick_seed(rng, count) for _ in range(20000)]
        assert min(firsts) >= 0 and max(firsts) + count - 1 < 2**24
        assert max(firsts) > 2**24 - 2**20  # the whole range is used, not a corner of it
    assert all(float(np.float32(s)) == s for s in firsts)  # exact in a Pd/Max float


def test_model_names_are_bounded():
    with pytest.raises(RequestError, match="at most 128 characters; got 250"):
        parse("/kick/model", ["m" * 250], LIM)
    with pytest.raises(RequestError, match="not a model name"):
        parse("/kick/model", ["é" * 120], LIM)  # 240 bytes: NAME.safetensors would pass NAME_MAX
    assert parse("/kick/model", ["m" * 128], LIM).name == "m" * 128


def test_every_route_has_its_handler_on_the_daemon():
    """osc_api.ROUTES is the one address -> handler table: each handler it names exists on the daemon's front end
    and is called with the request its reader made (a route added without a handler fails here, not on a user)."""
    from kickserver import osc_api
    from kickserver.frontend import Routes

    names = {r.handler for r in osc_api.ROUTES.values()}
    assert names <= {n for n in dir(osc_api.Handlers) if not n.startswith("_")}
    assert all(callable(getattr(Routes, n, None)) for n in names), sorted(n for n in names if not hasattr(Routes, n))

    class Seen:
        def __getattr__(self, name):
            return lambda req, client, reply: calls.append((name, type(req).__name__))

    calls: list = []
    args = {osc_api.MODEL: ["default"], osc_api.VARIATION: ["k.wav"], osc_api.INTERPOLATE: ["a", 1, "b", 2],
            osc_api.NEAR: [0.5, 0.5], osc_api.LOCATE: ["k.wav"]}
    for address in osc_api.ROUTES:
        osc_api.dispatch(Seen(), address, args.get(address, []), LIM, ("127.0.0.1", 1), lambda b: None)
    assert calls == [("ping", "Ping"), ("generate", "Generate"), ("variation", "Variation"), ("status", "Status"),
                     ("models", "Models"), ("select_model", "SelectModel"), ("interpolate", "Interpolate"),
                     ("controls", "Controls"), ("kit_map", "KitMap"), ("near", "Near"), ("locate", "Locate"),
                     ("proof", "Proof"), ("kit", "Kit")]
