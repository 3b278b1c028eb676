"""Latent diffusion over a frozen mel-VAE: fit, export one self-contained artifact, serve it over OSC;
a VAE that is not the one the denoiser learned in is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from safetensors.torch import load_file, save_file

from kickmodel.artifact import ArtifactError, read_metadata
from kickmodel.generator import Item
from kickmodel.loading import load_artifact, load_generator
from trainer.cli import main as kicktrain
from trainer.synth import synth_batch

FAST = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard"]


@pytest.fixture(scope="module")
def kicks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kicks")
    for i, clip in enumerate(synth_batch(10, seed=8)):
        sf.write(folder / f"k{i:02d}.wav", clip, 44100, subtype="PCM_16")
    return folder


@pytest.fixture(scope="module")
def vaes(tmp_path_factory) -> tuple[Path, Path]:
    from daemon_util import make_artifact

    d = tmp_path_factory.mktemp("vaes")
    return (make_artifact(d / "vae-a.safetensors", seed=1, family="mel_vae"),
            make_artifact(d / "vae-b.safetensors", seed=2, family="mel_vae"))


@pytest.fixture(scope="module")
def ld_artifact(kicks, vaes, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ld")
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--vae", str(vaes[0]), "--run-dir",
                      str(d / "run"), "--max-steps", "6", *FAST]) == 0
    out = d / "models" / "ld.safetensors"
    assert kicktrain(["export", str(d / "run"), "--out", str(out)]) == 0
    return out


def test_the_artifact_is_self_contained(ld_artifact, vaes):
    art = load_artifact(ld_artifact)
    assert art.family == "latent_diffusion" and set(art.part_configs) == {"denoiser", "vae", "inverter"}
    vae = load_artifact(vaes[0])
    assert art.part_hashes["vae"] == vae.part_hashes["vae"] == art.config.vae.sha256
    assert art.part_configs["vae"].family == "mel_vae"
    gen = load_generator(ld_artifact, "cpu")
    a = gen.generate([Item(seed=4, controls={"pitch": 0.2})], gen.settings(3))
    assert a.shape == (1, 4096) and np.isfinite(a).all()
    assert np.array_equal(a, gen.generate([Item(seed=4, controls={"pitch": 0.2})], gen.settings(3)))
    assert gen.encode(a).shape == (1, 8)  # the VAE's latent: the map works on it too


def test_a_vae_the_denoiser_did_not_learn_in_is_refused(ld_artifact, vaes, tmp_path):
    """Swap the vae part for another VAE's (hashes in the parts table made to agree): the denoiser's own
    record of its VAE still disagrees."""
    tensors = load_file(str(ld_artifact))
    other = load_file(str(vaes[1]))
    tensors.update({k: v for k, v in other.items() if k.startswith(("vae.", "inverter."))})
    meta = read_metadata(ld_artifact)
    parts = json.loads(meta["parts"])
    other_parts = json.loads(read_metadata(vaes[1])["parts"])
    parts["vae"], parts["inverter"] = other_parts["vae"], other_parts["inverter"]
    save_file(tensors, str(tmp_path / "swapped.safetensors"), metadata=dict(meta, parts=json.dumps(parts)))
    with pytest.raises(ArtifactError, match="is not the VAE the denoiser was trained in"):
        load_generator(tmp_path / "swapped.safetensors", "cpu")
    # without fixing the table, the part's own hash already disagrees
    tensors2 = dict(load_file(str(ld_artifact)))
    tensors2.update({k: v for k, v in other.items() if k.startswith("vae.")})
    save_file(tensors2, str(tmp_path / "mixed.safetensors"), metadata=meta)
    with pytest.raises(ArtifactError, match="part vae does not match its recorded content hash"):
        load_artifact(tmp_path / "mixed.safetensors")
    # a missing part is named
    parts3 = json.loads(meta["parts"])
    parts3.pop("vae")
    save_file({k: v for k, v in load_file(str(ld_artifact)).items() if not k.startswith("vae.")},
              str(tmp_path / "novae.safetensors"), metadata=dict(meta, parts=json.dumps(parts3)))
    with pytest.raises(ArtifactError, match="part vae is missing"):
        load_artifact(tmp_path / "novae.safetensors")


def test_fit_needs_a_mel_vae_and_notices_when_it_changed(kicks, vaes, tiny_artifact, tmp_path, capsys):
    run = tmp_path / "run"
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--run-dir", str(run), *FAST]) == 2
    assert "give it with --vae FILE" in capsys.readouterr().err
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--vae", str(tiny_artifact),
                      "--run-dir", str(run), *FAST]) == 2
    assert "is a waveform_diffusion model, not a mel-vae model" in capsys.readouterr().err
    vae = tmp_path / "vae.safetensors"
    vae.write_bytes(vaes[0].read_bytes())
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--vae", str(vae), "--run-dir", str(run),
                      "--max-steps", "2", *FAST]) == 0
    vae.write_bytes(vaes[1].read_bytes())  # the VAE file is replaced under the run
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--vae", str(vae), "--run-dir", str(run),
                      "--max-steps", "4", *FAST]) == 2
    assert "has changed since this run started" in capsys.readouterr().err


def test_a_run_keeps_its_vae_so_resuming_and_exporting_it_need_no_other_file(kicks, vaes, tmp_path, capsys):
    """The run copies its VAE into its folder when it starts (config.json records only the hash); the file it
    was given can go. A copy that is not the VAE the run started with is refused by its hash."""
    given = tmp_path / "elsewhere" / "vae.safetensors"
    given.parent.mkdir()
    given.write_bytes(vaes[0].read_bytes())
    run, ld = tmp_path / "run", ["--family", "latent-diffusion"]
    assert kicktrain(["fit", str(kicks), *ld, "--vae", str(given), "--run-dir", str(run), "--max-steps", "2",
                      *FAST]) == 0
    (given.parent / "vae.safetensors").unlink()
    given.parent.rmdir()
    vae_hash = load_artifact(vaes[0]).part_hashes["vae"]
    assert json.loads((run / "config.json").read_text())["vae"] == {"sha256": vae_hash}
    assert load_artifact(run / "vae.safetensors").part_hashes["vae"] == vae_hash
    capsys.readouterr()
    assert kicktrain(["fit", str(kicks), *ld, "--run-dir", str(run), "--max-steps", "4", *FAST]) == 0
    assert "resumed from step 2" in capsys.readouterr().err
    out = tmp_path / "ld.safetensors"
    assert kicktrain(["export", str(run), "--out", str(out)]) == 0
    art = load_artifact(out)
    assert art.step == 4 and art.part_hashes["vae"] == art.config.vae.sha256 == vae_hash
    meta = json.dumps(read_metadata(out))
    assert str(tmp_path) not in meta and "elsewhere" not in meta and art.training["run"] == "run"

    (run / "vae.safetensors").write_bytes(vaes[1].read_bytes())  # another VAE in the run's copy's place
    capsys.readouterr()
    assert kicktrain(["export", str(run), "--out", str(tmp_path / "x.safetensors")]) == 2
    assert "has changed since this run started" in capsys.readouterr().err
    assert kicktrain(["fit", str(kicks), *ld, "--run-dir", str(run), "--max-steps", "6", *FAST]) == 2
    assert "has changed since this run started" in capsys.readouterr().err
    (run / "vae.safetensors").unlink()  # a run from before runs kept their VAE: the fix is named
    assert kicktrain(["export", str(run), "--out", str(tmp_path / "x.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "holds no copy of the VAE it trains over" in err and "--vae FILE" in err and vae_hash[:12] in err
    assert kicktrain(["fit", str(kicks), *ld, "--vae", str(vaes[0]), "--run-dir", str(run), "--max-steps", "6",
                      *FAST]) == 0
    assert not (tmp_path / "x.safetensors").exists()


def test_a_latent_diffusion_model_brings_its_vae_to_init_and_to_vae(ld_artifact, kicks, tmp_path):
    """--init of a latent-diffusion model alone sets the family, the preset and the VAE (its own parts); --vae
    takes a latent-diffusion model's VAE too."""
    ld = load_artifact(ld_artifact)
    run = tmp_path / "init"
    assert kicktrain(["fit", str(kicks), "--init", str(ld_artifact), "--run-dir", str(run), "--max-steps", "1",
                      "--device", "cpu", "--no-progress", "--no-tensorboard"]) == 0
    cfg = json.loads((run / "config.json").read_text())
    assert (cfg["family"], cfg["preset"], cfg["vae"]["sha256"]) == ("latent_diffusion", "tiny", ld.part_hashes["vae"])
    assert load_artifact(run / "vae.safetensors").part_hashes["vae"] == ld.part_hashes["vae"]
    run = tmp_path / "vae"
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--vae", str(ld_artifact), "--run-dir",
                      str(run), "--max-steps", "1", *FAST]) == 0
    assert json.loads((run / "config.json").read_text())["vae"] == {"sha256": ld.part_hashes["vae"]}


