"""The kick synth's learned transient (kickmodel/families/kick_synth/transient.py): its window and bound (the first
sample stays 0, nothing changes from window_ms on, nothing added is louder than the bound), a model without it is the
model it was, a model with it plays it in every path and still sets its unit controls exactly, and its config is
checked. (Its training: tests/trainer/test_transient_training.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from daemon_util import root_conftest

from kickmodel import descriptors
from kickmodel.config import ConfigError
from kickmodel.families import from_dict, get_family, preset
from kickmodel.families.kick_synth.config import TransientConfig
from kickmodel.families.kick_synth.synth import U_LIMIT, n_params, synth_for
from kickmodel.families.kick_synth.transient import RISE_MS, TransientNet, WithTransient, window
from kickmodel.generator import Item, Ragged
from kickmodel.loading import load_generator

SR = 44100
N2 = n_params(2)


def _loud(net: TransientNet, seed: int = 0, std: float = 0.5) -> TransientNet:
    """Its weights drawn large: a transient that adds as much as its bound lets it."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return net.eval()


def _kicks(n: int = 6, length: int = 8192) -> tuple[torch.Tensor, torch.Tensor]:
    u = (torch.rand(n, N2, generator=torch.Generator().manual_seed(3)) * 2 - 1) * U_LIMIT
    with torch.no_grad():
        return synth_for(2, SR, length)(u), u


def test_the_window_starts_at_zero_rises_within_half_a_ms_and_ends_at_zero():
    w = window(SR, 30.0)
    assert w.shape[0] == int(np.ceil(30.0 * SR / 1000))
    assert float(w[0]) == 0.0 and bool((w >= 0).all()) and float(w.max()) <= 1.0
    rise = int(np.ceil(RISE_MS * SR / 1000))
    assert float(w[rise]) == pytest.approx(1.0, abs=1e-6)  # risen within RISE_MS
    assert float(w[-1]) < 1e-4  # and fallen to 0 at window_ms: the next sample is past it


@pytest.mark.parametrize("window_ms,max_db", [(30.0, -6.0), (8.0, -20.0)])
def test_what_is_added_starts_at_zero_ends_at_window_ms_and_stays_within_its_bound(window_ms, max_db):
    kicks, u = _kicks()
    assert bool((kicks[:, 0] == 0).all())
    net = _loud(TransientNet(TransientConfig(enabled=True, window_ms=window_ms, max_db=max_db), N2, SR))
    with torch.no_grad():
        out = net(kicks, u)
    w = net.window.shape[0]
    added = out - kicks
    assert bool((out[:, 0] == 0).all())  # the first sample is still exactly 0
    assert torch.equal(out[:, w:], kicks[:, w:])  # from window_ms on, the synth's own samples, bit for bit
    peak = kicks.abs().amax(dim=1, keepdim=True)
    bound = 10 ** (max_db / 20) * peak
    with torch.no_grad():
        alone = net.added(kicks, u)
    assert bool((alone.abs() <= net.window * bound * (1 + 1e-6)).all())  # what is added, as computed (float rounding)
    assert bool((added[:, :w].abs() <= net.window * bound + 1e-6 * peak).all())  # and as heard (one float rounding)
    assert float((alone.abs() / bound).max()) > 0.3  # it does add something: the bound is not met by doing nothing
    # scaling the kick scales what is added (its bound is the kick's own peak)
    with torch.no_grad():
        assert torch.allclose(net(0.25 * kicks, u), 0.25 * out, atol=1e-6)


def test_an_untrained_transient_adds_nothing():
    kicks, u = _kicks(2)
    net = TransientNet(TransientConfig(enabled=True), N2, SR)
    with torch.no_grad():
        assert torch.equal(net(kicks, u), kicks)


def test_a_config_without_the_section_is_a_model_without_a_transient():
    """Every model made before the transient existed: no section, no part, the synth alone."""
    fam = get_family("kick_synth")
    data = preset("tiny", "kick_synth").to_dict()
    del data["transient"]
    cfg = from_dict(data)
    assert cfg.transient == TransientConfig() and not cfg.transient.enabled
    assert fam.part_names(cfg) == ("denoiser",)
    assert set(fam.part_modules({"denoiser": cfg})) == {"denoiser"}
    on = cfg.replace("transient", enabled=True)
    assert fam.part_names(on) == ("denoiser", "transient")
    assert sum(p.numel() for p in fam.part_modules({"denoiser": on})["transient"].parameters()) < 50_000


def test_the_render_cost_counts_the_transients_pass():
    from kickmodel.families.base import render_cost_of

    fam = get_family("kick_synth")
    off = preset("tiny", "kick_synth")
    on = off.replace("transient", enabled=True)
    alone, both = render_cost_of(fam, {"denoiser": off}), render_cost_of(fam, {"denoiser": on})
    with torch.device("meta"):
        net = fam.part_modules({"denoiser": on})["transient"]
    per_sample = sum(p.numel() for p in net.convs.parameters())  # its convolutions' multiply-adds, each sample
    assert both.flops - alone.flops >= per_sample * net.window.shape[0]


