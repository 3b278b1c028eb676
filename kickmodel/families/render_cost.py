"""What one kick of an artifact would cost to render, known from its config before any real tensor is built.

A family lays out one kick's render as passes (`Family.render_passes`: its networks built on torch's meta
device, the DSP around them -- STFTs, Griffin-Lim, NNLS -- moved there too), and `render_cost` runs them on
the meta device, which computes shapes and allocates nothing. Counted on the way, per pass:

- FLOPs: torch's FlopCounterMode (convolutions, matrix products, attention) plus the FFTs (5 N log2 N per
  transform of N points), times how often the pass runs for one kick (a diffusion model's denoiser: its
  default steps, twice with classifier-free guidance);
- working memory: the largest sum of the tensors alive at once (each storage counted once, from the op
  that made it until it is dropped), beside the weights, which MAX_PART_BYTES bounds already.

A pass marked `encode` is the encoding of a source file (a variation's, a morph end's, a locate's: the VAE's
encoder, the kick synth's fit), counted in `flops` (a variation's kick pays it) and again in `encode_flops`.

`check_render_cost` refuses a config past MAX_RENDER_FLOPS or MAX_RENDER_BYTES, or whose encoding alone is past
MAX_ENCODE_FLOPS. The estimate is close, not exact (a kernel's scratch space is not seen); the budgets leave the
shipped presets a wide margin and refuse what costs gigabytes or tens of seconds (README, "Checks on an artifact").
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from ..config import ConfigError

# One kick at the model's default settings may cost at most this much. Estimated (and measured on the 2-core
# dev box): the bundled model 4.0 GFLOP and 8 MB; the costliest preset, waveform-diffusion base at its 50 steps,
# 198 GFLOP and 4 MB (7.5 s a kick: 26 GFLOP/s); a hostile 203 KB mel-VAE artifact (192000 samples, hop
# 16, n_fft 8192, 256 mels, Griffin-Lim) 1805 GFLOP and 2087 MB (3.2 GB at warm-up and 20 s a kick).
MAX_RENDER_FLOPS = 1e12  # 5 x the costliest preset: 15-40 s of one kick on a 2-core CPU, under 1 s on a GPU
MAX_RENDER_BYTES = 512 << 20  # working memory of one kick, 60 x the bundled model's (a batch of n: n times)
# One source file's encoding may cost at most this much. A fit (the kick synth's encoder) runs at about 12-16 GFLOP/s
# on the 2-core dev box against 26 for a render (small FFTs, autograd): the shipped kick-synth's fit, estimated 32
# GFLOP, takes 2-2.8 s there; one at its largest allowed iterations (fit.serve_iters and restart_iters 2000: 948
# GFLOP, under MAX_RENDER_FLOPS) took 79 s a locate in the field. 100 GFLOP: 3 x the shipped fit, about 8 s
# there, the daemon's default share of one address (32 kicks' worth at 0.25 s: kickserver.pricing)
MAX_ENCODE_FLOPS = 1e11

_FFTS = {torch.ops.aten._fft_r2c.default, torch.ops.aten._fft_c2r.default, torch.ops.aten._fft_c2c.default}
# on the meta device an STFT is one op: its FFTs, and the frames it holds while it runs, are counted here
_STFTS = {torch.ops.aten.stft.default, torch.ops.aten.stft.center, torch.ops.aten.istft.default}


@dataclass(frozen=True)
class RenderCost:
    flops: float
    bytes: int
    step_flops: float = 0.0  # what each sampling step adds (0 for a one-pass model)
    encode_flops: float = 0.0  # what encoding one source file costs (within flops too; 0: no encoder pass)

    def __str__(self) -> str:
        return f"{self.flops / 1e9:.1f} GFLOP and {self.bytes / 2**20:.0f} MB of working memory"


@dataclass(frozen=True)
class RenderPass:
    """One part of a kick's render, run `times` times per kick. `run(**counts)` runs it on the meta device (under
    inference mode); `loops` names the loops inside it and how often each runs ({"griffin_lim": 32}): the pass
    is traced with each loop run once (0 times where its count is 0), then with each run twice in turn, and
    its FLOPs are extrapolated to the counts (a loop's iterations cost the same), so that tracing costs the
    same whatever the counts. Its peak memory is the largest traced (a loop's iterations do not pile up)."""

    run: Callable[..., Any]
    times: int = 1
    loops: Mapping[str, int] = field(default_factory=dict)
    steps: int = 0  # a sampler's pass: `times` is for this many steps, and a request may ask for more (0: not)
    encode: bool = False  # a source file's encoding (a variation's, a morph end's, a locate's): see encode_flops


class _Tracer(TorchDispatchMode):
    """Live bytes (each storage once, from the op that made it until its last tensor here is dropped) and FFT
    FLOPs of what runs under it."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.fft_flops = 0.0
        self._alive: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        out = func(*args, **(kwargs or {}))
        scratch = 0
        if func in _FFTS:
            self.fft_flops += _fft_flops(func, args, out)
        elif func in _STFTS:
            flops, scratch = _stft_cost(func, args, out)
            self.fft_flops += flops
        inputs = {id(a) for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or id(t) in inputs:
                continue  # an in-place op's result is its input: nothing new
            key = t.untyped_storage()._cdata
            if key in self._alive:
                continue  # a view of a storage already counted
            n = t.untyped_storage().nbytes()
            self._alive[key] = n
            self.live += n
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, key)
        self.peak = max(self.peak, self.live + scratch)  # the op's frames, alive while it ran
        return out

    def _free(self, key: int) -> None:
        self.live -= self._alive.pop(key, 0)


def _fft_flops(func: Any, args: tuple, out: Any) -> float:
    x, dims = args[0], args[1]
    shape = out.shape if func is torch.ops.aten._fft_c2r.default else x.shape
    n = math.prod(int(shape[d]) for d in dims)
    transforms = max(x.numel(), out.numel()) / max(n, 1)
    if func is not torch.ops.aten._fft_c2c.default:
        transforms = transforms / 2.0  # real transforms: about half a complex one's work
    return 5.0 * n * math.log2(max(n, 2)) * transforms


def _stft_cost(func: Any, args: tuple, out: Any) -> tuple[float, int]:
    """(FLOPs, bytes of the frames it holds) of an STFT or inverse STFT: one real FFT of n_fft points per frame."""
    spec = args[0] if func is torch.ops.aten.istft.default else out
    n = int(args[1])
    bins = int(spec.shape[-2]) if spec.is_complex() else int(spec.shape[-3]) * 2  # (a real view: [..., 2])
    transforms = spec.numel() // max(1, bins)  # frames x batch
    real_size = spec.real.element_size() if spec.is_complex() else spec.element_size()
    return 2.5 * n * math.log2(max(n, 2)) * transforms + n * transforms, transforms * n * real_size


def denoiser_evaluations(steps: int, guidance: float, n_controls: int) -> int:
    """The denoiser's evaluations in one diffusion kick at its default settings: one per step (every sampler
    here is one evaluation a step), two with classifier-free guidance over controls."""
    return int(steps) * (2 if guidance != 1.0 and n_controls else 1)


def _trace(run: Callable[..., Any], counts: Mapping[str, int]) -> RenderCost:
    counter, tracer = FlopCounterMode(display=False), _Tracer()
    with torch.inference_mode(), torch.device("meta"), counter, tracer:
        run(**counts)
    return RenderCost(counter.get_total_flops() + tracer.fft_flops, tracer.peak)


def render_cost(passes: Iterable[RenderPass]) -> RenderCost:
    """FLOPs (each pass times how often it runs) and peak working memory (the largest pass's) of one kick."""
    flops, peak, step_flops, encode_flops = 0.0, 0, 0.0, 0.0
    for p in passes:
        base = {k: min(int(n), 1) for k, n in p.loops.items()}
        first = _trace(p.run, base)
        pass_flops, peak = first.flops, max(peak, first.bytes)
        for k, n in p.loops.items():
            if n > 1:
                second = _trace(p.run, base | {k: 2})
                pass_flops += (n - 1) * max(0.0, second.flops - first.flops)
                peak = max(peak, second.bytes)
        flops += p.times * pass_flops
        if p.steps:
            step_flops += p.times * pass_flops / p.steps
        if p.encode:
            encode_flops += p.times * pass_flops
    return RenderCost(flops, peak, step_flops, encode_flops)


def affordable_steps(cost: RenderCost, default_steps: int) -> int | None:
    """The most sampling steps one kick may take within MAX_RENDER_FLOPS (None: steps cost nothing extra). The
    artifact check judges a model at its own default steps; a request may ask for more, so the generator caps its
    max_steps here: an artifact saying 1 step cannot pass with a denoiser that costs the budget per step."""
    if cost.step_flops <= 0:
        return None
    fixed = max(0.0, cost.flops - default_steps * cost.step_flops)
    return max(1, int((MAX_RENDER_FLOPS - fixed) // cost.step_flops))


def check_render_cost(cost: RenderCost) -> None:
    """ConfigError naming the estimate and the budget when one kick, or one source file's encoding, would cost more
    than it may."""
    if cost.flops > MAX_RENDER_FLOPS or cost.bytes > MAX_RENDER_BYTES:
        raise ConfigError(f"one kick of it would take about {cost} (at most {MAX_RENDER_FLOPS / 1e9:.0f} GFLOP "
                          f"and {MAX_RENDER_BYTES >> 20} MB: kickmodel/families/render_cost.py); its config asks "
                          "for more work than any kick model this kickserver serves")
    if cost.encode_flops > MAX_ENCODE_FLOPS:
        raise ConfigError(f"encoding one source file with it (what a variation, a morph of a file and /kick/locate "
                          f"do first; the kick synth's fit) would take about {cost.encode_flops / 1e9:.0f} GFLOP (at "
                          f"most {MAX_ENCODE_FLOPS / 1e9:.0f} GFLOP, about 8 s on a 2-core CPU: "
                          "kickmodel/families/render_cost.py); a kick-synth model: lower its fit.serve_iters and "
                          "fit.restart_iters")
