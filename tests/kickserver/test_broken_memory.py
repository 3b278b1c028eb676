"""Files in the daemon's folders that are nested 10,000 deep, FIFOs or truncated: the daemon starts, answers, and
says what it ignored in one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from daemon_util import models_folder, start_daemon
from safetensors.torch import load_file, save_file

from kickmodel.artifact import read_metadata
from kickserver import state

DEEP = "[" * 10_000 + "]" * 10_000


def nested_artifact(src: Path, dst: Path) -> Path:
    save_file(load_file(str(src)), str(dst), metadata={**read_metadata(src), "config": DEEP})
    return dst


def status_model(d) -> str:
    (a, p), = d.send("/kick/status", timeout=5)
    assert a == "/kick/status", p
    return str(p[0])


def test_a_nested_artifact_is_left_out_of_the_listing(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    nested_artifact(tiny_artifact, models / "deep.safetensors")
    with start_daemon(tmp_path, models, model="tiny") as d:
        (a, p), = d.send("/kick/models", timeout=20)
        assert a == "/kick/models" and "tiny" in p and "deep" not in p, (a, p)
        assert "RecursionError" not in d.stderr_text() and "Traceback" not in d.stderr_text()


def test_a_start_whose_remembered_model_is_gone_beside_a_nested_artifact(tmp_path, tiny_artifact):
    """Choosing another model lists the folder: the nested file there crashed the start."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    nested_artifact(tiny_artifact, models / "deep.safetensors")
    state.StateFile(models).write_last_model("gone")
    with start_daemon(tmp_path, models, pin=False) as d:
        assert d.wait_for_log("the model that served last (gone) is gone", timeout=5)
        assert "Traceback" not in d.stderr_text()


def test_a_nested_state_file_is_ignored_and_the_daemon_starts(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    state.legacy_path_for(models).write_text("[" * 2048 + "]" * 2048)  # 4 KB
    with start_daemon(tmp_path, models, pin=False) as d:
        log = d.stderr_text()
        assert log.count("ignoring") == 1 and "too deeply nested" in log and "Traceback" not in log, log
        assert status_model(d)


def test_a_fifo_as_the_state_file_neither_hangs_the_start_nor_sigterm(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    os.mkfifo(state.legacy_path_for(models))
    with start_daemon(tmp_path, models, pin=False, ready_timeout=60) as d:
        assert "not a regular file" in d.stderr_text()
        d.signal(signal.SIGTERM)
        try:
            assert d.proc.wait(timeout=20) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGTERM did not stop the daemon") from None


@pytest.mark.parametrize("chosen", [False, True], ids=["served last", "chosen by /kick/model"])
def test_a_remembered_model_that_no_longer_loads_falls_back(tmp_path, tiny_artifact, chosen):
    """The remembered file (served last, or chosen, which would hold) is now cut in the middle of its weights: its
    header passes, the load fails."""
    models = models_folder(tmp_path / "models", tiny_artifact)
    raw = Path(tiny_artifact).read_bytes()
    (models / "mine.safetensors").write_bytes(raw[: len(raw) - (len(raw) - 8) // 3])
    state.StateFile(models).write_last_model("mine", chosen=chosen)
    with start_daemon(tmp_path, models, pin=False) as d:
        log = d.stderr_text()
        assert log.count("the model that served last (mine) does not load") == 1, log
        assert status_model(d) != "mine"
    # the memory now names the model that served
    assert state.read_last_model(models) not in (None, "mine")


def test_a_fifo_or_nested_ledger_in_the_output_folder_does_not_stop_the_start(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    for kind in ("fifo", "nested"):
        out = tmp_path / f"out-{kind}"
        out.mkdir()
        ledger = out / ".kickserver-ledger.json"
        os.mkfifo(ledger) if kind == "fifo" else ledger.write_text(DEEP)
        t0 = time.monotonic()
        with start_daemon(tmp_path, models, out_dir=out, extra_args=["--max-files", "10"]) as d:
            assert "ignoring unreadable ledger" in d.stderr_text(), d.stderr_text()
        assert time.monotonic() - t0 < 60
        shutil.rmtree(out)
