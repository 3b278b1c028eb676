"""scripts/draw_house.py: the drawing's modules sit in their folders' boxes, and the edges of an import circle (a
TYPE_CHECKING import closing it too) are the red ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _draw():
    spec = importlib.util.spec_from_file_location("_draw_house", REPO / "scripts" / "draw_house.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_circle_is_drawn_red_and_modules_sit_in_their_folders(tmp_path):
    pkg = tmp_path / "kickmodel"
    (pkg / "codecs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "codecs" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .codecs import mel\n")
    (pkg / "codecs" / "mel.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\n")
    (pkg / "b.py").write_text("from . import a\n")
    text = _draw().dot_text(tmp_path, "test")
    assert "1 import circle(s)" in text
    assert '"kickmodel.a" -> "kickmodel.codecs.mel" [color="#d00000"' in text
    assert '"kickmodel.codecs.mel" -> "kickmodel.a" [color="#d00000"' in text
    assert '"kickmodel.b" -> "kickmodel.a";' in text  # not in the circle: not red
    box = text.index('label="kickmodel/codecs/"')
    assert text.index('"kickmodel.codecs.mel" [label="mel"', box) > box
