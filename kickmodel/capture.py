"""Render capture: a loaded generator's networks under torch.compile or CUDA graphs, warmed up at load.

    report = capture(gen, "auto", log, batches=(1, 8))    # before gen serves, in the thread that will serve it
    report.used                                         # "off", "compile" or "graphs"
    report.error                                        # None, or why it fell back to eager (one line)

Modes: "off" (eager, nothing done), "compile" (each torch.nn.Module attribute of the generator wrapped in
torch.compile(mode="default", dynamic=False)), "graphs" (torch.compile(mode="reduce-overhead"): CUDA graphs, on a
CUDA device only) and "auto" ("graphs" on CUDA, "off" on the CPU or anything else). Only modules are wrapped, and
only their forward runs compiled: what a family does outside them (kick-synth's row-by-row synth, mel-vae's
Griffin-Lim, a VAE's decode method) stays eager and still works.

The warm-up renders at the generator's default settings, twice for each batch size in `batches` (and, for a model
with controls, once more with every control set, as classifier-free guidance doubles the network's batch), so
compiling and graph recording happen here, not on a musician's first kick. Another batch size compiles on its
first use (dynamic=False), so a server pads each batch up to the next size it warmed up (capture_sizes: 1, 2, 4, ...
and its largest batch) and drops the padding rows. If wrapping or the warm-up raises, the eager modules are put back
and the report says it fell back, with the error's type and first line; the caller logs that once.

release(gen) undoes a capture before another model is captured: the eager modules back on gen, torch's compiled
code, guards and CUDA graph pools dropped (torch.compiler.reset), then the garbage collected and, on CUDA, the
allocator's cache emptied, so repeated hot swaps do not pile up graphs and recompiles (pytorch#104095).

Under "graphs" each network call first marks a new step (torch.compiler.cudagraph_mark_step_begin) and returns a
copy of its output: a graph's output buffer is overwritten by its next replay, and the samplers and the row-by-row
families keep one call's output across the next (seen on an H200: "accessing tensor output of CUDAGraphs that has
been overwritten by a subsequent run"). CUDA graph state is per thread in torch (pytorch#123177), so call capture()
in the thread that renders.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

MODES = ("auto", "off", "compile", "graphs")
TORCH_MODE = {"compile": "default", "graphs": "reduce-overhead"}  # the torch.compile mode of each capture mode
GRAPHS_NEED_CUDA = "CUDA graphs need a CUDA device"
EAGER_ATTR = "_capture_eager"  # on a captured generator: {name: (owner, eager module)} (release() puts them back)


@dataclass(frozen=True)
class CaptureReport:
    """What capture() did: the mode asked for, the mode that serves ("off": eager), the warm-up's seconds, and
    why it fell back to eager (None when it did not)."""

    asked: str
    used: str
    warmup_s: float = 0.0
    error: str | None = None
    modules: tuple[str, ...] = ()  # the generator's attributes that were wrapped (and kept)
    batches: tuple[int, ...] = ()  # the batch sizes warmed up

    @property
    def fell_back(self) -> bool:
        return self.error is not None

    def describe(self) -> str:
        """One log phrase: 'render capture graphs (asked auto), warm-up 12.30 s' or '... fell back to eager: why'."""
        s = f"render capture {self.used} (asked {self.asked})"
        if self.used != "off" or self.warmup_s:
            s += f", warm-up {self.warmup_s:.2f} s"
        if self.error is not None:
            s += f"; fell back to eager: {self.error}"
        return s


def resolve_mode(mode: str, device: Any) -> str:
    """The capture mode "auto" stands for on this device ("graphs" on CUDA, else "off"); others as given.
    ValueError for a mode that is not one of MODES."""
    if mode not in MODES:
        raise ValueError(f"render capture {mode!r} is not known; choose one of {', '.join(MODES)}")
    if mode == "auto":
        return "graphs" if torch.device(device).type == "cuda" else "off"
    return mode


def capture_sizes(max_batch: int) -> tuple[int, ...]:
    """The batch sizes a server captures and pads its batches up to: the powers of two below max_batch, then
    max_batch (8: 1, 2, 4, 8; 6: 1, 2, 4, 6). A batch is padded by less than its own size (under 2x the work, and
    only a batch that is not a captured size), and the warm-up grows with log2(max_batch), not with max_batch (one
    warmed size per count would be 8 warm-ups at the default 8, 64 at 64). With guidance doubling each size, the
    networks see these sizes and their doubles: 5 distinct at the default 8, 8 at 64, which is torch's recompile
    limit per network (torch._dynamo.config.recompile_limit, 8 in torch 2.11); past it torch runs eagerly."""
    top = max(1, int(max_batch))
    sizes, b = [], 1
    while b < top:
        sizes.append(b)
        b *= 2
    return (*sizes, top)


def padded_size(n: int, sizes: Sequence[int]) -> int:
    """The smallest of sizes that holds n kicks (n itself when none does, or sizes is empty: nothing to pad to)."""
    return min((s for s in sizes if s >= n), default=n)


def release(gen: Any = None) -> None:
    """Drop a capture's compiled state before another model is captured (in the thread that renders): gen's eager
    modules put back (when capture() wrapped them), torch's compile caches and CUDA graph trees reset, the garbage
    collected and, on CUDA, the allocator's cached blocks returned. Never raises for a reset that fails."""
    eager = vars(gen).pop(EAGER_ATTR, None) if gen is not None else None
    for name, (owner, module) in (eager or {}).items():
        setattr(owner, name, module)
    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001, S110 - a failed reset leaves caches behind, never a model that cannot serve
        logging.getLogger(__name__).debug("torch._dynamo.reset failed", exc_info=True)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300]}" if text else type(e).__name__


