"""Where the suite writes: a user's folder ($XDG_CACHE_HOME/kickserver/bench) unless --out says otherwise, never the
tracked bench/results/*.json, docs/img/*.png or BENCHMARKS.md that the docs quote."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from daemon_util import daemon_env, make_artifact  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TRACKED = ("bench/results", "docs/img", "BENCHMARKS.md")


def _tracked_state() -> dict[str, str]:
    """{path: sha256} of every file the docs quote (the suite must leave them as they are)."""
    out = {}
    for name in TRACKED:
        p = REPO / name
        for f in sorted(p.rglob("*") if p.is_dir() else [p]):
            if f.is_file():
                out[str(f.relative_to(REPO))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def _run(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = daemon_env({"XDG_CACHE_HOME": str(cache)})
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_artifact(tmp_path_factory.mktemp("models") / "tiny.safetensors")


def test_the_suite_and_its_report_write_to_the_users_folder_by_default(tiny, tmp_path):
    before = _tracked_state()
    cache = tmp_path / "cache"
    proc = _run(["bench", "flops", "controls", "--quick", "--threads", "1", "--models", str(tiny)], cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = cache / "kickserver" / "bench"
    assert json.loads((folder / "flops-cpu.json").read_text())["benchmark"] == "flops"
    controls = (folder / "controls-cpu.json").read_text()
    assert json.loads(controls)["benchmark"] == "controls"
    # no path of this machine in a result (it may be committed and read anywhere): the model in a temp folder by
    # its name only, the plots in the user's folder likewise
    assert str(tmp_path) not in controls and str(tiny.parent) not in controls and str(REPO) not in controls
    assert json.loads(controls)["models"][0]["path"] == "(outside the repository) tiny.safetensors"
    assert sorted(p.name for p in (folder / "img").glob("controls-tiny-*.png"))  # the control plots beside them
    proc = _run(["bench.report"], cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (folder / "BENCHMARKS.md").read_text()
    assert "FLOPs and the hardware's limit" in page and "](img/controls-tiny-" in page
    assert _tracked_state() == before


def test_out_names_another_folder(tiny, tmp_path):
    out = tmp_path / "mine"
    proc = _run(["bench", "flops", "--quick", "--threads", "1", "--models", str(tiny), "--out", str(out)],
                tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "flops-cpu.json").is_file()
    assert not (tmp_path / "cache" / "kickserver").exists()


def test_the_reliability_table_rewrites_the_readme_only_when_asked(tmp_path, monkeypatch, capsys):
    """bench/reliability_table.py prints the table and keeps the figures in the user's folder; --readme writes
    README.md's table and bench/results/reliability.json. (The suite's run is replaced by two made-up cases: the
    real one takes minutes; the README and the results file are redirected into tmp_path.)"""
    from bench import common, reliability_table

    tallies = [{"case": "test_a", "what": "a | b", "faults": 1, "requests": 2, "kicks": 3, "lost": 0},
               {"case": "test_b", "what": "c", "faults": 0, "requests": 5, "kicks": 5, "lost": 0}]
    monkeypatch.setattr(reliability_table, "run_suite", lambda: tallies)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    (repo / "bench" / "results").mkdir(parents=True)
    readme = repo / "README.md"
    readme.write_text(f"intro\n{reliability_table.START}\nold table\n{reliability_table.END}\nafter\n")
    monkeypatch.setattr(reliability_table, "REPO", repo)
    monkeypatch.setattr(common, "RESULTS", repo / "bench" / "results")

    assert reliability_table.main([]) == 0
    assert "| `test_a` | a \\| b | 1 | 2 | 3 | 0 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "cache" / "kickserver" / "bench" / "reliability.json").read_text()) == tallies
    assert "old table" in readme.read_text() and not (repo / "bench" / "results" / "reliability.json").exists()

    assert reliability_table.main(["--readme"]) == 0
    doc = readme.read_text()
    assert "old table" not in doc and "| **2 cases** | | **1** | **7** | **8** | **0** |" in doc
    assert doc.startswith("intro\n") and doc.endswith("after\n")
    assert json.loads((repo / "bench" / "results" / "reliability.json").read_text()) == tallies


def test_no_committed_result_names_a_path_of_the_machine_that_made_it():
    """The figures the docs quote (bench/results, docs/eval) were measured somewhere; they must not say where on its
    disk (bench.common.portable, which every result writer calls, makes the paths relative or names only)."""
    import re

    where = re.compile(r"(?<![\w.:/])/(?:tmp|work|root|home|Users|mnt|media|srv|data|scratch|Volumes)/[^\s\"']*")
    found = []
    for folder in ("bench/results", "docs/eval"):
        for f in sorted((REPO / folder).rglob("*")):
            if f.suffix in (".json", ".txt"):
                found += [f"{f.relative_to(REPO)}: {m.group(0)}" for m in where.finditer(f.read_text())]
    assert not found, "\n".join(found[:10])


def test_portable_keeps_the_repository_relative_names_other_paths_and_leaves_addresses_alone(tmp_path, monkeypatch):
    from bench.common import OUTSIDE, portable

    kick = tmp_path / "my kicks"
    kick.mkdir()
    payload = {"artifact": str(REPO / "kickserver" / "models" / "default.safetensors"), "repo": str(REPO),
               "model": str(tmp_path / "tiny.safetensors"), "n": 3, "x": None,
               "argv": ["--kicks=" + str(tmp_path / "k"), f"v2 fits={tmp_path}/fits.npz", f"run {REPO}/bench/x.py"],
               "osc": ["/kick/done", "/kick/model custom", "/ping"],
               "said": "a FIFO, /dev/zero and /usr/lib/x.so named in a sentence",
               "long": "/" + "a" * 300 + "/b"}
    got = portable(payload)
    assert got["artifact"] == "kickserver/models/default.safetensors" and got["repo"] == "."
    assert got["model"] == f"{OUTSIDE} tiny.safetensors" and got["n"] == 3 and got["x"] is None
    assert got["argv"] == [f"--kicks={OUTSIDE} k", f"v2 fits={OUTSIDE} fits.npz", "run bench/x.py"]
    assert got["osc"] == payload["osc"] and got["said"] == payload["said"] and got["long"] == payload["long"]
    monkeypatch.setenv("HOME", "/")  # a home at the root makes no address a path
    assert portable("/kick/done") == "/kick/done"
