"""A variation source or an interpolation end at any sample rate costs the daemon a bounded amount of memory
(a 3.7 KB WAV at 9071 Hz took it from 0.6 to 7.25 GB)."""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np
import soundfile as sf
from daemon_util import models_folder, start_daemon

STEPS = 2


def proc_status(pid: int, key: str) -> int:
    """A /proc/PID/status figure in bytes (VmRSS, VmHWM, VmSize)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def write_kick(path: Path, sr: int, seconds: float = 0.2) -> Path:
    t = np.arange(int(seconds * sr)) / sr
    sf.write(path, 0.8 * np.sin(2 * np.pi * 60 * t) * np.exp(-t * 20), sr, subtype="PCM_16")
    return path


def test_odd_rate_sources_are_served_within_100_mb_of_idle(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models) as d:
        pid = d.proc.pid
        write_kick(d.out_dir / "common.wav", 48000)
        odd = [write_kick(d.out_dir / f"odd{sr}.wav", sr) for sr in (9071, 13001)]
        assert all(p.stat().st_size < 8000 for p in odd)  # a few KB each
        # warm every path once at a common rate, so what follows measures the odd rates alone
        (a, p), = d.send("/kick/variation", "common.wav", "strength", 0.5, "steps", STEPS, timeout=60)
        assert a == "/kick/done", p
        (a, p), = d.send("/kick/interpolate", "a", "common.wav", "b", 3, "t", 0.5, "steps", STEPS, timeout=60)
        assert a == "/kick/done", p
        idle = proc_status(pid, "VmRSS")
        # the old 1.6 GB kernel fails here instead of taking the machine's memory: at most 1 GB more address space
        resource.prlimit(pid, resource.RLIMIT_AS, (proc_status(pid, "VmSize") + (1 << 30), resource.RLIM_INFINITY))
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from the current RSS
        for src in odd:
            (a, p), = d.send("/kick/variation", src.name, "strength", 0.5, "steps", STEPS, "id", 3, timeout=60)
            assert a == "/kick/done", (src.name, p)
            (a, p), = d.send("/kick/interpolate", "a", str(src), "b", 3, "t", 0.5, "steps", STEPS, timeout=60)
            assert a == "/kick/done", (src.name, p)
        peak = proc_status(pid, "VmHWM")
        assert peak - idle < 100 << 20, f"peak {peak >> 20} MB, idle {idle >> 20} MB"
        assert "Traceback" not in d.stderr_text()


def test_a_rate_outside_the_range_is_refused_at_once(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models) as d:
        write_kick(d.out_dir / "slow.wav", 500, seconds=0.5)
        (a, p), = d.send("/kick/variation", "slow.wav", "id", 9, "steps", STEPS)
        assert a == "/kick/error", p
        assert p[0] == 9 and "slow.wav" in p[1] and "500 Hz" in p[1] and "1000..384000 Hz" in p[1], p
        # refused in the receive loop, from the header (never queued for the worker)
        assert d.wait_for_log("refused variation 9", timeout=5)
