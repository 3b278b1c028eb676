"""`python -m bench --quick`: every benchmark's code path on tiny models of each family, its JSON, and the page
`python -m bench.report` makes of it. The figures are not asserted (a quick run's mean nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from daemon_util import daemon_env, make_artifact  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NAMES = ("train", "sampling", "osc", "controls", "quality", "flops", "custom")
FAMILIES = {"wave": "waveform_diffusion", "vae": "mel_vae", "latent": "latent_diffusion"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    models = tmp / "models"
    models.mkdir()
    paths = [make_artifact(models / f"tiny-{k}.safetensors", family=f) for k, f in FAMILIES.items()]
    out, img = tmp / "out", tmp / "img"
    cmd = [sys.executable, "-m", "bench", "--quick", "--threads", "1", "--out", str(out), "--img", str(img),
           "--guidance", "1,2", "--models", *map(str, paths)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=daemon_env(), capture_output=True, text=True, timeout=600)
    return {"proc": proc, "out": out, "img": img, "tmp": tmp, "seconds": time.monotonic() - t0}


def test_quick_suite_runs_every_benchmark_and_writes_its_json(quick_run):
    proc = quick_run["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"python -m bench --quick: {quick_run['seconds']:.0f} s")
    for name in NAMES:
        d = json.loads((quick_run["out"] / f"{name}-cpu.json").read_text())
        assert d["suite"] == 1 and d["benchmark"] == name and d["quick"] is True
        m = d["machine"]
        assert m["cores"] >= 1 and m["torch"] and m["cpu"] and m["gpu"] is None
        assert d["rows"], name
        assert not [r for r in d["rows"] if "error" in r], (name, d["rows"])
        assert f"== {name} (quick)" in proc.stdout
    sampling = json.loads((quick_run["out"] / "sampling-cpu.json").read_text())
    assert {r["family"] for r in sampling["rows"]} == set(FAMILIES.values())
    assert {r["sampler"] for r in sampling["rows"] if r["family"] == "mel_vae"} == {"one pass"}
    train = json.loads((quick_run["out"] / "train-cpu.json").read_text())
    from kickmodel.families import family_names

    # the training benchmark builds every registered family itself (not only the models given)
    assert {(r["family"], r["mode"]) for r in train["rows"]} == {(f, m) for f in family_names()
                                                                 for m in ("optimised", "naive")}
    osc = json.loads((quick_run["out"] / "osc-cpu.json").read_text())
    b = osc["burst"]
    assert b["kicks_done"] + b["refused"] == b["kicks_asked"] and b["lost"] == 0 and b["max_queue"] >= 1
    assert all(r["p95_s"] >= r["median_s"] for r in osc["rows"])
    custom = json.loads((quick_run["out"] / "custom-cpu.json").read_text())
    assert custom["train_steps"] == 2 and 0 < custom["time_to_model_s"] < 600
    assert {r["name"] for r in custom["rows"] if r["kind"] == "model"} == {"tiny-wave @ 10", "custom @ 10"}
    controls = json.loads((quick_run["out"] / "controls-cpu.json").read_text())
    assert {g["model"] for g in controls["guidance"]} == {"tiny-wave", "tiny-latent"}  # mel-vae has no guidance
    for model in ("tiny-wave", "tiny-vae", "tiny-latent"):
        for control in ("decay", "pitch", "click"):
            assert (quick_run["img"] / f"controls-{model}-{control}.png").stat().st_size > 1000


def test_report_makes_the_page_from_the_json(quick_run):
    page, img = quick_run["tmp"] / "BENCHMARKS.md", quick_run["tmp"] / "page-img"
    proc = subprocess.run([sys.executable, "-m", "bench.report", "--results", str(quick_run["out"]), "--out",
                           str(page), "--img", str(img)], cwd=REPO, env=daemon_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    for heading in ("The daemon end to end", "Sampling latency", "Quality per cost", "FLOPs", "Do the dials",
                    "Training speed", "Time to a custom model"):
        assert f"### {heading}" in text
    assert "could not show" not in text and "A --quick run" in text
    assert "## GPU\n\nNot measured yet" in text
    for pic in ("bench-latency-steps.png", "bench-quality-latency.png", "controls-tiny-wave-pitch.png"):
        assert (img / pic).is_file() and f"page-img/{pic}" in text
