"""What Restart=on-failure restarts into: a daemon killed with SIGKILL (as a crash or the watchdog's final kill
leaves it) must start cleanly on the same output folder: stray temp files removed, finished kicks untouched.

The unit's policy fields themselves (Restart=on-failure, RestartSec, the start limit) are checked in
test_unit_file.py::test_notify_watchdog_and_restart_policy.
"""

from __future__ import annotations

import hashlib
import signal
from pathlib import Path

import pytest


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _generate(d, seed: int) -> Path:
    replies = d.send("/kick/generate", "seed", seed, "steps", 2, expect=1, timeout=120)
    assert replies and replies[0][0] == "/kick/done", f"{replies}\n{d.stderr_text()}"
    path = Path(replies[0][1][1])
    assert path.is_file() and path.parent == d.out_dir
    return path


@pytest.mark.slow
def test_killed_daemon_restarts_cleanly_on_the_same_folder(tmp_path, tiny_artifact):
    from daemon_util import start_daemon

    out = tmp_path / "out"
    first = start_daemon(tmp_path, tiny_artifact.parent, out_dir=out)
    try:
        kick = _generate(first, seed=11)
        digest = _sha(kick)
        first.proc.send_signal(signal.SIGKILL)  # no clean-up of any kind runs
        assert first.proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        first.terminate(timeout=5)

    # what a run killed mid-write leaves: the writer's hidden temp names (see kickserver/writer.py)
    dead_pid = first.proc.pid
    strays = [out / f".kick_20250101-120000_7.wav.{dead_pid}.part",
              out / f".kickserver-ledger.json.{dead_pid}.part"]
    for s in strays:
        s.write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt ")  # a torn header
    # files that are not the writer's own temp files must survive the clean-up
    keep = {out / ".notes.part": b"mine", out / "my_kick.wav": b"not a temp", out / "kick.wav.part": b"visible"}
    for p, data in keep.items():
        p.write_bytes(data)

    second = start_daemon(tmp_path, tiny_artifact.parent, out_dir=out)
    try:
        assert [s.name for s in strays if s.exists()] == [], "stray temp files left after restart"
        assert kick.is_file() and _sha(kick) == digest, "the kick written before the crash changed"
        assert all(p.read_bytes() == data for p, data in keep.items()), "clean-up removed a file it does not own"
        new = _generate(second, seed=12)  # the restarted daemon serves
        assert new != kick and new.is_file()
        assert _sha(kick) == digest
        assert [a for a, _ in second.send("/kick/ping")] == ["/kick/pong"]
        assert not [p.name for p in out.iterdir() if p.name.endswith(".part") and p not in keep]
        assert second.terminate() == 0, second.stderr_text()
    finally:
        second.terminate(timeout=5)
