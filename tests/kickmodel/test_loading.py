"""The file format knows no family (kickmodel.artifact); the one family-aware reader is kickmodel.loading."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kickmodel.artifact import ArtifactError, read_artifact, read_stored, read_stored_header
from kickmodel.loading import load_artifact, read_family

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "kickserver" / "models" / "default.safetensors"


def _graph():
    name = "_kickserver_import_graph"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "import_graph.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name].graph(REPO)


def test_the_file_format_reaches_no_family_at_any_depth():
    g = _graph()
    seen, todo = set(), ["kickmodel.artifact"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(g.get(m, ()))
    assert not [m for m in seen if m.startswith("kickmodel.families")], sorted(seen)
    assert "kickmodel.loading" not in seen


def test_the_format_reads_plain_tables_and_the_family_parses_them():
    stored = read_stored_header(BUNDLED)
    assert isinstance(stored.config, dict) and stored.config["family"] == stored.family == "latent_diffusion"
    assert set(stored.parts) == {"vae", "denoiser"}
    assert all(isinstance(e["config"], dict) for e in stored.parts.values())
    with pytest.raises(ArtifactError, match="only its header was read"):
        stored.decode()
    reading = read_family(stored)
    assert reading.config.family == "latent_diffusion" and set(reading.part_names) == {"vae", "denoiser"}
    assert reading.map_dim == reading.part_configs["vae"].vae.latent_dim and reading.render_cost is not None


def test_nothing_is_decoded_before_the_family_has_said_yes(monkeypatch):
    asked = []

    def refuse(stored):
        asked.append(stored.decodable)
        raise ArtifactError(f"{stored.path}: refused by its family")

    decoded = []
    monkeypatch.setattr(type(read_stored(BUNDLED)), "decode", lambda self: decoded.append(1))
    with pytest.raises(ArtifactError, match="refused by its family"):
        read_artifact(BUNDLED, refuse)
    assert asked == [True] and not decoded  # the reader saw the whole file, and nothing was decoded
    monkeypatch.undo()
    art = load_artifact(BUNDLED)
    assert set(art.part_names) == {"vae", "denoiser"} and art.map_dim == art.kit_map.latent_dim
