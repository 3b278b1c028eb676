"""The render contract: one method per mode (generate, vary, morph, from_map, locate) over one finishing core, settings
resolved and checked once (gen.settings), cancel and progress through one hook."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from kickmodel.generator import (
    INTERPOLATION,
    VARIATION,
    Cancelled,
    Endpoint,
    Item,
    Settings,
    SettingsError,
    StepPolicy,
    cancel_hook,
)

REPO = Path(__file__).resolve().parents[2]


def test_settings_resolve_and_check_once(generators):
    gen = generators["waveform_diffusion"]
    assert gen.settings() == Settings(gen.default_steps, gen.default_sampler)
    assert gen.settings(policy=StepPolicy(default=3)) == Settings(3, gen.default_sampler)
    assert gen.settings(50, policy=StepPolicy(cap=4)).steps == 4
    with pytest.raises(SettingsError, match=rf"steps must be within 1..{gen.max_steps}, got 0") as e:
        gen.settings(0, "ddim")
    assert e.value.settings == Settings(0, "ddim")  # what was resolved, for a caller that refuses it later
    with pytest.raises(SettingsError, match="unknown sampler 'euler_z'; choose one of"):
        gen.settings(3, "euler_z")
    assert generators["mel_vae"].settings(500, "nonsense") == Settings()  # a one-pass family takes neither


def test_each_mode_refuses_what_it_cannot_do_with_a_reason(generators):
    gen = generators["waveform_diffusion"]
    s = gen.settings(2)
    src = gen.prepare_source(gen.generate([Item(seed=2)], s)[0], gen.sample_rate)
    with pytest.raises(ValueError, match="strength must be within 0..1, got 1.5"):
        gen.vary(src, 1.5, [Item(seed=1)], s)
    with pytest.raises(ValueError, match="one t within 0..1 per kick"):
        gen.morph(Endpoint(seed=1), Endpoint(seed=2), [0.5, 0.7], [Item(seed=0)], gen.settings(2, "ddim"))
    with pytest.raises(ValueError, match=r"deterministic sampler \(dpmpp_2m or ddim\), not ddpm"):
        gen.morph(Endpoint(seed=1), Endpoint(seed=2), [0.5], [Item(seed=0)], gen.settings(2, "ddpm"))
    with pytest.raises(ValueError, match="no kit map: a waveform_diffusion model has no encoder"):
        gen.from_map(0.5, 0.5, 0.0, [Item(seed=1)])
    with pytest.raises(ValueError, match="no kit map"):
        gen.locate(src)


def test_a_model_that_cannot_vary_or_morph_says_so(generators, monkeypatch):
    gen = generators["mel_vae"]
    src = gen.prepare_source(gen.generate([Item(seed=2)], gen.settings())[0], gen.sample_rate)
    monkeypatch.setattr(gen, "capabilities", gen.capabilities - {VARIATION, INTERPOLATION})
    with pytest.raises(ValueError, match=r"model '.*' \(a mel_vae model\) cannot make variations; what it can do: "):
        gen.vary(src, 0.5, [Item(seed=1)], gen.settings())
    with pytest.raises(ValueError, match=r"cannot morph; what it can do: .*encode"):
        gen.morph(Endpoint(seed=1), Endpoint(seed=2), [0.5], [Item(seed=0)], gen.settings())


def test_a_variation_at_strength_0_is_the_source_itself_finished_without_the_subsonic_filter(generators):
    """Levelled as any kick, but neither filtered nor faded a second time: a finished kick has had its subsonic
    filter, its rise and its tail fade (a clip that does not start from silence still gets the rise)."""
    gen = generators["waveform_diffusion"]
    src = gen.prepare_source(gen.generate([Item(seed=2)], gen.settings(2))[0], gen.sample_rate)
    out = gen.vary(src, 0.0, [Item(seed=1), Item(seed=9)], gen.settings(2))
    from kickmodel.dsp import finish_kick

    fade_in = 0.0 if abs(src[0]) <= 1e-3 * np.abs(src).max() else 0.5
    want = finish_kick(np.stack([src, src]), gen.sample_rate, highpass_hz=0.0, fade_in_ms=fade_in, fade_ms=0.0)
    assert np.array_equal(out, want)


def test_the_hook_sees_every_pass_and_cancels_without_a_flag_left_on_the_generator(generators):
    gen = generators["latent_diffusion"]
    seen = []
    gen.generate([Item(seed=1)], gen.settings(3, "ddim"), hook=seen.append)
    stages = [i["stage"] for i in seen]
    assert stages.count("denoise") >= 3 and stages[-2:] == ["decode", "invert"], stages
    assert [i["i"] for i in seen if i["stage"] == "denoise"] == list(range(stages.count("denoise")))
    calls = []

    def stop_at_second(info):
        calls.append(info)
        if len(calls) == 2:
            raise Cancelled()

    with pytest.raises(Cancelled):
        gen.generate([Item(seed=1)], gen.settings(3, "ddim"), hook=stop_at_second)
    assert len(calls) == 2  # stopped where the hook raised
    assert not [k for k in vars(gen) if "cancel" in k or "hook" in k]  # nothing stored on the generator
    with pytest.raises(Cancelled):
        gen.generate([Item(seed=1)], gen.settings(3, "ddim"), hook=cancel_hook(lambda: True))
    assert gen.generate([Item(seed=1)], gen.settings(3, "ddim")).shape == (1, gen.length)  # next one: no hook


def test_kick_synth_fits_and_sets_units_through_the_hook(generators):
    gen = generators["kick_synth"]
    seen = []
    with pytest.raises(Cancelled):
        gen.generate([Item(seed=1, controls={"pitch_hz": 50.0})], gen.settings(2),
                     hook=lambda info: (seen.append(info["stage"]), info["stage"] == "units" and _raise()))
    assert "units" in seen


def _raise():
    raise Cancelled()


def _reads(path: Path, name: str) -> list[str]:
    """The functions of a source file that read `.name` (an attribute load) other than to print it (in an f-string),
    by qualified name."""
    tree = ast.parse(path.read_text())
    out = []

    def visit(node, where):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.JoinedStr):
                continue  # said in a message or a log line, not resolved
            inner = f"{where}.{child.name}" if isinstance(child, (ast.FunctionDef, ast.ClassDef)) else where
            if isinstance(child, ast.Attribute) and child.attr == name and isinstance(child.ctx, ast.Load):
                out.append(where.lstrip("."))
            visit(child, inner)

    visit(tree, "")
    return out


def test_steps_are_resolved_in_one_place():
    """Only GeneratorBase.settings reads a model's default steps and sampler to resolve them (describe reports them,
    a log line may say them): a second resolver anywhere in the house fails here."""
    allowed = {"GeneratorBase.settings", "GeneratorBase.describe"}
    found = {}
    for root in ("kickmodel", "kickserver", "trainer"):
        for f in sorted((REPO / root).rglob("*.py")):
            for name in ("default_steps", "default_sampler"):
                for where in _reads(f, name):
                    if where not in allowed:
                        found.setdefault(str(f.relative_to(REPO)), set()).add(where)
    assert not found, found
