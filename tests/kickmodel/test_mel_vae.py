"""The mel-VAE family: the ELBO's terms by hand, the KL warm-up, the learned prior, the inverter's
spectrum, and a tiny fit -> kill -> resume -> export -> daemon -> OSC round trip."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import torchaudio

from kickmodel.families import preset
from kickmodel.families.mel_vae.inverter import GriffinLimInverter, build_inverter
from kickmodel.families.mel_vae.mel import MelFrontEnd
from kickmodel.families.mel_vae.network import (
    MixturePrior,
    active_dims,
    band_weights,
    free_bits_kl,
    gaussian_kl,
    kl_beta,
    linear_error,
    low_centroid_error,
    recon_error,
)
from trainer.checkpoint import list_checkpoints
from trainer.recipes import get_recipe
from trainer.recipes.base import FitContext
from trainer.synth import synth_batch

ROOT = Path(__file__).resolve().parents[2]


def test_gaussian_kl_by_hand():
    mu = torch.tensor([[0.0, 1.0, -2.0]])
    logvar = torch.tensor([[0.0, math.log(4.0), -1.0]])
    want = [0.0, 0.5 * (1 + 4 - 1 - math.log(4)), 0.5 * (4 + math.exp(-1) - 1 + 1)]
    assert torch.allclose(gaussian_kl(mu, logvar)[0], torch.tensor(want), atol=1e-6)


def test_free_bits_and_reconstruction_by_hand():
    kl = torch.tensor([[0.01, 2.0], [0.03, 1.0]])  # batch means 0.02 and 1.5
    assert free_bits_kl(kl, 0.05).item() == pytest.approx(0.05 + 1.5)
    assert free_bits_kl(kl, 0.0).item() == pytest.approx(0.02 + 1.5)
    x = torch.zeros(2, 2, 2)
    x_hat = torch.tensor([[[1.0, -1.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 0.0]]])
    assert recon_error(x_hat, x, "l1").tolist() == [0.5, 0.5]
    assert recon_error(x_hat, x, "l2").tolist() == [0.5, 1.0]
    mu = torch.tensor([[0.0, 1.0, 5.0], [0.0, -1.0, 5.0], [0.0, 0.5, 5.001]])
    assert active_dims(mu) == 1


def test_low_band_weighting_by_hand():
    """Bands centred below recon_low_hz count low_weight times as much, the mean weight stays 1."""
    w = band_weights(torch.tensor([50.0, 100.0, 1000.0, 5000.0]), 250.0, 3.0)
    assert torch.allclose(w, torch.tensor([1.5, 1.5, 0.5, 0.5]))
    assert band_weights(torch.tensor([50.0, 5000.0]), 250.0, 1.0) is None
    x = torch.zeros(1, 4, 2)
    x_hat = torch.tensor([[[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]])  # error in one low, one high band
    assert recon_error(x_hat, x, "l1", w).tolist() == [0.5]  # (1.5 * 2 + 0.5 * 2) / 8
    x_hat_low = torch.tensor([[[1.0, 1.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
    assert recon_error(x_hat_low, x, "l1", w).tolist() == [0.75]
    cfg = preset("small", "mel_vae")
    centres = MelFrontEnd(cfg.mel, cfg.data.sample_rate, cfg.data.length).band_centres_hz
    assert int((centres < 250).sum()) == 11 and torch.all(centres[1:] > centres[:-1])


def test_kl_warm_up_schedule():
    assert [kl_beta(s, 0.5, 10) for s in (0, 5, 10, 20)] == [0.0, 0.25, 0.5, 0.5]
    assert kl_beta(0, 0.5, 0) == 0.5
    cfg = preset("tiny", "mel_vae").replace("vae", beta=0.4, kl_warmup_steps=8)
    objective = get_recipe("mel_vae").objective(cfg, FitContext(device=torch.device("cpu")))
    x = torch.from_numpy(synth_batch(2, seed=1, length=cfg.data.length))
    batch = objective.prepare_batch(x)
    seen = [objective.loss(objective.module, batch, None, None, torch.Generator().manual_seed(0), s)[1]["beta"]
            for s in (0, 2, 8, 100)]
    assert seen == pytest.approx([0.0, 0.1, 0.4, 0.4])


@pytest.mark.parametrize("field,key", [("recon_linear_weight", "recon_linear"), ("recon_pitch_weight", "recon_pitch")])
def test_the_extra_reconstruction_terms_are_added_to_the_training_loss_and_logged_on_their_own(field, key):
    x = torch.from_numpy(synth_batch(2, seed=1, length=preset("tiny", "mel_vae").data.length))
    seen = {}
    for w in (0.0, 2.0):
        torch.manual_seed(0)
        cfg = preset("tiny", "mel_vae").replace("vae", **{field: w})
        objective = get_recipe("mel_vae").objective(cfg, FitContext(device=torch.device("cpu")))
        loss, figures = objective.loss(objective.module, objective.prepare_batch(x), None, None,
                                       torch.Generator().manual_seed(0), 100)
        seen[w] = (loss.item(), {k: float(v) for k, v in figures.items()})  # figures may be device tensors
    assert key not in seen[0.0][1]
    term = seen[2.0][1][key]
    assert term > 0 and seen[2.0][1]["recon"] == pytest.approx(seen[0.0][1]["recon"])
    assert seen[2.0][0] == pytest.approx(seen[0.0][0] + 2.0 * term, rel=1e-5)


def test_the_body_frequency_track_error_by_hand():
    """The centroid of the low bands, frame by frame, in octaves, weighted by the real kick's low level:
    a body one band off costs log2 of the bands' ratio; a silent frame, the bands above low_hz and a
    level change that keeps the track cost nothing, though the log-mel error counts each the same."""
    centres = torch.tensor([40.0, 60.0, 80.0, 120.0, 500.0, 2000.0])
    floor = -100.0
    x = torch.full((1, 6, 3), -1.0)
    x[0, 2, :2] = 0.6  # a body at 80 Hz in the first two frames; frame 3 silent
    x[0, 4:, :] = 0.2
    low = x.clone()
    low[0, 2, :2], low[0, 1, :2] = -1.0, 0.6  # the body decoded at 60 Hz
    assert low_centroid_error(x, x, centres, 250.0, floor).item() == 0.0
    assert low_centroid_error(low, x, centres, 250.0, floor).item() == pytest.approx(math.log2(80 / 60), rel=2e-3)
    quiet_moved = low.clone()
    quiet_moved[0, :4, 2] = 0.9  # loud low bands where the real kick is silent: not weighted
    assert low_centroid_error(quiet_moved, x, centres, 250.0, floor).item() == pytest.approx(math.log2(80 / 60),
                                                                                           rel=2e-3)
    louder = x.clone()
    louder[0, 2, :2] += 0.12  # the same track 6 dB louder
    above = x.clone()
    above[0, 5, :2] += 0.12  # a band above low_hz
    assert low_centroid_error(louder, x, centres, 250.0, floor).item() < 1e-3  # (the floor bands weigh a little less)
    assert low_centroid_error(above, x, centres, 250.0, floor).item() == 0.0
    assert recon_error(louder, x).item() == pytest.approx(recon_error(above, x).item())


def test_mixture_prior_nll_of_a_standard_normal_by_hand():
    """With every output weight zero, each component is N(0, I) and the mixture is too."""
    from kickmodel.families.mel_vae.config import PriorConfig

    prior = MixturePrior(PriorConfig(components=3, hidden=8), latent_dim=4, n_controls=2)
    with torch.no_grad():
        for p in prior.net[-1].parameters():
            p.zero_()
    z = torch.tensor([[0.0, 1.0, -1.0, 2.0]])
    want = 0.5 * float((z**2).sum()) + 2 * math.log(2 * math.pi)
    assert prior.nll(z, torch.rand(1, 2), torch.ones(1, 2)).item() == pytest.approx(want, rel=1e-5)
    g = [torch.Generator().manual_seed(s) for s in (1, 1, 2)]
    s = prior.sample(None, None, g)
    assert torch.equal(s[0], s[1]) and not torch.equal(s[0], s[2])


def band_excess_db(audio: np.ndarray, sr: int, f: float, half: float = 60.0) -> float:
    """Level of a narrow band around f minus the level of the bands 300..700 Hz to either side; 0 where the
    band is more than 120 dB under the spectrum's peak (float32 rounding noise there, whose random
    ups and downs are no image: Griffin-Lim's silent bands sit at about -177 dB)."""
    spec = np.abs(np.fft.rfft(audio.astype(np.float64) * np.hanning(len(audio)))) ** 2
    freqs = np.fft.rfftfreq(len(audio), 1.0 / sr)
    centre = spec[(freqs > f - half) & (freqs < f + half)].mean()
    if centre < spec.max() * 1e-12:
        return 0.0
    side = spec[((freqs > f - 700) & (freqs < f - 300)) | ((freqs > f + 300) & (freqs < f + 700))].mean()
    return 10 * np.log10(centre / side)


