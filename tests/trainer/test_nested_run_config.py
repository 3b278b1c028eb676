"""A run folder whose config.json or metrics are nested 10,000 deep: kicktrain goes on as without them, or says
why in one line; never a RecursionError."""

from __future__ import annotations

import soundfile as sf

from trainer.cli import _init_defaults
from trainer.cli import main as kicktrain
from trainer.synth import synth_batch

DEEP = "[" * 10_000 + "]" * 10_000
FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]


class Args:
    family = None
    preset = None
    init = None

    def __init__(self, run_dir) -> None:
        self.run_dir = str(run_dir)


def test_fit_defaults_ignore_a_nested_run_config(tmp_path):
    (tmp_path / "config.json").write_text(DEEP)
    assert _init_defaults(Args(tmp_path)) == ("waveform-diffusion", "small")  # unusable: the defaults


def test_a_run_with_a_nested_config_is_refused_in_one_line(tmp_path, capsys):
    kicks = tmp_path / "kicks"
    kicks.mkdir()
    for i, clip in enumerate(synth_batch(4, seed=5)):
        sf.write(kicks / f"k{i}.wav", clip, 44100, subtype="PCM_16")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(DEEP)
    assert kicktrain(["fit", str(kicks), "--run-dir", str(run), "--max-steps", "1", *FAST]) == 2
    err = capsys.readouterr().err
    assert "cannot read the run's config" in err and "too deeply nested" in err and "Traceback" not in err, err
