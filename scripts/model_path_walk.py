"""The walk of a model file's path through the house: which of the project's shared source files a reader passes
through, in order, following the daemon as it picks the bundled model (kickserver.reload.resolve_model) and loads
it (load_generator), and how often the walk comes back to a file it had left.

    python scripts/model_path_walk.py                   # this checkout: stays, files, returns, the walk
    python scripts/model_path_walk.py --root /tmp/old   # another checkout (e.g. an older commit in a worktree)
    python scripts/model_path_walk.py --json            # the figures as JSON

How it is counted. Every Python call is seen (sys.setprofile); a step is the first call of a named function (a
reader reads each function once: a function called again, a comprehension or a lambda inside one, is no new step),
placed in its file. Only the house's shared files count: those directly in kickmodel/ and kickserver/, and the
family registry (kickmodel/families/__init__.py, base.py). A family's own folder, the helpers the families share
(kickmodel/families/*.py beside the registry) and the codecs (kickmodel/codecs/) are rooms of the house, passed
through as torch and the standard library are: a step from artifact.py through a family's folder into config.py
is a step from artifact.py to config.py. A stay is a run of consecutive steps in one file; a return is a stay in a
file the walk had already left (stays - files). Modules are imported before the walk starts (importing is not the
path a model takes); nothing the walk caches (a config's render cost) is warmed, so a first load is measured.

Where the loader lives is looked up: `kickmodel.loading.load_generator`, else `kickmodel.generator.load_generator`
(the checkout before the loader had a module of its own). On 0f4bf35 this gives 26 stays in 9 files, 17 returns.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from pathlib import Path

PROJECT_PACKAGES = ("kickmodel", "kickserver")
REGISTRY_FILES = ("kickmodel/families/__init__.py", "kickmodel/families/base.py")


def in_house(rel: str) -> bool:
    """Whether a file (relative to the root) is one of the house's shared files the walk counts."""
    return rel.count("/") == 1 or rel in REGISTRY_FILES


def _loader(root: Path):
    where = "kickmodel.loading" if (root / "kickmodel" / "loading.py").is_file() else "kickmodel.generator"
    return importlib.import_module(where).load_generator


def walk(root: Path) -> list[str]:
    """The house files (relative to root), one per step, while the bundled model is resolved and loaded."""
    root = Path(root).resolve()
    prefixes = tuple(str(root / p) + "/" for p in PROJECT_PACKAGES)
    reload = importlib.import_module("kickserver.reload")
    load_generator = _loader(root)
    # the family's modules are imported by the registry at its first lookup: import them now, so the walk sees
    # the path a model takes and not the one-off import of a module's body
    from kickmodel.artifact import read_metadata

    family = read_metadata(reload.BUNDLED).get("family", "")
    importlib.import_module(f"kickmodel.families.{family}")
    for name in ("generator", "network"):
        try:
            importlib.import_module(f"kickmodel.families.{family}.{name}")
        except ModuleNotFoundError:
            pass
    steps: list[str] = []
    read: set = set()

    def profile(frame, event, arg) -> None:
        if event != "call" or frame.f_code in read:
            return
        code = frame.f_code
        read.add(code)
        if code.co_filename.startswith(prefixes) and not code.co_name.startswith("<"):
            rel = str(Path(code.co_filename).relative_to(root))
            if in_house(rel):
                steps.append(rel)

    with tempfile.TemporaryDirectory() as empty:
        sys.setprofile(profile)
        try:
            path, _ = reload.resolve_model(Path(empty), "default")
            load_generator(path, "cpu")
        finally:
            sys.setprofile(None)
    return steps


def stays(steps: list[str]) -> list[str]:
    """The walk with consecutive steps in one file made one stay."""
    out: list[str] = []
    for f in steps:
        if not out or out[-1] != f:
            out.append(f)
    return out


def figures(steps: list[str]) -> dict:
    s = stays(steps)
    files = sorted(set(s))
    left: set[str] = set()
    returns: dict[str, int] = {}
    for prev, f in zip([None, *s], s):
        if f in left:
            returns[f] = returns.get(f, 0) + 1
        if prev is not None:
            left.add(prev)
    return {"stays": len(s), "files": len(files), "returns": sum(returns.values()), "returns_by_file": returns,
            "walk": s}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    for name in [m for m in sys.modules if m.split(".")[0] in PROJECT_PACKAGES]:
        del sys.modules[name]
    fig = figures(walk(root))
    if args.json:
        print(json.dumps(fig, indent=1))
        return 0
    print(f"{fig['stays']} stays in {fig['files']} files, {fig['returns']} returns to a file already left")
    for f, n in sorted(fig["returns_by_file"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:3d}  {f}")
    print("walk: " + " > ".join(fig["walk"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