@pytest.mark.parametrize("kind", ["vocos", "griffin-lim"])
def test_the_inverter_puts_no_peak_at_multiples_of_sample_rate_over_16(kind):
    """A test tone's mel, inverted, has no energy peak at k * sr/16 against the neighbouring bands (the
    waveform U-Net's stride-16 output stage put images there)."""
    cfg = preset("small", "mel_vae").replace("inverter", kind=kind)
    sr, n = cfg.data.sample_rate, cfg.data.length
    front = MelFrontEnd(cfg.mel, sr, n)
    torch.manual_seed(0)
    inverter = build_inverter(cfg.inverter, front).eval()
    t = np.arange(n) / sr
    tone = (0.5 * np.sin(2 * np.pi * 1000.0 * t) * np.exp(-t / 0.3)).astype(np.float32)
    with torch.no_grad():
        out = inverter(front(torch.from_numpy(tone)[None]))[0].numpy()
    assert np.isfinite(out).all() and np.abs(out).max() > 0
    for k in (1, 2, 3, 4):
        assert band_excess_db(out, sr, k * sr / 16) < 3.0, (kind, k)
    # the measure itself sees images when they are there: zero-stuffing x16 images the tone at k*sr/16 +- 1 kHz
    imaged = np.zeros(n, dtype=np.float32)
    imaged[::16] = tone[::16] * 16
    assert band_excess_db(imaged, sr, sr / 16 - 1000.0) > 10.0


