"""Each family's training half is its recipe (trainer/recipes/<name>.py): what an export may change comes from the
recipe (trainer/export.py names no family), the export writes the recipe's tensors and configs without building
a module, and `kicktrain fit --train-steps` (its older name --max-steps still taken) sets the training steps."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import soundfile as sf
import torch

from kickmodel.config import ConfigError
from kickmodel.families import family_names, get_family
from kickmodel.loading import load_artifact
from trainer.checkpoint import checkpoint_dir
from trainer.cli import main as kicktrain
from trainer.export import export_run
from trainer.recipes import get_recipe, recipe_names
from trainer.recipes import mel_vae as mel_vae_recipe
from trainer.recipes.mel_vae import MelVAERecipe
from trainer.synth import synth_batch

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]


@pytest.fixture(scope="module")
def kicks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kicks")
    for i, clip in enumerate(synth_batch(8, seed=7)):
        sf.write(folder / f"k{i}.wav", clip, 44100, subtype="PCM_16")
    return folder


@pytest.fixture(scope="module")
def vae_run(kicks, tmp_path_factory) -> Path:
    """A 2-step mel-VAE run (tiny: a learned inverter) with a checkpoint to export."""
    run = tmp_path_factory.mktemp("runs") / "vae"
    assert kicktrain(["fit", str(kicks), "--family", "mel-vae", "--run-dir", str(run), *FAST, "--train-steps", "2",
                      "--set", "train.ckpt_every=2"]) == 0
    return run


def test_every_export_key_is_a_field_of_its_section():
    """A recipe's export_keys name settings its family's config has (a section it has, a field of it)."""
    for name in recipe_names():
        recipe, cfg = get_recipe(name), get_family(name).presets()["tiny"]
        assert recipe.export_keys, name
        for section, keys in recipe.export_keys.items():
            fields = {f.name for f in dataclasses.fields(type(getattr(cfg, section)))}
            assert set(keys) <= fields, (name, section, set(keys) - fields)


def test_export_py_names_no_family_and_no_key():
    text = (ROOT / "trainer" / "export.py").read_text()
    for name in family_names():
        assert name not in text and get_family(name).cli_name not in text, name
    assert not [k for k in ("EXPORT_KEYS", "SAMPLING_KEYS", "griffin_lim_iters", "temperature", "time_power")
                if k in text]


def test_the_keys_an_export_may_change_come_from_the_familys_recipe(vae_run, tmp_path, monkeypatch):
    """The mel-VAE recipe lets an export switch to Griffin-Lim (its inverter part then left out) and set the
    temperature; a recipe that says otherwise changes what export takes, with nothing in export.py touched."""
    out = export_run(vae_run, tmp_path / "gl.safetensors", {"inverter.kind": "griffin-lim",
                                                            "sampling.temperature": 0.8}, log=lambda m: None)
    art = load_artifact(out)
    assert art.config.inverter.kind == "griffin-lim" and art.config.sampling.temperature == 0.8
    assert set(art.part_configs) == {"vae"} and not art.part_tensors("inverter")
    with pytest.raises(ConfigError, match=r"export cannot change sampling\.steps of a mel_vae model \(it can change: "
                                          r"sampling\.temperature, inverter\.kind, inverter\.griffin_lim_iters\)"):
        export_run(vae_run, tmp_path / "x.safetensors", {"sampling.steps": 10}, log=lambda m: None)

    monkeypatch.setattr(MelVAERecipe, "export_keys", {"sampling": ("temperature",)})  # the recipe, not export.py
    with pytest.raises(ConfigError, match=r"export cannot change inverter\.kind .*\(it can change: "
                                          r"sampling\.temperature\)"):
        export_run(vae_run, tmp_path / "y.safetensors", {"inverter.kind": "griffin-lim"}, log=lambda m: None)
    export_run(vae_run, tmp_path / "z.safetensors", {"sampling.temperature": 0.9}, log=lambda m: None)


def test_export_help_lists_each_recipes_keys(capsys):
    with pytest.raises(SystemExit):
        kicktrain(["export", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps lines after a hyphen
    for name in recipe_names():
        recipe = get_recipe(name)
        keys = ", ".join(f"{s}.{k}" for s, ks in recipe.export_keys.items() for k in ks)
        assert f"{recipe.cli_name}: {keys}" in text, name


def test_export_builds_nothing_of_training(vae_run, tmp_path, monkeypatch):
    """The artifact is the run's EMA weights and config as the recipe lays them out (artifact_contents): no
    objective, no mel front end, no module is built for it (it built all three)."""
    def refuse(*a, **k):
        raise AssertionError("export built a training module")

    with monkeypatch.context() as m:
        m.setattr(MelVAERecipe, "objective", refuse)
        m.setattr(mel_vae_recipe, "MelFrontEnd", refuse)
        m.setattr(mel_vae_recipe.MelVAEModule, "__init__", refuse)
        path = export_run(vae_run, tmp_path / "v.safetensors", log=lambda m: None)
    art = load_artifact(path)
    assert set(art.part_configs) == {"vae", "inverter"}
    state = torch.load(sorted(checkpoint_dir(vae_run).glob("step-*.pt"))[-1], weights_only=True)
    assert all(torch.equal(art.tensors[k], v) for k, v in state["ema"]["model"].items())  # the EMA weights


def test_map_help_names_every_family_that_can_encode(capsys):
    with pytest.raises(SystemExit):
        kicktrain(["map", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(mel-vae, latent-diffusion, kick-synth)" in text  # from the registry: kick-synth encodes too


@pytest.mark.parametrize("flag", ["--train-steps", "--max-steps"])
def test_fit_train_steps_and_its_older_name(flag, kicks, tmp_path, capsys):
    """`fit --train-steps N` trains N steps; `--max-steps N`, its older name (kickserver serve's --max-steps is
    the sampler's), still does the same."""
    run = tmp_path / "run"
    assert kicktrain(["fit", str(kicks), "--run-dir", str(run), *FAST, flag, "3", "--set", "train.ckpt_every=100",
                      "--set", "data.val_fraction=0", "--set", "train.log_every=1"]) == 0
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    assert "resumed" not in capsys.readouterr().err


def test_fit_help_says_train_steps_and_its_alias(capsys):
    with pytest.raises(SystemExit):
        kicktrain(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--train-steps N, --max-steps N" in text and "--max-steps is its older name" in text
