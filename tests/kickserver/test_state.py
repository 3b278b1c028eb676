"""The last served model, remembered across restarts: written atomically in the user's state folder (never the
models folder), read bounded, bad files ignored; an older version's file in the models folder still read."""

from __future__ import annotations

import json
import logging
import os

import pytest

from kickserver import state


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


def test_round_trip_and_atomic(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    s = state.StateFile(models)
    s.write_last_model("mine")
    assert state.read_last_model(models) == "mine"
    assert json.loads(state.path_for(models).read_text()) == {"version": 1, "model": "mine"}
    s.write_last_model("other", chosen=True)
    assert state.read_state(models) == ("other", True)
    assert json.loads(state.path_for(models).read_text()) == {"version": 1, "model": "other", "chosen": True}
    assert os.listdir(models) == []  # never in the models folder (it may be the package's kickserver/models)
    assert state.path_for(models).parent == tmp_path / "xdg-state" / "kickserver"
    assert os.listdir(state.path_for(models).parent) == [state.path_for(models).name]  # no temp file left behind
    assert state.path_for(tmp_path / "elsewhere") != state.path_for(models)  # one file per models folder


def test_an_older_versions_file_in_the_models_folder_is_still_read(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    state.legacy_path_for(models).write_text('{"version": 1, "model": "mine"}')
    assert state.read_state(models) == ("mine", False)
    state.StateFile(models).write_last_model("other")  # the new file wins from then on
    assert state.read_last_model(models) == "other"
    assert state.legacy_path_for(models).read_text() == '{"version": 1, "model": "mine"}'  # left as it was


def test_bad_files_are_ignored_with_one_line(tmp_path, caplog):
    p = state.path_for(tmp_path)
    p.parent.mkdir(parents=True)
    assert state.read_last_model(tmp_path) is None  # none yet: no log line
    for data in (b"not json", b'{"version": 1, "model": "../etc/passwd"}', b'{"version": 2, "model": "x"}',
                 b'["model"]', b'{"version": 1, "model": "' + b"m" * 5000 + b'"}', b"\xff\xfe"):
        p.write_bytes(data)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kickserver.state"):
            assert state.read_last_model(tmp_path) is None, data[:40]
        assert len(caplog.records) == 1 and "ignoring" in caplog.records[0].getMessage()


def test_a_failed_write_is_logged_once_and_never_raises(tmp_path, caplog, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file"))  # the state folder cannot be made
    s = state.StateFile(tmp_path / "models")
    with caplog.at_level(logging.WARNING, logger="kickserver.state"):
        s.write_last_model("a")
        s.write_last_model("b")
    assert len(caplog.records) == 1 and "cannot remember the served model" in caplog.text


def test_nested_brackets_a_fifo_and_a_link_are_ignored_at_once_with_one_line(tmp_path, caplog):
    """4 KB of nested brackets raised RecursionError; a FIFO blocked the start for good."""
    import threading

    p = state.path_for(tmp_path)
    p.parent.mkdir(parents=True)
    p.write_bytes(b"[" * 2048 + b"]" * 2048)
    for kind, why in (("nested", "too deeply nested"), ("fifo", "not a regular file"), ("link", "cannot read it")):
        if kind == "fifo":
            p.unlink()
            os.mkfifo(p)
        elif kind == "link":
            p.unlink()
            (tmp_path / "elsewhere.json").write_text('{"version": 1, "model": "mine"}')
            p.symlink_to(tmp_path / "elsewhere.json")
        caplog.clear()
        got: list = []
        with caplog.at_level(logging.WARNING, logger="kickserver.state"):
            t = threading.Thread(target=lambda out=got: out.append(state.read_last_model(tmp_path)), daemon=True)
            t.start()
            t.join(timeout=5)
        assert not t.is_alive(), f"reading a {kind} state file blocked"
        assert got == [None], kind
        assert len(caplog.records) == 1 and "ignoring" in caplog.text and why in caplog.text, (kind, caplog.text)
