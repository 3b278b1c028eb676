"""Live model reload: bad artifacts are refused while serving goes on; a new one is served within 5 s."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import soundfile as sf
import torch
from daemon_util import make_artifact, models_folder, start_daemon
from safetensors.torch import load_file, save_file

from trainer.artifact import read_metadata


def status_model(d) -> str:
    (a, p), = d.send("/kick/status")
    assert a == "/kick/status"
    return p[0]


def wait_for_model(d, name: str, timeout: float = 5.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if status_model(d) == name:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"model {name} not served within {timeout} s; log:\n{d.stderr_text()}")


def drop(path: Path, data: bytes) -> None:
    """Write the way a careful tool does: a hidden temp file, then rename into place."""
    tmp = path.parent / f".{path.name}.part"
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, tiny_artifact):
    return models_folder(tmp_path_factory.mktemp("models"), tiny_artifact)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, models_dir):
    tmp = tmp_path_factory.mktemp("reload")
    with start_daemon(tmp, models_dir, model="tiny") as d:
        d.tmp = tmp
        yield d


def bad_artifacts(tmp: Path, good: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {"garbage": b"this is not a safetensors file" * 10}
    torch.save({"w": torch.zeros(3)}, tmp / "pickle.pt")
    out["pickle"] = (tmp / "pickle.pt").read_bytes()
    save_file({"w": torch.zeros(3)}, str(tmp / "version.st"), metadata={"kickserver_format": "99"})
    out["version"] = (tmp / "version.st").read_bytes()
    tensors = load_file(str(good))
    first = sorted(tensors)[0]
    tensors[first] = torch.zeros(tuple(s + 1 for s in tensors[first].shape))
    save_file(tensors, str(tmp / "shape.st"), metadata=read_metadata(good))
    out["shape"] = (tmp / "shape.st").read_bytes()
    return out


def test_corrupt_artifacts_do_not_stop_serving(daemon, tmp_path):
    good = daemon.models_dir / "tiny.safetensors"
    for name, data in bad_artifacts(tmp_path, good).items():
        drop(daemon.models_dir / f"broken-{name}.safetensors", data)
    # an in-place write (no rename) of a bad file too: seen on close
    (daemon.models_dir / "broken-inplace.safetensors").write_bytes(b"\x80\x04garbage pickle")
    for name in ("garbage", "pickle", "version", "shape", "inplace"):
        assert daemon.wait_for_log(f"refused model broken-{name}.safetensors", timeout=10), daemon.stderr_text()
    log = daemon.stderr_text()
    assert "Traceback" not in log
    for name in ("garbage", "pickle", "version", "shape", "inplace"):
        assert log.count(f"refused model broken-{name}.safetensors") == 1, log
    assert "pickle" in log and "format version 99" in log and "do not fit" in log
    assert status_model(daemon) == "tiny"
    (a, p), = daemon.send("/kick/generate", "steps", 2)
    assert a == "/kick/done", p
    (a, names), = daemon.send("/kick/models")
    assert not any(n.startswith("broken") for n in names), names
    for f in daemon.models_dir.glob("broken-*"):
        f.unlink()


def test_new_valid_artifact_is_served_within_5s_and_no_request_is_lost(daemon, tmp_path):
    fresh = make_artifact(tmp_path / "fresh.safetensors", seed=1)
    replies: list = []
    stop = threading.Event()

    def keep_asking():  # requests in flight while the model is swapped
        i = 0
        while not stop.is_set() and i < 40:
            replies.extend(daemon.send("/kick/generate", "steps", 2, "id", 1000 + i, timeout=15))
            i += 1

    t = threading.Thread(target=keep_asking)
    t.start()
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        drop(daemon.models_dir / "fresh.safetensors", fresh.read_bytes())
        waited = wait_for_model(daemon, "fresh", timeout=5.0)
        assert time.monotonic() - t0 <= 5.0
        time.sleep(0.2)
    finally:
        stop.set()
        t.join(60)
    assert replies and all(a == "/kick/done" for a, _ in replies), replies
    assert len({p[0] for _, p in replies}) == len(replies)  # one answer per request
    (a, p), = daemon.send("/kick/generate", "steps", 2)
    assert "model=fresh" in sf.SoundFile(p[1]).copy_metadata()["comment"]
    print(f"new model served after {waited:.2f} s")


def test_model_switch_by_request(daemon):
    (a, p), = daemon.send("/kick/model", "tiny", timeout=15)
    assert (a, p) == ("/kick/model", ["tiny"])
    assert status_model(daemon) == "tiny"
    (a, names), = daemon.send("/kick/models")
    assert {"tiny", "fresh"} <= set(names)


def test_sighup_rereads_config(daemon):
    cfg = daemon.tmp / f"config-{daemon.port}.toml"
    cfg.write_text("max_files = 2\n")
    daemon.signal(signal.SIGHUP)
    assert daemon.wait_for_log("SIGHUP: config re-read", timeout=10), daemon.stderr_text()
    before = {p.name for p in daemon.out_dir.glob("kick_*.wav")}
    replies = daemon.send("/kick/generate", 4, "steps", 2, expect=4)
    assert [a for a, _ in replies] == ["/kick/done"] * 4
    deadline = time.monotonic() + 5  # pruning follows the batch's replies
    while True:
        after = {p.name for p in daemon.out_dir.glob("kick_*.wav")}
        if len(after - before) <= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert before <= after  # files written before retention was on are never removed
    assert len(after - before) == 2  # retention keeps the 2 newest of those it wrote
    assert {Path(p[1]).name for _, p in replies[2:]} == after - before
    # a bad config is refused with a log line, the daemon goes on
    cfg.write_text("max_filez = 2\n")
    daemon.signal(signal.SIGHUP)
    assert daemon.wait_for_log("config not reloaded", timeout=10)
    assert daemon.alive() and status_model(daemon) == "tiny"
