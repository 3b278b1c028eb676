"""Retention pruning is linear in the ledger. It was quadratic (each file removed summed every size again and
shifted the whole list; each batch stat-ed every file in the ledger): 40k entries took 55 s, and a 2.1 MB ledger
delayed a kick's reply by 24.9 s. Counted work, not the wall clock: the sizes read and the files stat-ed by one
prune, and how many files one prune removes at most (the rest go with the next batches)."""

from __future__ import annotations

import json
import os

from kickserver import writer as writer_mod
from kickserver.writer import LEDGER, KickWriter

N = 20_000


def counting(entries) -> tuple[list[dict], list[int]]:
    """The ledger's entries as dicts that count, in reads[0], how often a size is read."""
    reads = [0]

    class Entry(dict):
        def get(self, key, default=None):
            reads[0] += key == "size"
            return super().get(key, default)

    return [Entry(e) for e in entries], reads


def folder_with_ledger(tmp_path, n: int):
    out = tmp_path / "out"
    out.mkdir()
    files = []
    for i in range(n):
        name = f"kick_20261205-100000_{i}.wav"
        (out / name).write_bytes(b"RIFF")
        files.append({"name": name, "size": 100_000, "time": 1e9 + i})
    (out / LEDGER).write_text(json.dumps({"version": 1, "files": files}))
    return out


def test_one_prune_is_linear_in_the_ledger_and_stats_only_what_it_removes(tmp_path, monkeypatch):
    out = folder_with_ledger(tmp_path, N)
    w = KickWriter(out, 44100, max_mb=N * 0.1 - 50)  # 500 files over the budget
    entries, reads = counting(w._ledger)
    w._ledger = type(w._ledger)(entries)
    stats = []
    real = KickWriter._is_there
    monkeypatch.setattr(KickWriter, "_is_there", lambda self, entry: stats.append(entry) or real(self, entry))
    removed = w.prune()
    assert len(removed) == 500
    assert reads[0] <= 2 * N, f"{reads[0]} sizes read to remove 500 of {N} (quadratic: about 10 M)"
    assert len(stats) <= 2 * len(removed), f"{len(stats)} files stat-ed to remove {len(removed)}"
    assert len(os.listdir(out)) == N - 500 + 1  # and the ledger


def test_one_prune_removes_a_bounded_number_the_rest_go_with_the_next_batches(tmp_path):
    out = folder_with_ledger(tmp_path, N)
    w = KickWriter(out, 44100, max_files=10)  # e.g. max_files lowered from 100,000 on SIGHUP
    first = w.prune()
    assert len(first) == writer_mod.MAX_PRUNE, len(first)
    while len(w.written) > 10:
        assert len(w.prune()) <= writer_mod.MAX_PRUNE
    assert len([n for n in os.listdir(out) if n.endswith(".wav")]) == 10
