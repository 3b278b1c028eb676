"""Shared fixtures. Tests make what they need here or read it from tests/fixtures, never from outside the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(int(os.environ.get("KICK_TEST_THREADS", "1")))


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """kicktrain's shared prepared-data cache and the daemon's state files (kickserver.state) go under the test
    session's temp folder, not ~/.cache and ~/.local/state (subprocesses inherit the variables)."""
    old = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "XDG_STATE_HOME")}
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v

FIXTURES = Path(__file__).parent / "fixtures"


def fit_context(cfg, path: Path, seed: int = 0):
    """(cfg as `fit` would train it, a FitContext): each option of the family's recipe whose value is an artifact
    (its FamilyOption.artifact_of: a latent-diffusion model's --vae) gets a random one of the same preset beside
    `path` (a hidden file, so a models folder does not list it)."""
    from trainer.recipes import get_recipe
    from trainer.recipes.base import FitContext

    recipe = get_recipe(cfg.family)
    options = {opt.name: make_tiny_artifact(path.with_name(f".{path.stem}-{opt.name}.safetensors"), seed=seed,
                                            family=opt.artifact_of, preset_name=cfg.preset)
               for opt in recipe.options_for("bench") if opt.artifact_of}
    ctx = FitContext(device=torch.device("cpu"), log=lambda m: None, options=options)
    return recipe.fit_config(cfg, ctx), ctx


def make_tiny_artifact(path: Path, seed: int = 0, family: str = "waveform_diffusion", cfg=None,
                       preset_name: str = "tiny") -> Path:
    """A model of `family` (default preset tiny) with seeded random weights, exported as a real artifact
    (fast; no training)."""
    from kickmodel.families import preset
    from trainer.export import artifact_from_state
    from trainer.recipes import get_recipe

    path = Path(path)
    cfg, ctx = fit_context(cfg or preset(preset_name, family), path, seed)
    torch.manual_seed(seed)
    objective = get_recipe(cfg.family).objective(cfg, ctx)
    net = objective.module
    # Zero-initialised output layers would make every sample silent; give them small weights.
    with torch.no_grad():
        for p in net.parameters():
            if p.abs().sum() == 0 and p.ndim > 1:
                p.normal_(0, 0.02)
    quantiles = [[float(i) / 32 for i in range(33)] for _ in cfg.controls]
    return artifact_from_state(objective, cfg, net.state_dict(), name=path.stem, step=0, control_quantiles=quantiles,
                               training={"note": "random weights for tests"}).save(path)


@pytest.fixture(scope="session")
def tiny_artifact(tmp_path_factory) -> Path:
    """Path to a tiny artifact named tiny.safetensors in its own folder (a models folder)."""
    folder = tmp_path_factory.mktemp("models")
    return make_tiny_artifact(folder / "tiny.safetensors")


@pytest.fixture(scope="session")
def synth_kicks(tmp_path_factory) -> Path:
    """A folder of 12 procedural kicks (trainer.synth, seed 6) as 16-bit WAVs: data for a short fit or profile."""
    import soundfile as sf

    from trainer.synth import synth_batch

    folder = tmp_path_factory.mktemp("synth_kicks")
    for i, clip in enumerate(synth_batch(12, seed=6)):
        sf.write(folder / f"k{i:02d}.wav", clip, 44100, subtype="PCM_16")
    return folder


class StepClock:
    """A clock that moves `step` seconds each time it is read (a module's injected CLOCK, e.g. trainer.train's):
    --minutes or a progress interval without waiting."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now
