"""An independent folder watcher for tests: inotifywait (inotify-tools), not the watchdog library the daemon uses.

    with InotifyWatch(folder) as w:
        ...write...
    w.events  # [("MOVED_TO", "kick.wav"), ("CREATE", ".kick.wav.x.part"), ...] in kernel order

The watch is in place when the `with` block starts ("Watches established."), and every event of the
block has been read when it ends: a sentinel file is created last and the events are read up to it.
Tests that use it skip with a reason when inotifywait is not installed (CI installs inotify-tools).
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

EVENTS = "create,moved_to,close_write"


def require_inotifywait() -> str:
    exe = shutil.which("inotifywait")
    if exe is None:
        pytest.skip("inotifywait not installed (apt-get install inotify-tools; CI's .ci/run installs it)")
    return exe


class InotifyWatch:
    def __init__(self, folder: Path, events: str = EVENTS, timeout: float = 10.0) -> None:
        self.folder = Path(folder)
        self.events_arg = events
        self.timeout = timeout
        self.events: list[tuple[str, str]] = []
        self._sentinel = f"zz-inotify-sentinel-{uuid.uuid4().hex}"
        self._lines: queue.Queue[str | None] = queue.Queue()

    def __enter__(self) -> InotifyWatch:
        exe = require_inotifywait()
        self._proc = subprocess.Popen(
            [exe, "-m", "-e", self.events_arg, "--format", "%e %f", str(self.folder)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        err: queue.Queue[str | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._pump, args=(self._proc.stderr, err), daemon=True),
                         threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True)]
        for t in self._threads:
            t.start()
        seen = []
        deadline = time.monotonic() + self.timeout
        while not seen or "Watches established" not in seen[-1]:  # "Setting up watches." first
            try:
                line = err.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self._stop()
                raise RuntimeError(f"inotifywait did not start: {seen}")
            seen.append(line)
        return self

    @staticmethod
    def _pump(stream, q: queue.Queue) -> None:
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put(None)

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                sentinel = self.folder / self._sentinel
                sentinel.touch()
                deadline = time.monotonic() + self.timeout
                while True:
                    try:
                        line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
                    except queue.Empty:
                        line = None
                    if line is None:
                        raise RuntimeError(f"inotifywait stopped or did not report the sentinel; so far {self.events}")
                    event, _, name = line.partition(" ")
                    if name == self._sentinel:
                        break
                    self.events.append((event, name))
                os.unlink(sentinel)
        finally:
            self._stop()

    def _stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        for t in self._threads:  # they end at the pipes' EOF
            t.join(5)
        for f in (self._proc.stdout, self._proc.stderr):
            f.close()

    def of(self, name: str) -> list[str]:
        """The event kinds (e.g. "MOVED_TO", "CLOSE_WRITE,CLOSE") seen for one file name, in order."""
        return [e for e, n in self.events if n == name]