def test_a_config_that_recorded_its_vaes_path_still_reads_and_forgets_it():
    """Artifacts and runs before runs kept their VAE said where it was (vae.path): read, and dropped."""
    from kickmodel.config import ConfigError
    from kickmodel.families import from_dict, preset

    d = preset("tiny", "latent_diffusion").to_dict()
    d["vae"] = {"path": "/work/art/dec-f.safetensors", "sha256": "ab" * 32}
    cfg = from_dict(d)
    assert cfg.vae.sha256 == "ab" * 32 and "/work" not in cfg.to_json()
    with pytest.raises(ConfigError, match="pth"):  # still strict about any other key
        from_dict(dict(d, vae={"sha256": "ab" * 32, "pth": "x"}))


def test_the_daemon_serves_latent_diffusion_over_osc(ld_artifact, tmp_path):
    from daemon_util import start_daemon

    with start_daemon(tmp_path, ld_artifact.parent, model="ld") as d:
        (addr, args), = d.send("/kick/generate", "seed", 3, "steps", 4, "click", 0.9)
        assert addr == "/kick/done", args
        audio, sr = sf.read(args[1])
        assert sr == 44100 and np.abs(audio).max() > 0.5
        replies = d.send("/kick/variation", Path(args[1]).name, "strength", 0.5, "count", 2, "steps", 4, expect=2)
        assert [a for a, _ in replies] == ["/kick/done", "/kick/done"], replies