def test_the_front_end_is_torchaudios_magnitude_mel_spectrogram():
    """MelFrontEnd takes the STFT magnitude with hypot (faster than abs of a complex tensor on the CPU):
    the log-mel must be the one torchaudio's MelSpectrogram(power=1) gives."""
    cfg = preset("small", "mel_vae")
    sr, n = cfg.data.sample_rate, cfg.data.length
    front = MelFrontEnd(cfg.mel, sr, n)
    kick = torch.from_numpy(synth_batch(2, seed=5, length=n))
    ref = torchaudio.transforms.MelSpectrogram(sr, n_fft=cfg.mel.n_fft, hop_length=cfg.mel.hop,
                                               n_mels=cfg.mel.n_mels, f_min=cfg.mel.f_min,
                                               f_max=min(cfg.mel.f_max, sr / 2), power=1.0)(kick)
    db = 20.0 * torch.log10((ref[..., : front.frames] / front.gain).clamp(min=10.0 ** (cfg.mel.floor_db / 20.0)))
    assert torch.allclose(front(kick), front.db_to_unit(db), atol=1e-5)


def test_griffin_lim_inverts_a_real_mel_closely():
    cfg = preset("small", "mel_vae").replace("inverter", kind="griffin-lim")
    sr, n = cfg.data.sample_rate, cfg.data.length
    front = MelFrontEnd(cfg.mel, sr, n)
    inv = GriffinLimInverter(cfg.inverter, front)
    kick = torch.from_numpy(synth_batch(1, seed=4, length=n))
    with torch.no_grad():
        back = inv(front(kick))
    err = (front(back) - front(kick)).abs().mean().item()
    assert err < 0.05, err  # within 2.5 dB per mel bin on average (units: 2 / 100 dB)


