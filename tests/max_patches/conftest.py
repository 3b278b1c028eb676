"""Fixtures for the Max and Pd client tests: one running daemon shared by the round trips."""

from __future__ import annotations

import shutil

import pytest
from daemon_util import start_daemon


@pytest.fixture(scope="session")
def kick_daemon(tmp_path_factory, tiny_artifact):
    """A real daemon (tiny model, CPU, free loopback ports) for the Pd and liblo round trips.

    Session-scoped: starting one costs a few seconds of CPU, and these tests only add kicks to its folder.
    Its `reply_port` is bound by one client at a time (Pd's [netreceive], oscdump), never concurrently.
    """
    tmp = tmp_path_factory.mktemp("clients")
    models = tmp / "models"
    models.mkdir()
    shutil.copy2(tiny_artifact, models / "tiny.safetensors")
    with start_daemon(tmp, models) as d:
        yield d
