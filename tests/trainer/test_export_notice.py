"""`kicktrain fit --export-dir` into a folder a daemon serves from: it says, once, that a kickserver serving from
that folder without --model switches to the export, and how to pin one instead."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import soundfile as sf

from kickmodel.families import preset
from trainer.synth import synth_batch
from trainer.train import FitOptions, fit


def test_the_first_export_says_that_an_unpinned_daemon_switches_to_it(tmp_path):
    kicks = tmp_path / "kicks"
    kicks.mkdir()
    for i, clip in enumerate(synth_batch(6, seed=3)):
        sf.write(kicks / f"kick_{i:02d}.wav", clip, 44100, subtype="PCM_16")
    cfg = preset("tiny")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, ckpt_every=1))  # three exports: one notice
    lines: list[str] = []
    models = tmp_path / "models"
    fit(FitOptions(data=[str(kicks)], run_dir=tmp_path / "run", cfg=cfg, device="cpu", max_steps=3, progress=False,
                   tensorboard=False, export_dir=models, export_name="mine"), log=lines.append)
    assert (models / "mine.safetensors").is_file()
    notes = [ln for ln in lines if "switches to it" in ln]
    assert len(notes) == 1, lines
    note = notes[0]
    assert str(models) in note and "without --model" in note and "--model NAME" in note, note
    assert Path(models).name in note
