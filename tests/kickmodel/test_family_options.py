"""Families declare their command-line options in their training recipes (trainer/recipes/<name>.py):
each registered recipe's FamilyOption declarations become kicktrain's flags (no line in trainer/cli.py names them);
one given to a family that does not take it is refused in one line; a resumed run refuses an option that disagrees
with it."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import soundfile as sf

from kickmodel import families
from kickmodel.config import ConfigError
from kickmodel.families import family_names, get_family
from trainer import recipes
from trainer.cli import main as kicktrain
from trainer.recipes import get_recipe
from trainer.recipes.base import FamilyOption
from trainer.recipes.waveform_diffusion import WaveformRecipe
from trainer.synth import synth_batch

FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]
COMMANDS = ("fit", "export", "profile")


@pytest.fixture(scope="module")
def kicks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kicks")
    for i, clip in enumerate(synth_batch(8, seed=11)):
        sf.write(folder / f"k{i}.wav", clip, 44100, subtype="PCM_16")
    return folder


def _help(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        kicktrain([command, "--help"])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: compare words


def test_every_registered_familys_options_are_on_its_commands_help(capsys):
    declared = 0
    for name in family_names():
        recipe = get_recipe(name)
        for command in COMMANDS:
            text = _help(command, capsys)
            for opt in recipe.options_for(command):
                declared += 1
                assert f"{opt.flag} {opt.metavar}" in text, (command, opt.flag)
                assert f"{recipe.cli_name}: {' '.join(opt.help.split())}" in text, (command, opt.flag)
    assert declared >= 3  # latent diffusion's --vae on fit, export and profile at least


def test_fit_help_lists_each_family_with_its_summary(capsys):
    text = " ".join(_help("fit", capsys).split())
    for name in family_names():
        family = get_family(name)
        assert family.summary and f"{family.cli_name} {family.summary}" in text, name


def test_vae_on_a_waveform_diffusion_fit_is_refused_in_one_line(kicks, tmp_path, capsys):
    run = tmp_path / "run"
    assert kicktrain(["fit", str(kicks), "--family", "waveform-diffusion", "--vae", str(tmp_path / "v.safetensors"),
                      "--run-dir", str(run), *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "kicktrain fit: fit of a waveform-diffusion model takes no --vae (it takes no family options)"
    assert not run.exists()
    assert kicktrain(["profile", str(kicks), "--family", "mel-vae", "--vae", "v.safetensors", "--out",
                      str(tmp_path / "p"), "--preset", "tiny"]) == 2
    assert capsys.readouterr().err.strip() == ("kicktrain profile: profile of a mel-vae model takes no --vae "
                                               "(it takes no family options)")


class _FakeSynth(type(get_family("waveform_diffusion"))):
    """A family registered only in this test (the waveform U-Net under another name)."""

    name = "fake_synth"


class _FakeSynthRecipe(WaveformRecipe):
    """Its training recipe, with an option of its own; its fit_config stops the fit and says what reached it."""

    family = "fake_synth"
    options = (FamilyOption("wavetable", "the wavetable it plays", commands=("fit", "export"), metavar="WAV",
                            type=Path),)

    def fit_config(self, cfg, ctx):
        raise ConfigError(f"reached the family with {dict(ctx.options)!r}")


@pytest.fixture
def fake_family(monkeypatch) -> _FakeSynthRecipe:
    """The two halves of a new family, each one registry line: its folder's FAMILY, its recipe's RECIPE."""
    module = types.ModuleType("fake_synth_family")
    module.FAMILY = _FakeSynth()
    recipe = types.ModuleType("fake_synth_recipe")
    recipe.RECIPE = _FakeSynthRecipe()
    monkeypatch.setitem(sys.modules, "fake_synth_family", module)
    monkeypatch.setitem(sys.modules, "fake_synth_recipe", recipe)
    monkeypatch.setitem(families.REGISTRY, "fake_synth", "fake_synth_family")
    monkeypatch.setitem(recipes.RECIPES, "fake_synth", "fake_synth_recipe")
    return recipe.RECIPE


def test_a_family_registered_elsewhere_gets_its_flags_without_touching_the_cli(fake_family, kicks, tmp_path, capsys):
    assert "wavetable" not in (Path(__file__).parents[2] / "trainer" / "cli.py").read_text()
    fit_help, export_help, profile_help = (_help(c, capsys) for c in COMMANDS)
    assert "--wavetable WAV fake-synth: the wavetable it plays" in fit_help
    assert "--wavetable WAV" in export_help and "--wavetable" not in profile_help  # only where it is declared
    assert "--vae FILE latent-diffusion:" in fit_help  # the real families' flags are still there
    args = ["fit", str(kicks), "--run-dir", str(tmp_path / "run"), *FAST]
    assert kicktrain([*args, "--family", "fake-synth", "--wavetable", "saw.wav"]) == 2
    assert "reached the family with {'wavetable': PosixPath('saw.wav')}" in capsys.readouterr().err  # typed
    assert kicktrain([*args, "--family", "fake-synth", "--vae", "v.safetensors"]) == 2
    assert capsys.readouterr().err.strip() == ("kicktrain fit: fit of a fake-synth model takes no --vae "
                                               "(it takes --wavetable)")
    assert kicktrain([*args, "--family", "latent-diffusion", "--wavetable", "saw.wav"]) == 2
    assert capsys.readouterr().err.strip() == ("kicktrain fit: fit of a latent-diffusion model takes no --wavetable "
                                               "(it takes --vae)")
    # a resumed run: nothing here can check the option against the run, so it is refused, not ignored
    with pytest.raises(ConfigError, match="--wavetable: a resumed fake-synth run keeps the options it started"):
        fake_family.check_resume(fake_family.serving.presets()["tiny"], {"wavetable": Path("saw.wav")})
    fake_family.check_resume(fake_family.serving.presets()["tiny"], {})


def test_an_option_is_declared_with_a_name_and_commands_kicktrain_knows():
    with pytest.raises(ValueError, match="lower-case name"):
        FamilyOption("Wave-Table", "x")
    with pytest.raises(ValueError, match="unknown command"):
        FamilyOption("wavetable", "x", commands=("fit", "serve"))


@pytest.fixture(scope="module")
def vaes(tmp_path_factory) -> tuple[Path, Path]:
    from daemon_util import make_artifact

    d = tmp_path_factory.mktemp("vaes")
    return (make_artifact(d / "vae-a.safetensors", seed=1, family="mel_vae"),
            make_artifact(d / "vae-b.safetensors", seed=2, family="mel_vae"))


def test_a_resumed_run_takes_only_its_own_vae(kicks, vaes, tmp_path, capsys):
    """The run records its VAE by content hash (vae.sha256): resuming with another is refused at once, saying
    why; the same VAE (a copy elsewhere, by content) resumes."""
    run = tmp_path / "run"
    args = ["fit", str(kicks), "--family", "latent-diffusion", "--run-dir", str(run), *FAST,
            "--set", "train.ckpt_every=2"]
    assert kicktrain([*args, "--vae", str(vaes[0]), "--max-steps", "2"]) == 0
    capsys.readouterr()
    assert kicktrain([*args, "--vae", str(vaes[1]), "--max-steps", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1].startswith("kicktrain fit: --vae vae-b.safetensors is not the VAE this run trains"), err
    assert "sha256" in err.splitlines()[-1] and "data:" not in err  # refused, saying why, before it read its data
    copy = tmp_path / "elsewhere" / "same.safetensors"
    copy.parent.mkdir()
    copy.write_bytes(vaes[0].read_bytes())
    assert kicktrain([*args, "--vae", str(copy), "--max-steps", "4"]) == 0
    assert "resumed from step 2" in capsys.readouterr().err
