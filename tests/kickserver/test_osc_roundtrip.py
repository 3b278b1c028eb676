"""A real UDP round trip against a running daemon for every row of the OSC contract, errors included."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from daemon_util import REPO, build_message, daemon_env, models_folder, parse_replies, start_daemon

from kickserver import __version__, osc_api

STEPS = 2


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, tiny_artifact):
    return models_folder(tmp_path_factory.mktemp("models"), tiny_artifact)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, models_dir):
    tmp = tmp_path_factory.mktemp("roundtrip")
    roots = tmp / "roots"
    roots.mkdir()
    # bound beyond loopback: loopback clients are still served, others only from --allow networks
    with start_daemon(tmp, models_dir, extra_args=["--host", "0.0.0.0", "--allow", "198.51.100.0/24",
                                                   "--read-root", str(roots)]) as d:
        d.read_root = roots
        yield d


def one(d, address, *args, **kw):
    replies = d.send(address, *args, **kw)
    assert len(replies) == 1, replies
    return replies[0]


def error_reason(d, address, *args) -> str:
    addr, params = one(d, address, *args)
    assert addr == "/kick/error", (addr, params)
    assert isinstance(params[0], int) and isinstance(params[1], str)
    return params[1]


def type_tags(datagram: bytes) -> str:
    """The OSC type tag string of one message datagram (without the comma)."""
    end = datagram.index(b"\0")
    start = (end // 4 + 1) * 4
    tags = datagram[start:datagram.index(b"\0", start)].decode()
    assert tags.startswith(",")
    return tags[1:]


# ---------------------------------------------------------------- the rows


def test_ping(daemon):
    assert one(daemon, "/kick/ping") == ("/kick/pong", [__version__])


def test_generate_count_id_controls(daemon):
    replies = daemon.send("/kick/generate", 3, "id", 42, "steps", STEPS, "decay", 0.7, "seed", 100, expect=3)
    assert [a for a, _ in replies] == ["/kick/done"] * 3
    assert sorted(p[2] for _, p in replies) == [100, 101, 102]
    for _, (id, path, seed) in replies:
        assert id == 42
        p = Path(path)
        assert p.is_absolute() and p.parent == daemon.out_dir and p.is_file()
        assert p.name.startswith("kick_") and p.name.endswith(f"_{seed}.wav")
        info = sf.info(path)
        assert (info.samplerate, info.channels, info.subtype, info.format) == (44100, 1, "PCM_24", "WAV")
        x, _ = sf.read(path, dtype="float64")
        assert np.isfinite(x).all()
        assert abs(20 * math.log10(np.abs(x).max()) + 1.0) < 0.05  # peak at -1 dBFS
        assert abs(x[-1]) < 1e-4  # faded tail
        meta = sf.SoundFile(path).copy_metadata()
        assert "kickserver" in meta["software"]
        for needle in ("model=tiny", f"seed={seed}", f"steps={STEPS}", "sampler=dpmpp_2m", "decay=0.7000"):
            assert needle in meta["comment"]


def test_generate_accepts_pd_floats(daemon):
    replies = daemon.send("/kick/generate", 2.0, "steps", float(STEPS), "seed", 5.0, "id", 9.0, expect=2)
    assert [(a, p[0], p[2]) for a, p in replies] == [("/kick/done", 9, 5), ("/kick/done", 9, 6)]


def test_generate_assigns_negative_ids_and_random_seeds(daemon):
    """Server ids count down from -2 (client ids are >= 0, -1 is "none"); server seeds stay below 2^24."""
    (a1, p1), = daemon.send("/kick/generate", "steps", STEPS)
    (a2, p2), = daemon.send("/kick/generate", "steps", STEPS)
    assert a1 == a2 == "/kick/done"
    assert p2[0] < p1[0] <= -2
    assert 0 <= p1[2] < 2**24 and 0 <= p2[2] < 2**24 and p1[2] != p2[2]


def test_same_seed_twice_gives_identical_samples(daemon):
    (_, p1), = daemon.send("/kick/generate", "seed", 777, "steps", 3, "pitch", 0.25)
    (_, p2), = daemon.send("/kick/generate", "seed", 777, "steps", 3, "pitch", 0.25)
    assert p1[1] != p2[1]  # never overwritten: a second file
    a, _ = sf.read(p1[1], dtype="int32")
    b, _ = sf.read(p2[1], dtype="int32")
    assert np.array_equal(a, b)
    (_, p3), = daemon.send("/kick/generate", "seed", 778, "steps", 3, "pitch", 0.25)
    c, _ = sf.read(p3[1], dtype="int32")
    assert not np.array_equal(a, c)


def test_variation(daemon):
    (_, src), = daemon.send("/kick/generate", "seed", 11, "steps", STEPS)
    name = Path(src[1]).name
    replies = daemon.send("/kick/variation", name, "strength", 0.5, "count", 2, "seed", 3, "steps", STEPS, "id", 7,
                          expect=2)
    # no seed that /kick/generate turns into these kicks (-1); their names and tags carry their own seeds
    assert [(a, p[0], p[2]) for a, p in replies] == [("/kick/done", 7, osc_api.NO_SEED)] * 2
    assert [Path(p[1]).stem.split("_")[-1] for _, p in replies] == ["v3", "v4"]
    for _, p in replies:
        assert Path(p[1]).is_file() and p[1] != src[1]
    # an absolute path under the out folder (what /kick/done hands out) works too
    (a, p), = daemon.send("/kick/variation", src[1], "strength", 1.0, "steps", STEPS)
    assert a == "/kick/done"


def test_variation_strength_zero_returns_the_source(daemon):
    """The source prepared (onset, length, level) and finished without filtering or fading it again (the rise only
    where the prepared clip does not start from silence)."""
    from kickmodel.clips import prepare_audio, read_audio
    from kickmodel.config import DataConfig
    from kickmodel.dsp import finish_kick

    (_, src), = daemon.send("/kick/generate", "seed", 12, "steps", STEPS)
    (a, p), = daemon.send("/kick/variation", Path(src[1]).name, "strength", 0.0)
    assert a == "/kick/done", p
    got, _ = sf.read(p[1], dtype="float64")
    clip, _ = prepare_audio(*read_audio(Path(src[1])), DataConfig(length=4096), highpass=False)
    fade_in = 0.0 if abs(clip[0]) <= 1e-3 * np.abs(clip).max() else 0.5
    want = finish_kick(clip, 44100, highpass_hz=0, fade_in_ms=fade_in, fade_ms=0.0)
    assert np.abs(got - want).max() < 1e-5  # 24-bit quantisation only


def test_variation_paths_refused(daemon, tmp_path):
    (_, src), = daemon.send("/kick/generate", "seed", 13, "steps", STEPS)
    name = Path(src[1]).name
    outside = tmp_path / "outside.wav"
    sf.write(outside, np.zeros(4096), 44100)
    link = daemon.out_dir / "link-out.wav"
    link.symlink_to(outside)
    try:
        for source, why in [(f"../{daemon.out_dir.name}/{name}", "bare file name"),
                            (f"sub/{name}", "bare file name"),
                            (str(daemon.out_dir / ".." / daemon.out_dir.name / name), ".."),
                            (str(outside), "read root"),
                            ("/etc/passwd", "read root"),
                            ("link-out.wav", "links out"),
                            ("missing.wav", "does not exist"),
                            (".kickserver-ledger.json", "bare file name")]:
            reason = error_reason(daemon, "/kick/variation", source, "id", 5)
            assert why in reason, (source, reason)
    finally:
        link.unlink()
    # a read root: absolute paths under it are fine
    inside = daemon.read_root / "mine.wav"
    t = np.arange(4096) / 44100
    sf.write(inside, 0.8 * np.sin(2 * np.pi * 60 * t) * np.exp(-t * 20), 44100, subtype="PCM_16")
    (a, p), = daemon.send("/kick/variation", str(inside), "strength", 0.3, "steps", STEPS)
    assert a == "/kick/done", p


def test_variation_unreadable_source_is_an_error(daemon):
    bad = daemon.out_dir / "notaudio.wav"
    bad.write_bytes(b"RIFF....WAVEjunk")
    try:
        reason = error_reason(daemon, "/kick/variation", "notaudio.wav", "id", 31)
        assert "notaudio.wav" in reason
    finally:
        bad.unlink()


def test_variation_long_source_is_refused_at_once(daemon):
    long = daemon.read_root / "long.wav"
    sf.write(long, np.zeros(31 * 8000, dtype=np.float32), 8000, subtype="PCM_16")  # 31 s, header says so
    try:
        (a, p), = daemon.send("/kick/variation", str(long), "id", 61, "steps", STEPS)
        assert (a, p) == ("/kick/error", [61, "source long.wav is 31.0 s long; at most 30 s"])
        # refused in the receive loop (never queued for the worker, which would have decoded it)
        assert daemon.wait_for_log("refused variation 61: source long.wav is 31.0 s long", timeout=5)
    finally:
        long.unlink()


def test_status(daemon):
    """Independent of the other tests: it counts its own kicks."""
    (a, p), = daemon.send("/kick/status")
    assert a == "/kick/status"
    model, device, queued, generated, why, memory = p
    assert (model, device, why) == ("tiny", "cpu", "pinned by --model")
    assert memory.startswith("cpu RSS ") and memory.endswith(" MB"), memory  # appended last
    assert isinstance(queued, int) and isinstance(generated, int) and queued >= 0 and generated >= 0
    replies = daemon.send("/kick/generate", 2, "steps", STEPS, expect=2)
    assert [a for a, _ in replies] == ["/kick/done"] * 2, replies
    deadline = time.monotonic() + 5  # the worker clears its count of running kicks just after their replies
    while True:
        (a, p), = daemon.send("/kick/status")
        assert a == "/kick/status" and p[0] == "tiny" and p[3] == generated + 2, p  # both kicks counted
        if p[2] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert p[2] == 0, p  # nothing left in the queue


def test_models(daemon):
    (a, names), = daemon.send("/kick/models")
    assert a == "/kick/models" and "tiny" in names


def test_model(daemon):
    assert one(daemon, "/kick/model", "tiny") == ("/kick/model", ["tiny"])
    assert "not found" in error_reason(daemon, "/kick/model", "nosuchmodel")
    assert "not a model name" in error_reason(daemon, "/kick/model", "../tiny")


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("address,args,needle", [
    ("/kick/nope", (), "unknown address"),
    ("/kick/generate", ("steps", "many"), "steps must be an int"),
    ("/kick/generate", ("steps", 0), "steps must be within 1..200"),
    ("/kick/generate", ("steps", 201), "steps must be within 1..200"),
    ("/kick/generate", ("steps", 2.5), "whole number"),
    ("/kick/generate", (17,), "count must be within 1..16"),
    ("/kick/generate", (0,), "count must be within 1..16"),
    ("/kick/generate", ("seed", -1), "seed must be within"),
    ("/kick/generate", ("seed", ("h", 2**40)), "seed must be within"),
    ("/kick/generate", ("decay", 1.5), "decay must be within 0..1"),
    ("/kick/generate", ("decay", float("nan")), "finite"),
    ("/kick/generate", ("decay", float("inf")), "finite"),
    ("/kick/generate", ("decay", "loud"), "decay must be a number"),
    ("/kick/generate", ("colour", 0.5), "unknown key 'colour'"),
    ("/kick/generate", ("sampler", "euler"), "unknown sampler"),
    ("/kick/generate", ("sampler", "x" * 300), "longer than 256"),
    ("/kick/generate", ("seed",), "odd number"),
    ("/kick/generate", ("seed", 1, "seed", 2), "given twice"),
    ("/kick/generate", ("seed", True), "unsupported type"),
    ("/kick/generate", ("seed", None), "unsupported type"),
    ("/kick/generate", (3, "count", 2), "count given twice"),
    ("/kick/variation", (), "needs a source"),
    ("/kick/variation", ("x.wav", "strength", 1.5), "strength must be within 0..1"),
    ("/kick/variation", ("x.wav", "decayy", 0.5), "unknown key"),
    ("/kick/ping", (1,), "takes no arguments"),
    ("/kick/model", (), "takes one argument"),
    ("/kick/model", (3,), "must be a string"),
    ("/kick/" + "a" * 300, (), "unknown address"),
])
def test_refusals_get_clear_reasons(daemon, address, args, needle):
    reason = error_reason(daemon, address, *args)
    assert needle in reason


def test_refusal_echoes_the_request_id(daemon):
    (a, p), = daemon.send("/kick/generate", "id", 55, "steps", 999)
    assert (a, p[0]) == ("/kick/error", 55)
    (a, p), = daemon.send("/kick/generate", "steps", 999)
    assert (a, p[0]) == ("/kick/error", -1)
    # type and length refusals come before the other checks, and still name the id
    (a, p), = daemon.send("/kick/generate", "seed", None, "id", 56)
    assert (a, p[0]) == ("/kick/error", 56) and "unsupported type" in p[1]
    (a, p), = daemon.send("/kick/generate", "sampler", "x" * 300, "id", 57)
    assert (a, p[0]) == ("/kick/error", 57) and "longer than 256" in p[1]


def test_doubles_are_accepted_as_floats(daemon):
    (a, p), = daemon.send("/kick/generate", "decay", ("d", 0.25), "steps", STEPS)
    assert a == "/kick/done", p


def test_non_osc_and_empty_datagrams(daemon):
    """A datagram that is not OSC is never answered (a forged source must not draw a reply); it is logged."""
    assert daemon.send_raw(b"hello there\n", timeout=1.0) == []
    assert daemon.wait_for_log("that are not OSC", timeout=5)
    assert daemon.alive()
    assert one(daemon, "/kick/ping")[0] == "/kick/pong"


def test_a_bundle_is_answered_per_message(daemon):
    from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
    from pythonosc.osc_message_builder import OscMessageBuilder

    b = OscBundleBuilder(IMMEDIATELY)
    for addr in ("/kick/ping", "/kick/status"):
        b.add_content(OscMessageBuilder(address=addr).build())
    replies = daemon.send_raw(b.build().dgram, expect=2)
    assert sorted(a for a, _ in replies) == ["/kick/pong", "/kick/status"]


def test_a_bundle_with_a_future_time_tag_is_answered_at_once(daemon):
    """docs/daemon.md: the time tag is ignored, so a client cannot stall the server (python-osc's own
    dispatcher would sleep until it)."""
    from pythonosc.osc_bundle_builder import OscBundleBuilder
    from pythonosc.osc_message_builder import OscMessageBuilder

    b = OscBundleBuilder(time.time() + 3600)  # an hour ahead
    for addr in ("/kick/ping", "/kick/status"):
        b.add_content(OscMessageBuilder(address=addr).build())
    # both replies within send_raw's 10 s, against a tag an hour ahead: answered without waiting for it (no wall-clock
    # bound of a few seconds, which a loaded box can break)
    replies = daemon.send_raw(b.build().dgram, expect=2, timeout=10)
    assert sorted(a for a, _ in replies) == ["/kick/pong", "/kick/status"], replies
    assert one(daemon, "/kick/ping")[0] == "/kick/pong"  # and the server was not held up either


def test_reply_types_sizes_and_reply_port(daemon):
    """Replies use only i/f/s, stay under 4 KB and go to both the source port and the reply port."""
    listener = daemon.reply_listener()
    client = daemon.socket()
    other = daemon.socket()  # another program on this machine (Pd beside Max): its replies reach the reply port too
    try:
        listener.settimeout(10)
        client.settimeout(10)
        other.sendto(build_message("/kick/status", ()), (daemon.host, daemon.port))
        requests = [("/kick/ping", ()), ("/kick/status", ()), ("/kick/models", ()), ("/kick/model", ("tiny",)),
                    ("/kick/generate", ("steps", STEPS, "id", 3)), ("/kick/generate", ("bad", 1))]
        for address, args in requests:
            client.sendto(build_message(address, args), (daemon.host, daemon.port))
            data, _ = client.recvfrom(65536)
            # the reply port gets every reply to this address, a kick an earlier test of this module's daemon left
            # rendering among them (its /kick/done once came first, and the test failed under load): the copy is the
            # datagram equal to this reply, however many others arrive before it (recvfrom times out when none is)
            while listener.recvfrom(65536)[0] != data:
                pass
            assert len(data) < 4096
            assert set(type_tags(data)) <= set("ifs"), (address, type_tags(data))
    finally:
        listener.close()
        client.close()
        other.close()


def test_send_subcommand(daemon):
    run = subprocess.run([sys.executable, "-m", "kickserver", "send", "--port", str(daemon.port), "--timeout", "10",
                          "/kick/generate", "2", "steps", str(STEPS), "seed", "40"],
                         cwd=REPO, env=daemon_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("/kick/done ") for line in lines)
    assert lines[0].endswith(" 40") and lines[1].endswith(" 41")


# ---------------------------------------------------------------- files by rename only


def test_watcher_sees_final_names_only_by_move(daemon):
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    events: list[tuple[str, str, str]] = []

    class H(FileSystemEventHandler):
        def on_any_event(self, event):
            if not event.is_directory:
                events.append((event.event_type, os.path.basename(event.src_path),
                               os.path.basename(getattr(event, "dest_path", "") or "")))

    obs = Observer()
    obs.schedule(H(), str(daemon.out_dir), recursive=False)
    obs.start()
    try:
        time.sleep(0.2)
        replies = daemon.send("/kick/generate", 4, "steps", STEPS, expect=4)
        names = {Path(p[1]).name for _, p in replies}
        assert len(names) == 4
        time.sleep(0.5)
    finally:
        obs.stop()
        obs.join(5)
    moved_to = {dest for kind, _, dest in events if kind == "moved"}
    assert names <= moved_to, events
    for kind, src, dest in events:
        if src.endswith(".wav"):  # any event on a visible .wav name other than the rename is a partial file
            assert kind == "moved" or src.startswith(".") or src not in names, (kind, src, dest)
        if kind in ("created", "modified", "closed", "opened"):
            assert src.startswith(".") and src.endswith(".part"), (kind, src)


# ---------------------------------------------------------------- the burst (keep last: it fills the folder)


def test_burst_of_500_gets_500_answers(daemon):
    n = 500
    client = daemon.socket()
    counts = {"/kick/done": 0, "busy": 0, "other": []}
    stop = time.monotonic() + 120

    def sender():
        msg = build_message("/kick/generate", ("steps", 1))
        for i in range(n):
            client.sendto(msg, (daemon.host, daemon.port))
            if i % 50 == 49:
                time.sleep(0.005)

    t = threading.Thread(target=sender)
    try:
        client.settimeout(1.0)
        t.start()
        got = 0
        while got < n and time.monotonic() < stop:
            try:
                data, _ = client.recvfrom(65536)
            except TimeoutError:
                continue
            for a, p in parse_replies(data):
                got += 1
                if a == "/kick/done":
                    counts["/kick/done"] += 1
                elif a == "/kick/error" and p[1].startswith("busy"):
                    counts["busy"] += 1
                else:
                    counts["other"].append((a, p))
        t.join(10)
    finally:
        client.close()
    assert counts["other"] == []
    assert counts["/kick/done"] + counts["busy"] == n, counts
    assert counts["busy"] > 0  # the queue limit (64) was reached
    assert daemon.alive()


def test_type_tag_helper():
    assert type_tags(osc_api.done(1, "/x.wav", 2)) == "isi"
    assert type_tags(osc_api.status("m", "cpu", 0, 3, "pinned by --model")) == "ssiis"
