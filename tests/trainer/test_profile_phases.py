"""`kicktrain profile` splits a step honestly: on a GPU the profiler keeps each phase twice (the CPU's range and the
GPU's span of its kernels, with no CPU time), and the phases add up to the step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def _event(key: str, cpu_us: float, device: str = "cpu", device_us: float = 0.0):
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    return SimpleNamespace(key=key, cpu_time_total=cpu_us if device == "cpu" else 0.0, self_cpu_time_total=0.0,
                           device_time_total=device_us, self_device_time_total=0.0, count=1,
                           device_type=DeviceType.CPU if device == "cpu" else DeviceType.CUDA)


def test_a_gpu_profile_keeps_each_phase_time_beside_the_gpus_own_range_of_it():
    """On a GPU the profiler keeps a phase twice: the CPU's range, and the GPU's range of the kernels launched in it
    (no CPU time). The summary read the one it met last: forward + backward 0.0 ms on an H200."""
    from trainer.profiling import summarise

    class Prof:
        def key_averages(self):
            return [_event("ProfilerStep#2", 20_000), _event("ProfilerStep#2", 0, "cuda", 19_000),
                    _event("augment", 4_000), _event("forward", 6_000), _event("forward", 0, "cuda", 5_500),
                    _event("backward", 9_000), _event("backward", 0, "cuda", 8_800)]

    s = summarise(Prof(), 1, torch.device("cuda"))
    assert s["phases_ms_per_step"] == {"augment": 4.0, "forward": 6.0, "backward": 9.0}
    assert s["compute_ms"] == 15.0 and s["step_ms"] == 20.0
    assert s["phases_device_ms_per_step"] == {"forward": 5.5, "backward": 8.8}


def test_profile_phases_add_up_to_the_step(synth_kicks, tmp_path):
    out = tmp_path / "prof"
    run = subprocess.run([sys.executable, "-m", "trainer", "profile", str(synth_kicks), "--preset", "tiny",
                          "--steps", "5", "--out", str(out), "--device", "cpu"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    s = json.loads((out / "summary.json").read_text())
    phases = s["phases_ms_per_step"]
    assert phases["forward"] > 0 and phases["backward"] > 0, phases
    covered = sum(phases.values())
    assert 0.8 * s["step_ms"] <= covered <= 1.02 * s["step_ms"], (covered, s["step_ms"], phases)
