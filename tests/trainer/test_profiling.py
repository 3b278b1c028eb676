"""`kicktrain profile` as a new user meets it on a CPU: a quiet stderr, a picture of where a step's time goes,
a small trace, and the output saying how to open it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_profile_on_a_cpu_is_quiet_draws_the_phases_and_says_how_to_open_the_trace(synth_kicks, tmp_path):
    """A fresh process (what prints the CUDA line, kineto, prints it once per process, from C++ on fd 2)."""
    out = tmp_path / "prof"
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    env["PYTHONWARNINGS"] = "default"  # a warning the profile lets through would show
    run = subprocess.run([sys.executable, "-m", "trainer", "profile", str(synth_kicks), "--preset", "tiny",
                          "--steps", "5", "--out", str(out), "--device", "cpu"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    err = run.stderr.lower()
    assert "cuda" not in err and "gpugetdevicecount" not in err, run.stderr
    assert "warning" not in err, run.stderr
    png = out / "phases.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob(".*tmp*"))  # written atomically: no temp file left beside it
    assert "ui.perfetto.dev" in run.stdout and "torch-tb-profiler" in run.stdout
    assert str(png) in run.stdout
    # the summary averages all 3 recorded steps; the trace holds only the last one (--trace-steps 1), and its size
    # is printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["active_steps"] == 3 and summary["step_ms"] > 0
    (trace,) = out.glob("*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    steps = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#4"}, steps
    assert not any("Input Dims" in e.get("args", {}) for e in events)  # shapes only with --detail
    assert f"{trace.stat().st_size / 1e6:.1f} MB" in run.stdout


def test_phase_picture_stacks_the_phases_of_a_step():
    from trainer.profiling import phase_figure

    summary = {"device": "cpu", "family": "mel_vae", "preset": "tiny", "step_ms": 100.0, "active_steps": 3,
               "phases_ms_per_step": {"data": 1.0, "augment": 9.0, "forward": 40.0, "backward": 30.0,
                                      "optimizer": 5.0}}
    fig = phase_figure(summary)
    ax = fig.axes[0]
    widths = [p.get_width() for p in ax.patches]
    assert widths == pytest.approx([1.0, 9.0, 40.0, 30.0, 5.0, 15.0])  # the rest of the step is "other"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0].startswith("data") and labels[-1].startswith("other")
    assert "ms" in ax.get_xlabel()


def test_the_pictures_title_and_the_console_say_one_step_time():
    """The picture's title said 6286 ms (the sum of the phases it draws; a rest under 0.5 % of the
    step is not drawn) where the console said 6312.2 ms (the profiler's step). Both say the step's time now."""
    from trainer.profiling import format_summary, phase_figure

    phases = {"data": 86.0, "augment": 200.0, "forward": 3000.0, "backward": 2900.0, "optimizer": 100.0}  # 6286
    s = {"device": "cpu", "family": "mel_vae", "preset": "small", "step_ms": 6312.2, "active_steps": 4,
         "phases_ms_per_step": phases, "op_time_ms_per_step": 6000.0, "conv_share": 0.5, "matmul_share": 0.2,
         "data_and_augmentation_ms": 286.0, "waited_for_data_ms": 0.0, "compute_ms": 5900.0, "optimizer_ms": 100.0,
         "top_ops": []}
    title = phase_figure(s).axes[0].get_title()
    assert "6312.2 ms a step" in title, title
    assert format_summary(s).splitlines()[0].endswith(": 6312.2 ms"), format_summary(s)


def test_an_out_that_is_a_file_is_refused_in_one_line(tmp_path, capsys):
    from trainer.cli import main

    out = tmp_path / "summary"
    out.write_text("mine")
    assert main(["profile", str(tmp_path), "--out", str(out), "--preset", "tiny"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "Traceback" not in err
    assert out.read_text() == "mine"
