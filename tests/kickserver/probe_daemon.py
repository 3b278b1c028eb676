"""`python -m kickserver` with counters of the work the receive loop does for each datagram (for tests).

The counters are injected from outside the daemon (wrapping functions it calls), so one test reads the same figures
from any version of the daemon, the one before a fix included: per datagram handled by the receive loop, the OSC
messages it encodes (`osc_api.build`), the kit-map encodings (`osc_api.kit_map`), the files and folders it stats or
lists; and in every thread the artifact checks (`reload.validate`). Receive-loop CPU time (thread_time) is recorded
too, for the figures only: tests bound the counts, never a time. After each datagram the counters are written,
atomically, as JSON to $KICK_PROBE.

    from daemon_util import start_daemon
    with start_daemon(tmp_path, models, probe=tmp_path / "probe.json") as d: ...
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from kickserver import frontend, osc_api, reload

OUT = os.environ["KICK_PROBE"]
counts: dict[str, float] = {"datagrams": 0, "builds": 0, "map_encodes": 0, "fs": 0, "validations": 0,
                            "cpu_s": 0.0, "max_cpu_s": 0.0, "max_builds": 0, "max_fs": 0}
here = threading.local()


def _counting(fn, key: str, *, anywhere: bool = False):
    def wrapped(*a, **k):
        if anywhere or getattr(here, "on", False):
            counts[key] += 1
        return fn(*a, **k)
    return wrapped


osc_api.build = _counting(osc_api.build, "builds")
osc_api.kit_map = _counting(osc_api.kit_map, "map_encodes")
reload.validate = _counting(reload.validate, "validations", anywhere=True)
for _name in ("stat", "lstat", "listdir", "scandir"):
    setattr(os, _name, _counting(getattr(os, _name), "fs"))
_handle = frontend.FrontEnd._handle_datagram


def _write() -> None:
    tmp = f"{OUT}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, OUT)


def handle(self, data, addr):
    before = (counts["builds"], counts["fs"])
    here.on = True
    t0 = time.thread_time()
    try:
        return _handle(self, data, addr)
    finally:
        dt = time.thread_time() - t0
        here.on = False
        counts["datagrams"] += 1
        counts["cpu_s"] += dt
        counts["max_cpu_s"] = max(counts["max_cpu_s"], dt)
        counts["max_builds"] = max(counts["max_builds"], counts["builds"] - before[0])
        counts["max_fs"] = max(counts["max_fs"], counts["fs"] - before[1])
        _write()


frontend.FrontEnd._handle_datagram = handle

if __name__ == "__main__":
    from kickserver.cli import main

    sys.exit(main(sys.argv[1:]))
