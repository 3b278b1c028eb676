"""The OSC contract, byte for byte: the exchange recorded in tests/fixtures/osc_exchange.json (every route, its
refusals, a model swap; tests/kickserver/osc_exchange.py) replayed against the daemon must draw the same replies,
datagram for datagram, with only what varies between runs normalised (temporary paths, file stamps, memory)."""

from __future__ import annotations

from osc_exchange import SETTINGS, load, recorded_steps, run, script, show


def test_the_recorded_script_is_the_recorders():
    """The fixture holds what osc_exchange.script() sends (re-record after changing the script)."""
    assert [(w, d.hex(), e) for w, d, e in script()] == [(w, d.hex(), e) for w, d, e in recorded_steps()]
    assert load()["settings"] == SETTINGS


def test_the_exchange_covers_every_route_and_reply():
    """Every address the daemon serves is asked, and every reply address it sends comes back at least once."""
    from kickserver import osc_api

    sent = {bytes.fromhex(s["sent"]).split(b"\0", 1)[0].decode("latin-1") for s in load()["steps"]}
    assert set(osc_api.ADDRESSES) <= sent, sorted(set(osc_api.ADDRESSES) - sent)
    replied = {r.split(" ", 1)[0] for s in load()["steps"] for r in s["shown"]}
    assert set(osc_api.REPLY_ADDRESSES) <= replied, sorted(set(osc_api.REPLY_ADDRESSES) - replied)


def test_the_daemon_answers_the_recorded_exchange_byte_for_byte(tmp_path):
    record, got, seen = run(tmp_path, recorded_steps())
    differ = [f"{w['what']}:\n  recorded {w['shown']}\n  now      {g['shown']}"
              for w, g in zip(load()["steps"], record, strict=True) if w["replies"] != g["replies"]]
    assert not differ, "\n".join(differ)
    # every reply also went to the reply port (in the order each thread sent them: compared as a whole)
    assert sorted(map(show, seen)) == sorted(map(show, got))
    assert sorted(seen) == sorted(got)