def test_with_augmentation_off_each_clip_is_encoded_once(vaes, monkeypatch):
    """The latent cache: the same latents as encoding every batch, and the VAE's encoder runs once per
    distinct clip. With augmentation on, nothing is kept (every batch is new audio)."""
    import dataclasses

    import torch

    from kickmodel.config import AugmentConfig
    from kickmodel.families import preset
    from kickmodel.families.mlp_denoiser import MLPDenoiser
    from trainer.recipes.latent_diffusion import LatentObjective

    vae = load_artifact(vaes[0])
    off = AugmentConfig(**{f.name: 0.0 for f in dataclasses.fields(AugmentConfig) if f.name.endswith("_p")})
    cfg = preset("tiny", "latent_diffusion").with_section("augment", off)
    net = MLPDenoiser(cfg.model, vae.config.vae.latent_dim, len(cfg.controls))
    obj = LatentObjective(cfg, net, vae, torch.device("cpu"))
    clips = torch.from_numpy(synth_batch(5, seed=3, length=vae.config.data.length)).float()
    calls = []
    real = obj.posterior_means
    monkeypatch.setattr(obj, "posterior_means", lambda x: calls.append(len(x)) or real(x))
    first = obj.prepare_batch(clips[[0, 1, 2]])
    again = obj.prepare_batch(clips[[2, 3, 0, 4]])
    assert calls == [3, 2]  # clips 3 and 4 were new
    assert torch.allclose(first, obj.to_latent(clips[[0, 1, 2]]), atol=1e-6)
    assert torch.allclose(again, obj.to_latent(clips[[2, 3, 0, 4]]), atol=1e-6)
    on = LatentObjective(preset("tiny", "latent_diffusion"), net, vae, torch.device("cpu"))
    assert on.cache is None