def test_nnls_fits_a_decoders_inconsistent_mel_far_better_than_the_clamped_pseudo_inverse():
    # a decoder's mel is never exactly the mel of some spectrum: here a 60 Hz body whose second band came out
    # 3 dB cold. The pseudo-inverse's answer then goes negative, and clamping it at 0 left a spectrum whose
    # mel was far from the one asked for (in the shipped model's kicks: pitch fell in 50 %, 61 % with NNLS)
    cfg = preset("small", "mel_vae").replace("inverter", kind="griffin-lim")
    sr, n = cfg.data.sample_rate, cfg.data.length
    front = MelFrontEnd(cfg.mel, sr, n)
    t = torch.arange(n) / sr
    body = torch.sin(2 * math.pi * 60.0 * t) * torch.exp(-t / 0.15)
    fb = front.filterbank
    invs = {k: GriffinLimInverter(cfg.inverter.__class__(kind="griffin-lim", nnls_iters=k), front) for k in (0, 30)}
    with torch.no_grad():
        exact = front.magnitude(front(body[None]))
        mel = front(body[None])
        mel[:, 1] -= 2 * 3.0 / -cfg.mel.floor_db  # -3 dB in the normalised units
        wrong = front.magnitude(mel)
        resid = {k: (fb.T @ inv.linear(wrong) - wrong).norm().item() for k, inv in invs.items()}
        lin = invs[30].linear(wrong)
        exact_resid = (fb.T @ invs[30].linear(exact) - exact).norm() / exact.norm()
    assert (invs[0].pinv @ wrong).min() < 0  # the case NNLS is for
    assert resid[30] < 0.5 * resid[0], resid
    assert (lin >= 0).all()
    assert exact_resid < 1e-4  # a consistent mel is still matched


def test_the_linear_magnitude_term_weighs_loud_bins_the_log_term_does_not():
    floor = -100.0
    x = torch.full((1, 4, 10), -1.0)
    x[:, 0] = 0.8  # a loud band (-10 dB) among bands at the floor
    unit = 2 * 6.0 / -floor  # 6 dB in the normalised units
    loud, quiet = x.clone(), x.clone()
    loud[:, 0] += unit
    quiet[:, 2] += unit
    assert linear_error(x, x, floor).item() == 0.0
    assert recon_error(loud, x).item() == pytest.approx(recon_error(quiet, x).item())
    assert linear_error(loud, x, floor).item() > 1000 * linear_error(quiet, x, floor).item()
    assert linear_error(loud, x, floor).item() == pytest.approx(10 ** (6 / 20) - 1, rel=1e-3)
    wild = x.clone()
    wild[:, 1] = 50.0  # clamped before the exponential: finite
    assert torch.isfinite(linear_error(wild, x, floor)).all()


