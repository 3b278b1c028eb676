"""Generators declare what they can do: `capabilities` on the class (kickmodel.generator), with
the members each name promises; what a generator declares is what it can do, and callers (kicktrain map)
go by the declaration, not by probing for methods."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from kickmodel.families import family_names
from kickmodel.generator import (
    CAPABILITIES,
    CONTROLS,
    ENCODE,
    GUIDANCE,
    INTERPOLATION,
    INVERT,
    KIT_NUMBERS,
    SAMPLERS,
    VARIATION,
    Encodes,
    Endpoint,
    GeneratorBase,
    Guided,
    Inverts,
    Item,
    KickGenerator,
)
from kickmodel.loading import load_generator
from trainer.cli import main as kicktrain
from trainer.synth import synth_batch


@pytest.fixture(scope="module")
def generators(tmp_path_factory):
    from daemon_util import make_artifact

    d = tmp_path_factory.mktemp("gens")
    return {name: load_generator(make_artifact(d / f"{name}.safetensors", seed=3, family=name), "cpu")
            for name in family_names()}


def _overrides(gen, method: str) -> bool:
    return getattr(type(gen), method) is not getattr(GeneratorBase, method)


@pytest.mark.parametrize("name", family_names())
def test_each_generator_can_do_what_it_declares_and_declares_what_it_can(generators, name):
    gen = generators[name]
    caps = gen.capabilities
    assert isinstance(caps, frozenset) and caps <= CAPABILITIES, caps
    members = [m for m in vars(KickGenerator) if not m.startswith("_")] + list(KickGenerator.__annotations__)
    modes = {"generate", "vary", "morph", "from_map", "locate", "kit"}  # one method per mode, nothing else renders
    assert {"capabilities", "artifact", "config", "interpolation_samplers", "settings"} | modes <= set(members)
    assert "render" not in members
    missing = [m for m in members if not hasattr(gen, m)]  # the Protocol says what every generator exposes
    assert not missing, missing
    assert (CONTROLS in caps) == bool(gen.controls)
    assert (SAMPLERS in caps) == bool(gen.samplers) == (gen.max_steps > 0)
    assert (ENCODE in caps) == isinstance(gen, Encodes)
    assert (INVERT in caps) == isinstance(gen, Inverts)
    assert (GUIDANCE in caps) == isinstance(gen, Guided)
    assert (VARIATION in caps) == _overrides(gen, "_vary")
    assert (INTERPOLATION in caps) == _overrides(gen, "_morph")
    assert (KIT_NUMBERS in caps) == _overrides(gen, "_kit_numbers") == (gen.kit_rules() == "numbers")
    assert gen.describe()["capabilities"] == sorted(caps)
    steps = 2 if SAMPLERS in caps else None
    sampler = gen.interpolation_samplers[0] if gen.interpolation_samplers else None
    kick = gen.generate([Item(seed=1, controls={gen.controls[0]: 0.3} if CONTROLS in caps else {})],
                        gen.settings(steps))
    src = gen.prepare_source(kick[0], gen.sample_rate)
    if VARIATION in caps:
        assert np.isfinite(gen.vary(src, 0.5, [Item(seed=2)], gen.settings(steps))).all()
    if INTERPOLATION in caps:
        morph = gen.morph(Endpoint(seed=1), Endpoint(source=src), [0.0, 0.5], [Item(seed=0), Item(seed=0)],
                          gen.settings(steps, sampler))
        # as long as the model's render, or longer where a family plays a kick as long as its decay (kick-synth)
        assert morph.shape[0] == 2 and gen.length <= morph.shape[1] <= getattr(gen, "max_length", gen.length)
    if ENCODE in caps:
        z = gen.encode(np.stack([src, src]))
        assert z.shape == (2, gen.latent_dim) and np.isfinite(z).all()
    if INVERT in caps:
        assert np.isfinite(gen.invert(src, 2).cpu().numpy()).all()
    kit = gen.kit([Item(seed=3)], 2, 2, gen.settings(steps))  # every model makes a kit, by its rules or the audio ones
    assert [len(row) for row in kit] == [2, 2] and all(np.isfinite(h).all() for row in kit for h in row)
    assert np.abs(kit[0][0]).max() < np.abs(kit[1][0]).max()
    if GUIDANCE in caps:
        own = gen.guidance
        gen.guidance = 2.0
        try:
            assert np.isfinite(gen.generate([Item(seed=1, controls={gen.controls[0]: 0.9})], gen.settings(steps))).all()
        finally:
            gen.guidance = own


def test_a_model_trained_without_controls_does_not_declare_them(tmp_path):
    from daemon_util import root_conftest

    from kickmodel.families import preset

    cfg = preset("tiny", "mel_vae").replace("conditioning", controls=())
    gen = load_generator(root_conftest().make_tiny_artifact(tmp_path / "free.safetensors", family="mel_vae",
                                                            cfg=cfg), "cpu")
    assert gen.controls == () and CONTROLS not in gen.capabilities and ENCODE in gen.capabilities
    assert CONTROLS in type(gen).capabilities  # the family can; this model cannot


def test_an_unknown_capability_is_refused_where_it_is_declared():
    with pytest.raises(TypeError, match="unknown telepathy"):
        type("Odd", (GeneratorBase,), {"capabilities": frozenset({VARIATION, "telepathy"})})


def test_map_goes_by_the_declared_encoder_not_by_a_method_it_finds(generators, tmp_path, monkeypatch, capsys):
    from daemon_util import make_artifact

    mel = type(generators["mel_vae"])
    assert callable(mel.encode)
    monkeypatch.setattr(mel, "capabilities", mel.capabilities - {ENCODE})  # has encode(), does not declare it
    art = make_artifact(tmp_path / "vae.safetensors", family="mel_vae")
    folder = tmp_path / "kicks"
    folder.mkdir()
    for i, clip in enumerate(synth_batch(4, seed=2)):
        sf.write(folder / f"k{i}.wav", clip, 44100, subtype="PCM_16")
    assert kicktrain(["map", str(art), str(folder), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a mel-vae model, which has no encoder to place kicks on a map" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "m").exists()
