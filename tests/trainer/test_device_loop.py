"""The training loop on its device: the clips live there, a step is chosen, augmented, measured and
prepared there, the loss is read back once a step, and `kicktrain profile` times the phases for real."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kickmodel.families import preset
from trainer.train import FitOptions, Trainer

META = torch.device("meta")


def _trainer(synth_kicks: Path, run: Path, family: str = "waveform_diffusion", **train) -> Trainer:
    cfg = preset("tiny", family)
    if train:
        cfg = cfg.replace("train", **train)
    opts = FitOptions(data=[str(synth_kicks)], run_dir=run, cfg=cfg, device="cpu", max_steps=10, progress=False,
                      tensorboard=False, cache_dir=run.parent / "cache")
    return Trainer(opts, log=lambda m: None)


def test_the_clips_go_to_the_device_unless_they_would_crowd_it():
    from trainer.train import place_clips

    audio = torch.zeros(10, 1000)  # 40 kB
    said: list[str] = []
    on = place_clips(audio, META, said.append, free_bytes=10**9)
    assert on.device == META and on.shape == audio.shape and said == []
    kept = place_clips(audio, META, said.append, free_bytes=100_000)  # 40 kB of 100 kB free: over the share
    assert kept is audio and kept.device.type == "cpu"
    assert len(said) == 1 and "kept on the CPU" in said[0] and "40 kB" in said[0], said
    cpu = place_clips(audio, torch.device("cpu"), said.append)
    assert cpu is audio and len(said) == 1  # the CPU: nothing to move, nothing to say


def test_a_step_is_drawn_augmented_and_measured_on_the_device(synth_kicks, tmp_path):
    """The trainer's step on the meta device (shapes, no values): the clips indexed there, augmented, their
    controls measured and the drop masks moved there, none of it read back; the generators end where the CPU's
    do (the same draws, so a resume is as exact on a GPU as on the CPU)."""
    tr = _trainer(synth_kicks, tmp_path / "run")
    try:
        ref, g_ref = tr._prepare(3)
        tr.device = META
        tr.audio = tr.audio.to(META)
        tr.objective.prepare_batch = lambda x: x  # the network's own preparation is the family's test
        out, g_out = tr._prepare(3)
    finally:
        tr.close_prefetch()
    assert len(out) == len(ref)
    for (x, c, m), (xr, cr, mr) in zip(out, ref):
        assert x.device == META and c.device == META and m.device == META
        assert x.shape == (xr.shape[0], xr.shape[-1])  # the waveform family prepares [B, 1, L]
        assert c.shape == cr.shape and m.shape == mr.shape
    assert torch.equal(g_ref.get_state(), g_out.get_state())


class _Watched(torch.Tensor):
    """A loss whose values, when read on the host (item, tolist, float), are counted: each read waits for the
    device."""

    reads = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__float__):
            _Watched.reads += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_step_reads_its_loss_back_once_not_per_micro_batch(synth_kicks, tmp_path):
    tr = _trainer(synth_kicks, tmp_path / "run", batch_size=6, micro_batch=2, prefetch=False)
    assert tr.n_micro == 3
    loss_of = tr.objective.loss

    def watched(*a, **kw):
        loss, figures = loss_of(*a, **kw)
        return loss.as_subclass(_Watched), {"watched": loss.detach().as_subclass(_Watched) * 2, "plain": 1.5}

    tr.objective.loss = watched
    try:
        _Watched.reads = 0
        metrics = tr.train_step()
    finally:
        tr.close_prefetch()
    assert _Watched.reads == 1, _Watched.reads
    assert isinstance(metrics["loss"], float) and isinstance(metrics["watched"], float)
    assert metrics["watched"] == pytest.approx(2 * metrics["loss"], rel=1e-6)
    assert metrics["plain"] == pytest.approx(1.5)


def test_profiling_synchronises_the_device_at_each_phase_boundary(synth_kicks, tmp_path):
    """While profiling, each phase waits for the device at its start and its end (so a GPU's phase ranges hold its
    work, not the launches); in the normal loop nothing waits."""
    tr = _trainer(synth_kicks, tmp_path / "run", prefetch=False)
    calls: list[int] = []
    try:
        tr.train_step()
        tr._phase_sync = lambda: calls.append(1)
        tr.train_step()
        profiled = len(calls)
        tr._phase_sync = None
        tr.train_step()
    finally:
        tr.close_prefetch()
    # data, augment, conditioning, prepare, forward, backward, optimizer, ema: two each
    assert profiled >= 16, profiled
    assert len(calls) == profiled


def test_the_mel_vae_loss_reads_nothing_back(synth_kicks, tmp_path, monkeypatch):
    """Its figures (recon, kl, active dimensions...) stay device tensors for the loop's one read a step; validation
    still gets numbers."""
    tr = _trainer(synth_kicks, tmp_path / "run", family="mel_vae", prefetch=False)
    try:
        (x, c, m), *_ = tr._prepare(0)[0]
        figures_val = tr.validate()

        def read(*a, **kw):
            raise AssertionError("a device value was read back inside the loss")

        with monkeypatch.context() as mp:
            for name in ("item", "tolist", "__float__", "__int__", "__bool__"):
                mp.setattr(torch.Tensor, name, read)
            loss, figures = tr.objective.loss(tr.module, x, c, m, torch.Generator().manual_seed(0), 0)
        metrics = tr.train_step()
    finally:
        tr.close_prefetch()
    assert {"recon", "kl", "active_dims", "prior_nll"} <= set(figures)
    assert all(isinstance(metrics[k], float) for k in figures)
    assert isinstance(figures_val["active_dims"], int) and isinstance(figures_val["recon"], float)


def test_kicktrain_profile_bounds_its_phases_by_waits_for_the_device(synth_kicks, tmp_path, monkeypatch):
    import trainer.profiling as profiling

    waits: list[str] = []
    monkeypatch.setattr(profiling, "device_sync", lambda device: lambda: waits.append(device.type))
    opts = FitOptions(data=[str(synth_kicks)], run_dir=tmp_path / "unused", cfg=preset("tiny"), device="cpu",
                      progress=False, tensorboard=False, cache_dir=tmp_path / "cache")
    s = profiling.profile_training(opts, 3, tmp_path / "prof", log=lambda m: None)
    assert s["active_steps"] == 1 and len(waits) >= 3 * 16 and set(waits) == {"cpu"}


def test_clips_kept_in_ram_are_moved_to_the_device_each_step(synth_kicks, tmp_path):
    """place_clips kept them on the CPU (too large a share of the GPU): each micro-batch is indexed in RAM and moved."""
    tr = _trainer(synth_kicks, tmp_path / "run")
    try:
        ref, g_ref = tr._prepare(2)
        tr.device = META  # the clips stay where they are
        tr.objective.prepare_batch = lambda x: x
        out, g_out = tr._prepare(2)
    finally:
        tr.close_prefetch()
    assert tr.audio.device.type == "cpu"
    assert all(x.device == META and c.device == META for x, c, _ in out)
    assert torch.equal(g_ref.get_state(), g_out.get_state())
