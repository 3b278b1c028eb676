"""A drawing of the house: the project's module import graph (scripts/import_graph.py, TYPE_CHECKING imports counted),
each module inside a box for its folder, the edges of an import circle in red.

    python scripts/draw_house.py --out docs/img/house-after.svg
    python scripts/draw_house.py --root /tmp/before --out docs/img/house-before.svg   # an older checkout
    python scripts/draw_house.py --dot                                                # the DOT text only

Needs graphviz's `dot` for the SVG (apt-get install graphviz). A module's edge to its own parent package is left out
(import_graph's rule); an edge to a package (`kickmodel.families`) goes to its __init__.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _import_graph():
    spec = importlib.util.spec_from_file_location("_house_import_graph", HERE / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def folder_of(root: Path, module: str) -> str:
    """The folder a module's file lies in ("kickmodel/families/mel_vae" for its __init__ and its modules)."""
    path = root.joinpath(*module.split("."))
    return module.replace(".", "/") if (path / "__init__.py").is_file() else module.rpartition(".")[0].replace(".", "/")


def dot_text(root: Path, title: str) -> str:
    ig = _import_graph()
    g = ig.graph(root)
    in_cycle = {m for c in ig.cycles(g) for m in c}
    folders: dict[str, list[str]] = {}
    for m in sorted(g):
        folders.setdefault(folder_of(root, m), []).append(m)
    n_cycles = len(ig.cycles(g))
    lines = ["digraph house {", '  graph [rankdir=LR, fontname="Helvetica", fontsize=20, nodesep=0.15, ranksep=1.2,',
             f'         label="{title}: {len(g)} modules, {sum(len(d) for d in g.values())} imports, '
             f'{n_cycles} import circle(s)", labelloc=t];',
             '  node [shape=box, style="rounded,filled", fillcolor="#f4f4f4", fontname="Helvetica", fontsize=10];',
             '  edge [color="#00000040", arrowsize=0.5];']
    for i, (folder, mods) in enumerate(sorted(folders.items())):
        lines.append(f'  subgraph cluster_{i} {{ label="{folder}/"; style="rounded"; color="#8080c0";')
        for m in mods:
            name = m.rpartition(".")[2] if m.replace(".", "/") != folder else "__init__"
            fill = ', fillcolor="#ffb0b0"' if m in in_cycle else ""
            lines.append(f'    "{m}" [label="{name}"{fill}];')
        lines.append("  }")
    for m, deps in sorted(g.items()):
        for d in sorted(deps):
            if d not in g:
                continue
            red = ' [color="#d00000", penwidth=2.0]' if m in in_cycle and d in in_cycle else ""
            lines.append(f'  "{m}" -> "{d}"{red};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=HERE.parent)
    ap.add_argument("--out", type=Path, help="the SVG to write")
    ap.add_argument("--title", default="the house")
    ap.add_argument("--dot", action="store_true", help="print the DOT text instead")
    args = ap.parse_args(argv)
    text = dot_text(args.root.resolve(), args.title)
    if args.dot or args.out is None:
        sys.stdout.write(text)
        return 0
    if shutil.which("dot") is None:
        print("graphviz's dot is not installed (apt-get install graphviz); --dot prints the graph", file=sys.stderr)
        return 2
    svg = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=True).stdout
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(svg)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
