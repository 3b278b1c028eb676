"""How a run trains: micro-batch, gradient checkpointing and precision, chosen per device and memory budget.

    plan = choose_loop(cfg, device, budget_gb, ctx, log)   # budget_gb: --vram-budget, or None
    cfg = plan.apply(cfg)                                  # train.micro_batch, grad_checkpointing, mixed_precision
    log(plan.line(cfg.train.batch_size))                   # "loop: micro-batch 8 x 2, fp32, checkpointing off: ..."

The low-VRAM tricks (autocast, gradient accumulation over small micro-batches, gradient checkpointing) only cost
time where memory is not short: on an H200 the presets' "optimised" loop ran at 0.30x-1.49x of the naive loop's
samples/s and never beat it. So the plan starts from the naive loop and gives up speed only for memory:
it tries candidate loops, fastest first, and takes the first whose measured peak fits 0.9 x the budget.

Candidate order (`candidates`), fastest first:
- On a GPU these networks are small, so kernel-launch overhead, not arithmetic, sets the pace: the largest
  micro-batch first (fewest launches per sample). At each micro-batch: fp32, then autocast (bf16 where supported,
  else fp16): at these sizes autocast's casts cost more than its faster matmuls save (the naive fp32 loop beat
  the bf16 one), but it saves activation memory and costs less than recomputing the forward pass; then
  checkpointing on (fp32, then autocast), which runs each block's forward twice but keeps the large
  micro-batch; only then the next smaller micro-batch (the divisors of the per-rank
  batch, largest first), whose extra launches cost the most on a GPU.
- On the CPU there is no launch overhead to amortise and autocast is not faster: fp32 only, and smaller
  micro-batches cost little (the same arithmetic, a few more Python steps) while checkpointing costs a
  recomputed forward. So every micro-batch without checkpointing, largest first, then every one with it.
- A family whose network offers no checkpointing (no `grad_checkpointing` flag) is not probed with it.

Budget: `--vram-budget GB`. Without one, on a GPU the budget is the device's free memory (torch.cuda.mem_get_info,
before the run builds anything) less a margin of 512 MiB + 5 % of its total (the CUDA context, cuDNN workspaces,
fragmentation); on the CPU (or another device) no budget means the naive loop (the whole per-rank batch in one
micro-batch, fp32, no checkpointing) without probing. With a budget and no candidate that fits: TrainingError
naming the budget, the smallest peak measured and the fix.

Measuring a candidate (`StepProbe`): one real training step of the family's objective (a random batch through
prepare_batch, the loss, backward and an AdamW step, with the optimiser's state already allocated, as in every
step but a run's first) at the candidate's settings. On CUDA the figure is torch.cuda.max_memory_allocated around
it. Elsewhere (the CPU) it is `LiveBytes`, a TorchDispatchMode that counts the bytes of the live tensor storages
on the device (parameters and buffers of the objective's modules, gradients, optimiser state, activations, the
batch): the peak of the step, not the process's resident memory, so it grows with the micro-batch and shrinks
with checkpointing as the GPU's figure does. (torch's MemTracker gives the same figures for the waveform and
mel-VAE families but fails on a frozen encoder's parameters: latent diffusion's VAE.)

Settings the user chose are kept (`explicit_settings`): a config has no record of which values were typed, so
the rule is: train.micro_batch and train.grad_checkpointing count as the user's when they differ from the named
preset's values (from TrainConfig's defaults for a custom config), and train.mixed_precision when it is not
"auto" ("auto" is how a config leaves precision to kicktrain). A `--set` that repeats the preset's value is
therefore the preset's. Candidates are then only those with the user's values.

A resumed run keeps the loop its config.json records, budget or not: how a step is split decides how its
random draws (augmentation, noise) are made, so a different split would not repeat the killed run's steps.
Under torchrun each process plans for its own device and per-rank batch; ranks that chose differently still
take one all-reduced step of the same per-rank batch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

from kickmodel.config import Config, TrainConfig
from kickmodel.families import preset

from .errors import TrainingError
from .recipes import get_recipe
from .recipes.base import FitContext

Log = Callable[[str], None]

_MODE = {"fp32": "off", "bf16": "bf16", "fp16": "fp16"}  # LoopPlan.precision -> train.mixed_precision
USABLE = 0.9  # share of the budget a measured step may peak at (the rest: what it does not show, e.g. the EMA copy)
MiB = 2**20


def set_grad_checkpointing(module: torch.nn.Module, on: bool) -> None:
    """Every submodule that offers gradient checkpointing (a `grad_checkpointing` flag) gets `on`."""
    for m in module.modules():
        if hasattr(m, "grad_checkpointing"):
            m.grad_checkpointing = on


@dataclasses.dataclass(frozen=True)
class Candidate:
    micro_batch: int
    grad_checkpointing: bool
    precision: str  # fp32 | bf16 | fp16

    def __str__(self) -> str:
        return (f"micro-batch {self.micro_batch}, {self.precision}, "
                f"checkpointing {'on' if self.grad_checkpointing else 'off'}")


@dataclasses.dataclass(frozen=True)
class LoopPlan:
    micro_batch: int
    grad_checkpointing: bool
    precision: str  # fp32 | bf16 | fp16
    peak_mb: float | None  # measured peak of one step; None when nothing was probed
    budget_mb: float | None  # the budget it was chosen for; None without one
    reason: str  # why, for the log
    # train.mixed_precision that records `precision`: "auto" where auto means it on this device (a CPU run's
    # fp32), so a config that left precision to kicktrain still reads so; else off, bf16 or fp16
    mixed_precision: str = ""

    def apply(self, cfg: Config) -> Config:
        """cfg with the plan's train.micro_batch, grad_checkpointing and mixed_precision."""
        return cfg.replace("train", micro_batch=self.micro_batch, grad_checkpointing=self.grad_checkpointing,
                           mixed_precision=self.mixed_precision or _MODE[self.precision])

    def line(self, batch: int) -> str:
        """One log line: what was chosen for a (per-rank) batch, and why."""
        return (f"loop: micro-batch {self.micro_batch} x {max(1, batch // self.micro_batch)}, {self.precision}, "
                f"checkpointing {'on' if self.grad_checkpointing else 'off'}: {self.reason}")


