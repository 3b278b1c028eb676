"""One retention prune over a ledger of --n kicks (files present, 100 kB each in the ledger),
--over kicks over the max_mb budget: its seconds, the sizes it read and the files it stat-ed. On another tree:
PYTHONPATH=TREE python bench/studies/retention_prune.py.

    python bench/studies/retention_prune.py [--n 40000] [--over 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kickserver.writer import LEDGER, KickWriter


class Counting(dict):
    """A ledger entry that counts the reads of its size."""

    reads = 0

    def get(self, key, default=None):
        if key == "size":
            Counting.reads += 1
        return super().get(key, default)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--over", type=int, default=1000)
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        files = []
        for i in range(ns.n):
            name = f"kick_20261205-100000_{i}.wav"
            (out / name).write_bytes(b"RIFF")
            files.append({"name": name, "size": 100_000, "time": 1e9 + i})
        (out / LEDGER).write_text(json.dumps({"version": 1, "files": files}))
        w = KickWriter(out, 44100, max_mb=(ns.n - ns.over) * 0.1)
        w._ledger = [Counting(f) for f in w._ledger]
        stats = [0]
        if hasattr(KickWriter, "_is_file"):
            real = KickWriter._is_file
            KickWriter._is_file = lambda self, name: stats.__setitem__(0, stats[0] + 1) or real(self, name)
        else:  # the writer before the folder was opened once (Path.is_file)
            real_path = Path.is_file
            Path.is_file = lambda self, **kw: stats.__setitem__(0, stats[0] + 1) or real_path(self, **kw)
        t0 = time.perf_counter()
        removed = w.prune()
        dt = time.perf_counter() - t0
    print(f"ledger {ns.n}, {ns.over} over: one prune removed {len(removed)} in {dt:.2f} s, read {Counting.reads} "
          f"sizes, stat-ed {stats[0]} files")


if __name__ == "__main__":
    main()
