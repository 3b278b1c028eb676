"""The shape of the code, read from the source (scripts/import_graph.py): the daemon imports only the runtime,
the runtime imports nothing of the trainer nor a training-only library, and no module import cycle."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINING_ONLY = ("tensorboard", "matplotlib", "sklearn", "tqdm")


def _import_graph():
    name = "_kickserver_import_graph"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "import_graph.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def test_the_daemon_imports_only_the_runtime():
    edges = _import_graph().package_edges(_import_graph().graph(REPO))
    assert edges["kickserver"] == {"kickmodel"}
    assert edges["kickmodel"] == set()  # neither the trainer nor the daemon
    assert edges["trainer"] <= {"kickmodel"}


def test_the_runtime_imports_no_training_only_library():
    ig = _import_graph()
    for f in sorted((REPO / "kickmodel").rglob("*.py")):
        used = {n.split(".")[0] for n in ig.imports_of(REPO, f)}
        assert not used & set(TRAINING_ONLY), (f.relative_to(REPO), sorted(used & set(TRAINING_ONLY)))


def test_no_import_cycle():
    ig = _import_graph()
    assert ig.cycles(ig.graph(REPO)) == []


def test_a_cycle_and_a_lazy_import_are_seen(tmp_path):
    """The reader itself: a lazy (function-level) import closes a cycle; one under TYPE_CHECKING does not."""
    ig = _import_graph()
    pkg = tmp_path / "kickmodel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("x = 1\ndef f():\n    from kickmodel import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    g = ig.graph(tmp_path, ("kickmodel",))
    assert ig.cycles(g) == [["kickmodel.a", "kickmodel.b"]]
    assert "kickmodel.a" not in g["kickmodel.c"]