def _clone(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(o) for o in out)
    if isinstance(out, dict):
        return {k: _clone(v) for k, v in out.items()}
    return out


class GraphStep(torch.nn.Module):
    """A module compiled with CUDA graphs, called as one step each time: marks the step's start, and returns a copy
    of the output (which the graph's next replay would overwrite). Attributes not its own are the module's."""

    def __init__(self, compiled: torch.nn.Module) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return _clone(self.compiled(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["compiled"], name)


def _wrap(module: torch.nn.Module, mode: str) -> torch.nn.Module:
    compiled = torch.compile(module, mode=TORCH_MODE[mode], dynamic=False)
    return GraphStep(compiled) if mode == "graphs" else compiled


def _modules_of(gen: Any) -> dict[str, tuple[Any, torch.nn.Module]]:
    """{name: (owner, module)}: the generator's modules and its codec's (kickmodel.codecs), by attribute name."""
    out = {}
    for owner in (gen, getattr(gen, "codec", None)):
        if owner is not None:
            out.update({k: (owner, v) for k, v in vars(owner).items() if isinstance(v, torch.nn.Module)})
    return out


def _warm_items(gen: Any, b: int, controls: bool) -> list:
    from .generator import Item

    names = tuple(getattr(gen, "controls", ()) or ()) if controls else ()
    return [Item(seed=i, controls={c: 0.5 for c in names}) for i in range(b)]


def capture(gen: Any, mode: str, log: logging.Logger | None = None, *, batches: Sequence[int] = (1,),
            cancel: Callable[[], bool] | None = None) -> CaptureReport:
    """Wrap gen's modules for `mode` (MODES) and warm them up for each batch size in batches; see the module doc.
    Never raises for a capture that fails (it falls back to eager and says so), except ValueError for an unknown
    mode and kickmodel.generator.Cancelled when cancel() says stop during the warm-up (the modules are then eager
    again)."""
    from .generator import CONTROLS, Cancelled, cancel_hook

    used = resolve_mode(mode, gen.device)
    if used == "off":
        return CaptureReport(mode, "off")
    if used == "graphs" and torch.device(gen.device).type != "cuda":
        return CaptureReport(mode, "off", error=f"{GRAPHS_NEED_CUDA}; the model is on {gen.device}")
    sizes = tuple(dict.fromkeys(max(1, int(b)) for b in batches)) or (1,)
    eager = _modules_of(gen)
    t0 = time.perf_counter()
    try:
        for name, (owner, module) in eager.items():
            setattr(owner, name, _wrap(module, used))
        settings = gen.settings()  # the model's own
        hook = cancel_hook(cancel)
        guided = CONTROLS in gen.capabilities and bool(getattr(gen, "controls", ()))
        for b in sizes:
            for with_controls in (False, False, True) if guided else (False, False):
                t1 = time.perf_counter()
                gen.generate(_warm_items(gen, b, with_controls), settings, hook=hook)
                if log is not None:
                    log.debug("capture %s: batch %d%s rendered in %.2f s", used, b,
                              " with controls" if with_controls else "", time.perf_counter() - t1)
    except Cancelled:
        for name, (owner, module) in eager.items():
            setattr(owner, name, module)
        raise
    except Exception as e:  # noqa: BLE001 - any failure to capture means eager, said once by the caller
        for name, (owner, module) in eager.items():
            setattr(owner, name, module)
        if log is not None:
            log.debug("capture %s failed", used, exc_info=True)
        return CaptureReport(mode, "off", time.perf_counter() - t0, _first_line(e), (), sizes)
    setattr(gen, EAGER_ATTR, eager)
    return CaptureReport(mode, used, time.perf_counter() - t0, None, tuple(eager), sizes)
