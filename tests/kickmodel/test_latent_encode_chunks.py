"""Latent diffusion encodes each augmented batch with its VAE in chunks (a batch of 64 in one go peaked at
8.3 GB on a GPU): the encoder never sees more than the chunk, and the latents are those of one go."""

from __future__ import annotations

import pytest
import torch

from kickmodel.loading import load_artifact
from trainer.synth import synth_batch


@pytest.fixture(scope="module")
def objective(tmp_path_factory):
    from daemon_util import make_artifact

    from kickmodel.families import preset
    from kickmodel.families.mlp_denoiser import MLPDenoiser
    from trainer.recipes.latent_diffusion import LatentObjective

    vae = load_artifact(make_artifact(tmp_path_factory.mktemp("vae") / "vae.safetensors", seed=1, family="mel_vae"))
    cfg = preset("tiny", "latent_diffusion")  # augmentation on: every batch is encoded
    net = MLPDenoiser(cfg.model, vae.config.vae.latent_dim, len(cfg.controls))
    obj = LatentObjective(cfg, net, vae, torch.device("cpu"))
    obj.fit_data(torch.from_numpy(synth_batch(6, seed=2, length=vae.config.data.length)).float())
    return obj


def test_a_batch_is_encoded_in_chunks_with_the_latents_of_one_go(objective, monkeypatch):
    obj = objective
    assert obj.cache is None
    clips = torch.from_numpy(synth_batch(11, seed=3, length=obj.vae_art.config.data.length)).float()
    one_go = obj.module.normalise(obj.vae.encode(obj.front(clips))[0].float())
    seen: list[int] = []
    encode = obj.vae.encode
    monkeypatch.setattr(obj.vae, "encode", lambda mel: seen.append(len(mel)) or encode(mel))
    monkeypatch.setattr(obj, "encode_chunk", 4)
    z = obj.prepare_batch(clips)
    assert seen == [4, 4, 3]
    assert z.shape == one_go.shape and not z.requires_grad
    torch.testing.assert_close(z, one_go, rtol=1e-5, atol=1e-5)


def test_the_chunk_keeps_the_encoders_activations_small(objective):
    """The default chunk: a few clips at a time, whatever the batch (64 at the small preset)."""
    assert 1 <= objective.encode_chunk <= 16
