"""JSON nested 10,000 deep in an artifact or a cache: a clear refusal, never a RecursionError (a run
folder's config: tests/trainer/test_nested_run_config.py)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from kickmodel.artifact import ArtifactError, read_metadata
from kickmodel.loading import check_artifact, load_artifact
from kickserver import reload

DEEP = "[" * 10_000 + "]" * 10_000


def with_meta(src: Path, dst: Path, **changes: str) -> Path:
    save_file(load_file(str(src)), str(dst), metadata={**read_metadata(src), **changes})
    return dst


@pytest.mark.parametrize("key", ["config", "parts", "controls", "control_quantiles", "training"])
def test_deeply_nested_metadata_is_refused_with_a_reason(tiny_artifact, tmp_path, key):
    bad = with_meta(tiny_artifact, tmp_path / "deep.safetensors", **{key: DEEP})
    for check in (check_artifact, load_artifact):
        with pytest.raises(ArtifactError, match=rf"^{bad}: .*too deeply nested \(10000 levels"):
            check(bad)
    assert reload.list_models(tmp_path) == sorted(["default"] if reload.BUNDLED.is_file() else [])


def test_a_deeply_nested_header_is_refused(tiny_artifact, tmp_path):
    raw = Path(tiny_artifact).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    head = json.dumps(header)[:-1] + ', "junk": ' + DEEP + "}"
    head += " " * (-len(head) % 8)
    bad = tmp_path / "deephead.safetensors"
    bad.write_bytes(struct.pack("<Q", len(head)) + head.encode() + raw[8 + n:])
    with pytest.raises(ArtifactError, match="header: too deeply nested"):
        check_artifact(bad)
    with pytest.raises(ArtifactError, match="header: too deeply nested"):
        load_artifact(bad)


def test_a_nested_cache_manifest_means_a_rebuild(tmp_path):
    from trainer import data

    (tmp_path / data.MANIFEST_FILE).write_text(DEEP)
    assert data._read_manifest(tmp_path) is None