def test_the_denoiser_takes_the_samplers_cpu_time_grid_to_the_networks_device():
    # the samplers' time grids are CPU tensors; on a GPU the latent denoiser's time embedding met them on
    # the CPU and latent diffusion failed at its first step (an H200, 2026-12-04). The meta device stands in
    # for the GPU here: any CPU tensor reaching the network's layers is the same error
    import torch

    from kickmodel.diffusion import Denoiser
    from kickmodel.families import preset
    from kickmodel.families.mlp_denoiser import MLPDenoiser

    cfg = preset("tiny", "latent_diffusion")
    den = Denoiser.from_config(MLPDenoiser(cfg.model, 8, 3).to("meta"), cfg.diffusion)
    for t in (torch.tensor(0.5), torch.full((2,), 0.5)):
        out = den(torch.zeros(2, 8, device="meta"), t)
        assert out.device.type == "meta" and out.shape == (2, 8)


def test_a_decoder_only_fine_tune_of_its_vae_can_take_the_vaes_place(ld_artifact, kicks, vaes, tmp_path, capsys):
    """A denoiser is valid over any VAE whose encoder is bit-identical to the one it learned in (the same
    latent space): a mel-VAE fine-tuned with vae.train_encoder=false can replace its VAE by a fine-tune
    of the latent diffusion over it; a VAE with another encoder cannot."""
    ft = tmp_path / "vae-ft"
    assert kicktrain(["fit", str(kicks), "--family", "mel-vae", "--init", str(vaes[0]), "--run-dir", str(ft),
                      "--max-steps", "3", "--set", "vae.train_encoder=false", *FAST]) == 0
    vae_ft = tmp_path / "vae-ft.safetensors"
    assert kicktrain(["export", str(ft), "--out", str(vae_ft)]) == 0
    a, b = load_artifact(vaes[0]), load_artifact(vae_ft)
    assert a.part_hashes["vae"] != b.part_hashes["vae"]  # the decoder moved
    run = tmp_path / "ld-ft"
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--init", str(ld_artifact), "--vae",
                      str(vae_ft), "--run-dir", str(run), "--max-steps", "0", *FAST]) == 0
    out = tmp_path / "ld-ft.safetensors"
    assert kicktrain(["export", str(run), "--out", str(out)]) == 0
    art = load_artifact(out)
    assert art.part_hashes["vae"] == b.part_hashes["vae"] == art.config.vae.sha256
    # with no steps the denoiser is the one it started from, exactly: only the decoder changed
    assert art.part_hashes["denoiser"] == load_artifact(ld_artifact).part_hashes["denoiser"]
    exported = load_generator(out, "cpu")
    assert exported.generate([Item(seed=1)], exported.settings(2)).shape == (1, 4096)
    # or the run itself exported with the fine-tuned decoder: the same denoiser, step and training record
    run0 = ld_artifact.parent.parent / "run"
    out2 = tmp_path / "ld-export.safetensors"
    assert kicktrain(["export", str(run0), "--out", str(out2), "--vae", str(vae_ft)]) == 0
    art2, art0 = load_artifact(out2), load_artifact(ld_artifact)
    assert art2.part_hashes == art.part_hashes and art2.config.vae.sha256 == b.part_hashes["vae"]
    assert art2.step == art0.step and art2.training["run"] == art0.training["run"]
    assert kicktrain(["export", str(run0), "--out", str(tmp_path / "x.safetensors"), "--vae", str(vaes[1])]) == 2
    assert "its encoder differs" in capsys.readouterr().err
    assert kicktrain(["export", str(ft), "--out", str(tmp_path / "y.safetensors"), "--vae", str(vae_ft)]) == 2
    assert "export of a mel-vae model takes no --vae" in capsys.readouterr().err
    assert not (tmp_path / "x.safetensors").exists() and not (tmp_path / "y.safetensors").exists()
    # another VAE (another encoder) is refused, and says why
    assert kicktrain(["fit", str(kicks), "--family", "latent-diffusion", "--init", str(ld_artifact), "--vae",
                      str(vaes[1]), "--run-dir", str(tmp_path / "ld-other"), "--max-steps", "2", *FAST]) == 2
    assert "whose encoder differs" in capsys.readouterr().err
