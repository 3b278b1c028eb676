"""Codecs as pieces (kickmodel.codecs): each turns audio into its prior's space and back with the shapes it promises,
calling the render hook between its passes, and a family pairs a prior with one (latent diffusion serves with the
mel-VAE's codec itself, not a copy of it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kickmodel.codecs.identity import WaveformCodec, reject_images
from kickmodel.codecs.mel import MelCodec
from kickmodel.codecs.synth import SynthCodec
from kickmodel.generator import Item


def test_the_waveform_codec_round_trips_and_dips_only_where_asked():
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((3, 4096)).astype(np.float32))
    plain = WaveformCodec(scale=2.0, sample_rate=44100, patch=16)
    z = plain.encode(x)
    assert z.shape == (3, 1, 4096) and torch.equal(z, x[:, None] * 2.0)
    assert np.allclose(plain.decode(z), x.numpy(), atol=1e-6)
    dipped = WaveformCodec(scale=2.0, sample_rate=44100, patch=16, image_reject_db=30.0).decode(z)
    assert np.array_equal(dipped, reject_images(x.numpy(), 44100, 16, 30.0))
    spectrum = np.abs(np.fft.rfft(dipped[0])) / np.abs(np.fft.rfft(x.numpy()[0]))
    image = int(round(44100 / 16 / (44100 / 4096)))  # the bin of the first image, sample_rate / patch
    assert spectrum[image] < 0.1 and 0.9 < np.median(spectrum[:image // 2]) < 1.1


def test_the_mel_codec_round_trips_shapes_kick_by_kick(generators):
    gen = generators["mel_vae"]
    codec = gen.codec
    assert isinstance(codec, MelCodec)
    clips = gen.generate([Item(seed=s) for s in (1, 2)], gen.settings())
    z = codec.encode(torch.from_numpy(clips))
    assert z.shape == (2, codec.latent_dim) and torch.isfinite(z).all()
    assert np.allclose(codec.encode_batch(clips), z.numpy(), atol=1e-5)  # one batch for a map, the same latents
    seen = []
    audio = codec.decode(z, seen.append)
    assert audio.shape == (2, gen.length) and audio.dtype == np.float32 and np.isfinite(audio).all()
    assert [i["stage"] for i in seen] == ["decode", "invert"]
    alone = codec.decode(z[1:], lambda info: None)
    assert np.array_equal(alone[0], audio[1])  # a kick does not depend on its batch


def test_latent_diffusion_serves_with_the_mel_vae_codec_itself(generators):
    ld, mel = generators["latent_diffusion"], generators["mel_vae"]
    assert type(ld.codec) is type(mel.codec) is MelCodec
    assert not hasattr(ld, "vae") and not hasattr(ld, "inverter")  # no copy of its encode/decode beside it


def test_the_synth_codec_plays_numbers_and_fits_them_back(generators):
    gen = generators["kick_synth"]
    codec = gen.codec
    assert isinstance(codec, SynthCodec)
    u = gen.net.denormalise(torch.zeros(2, codec.latent_dim))
    audio = codec.decode(u, lambda info: None)
    assert audio.shape == (2, gen.length) and np.isfinite(audio).all()
    checks = []
    fitted = codec.encode(torch.from_numpy(audio[:1]), checks.append)
    assert fitted.shape == (1, codec.latent_dim) and torch.isfinite(fitted).all()
    assert checks and {i["stage"] for i in checks} == {"fit"}


def test_the_image_dip_is_the_waveform_familys_own_and_old_configs_still_load():
    import json

    from kickmodel.artifact import read_metadata
    from kickmodel.config import ConfigError
    from kickmodel.families import from_dict, preset

    wave = preset("tiny", "waveform_diffusion")
    assert wave.sampling.image_reject_db == 30.0
    for family in ("latent_diffusion", "kick_synth"):
        cfg = preset("tiny", family)
        assert not hasattr(cfg.sampling, "image_reject_db")
        old = cfg.to_dict()
        old["sampling"]["image_reject_db"] = 0.0  # as every diffusion family's sampling section once carried it
        assert from_dict(old) == cfg
        old["sampling"]["image_reject"] = 0.0
        with pytest.raises(ConfigError, match="image_reject"):  # still strict about any other key
            from_dict(old)
    shipped = Path(__file__).resolve().parents[2] / "kickserver" / "models"
    written_before = []
    for path in sorted(shipped.glob("*.safetensors")):
        stored = json.loads(read_metadata(path)["config"])
        if "image_reject_db" in stored["sampling"]:  # written before the move (the kick-synth model since is not)
            assert stored["sampling"]["image_reject_db"] == 0.0, path.name
            written_before.append(path.name)
        assert not hasattr(from_dict(stored).sampling, "image_reject_db")
    assert "default.safetensors" in written_before  # a real old config among them
