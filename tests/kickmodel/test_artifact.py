"""Artifact format 2 (parts, per-part configs and hashes), format 1 still read, and nothing in a file
trusted before it is bounded: a config that asks for too much is refused before anything is built."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from kickmodel.artifact import ArtifactError, read_metadata
from kickmodel.families import preset
from kickmodel.generator import Item
from kickmodel.loading import load_artifact, load_generator


def _rewrite(src: Path, dst: Path, *, tensors=None, meta=None) -> Path:
    t = load_file(str(src)) if tensors is None else tensors
    m = read_metadata(src) if meta is None else meta
    save_file(t, str(dst), metadata=m)
    return dst


def _as_v1(src: Path, dst: Path) -> Path:
    """The same weights in format 1: un-namespaced tensors, a version-1 config."""
    meta = read_metadata(src)
    cfg = json.loads(meta["config"])
    model = dict(cfg["model"], family=cfg["family"], controls=cfg["conditioning"]["controls"])
    v1cfg = {"version": 1, "preset": cfg["preset"], "data": cfg["data"], "augment": cfg["augment"], "model": model,
             "diffusion": dict(cfg["diffusion"], cond_drop=cfg["conditioning"]["drop_all"]),
             "sampling": cfg["sampling"], "train": cfg["train"]}
    v1meta = {k: v for k, v in meta.items() if k != "parts"}
    v1meta.update(kickserver_format="1", config=json.dumps(v1cfg))
    tensors = {k.removeprefix("denoiser."): v for k, v in load_file(str(src)).items()}
    return _rewrite(src, dst, tensors=tensors, meta=v1meta)


def test_format_2_names_parts_and_records_their_configs_and_hashes(tiny_artifact):
    meta = read_metadata(tiny_artifact)
    assert meta["kickserver_format"] == "2"
    parts = json.loads(meta["parts"])
    assert set(parts) == {"denoiser"} and len(parts["denoiser"]["sha256"]) == 64
    assert parts["denoiser"]["config"]["family"] == "waveform_diffusion"
    assert all(k.startswith("denoiser.") for k in load_file(str(tiny_artifact)))


def test_format_1_artifacts_still_load_and_sound_the_same(tiny_artifact, tmp_path):
    v1 = _as_v1(tiny_artifact, tmp_path / "old.safetensors")
    art = load_artifact(v1)
    assert art.format_version == 1 and all(k.startswith("denoiser.") for k in art.tensors)
    old, new = load_generator(v1, "cpu"), load_generator(tiny_artifact, "cpu")
    a = old.generate([Item(seed=5)], old.settings(3))
    b = new.generate([Item(seed=5)], new.settings(3))
    assert np.array_equal(a, b)


def _with_model(src: Path, dst: Path, **model) -> Path:
    meta = read_metadata(src)
    cfg = json.loads(meta["config"])
    cfg["model"].update(model)
    parts = json.loads(meta["parts"])
    parts["denoiser"]["config"] = cfg
    # the attack's shape: a few KB of metadata and one token tensor
    return _rewrite(src, dst, tensors={"denoiser.w": torch.zeros(1)},
                    meta=dict(meta, config=json.dumps(cfg), parts=json.dumps(parts)))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("widths,blocks,why", [
    ([2048] * 5, 1, "larger than any kick model"),  # past the family's bounds
    ([1024] * 5, 4, "asks for"),  # within them, but over the parameter budget (counted on the meta device)
])
def test_a_config_that_asks_for_too_much_is_refused_before_anything_is_built(tiny_artifact, tmp_path, widths,
                                                                               blocks, why):
    bad = _with_model(tiny_artifact, tmp_path / "huge.safetensors", widths=widths, blocks_per_level=blocks)
    assert bad.stat().st_size < 8_000
    before = _peak_rss_mb()
    t0 = time.perf_counter()
    with pytest.raises(ArtifactError, match=why):
        load_generator(bad, "cpu")
    assert time.perf_counter() - t0 < 5.0
    assert _peak_rss_mb() - before < 100  # the daemon once grew from 583 MB to 3.2 GB on such a file


def test_parts_are_checked_against_their_hash_and_the_family(tiny_artifact, tmp_path):
    tensors = load_file(str(tiny_artifact))
    k = sorted(tensors)[0]
    tensors[k] = tensors[k] + 0.5
    with pytest.raises(ArtifactError, match="part denoiser does not match its recorded content hash"):
        load_artifact(_rewrite(tiny_artifact, tmp_path / "changed.safetensors", tensors=tensors))
    meta = read_metadata(tiny_artifact)
    with pytest.raises(ArtifactError, match="part denoiser is missing"):
        load_artifact(_rewrite(tiny_artifact, tmp_path / "nopart.safetensors", meta=dict(meta, parts="{}")))
    extra = dict(load_file(str(tiny_artifact)), **{"denoiser.spare": torch.zeros(2)})
    with pytest.raises(ArtifactError, match="tensor denoiser.spare is not used by its config"):
        load_artifact(_rewrite(tiny_artifact, tmp_path / "extra.safetensors", tensors=extra))
    nan = load_file(str(tiny_artifact))
    nan[k] = torch.full_like(nan[k], float("nan"))
    parts = json.loads(meta["parts"])
    parts["denoiser"].pop("sha256")
    with pytest.raises(ArtifactError, match="NaN or inf"):
        load_artifact(_rewrite(tiny_artifact, tmp_path / "nan.safetensors", tensors=nan,
                               meta=dict(meta, parts=json.dumps(parts))))
    with pytest.raises(ArtifactError, match="family 'wavetable' is not known"):
        load_artifact(_rewrite(tiny_artifact, tmp_path / "fam.safetensors", meta=dict(meta, family="wavetable")))
    with pytest.raises(ArtifactError, match="metadata controls is not JSON"):
        load_artifact(_rewrite(tiny_artifact, tmp_path / "junk.safetensors", meta=dict(meta, controls="[decay")))


def test_folders_fifos_and_huge_headers_are_refused_without_blocking(tmp_path):
    with pytest.raises(ArtifactError, match="is a folder; give an artifact file"):
        load_artifact(tmp_path)
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(ArtifactError, match="not a regular file"):
        load_artifact(fifo)  # opened non-blocking: no writer needed to get here
    big = tmp_path / "header.safetensors"
    big.write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(ArtifactError, match="header length"):
        load_artifact(big)


def test_preset_configs_export_with_their_family(tmp_path):
    cfg = preset("tiny")
    assert cfg.to_dict()["family"] == "waveform_diffusion" and "model" in cfg.to_dict()
