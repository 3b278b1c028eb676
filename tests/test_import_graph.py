"""The shape of the code, read from the source (scripts/import_graph.py): the daemon imports only the runtime,
the runtime imports nothing of the trainer nor a training-only library, and no module import cycle."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINING_ONLY = ("tensorboard", "matplotlib", "sklearn", "tqdm")


def _script(stem: str):
    """scripts/<stem>.py as a module (the scripts are not a package)."""
    name = f"_kickserver_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _import_graph():
    return _script("import_graph")


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
    """The reader itself: a lazy (function-level) import closes a cycle, and so does one under TYPE_CHECKING (a type
    named in a signature is a dependency too)."""
    ig = _import_graph()
    pkg = tmp_path / "kickmodel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("x = 1\ndef f():\n    from kickmodel import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .e import y\n")
    (pkg / "e.py").write_text("from . import d\n")
    g = ig.graph(tmp_path, ("kickmodel",))
    assert ig.cycles(g) == [["kickmodel.a", "kickmodel.b"], ["kickmodel.d", "kickmodel.e"]]
    assert "kickmodel.a" in g["kickmodel.c"]


def _model_path_walk():
    return _script("model_path_walk")


def test_the_walk_of_a_model_path_comes_back_at_most_8_times():
    """scripts/model_path_walk.py: resolve_model + load_generator of the bundled model pass through the house's files
    in a line (the file format, then its family, then the generator), coming back to a file already left at most 8
    times (17 before the loader had a module of its own and the file format knew the families)."""
    walk = _model_path_walk()
    fig = walk.figures(walk.walk(REPO))
    assert fig["walk"][:2] == ["kickserver/reload.py", "kickmodel/loading.py"]
    assert "kickmodel/families/__init__.py" in fig["walk"]  # the walk reached the family, so it measured the path
    assert fig["returns"] <= 8, fig


def test_the_walk_counts_a_return_to_a_file_already_left():
    walk = _model_path_walk()
    fig = walk.figures(["a.py", "a.py", "b.py", "a.py", "c.py", "b.py", "b.py"])
    assert (fig["stays"], fig["files"], fig["returns"]) == (5, 3, 2)
    assert fig["returns_by_file"] == {"a.py": 1, "b.py": 1}
    assert walk.in_house("kickmodel/loading.py") and walk.in_house("kickmodel/families/base.py")
    assert not walk.in_house("kickmodel/families/mel_vae/network.py")



def _imported_tops(folder: str):
    """(file, the top-level names it imports) for every Python file under folder."""
    ig = _import_graph()
    for f in sorted((REPO / folder).rglob("*.py")):
        yield f, {n.split(".")[0] for n in ig.imports_of(REPO, f) if n}


def _sys_path_arguments(path: Path) -> list[str]:
    """The source of every argument given to sys.path.insert / append / extend in a file."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("insert", "append", "extend") and ast.unparse(node.func.value) == "sys.path"):
            found += [ast.unparse(a) for a in node.args]
    return found


def test_bench_never_imports_the_tests():
    """The benchmarks and studies run without tests/: none imports the package `tests` or a module of it by its
    own name (as tests/ on sys.path would allow: daemon_util, conftest...), nor puts a tests folder on sys.path."""
    theirs = {"tests"} | {p.stem for p in (REPO / "tests").rglob("*.py")} - {"__init__"}
    for f, used in _imported_tops("bench"):
        assert not used & theirs, (str(f.relative_to(REPO)), sorted(used & theirs))
        assert not [a for a in _sys_path_arguments(f) if "tests" in a], str(f.relative_to(REPO))


def test_only_the_benchs_own_tests_import_it():
    """tests/bench/ tests the bench; every other test stands without it."""
    for f, used in _imported_tops("tests"):
        if (REPO / "tests" / "bench") not in f.parents:
            assert "bench" not in used, str(f.relative_to(REPO))


def test_the_worker_reaches_nothing_of_the_osc_contract():
    """The worker emits outcomes (kickserver.jobs: Done, Refused, ...) and the front end encodes them: neither
    kickserver.worker nor anything it imports, at any depth, imports kickserver.osc_api."""
    g = _import_graph().graph(REPO)
    seen, todo = set(), ["kickserver.worker"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(g.get(m, ()))
    assert "kickserver.osc_api" not in seen, sorted(m for m in seen if "osc_api" in g.get(m, ()))
    assert "kickserver.frontend" not in seen and "kickserver.daemon" not in seen
