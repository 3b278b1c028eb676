"""kickmodel.safejson: JSON a file supplies is bounded in size and nesting before it is parsed, and a file is
opened so that it can never block (a FIFO or a device would hang the reader)."""

from __future__ import annotations

import json
import os
import threading

import pytest

from kickmodel import safejson
from kickmodel.safejson import BadJSON

DEEP = "[" * 10_000 + "]" * 10_000  # 20 KB: json.loads raises RecursionError on it


def test_deep_nesting_is_refused_not_a_recursion_error():
    with pytest.raises(RecursionError):
        json.loads(DEEP)  # what every caller met before
    with pytest.raises(BadJSON, match=r"too deeply nested \(10000 levels of arrays and objects; at most 32\)"):
        safejson.parse(DEEP, max_bytes=1 << 20)
    with pytest.raises(BadJSON, match="too deeply nested"):
        safejson.parse('{"a": ' * 40 + "1" + "}" * 40, max_bytes=1 << 20)


@pytest.mark.parametrize("text,depth", [
    ("1", 0), ('"[[[["', 0), ("[]", 1), ('[[1], {"a": [2]}]', 3), ('["\\"[[["]', 1), ('["\\\\", [1]]', 2),
    ('{"a\\\\\\"[": [[]]}', 3), ('"\\\\\\\\"', 0),
])
def test_depth_counts_brackets_outside_strings_only(text, depth):
    assert safejson.depth(text.encode()) == depth
    assert safejson.parse(text, max_bytes=100) == json.loads(text)


def test_the_depth_limit_itself_is_allowed():
    ok = "[" * safejson.MAX_DEPTH + "]" * safejson.MAX_DEPTH
    assert safejson.parse(ok, max_bytes=1000) == json.loads(ok)
    with pytest.raises(BadJSON):
        safejson.parse("[" + ok + "]", max_bytes=1000)


def test_size_is_bounded_before_parsing():
    with pytest.raises(BadJSON, match=r"too large \(12 bytes; at most 11\)"):
        safejson.parse('"0123456789"', max_bytes=11)


def test_not_json_and_unusable_json():
    for bad in ("not json", b"\xff\xfe", "1" * 5000):  # the last: more digits than Python converts to an int
        with pytest.raises(BadJSON, match="not"):
            safejson.parse(bad, max_bytes=1 << 20)


def test_a_run_of_escaped_quotes_is_scanned_in_linear_time():
    import time

    t0 = time.perf_counter()
    with pytest.raises(BadJSON):
        safejson.parse('["' + '\\"' * 500_000, max_bytes=1 << 21)
    assert time.perf_counter() - t0 < 2.0


def test_read_a_regular_file(tmp_path):
    p = tmp_path / "a.json"
    p.write_text('{"version": 1}')
    assert safejson.read(p, max_bytes=100) == {"version": 1}
    with pytest.raises(BadJSON, match="too large"):
        safejson.read(p, max_bytes=5)
    with pytest.raises(FileNotFoundError):
        safejson.read(tmp_path / "missing.json", max_bytes=100)


def test_read_refuses_a_fifo_at_once_and_a_link(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    got: list = []
    t = threading.Thread(target=lambda: got.append(_raises(lambda: safejson.read(fifo, max_bytes=100))), daemon=True)
    t.start()
    t.join(timeout=5)
    assert not t.is_alive(), "reading a FIFO blocked"
    assert isinstance(got[0], BadJSON) and "not a regular file" in str(got[0])
    target = tmp_path / "target.json"
    target.write_text("{}")
    (tmp_path / "link.json").symlink_to(target)
    with pytest.raises(OSError):
        safejson.read(tmp_path / "link.json", max_bytes=100)


def _raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test looks at it
        return e
    return None


def test_depth_is_the_same_whatever_the_chunks_and_its_memory_stays_bounded():
    """depth() scans in chunks carrying the level, an open string and a run of backslashes across them: every cut
    gives the same answer, including cuts inside a run of backslashes before a quote; and an 8 MB text costs a
    chunk's arrays, not ~48 bytes per byte."""
    import json
    import random
    import tracemalloc

    from kickmodel import safejson

    rng = random.Random(0)
    texts = [b'{"a": "x\\\\\\\\\\"]]", "b": [[["\\\\"]]], "c": "[{"}', b'["\\\\\\\\", [[1]]]', b'"[[["', b"[]"]
    for _ in range(200):
        doc = 0
        for _ in range(rng.randint(0, 6)):
            doc = rng.choice([[doc, "]" * rng.randint(0, 3)], {"k\\\"[": doc}, [doc, "\\" * rng.randint(0, 5)]])
        texts.append(json.dumps(doc).encode())
    for t in texts:
        whole = safejson.depth(t, chunk=1 << 20)
        assert all(safejson.depth(t, chunk=k) == whole for k in (1, 2, 3, 5, 7, 64)), t
    assert safejson.depth(b"[" * 5 + b"]" * 5, chunk=2) == 5
    big = (b'{"a": "' + b"\\\\" * (4 << 20) + b'", "b": [[1]]}')
    tracemalloc.start()
    assert safejson.depth(big) == 3  # the object and two arrays; the brackets-free string spans chunks
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 80 << 20, peak