def autocast_precision(device: torch.device) -> str:
    """The autocast precision a device trains in: bf16 where supported (and on the CPU), else fp16."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "fp16"
    return "bf16"


def precision_of(mode: str, device: torch.device) -> str:
    """train.mixed_precision as the plan names it ("auto" resolves as the trainer resolves it)."""
    if mode == "off" or (mode == "auto" and device.type != "cuda"):
        return "fp32"
    if mode in ("bf16", "fp16"):
        return mode
    return autocast_precision(device)


def explicit_settings(cfg: Config) -> dict[str, Any]:
    """The train settings of the loop the user chose ({"micro_batch": 4, "mixed_precision": "bf16"}); the rule is
    in the module docstring."""
    try:
        ref = preset(cfg.preset, cfg.family).train
    except Exception:  # noqa: BLE001 -- "custom" or a preset this family no longer has: TrainConfig's defaults
        ref = TrainConfig()
    tc, out = cfg.train, {}
    if tc.micro_batch != ref.micro_batch:
        out["micro_batch"] = tc.micro_batch
    if tc.grad_checkpointing != ref.grad_checkpointing:
        out["grad_checkpointing"] = tc.grad_checkpointing
    if tc.mixed_precision != "auto":
        out["mixed_precision"] = tc.mixed_precision
    return out


def candidates(batch: int, device: torch.device, explicit: dict[str, Any] | None = None) -> list[Candidate]:
    """Loops for a per-rank batch on device, fastest first (see the module docstring), keeping `explicit`."""
    explicit = explicit or {}
    micros = [m for m in range(batch, 0, -1) if batch % m == 0]
    if "micro_batch" in explicit:
        micros = [explicit["micro_batch"]]
    if device.type == "cpu":
        order = [Candidate(m, ck, "fp32") for ck in (False, True) for m in micros]
    else:
        amp = autocast_precision(device)
        order = [Candidate(m, ck, p) for m in micros for ck in (False, True) for p in ("fp32", amp)]
    out = []
    for c in order:
        if "grad_checkpointing" in explicit:
            c = dataclasses.replace(c, grad_checkpointing=explicit["grad_checkpointing"])
        if "mixed_precision" in explicit:
            c = dataclasses.replace(c, precision=precision_of(explicit["mixed_precision"], device))
        if c not in out:
            out.append(c)
    return out


def gpu_budget_mb(device: torch.device) -> tuple[float, str]:
    """(budget in MB, how it was set) when none is given on a GPU: its free memory less a margin."""
    free, total = torch.cuda.mem_get_info(device)
    margin = 512 * MiB + 0.05 * total
    return max(0.0, free - margin) / MiB, (f"the GPU's free memory ({free / 2**30:.1f} GB less a "
                                           f"{margin / 2**30:.1f} GB margin)")


class LiveBytes(TorchDispatchMode):
    """Peak bytes of the live tensor storages on one device type while the context is open: `resident` (tensors
    that already exist) at the start, plus the storage of every tensor an operator returns (each storage once,
    however many views it has), less each one when it is freed (a weakref callback on the storage, which torch
    keeps as one Python object for as long as the storage lives). torch's own MemTracker
    (torch.distributed._tools.mem_tracker) counts the same way but fails on modules with frozen parameters
    (a latent-diffusion run's VAE encoder): "cannot register a hook on a tensor that doesn't require gradient"."""

    def __init__(self, device_type: str, resident: list[torch.Tensor] = ()) -> None:
        super().__init__()
        self.device_type = device_type
        self.now = self.peak = 0
        self._live: WeakIdKeyDictionary = WeakIdKeyDictionary()
        for t in resident:
            self._add(t)

    def _add(self, t: torch.Tensor) -> None:
        if t.device.type != self.device_type or t.layout is not torch.strided:
            return
        st = t.untyped_storage()
        if st in self._live:
            return
        n = st.nbytes()
        self._live[st] = weakref.ref(st, functools.partial(self._freed, n))
        self.now += n
        self.peak = max(self.peak, self.now)

    def _freed(self, n: int, _ref: Any) -> None:
        self.now -= n

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._add(t)
        return out


class StepProbe:
    """Peak memory (MB) of one real training step of cfg's objective at a candidate's settings; built once
    (the family's module, an AdamW) and reused for every candidate."""

    def __init__(self, cfg: Config, device: torch.device, ctx: FitContext | None = None) -> None:
        self.cfg, self.device = cfg, device
        quiet: Log = lambda m: None  # noqa: E731 -- building the probe's module says nothing the run will not
        ctx = dataclasses.replace(ctx, device=device, log=quiet) if ctx is not None else FitContext(device=device,
                                                                                                     log=quiet)
        self.objective = get_recipe(cfg.family).objective(cfg, ctx)
        self.net = self.objective.module
        self.net.train()
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-6)
        # the optimiser's state exists before any measured step, as it does in every step of a run but its
        # first: so each candidate's figure is the steady state's, whichever candidate is measured first
        for p in self.net.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.g = torch.Generator().manual_seed(0)
        # a family whose network has no checkpointing (no `grad_checkpointing` flag) gains nothing from it
        self.can_checkpoint = any(hasattr(m, "grad_checkpointing") for m in self.net.modules())

    def _step(self, c: Candidate) -> None:
        set_grad_checkpointing(self.net, c.grad_checkpointing)
        x = torch.randn(c.micro_batch, self.cfg.data.length, generator=self.g).mul_(0.1).to(self.device)
        amp = (torch.autocast(self.device.type, dtype=getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}
                                                                  [c.precision]))
               if c.precision != "fp32" else nullcontext())
        with amp:
            loss, _ = self.objective.loss(self.net, self.objective.prepare_batch(x), None, None, self.g, 0)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def __call__(self, c: Candidate) -> float:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            try:
                self._step(c)
                torch.cuda.synchronize(self.device)
                return torch.cuda.max_memory_allocated(self.device) / MiB
            except torch.cuda.OutOfMemoryError:
                self.opt.zero_grad(set_to_none=True)
                return math.inf
        with LiveBytes(self.device.type, self._resident()) as tracker:
            self._step(c)
        return tracker.peak / MiB

    def _resident(self) -> list[torch.Tensor]:
        """What stays allocated between steps: every module's parameters and buffers the objective holds
        (the trained one, a frozen encoder), and the optimiser's state."""
        out: list[torch.Tensor] = []
        for v in [self.net, *vars(self.objective).values()]:
            if isinstance(v, torch.nn.Module):
                out += [*v.parameters(), *v.buffers()]
        out += [t for state in self.opt.state.values() for t in state.values() if isinstance(t, torch.Tensor)]
        return out

    def close(self) -> None:
        del self.objective, self.net, self.opt
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def _size(mb: float) -> str:
    return f"{mb / 1024:.2f} GB" if mb >= 1024 else f"{mb:.1f} MB"