def test_tiny_vae_fit_kill_resume_export_serve(tmp_path):
    """The issue's chain: a tiny mel-VAE fit, killed, resumed, exported, served by the daemon; OSC
    /kick/generate and /kick/variation answered with files."""
    from daemon_util import start_daemon

    kicks = tmp_path / "kicks"
    kicks.mkdir()
    for i, clip in enumerate(synth_batch(10, seed=2)):
        sf.write(kicks / f"k{i:02d}.wav", clip, 44100, subtype="PCM_16")
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "trainer.cli", "fit", str(kicks), "--family", "mel-vae", "--preset", "tiny",
           "--run-dir", str(run), "--device", "cpu", "--no-progress", "--no-tensorboard",
           "--set", "train.ckpt_every=2", "--set", "train.val_every=0"]
    proc = subprocess.Popen([*cmd, "--max-steps", "100000"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(list_checkpoints(run)) < 2:
            time.sleep(0.05)
        assert len(list_checkpoints(run)) >= 2, "no checkpoints appeared"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    last = max(int(p.stem.split("-")[1]) for p in list_checkpoints(run))
    out = subprocess.run([*cmd, "--max-steps", str(last + 2)], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and f"resumed from step {last}" in out.stderr, out.stderr
    models = tmp_path / "models"
    subprocess.run([sys.executable, "-m", "trainer.cli", "export", str(run), "--out",
                    str(models / "vae.safetensors")], env=env, check=True, capture_output=True, timeout=120)
    with start_daemon(tmp_path, models, model="vae") as d:
        (addr, args), = d.send("/kick/generate", "seed", 7, "decay", 0.8)
        assert addr == "/kick/done", args
        path = Path(args[1])
        audio, sr = sf.read(path)
        assert sr == 44100 and np.isfinite(audio).all() and np.abs(audio).max() > 0.5
        replies = d.send("/kick/variation", path.name, "strength", 0.3, "count", 2, expect=2)
        assert [a for a, _ in replies] == ["/kick/done", "/kick/done"], replies
        (addr, args), = d.send("/kick/generate", "steps", 30, "sampler", "ddim")  # a one-pass model ignores both
        assert addr == "/kick/done", args


def _kick_folder(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, clip in enumerate(synth_batch(n, seed=9)):
        sf.write(folder / f"kick{i:02d}.wav", clip, 44100, subtype="PCM_16")
    return folder


def test_kicktrain_map_writes_the_picture_and_one_row_per_kick(tmp_path, capsys):
    import csv

    from daemon_util import make_artifact

    from trainer.cli import main as kicktrain

    art = make_artifact(tmp_path / "vae.safetensors", family="mel_vae")
    kicks = _kick_folder(tmp_path / "kicks", 12)
    assert kicktrain(["map", str(art), str(kicks), "--out", str(tmp_path / "m"), "--perplexity", "3"]) == 0
    rows = list(csv.DictReader((tmp_path / "m" / "map.csv").open()))
    assert len(rows) == 12 and {Path(r["path"]).name for r in rows} == {f"kick{i:02d}.wav" for i in range(12)}
    assert list(rows[0]) == ["path", "name", "tsne_x", "tsne_y", "pca_x", "pca_y", "decay", "pitch", "click"]
    assert all(r["name"] == Path(r["path"]).stem for r in rows)
    assert all(r["tsne_x"] and float(r["pitch"]) > 20 for r in rows)
    png = (tmp_path / "m" / "map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    # too few kicks for the perplexity: laid out at the largest one they allow, said in a line (the CSV is then the
    # layout `--into` stores); too few even for perplexity 2: a clear message and a PCA-only map
    capsys.readouterr()
    assert kicktrain(["map", str(art), str(kicks), "--out", str(tmp_path / "p")]) == 0
    assert "12 kicks are too few for t-SNE at perplexity 30; laying out at 3" in capsys.readouterr().err
    rows = list(csv.DictReader((tmp_path / "p" / "map.csv").open()))
    assert len(rows) == 12 and all(r["tsne_x"] and r["pca_x"] for r in rows)
    few = _kick_folder(tmp_path / "few", 5)
    assert kicktrain(["map", str(art), str(few), "--out", str(tmp_path / "q")]) == 0
    err = capsys.readouterr().err
    assert "too few for t-SNE at perplexity 30" in err and "(try --perplexity 1)" in err
    rows = list(csv.DictReader((tmp_path / "q" / "map.csv").open()))
    assert len(rows) == 5 and all(r["tsne_x"] == "" and r["pca_x"] for r in rows)


def test_kicktrain_map_refuses_a_family_without_an_encoder(tmp_path, tiny_artifact, capsys):
    from trainer.cli import main as kicktrain

    kicks = _kick_folder(tmp_path / "kicks", 4)
    assert kicktrain(["map", str(tiny_artifact), str(kicks), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert "waveform-diffusion model, which has no encoder" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_export_can_switch_a_mel_vae_to_griffin_lim(tmp_path, capsys):
    """The inverter kind needs no retraining: a run with a learned inverter exports a Griffin-Lim model too."""
    from kickmodel.generator import Item
    from kickmodel.loading import load_artifact, load_generator
    from trainer.cli import main as kicktrain

    kicks = _kick_folder(tmp_path / "kicks", 6)
    run = tmp_path / "run"
    assert kicktrain(["fit", str(kicks), "--family", "mel-vae", "--preset", "tiny", "--run-dir", str(run),
                      "--device", "cpu", "--no-progress", "--no-tensorboard", "--max-steps", "2"]) == 0
    out = tmp_path / "gl.safetensors"
    assert kicktrain(["export", str(run), "--out", str(out), "--set", "inverter.kind=griffin-lim",
                      "--set", "sampling.temperature=0.8"]) == 0
    art = load_artifact(out)
    assert set(art.part_configs) == {"vae"} and art.config.inverter.kind == "griffin-lim"
    assert art.config.sampling.temperature == 0.8
    gen = load_generator(out, "cpu")
    assert gen.describe()["inverter"] == "griffin-lim"
    assert gen.generate([Item(seed=1)], gen.settings()).shape == (1, 4096)
    capsys.readouterr()
    assert kicktrain(["export", str(run), "--out", str(out), "--set", "vae.beta=1"]) == 2
    assert "export cannot change vae.beta of a mel_vae model" in capsys.readouterr().err


def test_a_fine_tune_keeps_the_artifacts_shape_and_its_own_loss_settings(tmp_path):
    """--init takes the network's shape (and mel, prior, inverter) from the artifact; the loss settings asked
    on the command line (beta, warm-up, the low-band weight) are the run's own, not silently replaced."""
    from daemon_util import make_artifact

    from kickmodel.loading import load_artifact

    art = load_artifact(make_artifact(tmp_path / "vae.safetensors", family="mel_vae"))
    recipe = get_recipe("mel_vae")
    asked = preset("tiny", "mel_vae").replace("vae", latent_dim=art.config.vae.latent_dim + 4, beta=0.5,
                                               kl_warmup_steps=0, recon_low_weight=8.0)
    ctx = FitContext(device=torch.device("cpu"), log=lambda m: None, init=art)
    cfg = recipe.fit_config(asked, ctx)
    assert cfg.vae.latent_dim == art.config.vae.latent_dim and cfg.vae.channels == art.config.vae.channels
    assert (cfg.vae.beta, cfg.vae.kl_warmup_steps, cfg.vae.recon_low_weight) == (0.5, 0, 8.0)
    assert cfg.mel == art.config.mel and cfg.inverter == art.config.inverter


def test_a_decoder_only_fine_tune_leaves_the_encoder_as_it_was(tmp_path):
    """vae.train_encoder=false: after fine-tuning steps the encoder (the latent space a latent diffusion was
    trained in) is bit for bit the one it started from, and the decoder has moved."""
    from daemon_util import make_artifact
    from safetensors.torch import load_file

    from trainer.cli import main as kicktrain

    kicks = tmp_path / "kicks"
    kicks.mkdir()
    for i, clip in enumerate(synth_batch(6, seed=3)):
        sf.write(kicks / f"k{i:02d}.wav", clip, 44100, subtype="PCM_16")
    start = make_artifact(tmp_path / "vae.safetensors", family="mel_vae")
    out = tmp_path / "tuned.safetensors"
    args = ["--preset", "tiny", "--device", "cpu", "--no-progress", "--no-tensorboard", "--max-steps", "3",
            "--set", "train.ema_decay=0", "--set", "vae.posterior_noise=false"]
    assert kicktrain(["fit", str(kicks), "--family", "mel-vae", "--init", str(start), "--run-dir",
                      str(tmp_path / "run"), *args, "--set", "vae.train_encoder=false"]) == 0
    assert kicktrain(["export", str(tmp_path / "run"), "--out", str(out)]) == 0
    before, after = load_file(str(start)), load_file(str(out))
    enc = [k for k in before if k.startswith("vae.encoder.")]
    dec = [k for k in before if k.startswith("vae.decoder.")]
    assert enc and dec
    assert all(torch.equal(before[k], after[k]) for k in enc)
    assert not all(torch.equal(before[k], after[k]) for k in dec)


def test_band_weights_are_built_on_the_front_ends_device():
    """The objective is built after the front end moved to the training device: nothing may stay on the CPU
    (the meta device stands in for a GPU here)."""
    cfg = preset("tiny", "mel_vae")
    front = MelFrontEnd(cfg.mel, cfg.data.sample_rate, cfg.data.length).to("meta")
    assert front.band_centres_hz.device.type == "meta"
