"""Every family x preset: build, shape-check, one training step, export, load, render (the RAVE habit).

Plus the seam itself: the registry, configs that belong to their family, and a daemon that imports
nothing family-specific."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from kickmodel.config import ConfigError
from kickmodel.families import cli_name, family_names, from_dict, get_family, preset
from kickmodel.families.base import Family
from kickmodel.generator import Item
from kickmodel.loading import load_artifact, load_generator, save_artifact
from trainer.recipes import get_recipe, recipe_names

ROOT = Path(__file__).resolve().parents[2]
CASES = [(f, p) for f in family_names() for p in ("tiny", "small", "base")] + [("waveform_diffusion", "tiny-pqmf")]


@pytest.mark.parametrize("family,name", CASES, ids=[f"{cli_name(f)}-{p}" for f, p in CASES])
def test_family_preset_trains_exports_loads_and_renders(family, name, tmp_path):
    from daemon_util import root_conftest

    fit_context = root_conftest().fit_context

    if name == "tiny-pqmf":  # the waveform U-Net with the filter bank in and out instead of strided convs
        cfg = preset("tiny", family).replace("model", io="pqmf")
    else:
        cfg = preset(name, family)
    cfg = cfg.replace("train", batch_size=2, micro_batch=2)  # the preset's shapes, a small batch
    cfg, ctx = fit_context(cfg, tmp_path / f"{name}.safetensors")
    fam = get_family(family)
    assert from_dict(cfg.to_dict()) == cfg  # the config survives JSON
    torch.manual_seed(0)
    objective = get_recipe(family).objective(cfg, ctx)  # its training half: trainer/recipes/<name>.py
    objective.fit_data(torch.randn(4, cfg.data.length) * 0.2)
    module = objective.module
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, cfg.data.length, generator=g) * 0.2
    cond = torch.rand(2, len(cfg.controls)) if cfg.controls else None
    mask = torch.ones_like(cond) if cond is not None else None
    before = {k: v.clone() for k, v in module.state_dict().items()}
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    loss, figures = objective.loss(module, objective.prepare_batch(x), cond, mask, g, 0)
    assert loss.ndim == 0 and torch.isfinite(loss), (loss, figures)
    loss.backward()
    opt.step()
    changed = [k for k, v in module.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "one training step changed no weight"
    val = objective.val_loss(module.eval(), objective.prepare_batch(x), cond, mask, torch.Generator().manual_seed(1))
    assert np.isfinite(val["loss"])

    tensors = objective.artifact_tensors(module.state_dict())
    assert {k.split(".", 1)[0] for k in tensors} == set(fam.part_names(cfg, {
        p: from_dict(c) for p, c in objective.part_configs(cfg).items()}))
    quantiles = [[float(i) / 32 for i in range(33)] for _ in cfg.controls]
    path = save_artifact(tmp_path / f"{name}.safetensors", tensors, cfg, step=1, control_quantiles=quantiles,
                         part_configs=objective.part_configs(cfg))
    art = load_artifact(path)
    assert art.family == family and set(art.part_configs) == set(objective.parts)
    gen = load_generator(path, "cpu")
    steps = 2 if gen.samplers else None
    out = gen.generate([Item(seed=3, controls={cfg.controls[0]: 0.7})], gen.settings(steps))
    # the model's length; a kick-synth kick whose tail outlasts it is played at its max_length (3 s)
    assert out.shape[0] == 1 and out.shape[1] in (cfg.data.length, gen.max_length) and np.isfinite(out).all()
    assert abs(20 * np.log10(np.abs(out).max()) + 1.0) < 0.01  # finished: peak -1 dBFS
    again = gen.generate([Item(seed=3, controls={cfg.controls[0]: 0.7})], gen.settings(steps))
    assert np.array_equal(out, again)  # the same seed and settings: the same kick
    src = gen.prepare_source(out[0], gen.sample_rate)
    same = gen.vary(src, 0.0, [Item(seed=4)], gen.settings(steps))
    assert np.allclose(same[0], gen.vary(src, 0.0, [Item(seed=9)], gen.settings(steps))[0])
    out48 = gen.generate([Item(seed=3)], gen.settings(steps), sample_rate=48000)
    rendered = gen.generate([Item(seed=3)], gen.settings(steps)).shape[1]  # the model's length, or its max_length
    assert abs(out48.shape[1] - rendered * 48000 / cfg.data.sample_rate) <= 1


def test_unknown_family_and_foreign_sections_are_refused():
    with pytest.raises(ConfigError, match="model family 'wavetable' is not known"):
        preset("tiny", "wavetable")
    d = preset("tiny").to_dict()
    d["inverter"] = {}
    with pytest.raises(ConfigError, match="unknown section"):
        from_dict(d)
    assert get_family("waveform-diffusion") is get_family("waveform_diffusion")


def test_version_1_configs_are_upgraded():
    d = preset("tiny").to_dict()
    model = dict(d["model"], family="waveform_diffusion", controls=list(d["conditioning"]["controls"]))
    v1 = {"version": 1, "preset": "tiny", "data": d["data"], "augment": d["augment"], "model": model,
          "diffusion": dict(d["diffusion"], cond_drop=0.2), "sampling": d["sampling"], "train": d["train"]}
    cfg = from_dict(v1)
    assert cfg.family == "waveform_diffusion" and cfg.controls == ("decay", "pitch", "click")
    assert cfg.conditioning.drop_all == 0.2 and cfg.model == preset("tiny").model


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_daemon_imports_nothing_family_specific():
    """kickserver/ talks to models through kickmodel.generator and loads them through kickmodel.loading (the one
    family-aware reader) only: no family module, no diffusion code."""
    allowed = {"kickmodel", "kickmodel.generator", "kickmodel.loading", "kickmodel.artifact", "kickmodel.clips",
               "kickmodel.fsutil", "kickmodel.dsp",  # generic: atomic writes, where a kick's file ends
               "kickmodel.config", "kickmodel.offline", "kickmodel.wavfile", "kickmodel.descriptors",
               "kickmodel.capture", "kickmodel.kitmap",  # generic: render capture, a model's kit map
               "kickmodel.kitrules", "kickmodel.notes", "kickmodel.naming",  # kits, notes and file names of any family
               "kickmodel.batching"}  # generic: the writer measures a batch's kicks side by side
    for path in sorted((ROOT / "kickserver").glob("*.py")):
        used = {m for m in _imports(path) if m.split(".")[0] in ("kickmodel", "trainer")}
        assert used <= allowed, (path.name, sorted(used - allowed))


def test_every_family_has_a_training_recipe_by_the_same_name():
    """A family is two halves: its serving half here (kickmodel.families.REGISTRY) and its training half in the
    trainer (trainer.recipes.RECIPES), one line each, by the same name."""
    assert recipe_names() == family_names()
    for name in family_names():
        recipe = get_recipe(name)
        assert recipe.family == name and recipe.serving is get_family(name)
        assert get_recipe(cli_name(name)) is recipe
    with pytest.raises(ConfigError, match="model family 'wavetable' has no training recipe"):
        get_recipe("wavetable")


TRAINING_MEMBERS = ("objective", "options", "options_for", "take_options", "check_resume", "fit_config",
                    "export_config", "export_keys", "artifact_contents")


def test_a_familys_serving_half_has_no_training_member():
    """kickmodel's Family is what the daemon needs (configs, parts, limits, what builds the generator and what it
    can do); how a family is trained is its recipe's (and the recipe's module is never imported by kickmodel)."""
    for name in family_names():
        family = get_family(name)
        assert not [m for m in TRAINING_MEMBERS if hasattr(family, m)], name
        assert family.load_generator.__func__ is Family.load_generator  # its generator_class builds it
        assert family.capabilities == family.generator_class().capabilities
    for path in (ROOT / "kickmodel").rglob("*.py"):
        assert not [m for m in _imports(path) if m.split(".")[0] == "trainer"], path
        assert path.name != "objective.py", path  # training losses live in trainer/recipes/
