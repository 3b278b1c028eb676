"""The project's own import graph, read from the source (nothing is imported): who imports whom, and the cycles.

    python scripts/import_graph.py                 # edges between packages, then every cycle between modules
    python scripts/import_graph.py --modules       # every module -> module edge
    python scripts/import_graph.py --root DIR      # another checkout (e.g. an older commit in a worktree)

Every import counts: at the top of a file, inside a function (a lazy import is still a dependency: it only
moves the failure to run time) and under `if TYPE_CHECKING:` (a type named in a signature is a dependency
too: the module cannot be read, checked or moved without the one it names). Importing
`a.b.c` also depends on the packages `a.b` and `a` (it runs their __init__.py). A module's tie to its own
parent packages is not counted as an edge: a family's package (its `Family`) building its own network and
generator is one unit, not a layering knot; an explicit `from . import X` in a submodule still counts.
tests/test_import_graph.py holds the rules: kickserver imports only kickmodel, kickmodel imports neither
the trainer nor a training-only library, and no cycle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

PACKAGES = ("kickmodel", "kickserver", "trainer")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(root: Path, path: Path) -> set[str]:
    """Absolute names of everything `path` imports (the module itself for `from m import x`; m.x too, when
    x is a submodule in the tree)."""
    me = module_name(root, path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            for a in node.names:  # `from . import osc_api`: a submodule
                if _exists(root, f"{mod}.{a.name}"):
                    found.add(f"{mod}.{a.name}")
    return found


def _exists(root: Path, name: str) -> bool:
    p = root.joinpath(*name.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """{module: modules of `packages` it imports, with their parent packages} (self excluded)."""
    packages = tuple(packages)
    files = [f for p in packages if (root / p).is_dir() for f in sorted((root / p).rglob("*.py"))]
    out: dict[str, set[str]] = {}
    for f in files:
        me = module_name(root, f)
        parts = me.split(".")
        mine = {".".join(parts[:i]) for i in range(1, len(parts))}  # its own packages
        deps: set[str] = set()
        for name in imports_of(root, f):
            if name.split(".")[0] not in packages:
                continue
            while name and not _exists(root, name):  # `from kickmodel.config import X`: X is a name, not a module
                name = name.rpartition(".")[0]
            parts = name.split(".")
            deps.add(name)
            deps |= {".".join(parts[:i]) for i in range(1, len(parts))} - mine
        deps.discard(me)
        out[me] = deps
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def package_edges(g: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, deps in g.items():
        top = m.split(".")[0]
        out.setdefault(top, set()).update(d.split(".")[0] for d in deps if d.split(".")[0] != top)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--modules", action="store_true", help="print every module -> module edge")
    args = ap.parse_args(argv)
    g = graph(args.root)
    for pkg, deps in sorted(package_edges(g).items()):
        print(f"{pkg} -> {', '.join(sorted(deps)) or '(none of ours)'}")
    if args.modules:
        for m, deps in sorted(g.items()):
            print(f"  {m} -> {', '.join(sorted(deps))}")
    found = cycles(g)
    print(f"{len(found)} import cycle(s)" + (":" if found else ""))
    for c in found:
        print("  " + " - ".join(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