def test_the_transients_config_is_checked_naming_the_key():
    fam = get_family("kick_synth")
    cfg = preset("tiny", "kick_synth").replace("transient", enabled=True)
    fam.check_config(cfg)
    for change, key in [({"window_ms": 0.2}, "transient.window_ms"), ({"max_db": 6.0}, "transient.max_db"),
                        ({"channels": 0}, "transient.channels"), ({"lr": 0.0}, "transient.lr"),
                        ({"window_ms": 500.0}, "transient.window_ms")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            fam.check_config(cfg.replace("transient", **change))
    with pytest.raises(ConfigError, match="transient section is larger"):
        fam.check_limits(cfg.replace("transient", channels=512))
    fam.check_limits(cfg.replace("transient", enabled=False, channels=512))  # off: nothing is built


@pytest.fixture(scope="module")
def transient_model(tmp_path_factory):
    """A tiny model with a transient (random weights, drawn large), long enough to measure a decay."""
    cfg = preset("tiny", "kick_synth").replace("data", length=16384).replace("transient", enabled=True)
    path = tmp_path_factory.mktemp("kst") / "kst.safetensors"
    gen = load_generator(root_conftest().make_tiny_artifact(path, family="kick_synth", cfg=cfg))
    _loud(gen.transient, std=0.2)
    return gen


def _rows(raw) -> list[np.ndarray]:
    if isinstance(raw, Ragged):
        return [raw.audio[i, :n] for i, n in enumerate(raw.lengths)]
    return list(raw)


def test_a_model_with_a_transient_plays_it_after_the_synth(transient_model):
    gen = transient_model
    assert gen.describe()["synth_transient"] and isinstance(gen.codec.synth, WithTransient)
    assert isinstance(gen.long_synth, WithTransient)
    z = np.zeros((2, gen.latent_dim), dtype=np.float32)
    items = [Item(seed=1), Item(seed=2)]
    raw = _rows(gen.decode_latents(z, items))
    u = gen.numbers(torch.as_tensor(z))
    w = gen.transient.window.shape[0]
    for i, row in enumerate(raw):
        synth = gen.long_synth.synth if len(row) > gen.length else gen.codec.synth.synth
        with torch.no_grad():
            alone = synth(u[i:i + 1], torch.tensor([items[i].seed]))[0].numpy()
            played = gen.transient(torch.from_numpy(alone)[None], u[i:i + 1])[0].numpy()
        assert np.array_equal(row, played)  # the synth, then the transient
        assert not np.array_equal(row[:w], alone[:w]) and np.array_equal(row[w:], alone[w:])
        assert row[0] == 0.0


def test_a_models_generated_kicks_change_with_its_transient_alone(transient_model):
    """generate and vary go through the transient: its output layer zeroed, the same seeds make other kicks."""
    gen = transient_model
    items = [Item(seed=s) for s in range(2)]
    with_it = gen.generate(items, gen.settings())
    varied = gen.vary(with_it[0][:gen.length], 0.3, items[:1], gen.settings())
    saved = {k: v.clone() for k, v in gen.transient.state_dict().items()}
    try:
        with torch.no_grad():
            gen.transient.out.weight.zero_()
            gen.transient.out.bias.zero_()
        without = gen.generate(items, gen.settings())
        varied_without = gen.vary(with_it[0][:gen.length], 0.3, items[:1], gen.settings())
    finally:
        gen.transient.load_state_dict(saved)
    assert not np.array_equal(with_it, without)
    assert not np.array_equal(varied, varied_without)


@pytest.mark.parametrize("controls", [{"pitch_hz": 61.7}, {"decay_s": 0.15}, {"click_db": -20.0},
                                      {"click_db": -28.0}, {"click_db": -40.0}])
def test_unit_controls_measure_as_asked_with_the_transient_on(transient_model, controls):
    """Set on the kick as it is played: the transient's attack counts in the click measured. (A click asked quieter
    than what the transient alone adds above 2 kHz is out of reach: the synth's click can only go to silence.)"""
    gen = transient_model
    kicks = gen.generate([Item(seed=s, controls=controls) for s in range(3)], gen.settings())
    got = descriptors.measure(torch.from_numpy(kicks), SR).numpy()
    (name, want), = controls.items()
    if name == "pitch_hz":  # the settled body's pitch, what a pitch asked in Hz means (as a tuner reads it)
        settled = descriptors.settled_pitch_hz(torch.from_numpy(kicks), SR).numpy()
        assert np.abs(1200 * np.log2(settled / want)).max() <= 25, settled
    elif name == "decay_s":
        assert np.abs(got[:, 0] / want - 1).max() <= 0.1, got
    else:
        assert np.abs(got[:, 2] - want).max() <= 1.5, got
