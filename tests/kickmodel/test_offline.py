"""One offline renderer and one WAV encoder: `kicktrain sample` and `kickserver render` make the same kicks, with
the same tags, for the same model, seeds and settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
from daemon_util import REPO, daemon_env, models_folder

from trainer.cli import main as kicktrain


def test_kicktrain_sample_and_kickserver_render_write_the_same_kicks(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    (tmp_path / "c.toml").write_text("")
    assert kicktrain(["sample", str(tiny_artifact), "--n", "3", "--out", str(tmp_path / "a"), "--seed", "11",
                      "--steps", "2", "--device", "cpu", "--control", "decay=0.3"]) == 0
    r = subprocess.run([sys.executable, "-m", "kickserver", "render", "--n", "3", "--batch", "3", "--out",
                        str(tmp_path / "b"), "--config", str(tmp_path / "c.toml"), "--models", str(models),
                        "--model", "tiny", "--device", "cpu", "--steps", "2", "--seed", "11", "--sample-rate",
                        "44100", "--control", "decay=0.3"], cwd=REPO, env=daemon_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rendered = [Path(p) for p in r.stdout.split()]
    sampled = sorted((tmp_path / "a").glob("*.wav"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    assert [p.name for p in sampled] == ["tiny_11.wav", "tiny_12.wav", "tiny_13.wav"]
    assert len(rendered) == 3
    for a, b in zip(sampled, rendered):
        xa, sra = sf.read(a, dtype="int32")
        xb, srb = sf.read(b, dtype="int32")
        assert sra == srb == 44100 and np.array_equal(xa, xb)
        ta, tb = sf.SoundFile(a).copy_metadata(), sf.SoundFile(b).copy_metadata()
        assert ta["comment"] == tb["comment"] and "steps=2" in ta["comment"] and "decay=0.3000" in ta["comment"]
        assert ta["software"].startswith("kicktrain") and tb["software"].startswith("kickserver")
