"""What every benchmark shares: the machine it ran on, where results go, tables, percentiles, test models.

A benchmark module of the suite (`python -m bench`) has NAME, `run(opts) -> dict` (a payload whose "rows"
are a list of flat dicts) and `table(payload) -> str`; bench/__main__.py adds the machine and the date and
writes `<out>/<NAME>-<cpu|cuda>.json` through `write_result`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

BUNDLED = REPO / "kickserver" / "models" / "default.safetensors"
STARTER_KIT = REPO / "kickserver" / "data" / "kicks"
RESULTS = REPO / "bench" / "results"  # the figures the docs quote: written only when asked (--out bench/results)
IMG = REPO / "docs" / "img"  # the docs' plots: written only when asked (--img docs/img)
SCHEMA = 1  # the "suite" key of every JSON the suite writes; bench/report.py reads only these


def user_results() -> Path:
    """Where results and plots go unless --out (--img) says otherwise: $XDG_CACHE_HOME/kickserver/bench
    (~/.cache when unset). A measurement on someone's machine is theirs: it does not rewrite the tracked
    bench/results/*.json and docs/img/*.png that the docs quote."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kickserver" / "bench"


def add_out_option(ap: Any, what: str = "the JSON") -> None:
    """--out FOLDER on a benchmark's parser: user_results() unless given (bench/results: the docs' figures)."""
    ap.add_argument("--out", type=Path, default=user_results(),
                    help=f"folder for {what} (default {user_results()}; the figures the docs quote: bench/results)")


@dataclass
class Options:
    """What `python -m bench` was asked; each benchmark reads the fields it needs."""

    quick: bool = False
    device: str = "auto"
    models: list[Path] = field(default_factory=lambda: [BUNDLED])
    out: Path = field(default_factory=user_results)
    img: Path = field(default_factory=lambda: user_results() / "img")
    real: list[Path] = field(default_factory=lambda: [STARTER_KIT])
    train: list[Path] = field(default_factory=lambda: [STARTER_KIT])
    kicks: Path = STARTER_KIT  # the custom benchmark's source of a user's folder
    init: Path | None = None  # the custom benchmark's model to fine-tune (default: models[0])
    budget_s: float | None = None  # the custom benchmark's training budget (default: custom.BUDGET_S)
    family: str | None = None  # the custom benchmark: a new model of this family instead of fine-tuning init
    guidance: list[float] = field(default_factory=list)
    seed: int = 0
    threads: int = 0  # torch threads in this process and in the processes it starts (0: torch's default)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() is often just 'x86_64')."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def machine(device: str = "cpu") -> dict[str, Any]:
    """Where a figure was measured: CPU model, cores, torch threads, GPU (when the device is one), versions."""
    import torch

    info: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "torch": torch.__version__, "python": platform.python_version(),
                            "os": platform.platform(terse=True), "host": platform.node(), "commit": _git_commit(),
                            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "gpu": None}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        props = torch.cuda.get_device_properties(dev)
        info["gpu"] = props.name
        info["gpu_memory_gb"] = round(props.total_memory / 2**30, 1)
        info["cuda"] = torch.version.cuda
    return info


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def device_kind(device: Any) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


OUTSIDE = "(outside the repository)"


def portable(value: Any, repo: Path = REPO) -> Any:
    """value (a payload: dicts, lists, strings) with no path of the machine that measured it. A path inside the
    repository becomes relative to it ("." for the repository itself), any other absolute path becomes
    `(outside the repository) NAME` (its file name only: a temp folder, a user's home), whether it is the whole string
    or a word in one (a command line, `--kicks=/x`, `NAME=/x`). An absolute path is one whose first folder exists
    on this machine (not a system folder such as /dev or /usr), so an OSC address (/kick/done) is left as it is."""
    if isinstance(value, Mapping):
        return {k: portable(v, repo) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v, repo) for v in value]
    if not isinstance(value, str):
        return value
    return _PATH_WORD.sub(lambda m: m.group(1) + _portable_path(m.group(2), str(repo)), value)


# a path where a word starts: at the start, after a space, '=', a quote or '('; it runs to the next space or quote
_PATH_WORD = re.compile(r"""(^|[\s='"(])(/[^\s'"]*)""")


def _portable_path(path: str, root: str) -> str:
    if path.rstrip(os.sep) == root:
        return "."
    if path.startswith(root + os.sep):
        return path[len(root) + 1:]
    first = path.split(os.sep)[1]
    if not first or first in _SYSTEM or not os.path.isdir(os.sep + first):
        return path  # not where this machine keeps files: an OSC address, "/", /dev/zero named in a sentence
    return f"{OUTSIDE} {Path(path.rstrip(os.sep)).name}"


_SYSTEM = frozenset({"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "proc", "run", "sbin", "sys", "usr"})


def write_json(path: Path, payload: dict[str, Any]) -> Path:
    """payload as JSON at path (its folder made), atomically (temp + fsync + rename); NaN/inf become null; no path
    of this machine in it (portable)."""
    from kickmodel.fsutil import atomic_write_bytes
    from trainer.evaluation.report import json_safe

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps(portable(json_safe(payload)), indent=1, allow_nan=False) + "\n").encode())
    return path


def write_result(out: Path, name: str, kind: str, payload: dict[str, Any]) -> Path:
    """payload as <out>/<name>-<kind>.json (write_json)."""
    return write_json(Path(out) / f"{name}-{kind}.json", payload)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between order statistics (numpy's default)."""
    import numpy as np

    if not len(values):
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def fmt(v: Any, spec: str = ".3g") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    """An aligned text table: columns are (key, heading, format spec); missing keys show '-'."""
    cells = [[fmt(r.get(k), spec) for k, _, spec in columns] for r in rows]
    heads = [h for _, h, _ in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(heads)]

    def line(cs: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cs, widths)))

    return "\n".join([line(heads), line(["-" * w for w in widths])] + [line(c) for c in cells])


def model_label(gen: Any) -> str:
    """How a model is named in tables: its artifact name, and its family."""
    return f"{gen.name} ({gen.family.replace('_', '-')})"


def random_artifact(path: Path, family: str, preset_name: str = "tiny", seed: int = 0) -> Path:
    """A real artifact of `family` and preset with seeded random weights (no training), for benchmarks of
    speed, memory and FLOPs, which do not depend on the weights. A family option whose value is an artifact
    (a latent-diffusion model's --vae) gets a random one of the same preset beside it (a hidden file, so a
    models folder does not list it): family_options."""
    import torch

    from kickmodel.families import preset
    from trainer.export import artifact_from_state
    from trainer.recipes import get_recipe
    from trainer.recipes.base import FitContext

    path = Path(path)
    cfg = preset(preset_name, family)
    options = family_options(cfg.family, {}, path.parent, preset_name, seed, stem=f".{path.stem}")
    ctx = FitContext(device=torch.device("cpu"), log=lambda m: None, options=options)
    recipe = get_recipe(cfg.family)
    cfg = recipe.fit_config(cfg, ctx)
    torch.manual_seed(seed)
    objective = recipe.objective(cfg, ctx)
    with torch.no_grad():  # zero-initialised output layers would make every kick silent
        for p in objective.module.parameters():
            if p.ndim > 1 and p.abs().sum() == 0:
                p.normal_(0, 0.02)
    quantiles = [[i / 32 for i in range(33)] for _ in cfg.controls]
    art = artifact_from_state(objective, cfg, objective.module.state_dict(), name=path.stem, step=0,
                              control_quantiles=quantiles, training={"note": "random weights for benchmarks"})
    return art.save(path)


def family_options(family: str, given: Mapping[str, Any], folder: Path, preset_name: str, seed: int = 0,
                   stem: str | None = None) -> dict[str, Any]:
    """The options a benchmark gives `family` (its recipe's FamilyOption declarations on "bench"): those in `given`
    (e.g. a benchmark's flags from trainer.cli.add_family_flags(parser, "bench")) that it takes -- a benchmark
    of several families gives each only its own -- and, for each not given whose value is an artifact
    (artifact_of), a random one of the same preset in folder, named STEM-OPTION.safetensors."""
    from trainer.recipes import get_recipe

    recipe = get_recipe(family)
    stem = stem or f".{recipe.family}-{preset_name}"
    out: dict[str, Any] = {}
    for opt in recipe.options_for("bench"):
        if given.get(opt.name) is not None:
            out[opt.name] = opt.type(given[opt.name])
        elif opt.artifact_of:
            out[opt.name] = random_artifact(Path(folder) / f"{stem}-{opt.name}.safetensors", opt.artifact_of,
                                            preset_name, seed)
    return out


def option_args(options: Mapping[str, Any]) -> list[str]:
    """Family options as `kicktrain fit` flags: {"vae": path} -> ["--vae", "path"]."""
    from trainer.recipes.base import option_flag

    return [a for name, value in options.items() for a in (option_flag(name), str(value))]


def set_threads(n: int) -> None:
    if n > 0:
        import torch

        torch.set_num_threads(n)
