"""Parsing and reply building without a socket."""

from __future__ import annotations

import pytest

from kickserver import osc_api
from kickserver.osc_api import Generate, Limits, RequestError, Variation, parse

LIM = Limits(controls=("decay", "pitch"), max_steps=200)


def test_addresses_constant():
    assert osc_api.ADDRESSES == ("/kick/ping", "/kick/generate", "/kick/variation", "/kick/status", "/kick/models",
                                 "/kick/model")


def test_generate_forms():
    assert parse("/kick/generate", [], LIM) == Generate()
    assert parse("/kick/generate", [3.0, "decay", 1, "id", -5], LIM) == Generate(id=-5, count=3,
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
