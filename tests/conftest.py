"""Shared fixtures. Tests make what they need here or read it from tests/fixtures, never from outside the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(int(os.environ.get("KICK_TEST_THREADS", "1")))

FIXTURES = Path(__file__).parent / "fixtures"


def make_tiny_artifact(path: Path, seed: int = 0) -> Path:
    """A tiny-preset model with seeded random weights, exported as a real artifact (fast; no training)."""
    from trainer.artifact import save_artifact
    from trainer.config import preset
    from trainer.model import build_network

    cfg = preset("tiny")
    torch.manual_seed(seed)
    net = build_network(cfg)
    # Zero-initialised output layers would make every sample silent; give them small weights.
    with torch.no_grad():
        for p in net.parameters():
            if p.abs().sum() == 0 and p.ndim > 1:
                p.normal_(0, 0.02)
    quantiles = [[float(i) / 32 for i in range(33)] for _ in cfg.model.controls]
    return save_artifact(path, net.state_dict(), cfg, step=0, control_quantiles=quantiles,
                         training={"note": "random weights for tests"})


@pytest.fixture(scope="session")
def tiny_artifact(tmp_path_factory) -> Path:
    """Path to a tiny artifact named tiny.safetensors in its own folder (a models folder)."""
    folder = tmp_path_factory.mktemp("models")
    return make_tiny_artifact(folder / "tiny.safetensors")
