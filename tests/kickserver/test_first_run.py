"""What a new user meets: which model serves and why (log and /kick/status), a missing
model asked for by /kick/model, a variation source outside the roots naming --read-root. (Also
`kickserver send` with no daemon in test_cli_send.py, a port in use found before the model loads in
test_config_server.py.)"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from daemon_util import make_artifact, start_daemon

from kickserver.sources import SourceRefused, resolve_source


def status(d) -> list:
    (a, p), = d.send("/kick/status", timeout=5)
    assert a == "/kick/status", p
    return p


def wait_status(d, name: str, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while True:
        p = status(d)
        if p[0] == name:
            return p
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} not served within {timeout} s (status {p}):\n{d.stderr_text()}")
        time.sleep(0.1)


def drop(src: Path, dest: Path) -> None:
    tmp = dest.parent / f".{dest.name}.part"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)


# ---------------------------------------------------------------- item 4: which model serves, and why


def test_the_status_and_the_log_say_why_a_model_serves(tmp_path):
    """A fresh install (no models folder): the bundled default; a model exported there later is swapped in
    (newest in the models folder); one chosen by /kick/model; after a restart the remembered one; --model pins."""
    models = tmp_path / "share" / "models"
    with start_daemon(tmp_path, models, pin=False) as d:
        p = status(d)
        assert p[:2] == ["default", "cpu"] and len(p) == 6 and p[4] == "bundled default", p  # p[5]: memory
        assert d.wait_for_log("serving default: bundled default", timeout=1), d.stderr_text()
        drop(make_artifact(tmp_path / "mine.safetensors", seed=5), models / "mine.safetensors")
        p = wait_status(d, "mine", 10)
        assert p[4] == "newest in the models folder", p
        # the log says it, and how to keep a model instead
        assert d.wait_for_log("serving mine: newest in the models folder", timeout=5), d.stderr_text()
        line = [ln for ln in d.stderr_text().splitlines() if "serving mine: newest" in ln][-1]
        assert "--model" in line, line
        (a, p), = d.send("/kick/model", "default", timeout=60)
        assert (a, p) == ("/kick/model", ["default"])
        assert status(d)[4] == "chosen by /kick/model"
    with start_daemon(tmp_path, models, pin=False) as d:  # the choice is remembered, as a choice
        p = status(d)
        assert p[0] == "default" and p[4] == "chosen by /kick/model", p
        assert d.wait_for_log("serving default: chosen by /kick/model", timeout=1), d.stderr_text()
    with start_daemon(tmp_path, models, model="mine") as d:
        assert status(d)[4] == "pinned by --model"
    with start_daemon(tmp_path, models, pin=False) as d:  # a pinned run served mine last: remembered, not chosen
        p = status(d)
        assert p[0] == "mine" and p[4] == "remembered from the last run", p
        assert d.wait_for_log("serving mine: remembered from the last run", timeout=1), d.stderr_text()


@pytest.mark.parametrize("serving", ["another model", "the same model"])
def test_a_choice_holds_when_a_fit_exports_and_across_a_restart(tmp_path, serving):
    """`/kick/model default` answered "chosen by /kick/model", yet a running fit's next export
    (a new artifact in the models folder of a daemon without --model) was swapped in minutes later, and remembered,
    so the next start served the half-trained model. A choice holds until the next one: the export is listed, not
    served, here and after a restart. "the same model": the choice of the model already serving (answered at once)."""
    models = tmp_path / "share" / "models"
    with start_daemon(tmp_path, models, pin=False) as d:
        if serving == "another model":
            drop(make_artifact(tmp_path / "mine.safetensors", seed=5), models / "mine.safetensors")
            wait_status(d, "mine", 10)
        (a, p), = d.send("/kick/model", "default", timeout=60)
        assert (a, p) == ("/kick/model", ["default"])
        drop(make_artifact(tmp_path / "fit.safetensors", seed=6), models / "fit.safetensors")  # the fit's export
        assert d.wait_for_log("model fit is ready in", timeout=20), d.stderr_text()
        p = status(d)
        assert p[0] == "default" and p[4] == "chosen by /kick/model", p
        (a, names), = d.send("/kick/models", timeout=10)
        assert "fit" in names, names  # listed: the musician can choose it
    with start_daemon(tmp_path, models, pin=False) as d:
        p = status(d)
        assert p[0] == "default" and p[4] == "chosen by /kick/model", p
        drop(make_artifact(tmp_path / "fit2.safetensors", seed=7), models / "fit.safetensors")  # its next export
        assert d.wait_for_log("model fit is ready in", timeout=20), d.stderr_text()
        assert status(d)[:1] == ["default"]
        d.signal(signal.SIGHUP)  # a reload without a configured model keeps the choice
        assert d.wait_for_log("SIGHUP: model default unchanged", timeout=30), d.stderr_text()
        assert status(d)[::4] == ["default", "chosen by /kick/model"]
        (a, p), = d.send("/kick/model", "fit", timeout=60)  # until the musician chooses again
        assert (a, p) == ("/kick/model", ["fit"])
        assert status(d)[4] == "chosen by /kick/model"


# ---------------------------------------------------------------- item 5: a missing model


def test_a_missing_model_is_refused_naming_the_ones_there_and_the_served_one_stays(tmp_path):
    """The models folder holds no artifacts: /kick/model nosuch used to answer `/kick/model default`."""
    models = tmp_path / "models"
    models.mkdir()
    with start_daemon(tmp_path, models, pin=False) as d:
        (a, p), = d.send("/kick/model", "nosuch", timeout=10)
        assert a == "/kick/error" and p[0] == -1, (a, p)
        assert "'nosuch' not found" in p[1] and "available: default" in p[1], p
        assert status(d)[0] == "default"
        (a, p), = d.send("/kick/model", "default", timeout=10)  # the bundled one is still there by name
        assert (a, p) == ("/kick/model", ["default"])


# ---------------------------------------------------------------- item 6: messages that point to the fix


def test_a_source_outside_the_roots_names_read_root(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "k.wav").write_bytes(b"x")
    (out / "link.wav").symlink_to(elsewhere / "k.wav")
    with pytest.raises(SourceRefused) as e:
        resolve_source(str(elsewhere / "k.wav"), out, [])
    assert f"--read-root {elsewhere}" in str(e.value), e.value
    # a link out: where it points is not named (the reply may go to a forged address), the way out is
    with pytest.raises(SourceRefused) as e:
        resolve_source("link.wav", out, [])
    assert "--read-root" in str(e.value) and "absolute path" in str(e.value) and str(elsewhere) not in str(e.value)
