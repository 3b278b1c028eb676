"""The README's custom-model route on a fresh clone: `kicktrain fit MY_KICKS --init <the bundled model>` with
nothing else to say (the family, the preset and the VAE come from the artifact), and the daemon serves what it
exported. The bundled model's denoiser is small and its VAE frozen, so two steps take seconds on a CPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import soundfile as sf

from kickmodel.artifact import read_metadata
from kickmodel.loading import load_artifact
from trainer.cli import main as kicktrain

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "kickserver" / "models" / "default.safetensors"
KIT = REPO / "kickserver" / "data" / "kicks"
FOLDER = "my-own-kicks-q7z"  # a name found nowhere in the bundled artifact


@pytest.fixture(scope="module")
def my_kicks(tmp_path_factory) -> Path:
    """20 kicks of the starter kit, spread over it, in a folder of the user's."""
    folder = tmp_path_factory.mktemp("user") / FOLDER
    folder.mkdir()
    files = sorted(KIT.glob("*.flac"))
    for f in files[:: max(1, len(files) // 20)][:20]:
        shutil.copy2(f, folder / f.name)
    assert FOLDER not in json.dumps(read_metadata(BUNDLED))
    return folder


def test_fine_tuning_the_bundled_model_needs_only_the_kicks_and_the_daemon_serves_it(my_kicks, tmp_path, capsys):
    from daemon_util import start_daemon

    run, models = tmp_path / "mine", tmp_path / "models"
    assert kicktrain(["fit", str(my_kicks), "--init", str(BUNDLED), "--run-dir", str(run), "--max-steps", "2",
                      "--export-dir", str(models)]) == 0, capsys.readouterr().err
    out = models / "mine.safetensors"
    art, bundled = load_artifact(out), load_artifact(BUNDLED)
    assert art.family == "latent_diffusion" and art.step == 2
    # the VAE came from the artifact (no --vae, no file of the machine that built it), and the run kept a copy
    assert art.part_hashes["vae"] == bundled.part_hashes["vae"] == art.config.vae.sha256
    assert load_artifact(run / "vae.safetensors").part_hashes["vae"] == bundled.part_hashes["vae"]
    # and its sampling settings (chosen by evaluating the bundled model: guidance 2), not the preset's
    assert art.config.sampling == bundled.config.sampling and bundled.config.sampling.guidance == 2.0
    meta = json.dumps(read_metadata(out))
    assert str(tmp_path) not in meta and FOLDER not in meta and str(REPO) not in meta
    # resuming needs no flag either: the run folder says its family and preset
    assert kicktrain(["fit", str(my_kicks), "--run-dir", str(run), "--max-steps", "3"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 3

    with start_daemon(tmp_path, models, model="mine") as d:
        (addr, args), = d.send("/kick/generate", "seed", 1, "steps", 4, timeout=60)
        assert addr == "/kick/done", (args, d.stderr_text()[-2000:])
        wav = Path(args[1])
        assert wav.suffix == ".wav" and wav.is_file()
        audio, sr = sf.read(wav)
        assert sr in (44100, 48000) and len(audio) > 0.5 * sr and abs(audio).max() > 0.1


@pytest.mark.parametrize("family", ["waveform-diffusion", "mel-vae"])
def test_init_and_a_family_that_contradicts_it_say_the_fix_in_one_line(my_kicks, tmp_path, capsys, family):
    run = tmp_path / "run"
    assert kicktrain(["fit", str(my_kicks), "--init", str(BUNDLED), "--family", family, "--run-dir", str(run),
                      "--max-steps", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kicktrain fit: --init default.safetensors is a latent-diffusion model: drop --family or pass "
                   "--family latent-diffusion"]
    assert not run.exists()