def choose_loop(cfg: Config, device: torch.device, budget_gb: float | None, ctx: FitContext | None, log: Log,
                measure_peak: Callable[[Candidate], float] | None = None, world: int = 1,
                resumed: bool = False) -> LoopPlan:
    """The fastest loop whose one-step peak fits 0.9 x the budget (see the module docstring).
    measure_peak(candidate) -> MB replaces the real probe (tests); world: processes sharing batch_size;
    resumed: keep the loop cfg records."""
    tc = cfg.train
    batch = tc.batch_size // world if world > 1 and tc.batch_size % world == 0 else tc.batch_size
    if budget_gb is not None and not (math.isfinite(budget_gb) and budget_gb > 0):
        raise TrainingError(f"--vram-budget {budget_gb}: expected a positive number of GB (e.g. --vram-budget 6)")
    if resumed:
        why = "a resumed run keeps the loop its config.json records, so its steps repeat exactly"
        if budget_gb is not None:
            why += f" (--vram-budget {budget_gb:g} is for a new run)"
        return LoopPlan(min(tc.micro_batch, batch), tc.grad_checkpointing, precision_of(tc.mixed_precision, device),
                        None, None, why, tc.mixed_precision)

    def plan(c: Candidate, peak: float | None, budget: float | None, reason: str) -> LoopPlan:
        auto = tc.mixed_precision == "auto" and precision_of("auto", device) == c.precision
        return LoopPlan(c.micro_batch, c.grad_checkpointing, c.precision, peak, budget, reason,
                        "auto" if auto else _MODE[c.precision])

    explicit = explicit_settings(cfg)
    order = candidates(batch, device, explicit)
    kept = f"; as set: {', '.join(f'train.{k}={v}' for k, v in explicit.items())}" if explicit else ""
    if budget_gb is None and device.type != "cuda":
        return plan(order[0], None, None, f"no --vram-budget on the {device.type}: the naive loop, not probed{kept}")
    if budget_gb is None:
        budget_mb, source = gpu_budget_mb(device)
    else:
        budget_mb, source = budget_gb * 1024, f"the {budget_gb:g} GB budget"
    probe = None
    if measure_peak is None:
        probe = measure_peak = StepProbe(cfg, device, ctx)
        if not probe.can_checkpoint and "grad_checkpointing" not in explicit:
            order = [c for c in order if not c.grad_checkpointing]
    try:
        smallest: tuple[float, Candidate] | None = None
        for c in order:
            peak = measure_peak(c)
            log(f"loop probe: {c}: peak {_size(peak) if math.isfinite(peak) else 'out of memory'}")
            if peak <= USABLE * budget_mb:
                return plan(c, peak, budget_mb, f"fits {source} at {_size(peak)} peak{kept}")
            if smallest is None or peak < smallest[0]:
                smallest = (peak, c)
    finally:
        if probe is not None:
            probe.close()
    assert smallest is not None
    least = f"{_size(smallest[0])} ({smallest[1]})" if math.isfinite(smallest[0]) else "out of memory"
    fix = ("raise --vram-budget, train a smaller preset (--preset tiny|small) or a smaller batch "
           "(--set train.batch_size=N)")
    if explicit:
        fix += f", or leave {', '.join('train.' + k for k in explicit)} to kicktrain (drop the --set)"
    raise TrainingError(f"no training loop fits {source} ({_size(USABLE * budget_mb)} usable): the smallest peak "
                        f"measured was {least}; {fix}")
