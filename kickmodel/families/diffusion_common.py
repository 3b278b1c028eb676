"""What the diffusion families (waveform, latent) share: the generator's sampling, variation and
guidance logic (their training objective: trainer/recipes/diffusion.py).

A diffusion family says how audio becomes the space it diffuses in and back (`to_latent`,
`from_latent`); everything else -- seeded noise per kick, the sampling time grid, classifier-free
guidance over the controls, SDEdit variations -- is here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..artifact import Artifact
from ..batching import in_render_shape
from ..config import MAX_STEPS
from ..diffusion import SAMPLER_NAMES, Denoiser, SamplingConfig, run_sampler
from ..generator import (
    CONTROLS,
    GUIDANCE,
    INTERPOLATION,
    INVERT,
    SAMPLERS,
    VARIATION,
    Endpoint,
    GeneratorBase,
    Hook,
    Item,
    Settings,
)


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of t in [0, 1], scaled to the 0..1000 range of DDPM's step index."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = (t.float() * 1000.0)[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


class DiffusionGenerator(GeneratorBase):
    """Sampling from a trained denoiser. Subclasses give `latent_shape`, `to_latent` and `from_latent`."""

    capabilities = frozenset({CONTROLS, SAMPLERS, GUIDANCE, VARIATION, INTERPOLATION, INVERT})
    samplers = SAMPLER_NAMES
    max_steps = MAX_STEPS
    latent_shape: tuple[int, ...] = ()

    def _affordable_steps(self, artifact: Artifact) -> int:
        """MAX_STEPS, or fewer when a kick of this model at that many steps would pass the render budget: the
        artifact check judged it at its own default steps, a request may ask for more (render_cost.py). The cost is
        the one the reader estimated (artifact.render_cost), else (an artifact built in memory) estimated here."""
        from .render_cost import affordable_steps

        cost = artifact.render_cost
        if cost is None:
            from . import get_family
            from .base import render_cost_of

            family = get_family(artifact.family)
            configs = {p: artifact.config_of(p) for p in family.part_names(artifact.config, artifact.part_configs)}
            cost = render_cost_of(family, configs)
        n = affordable_steps(cost, int(artifact.config.sampling.steps))
        return MAX_STEPS if n is None else max(int(artifact.config.sampling.steps), min(MAX_STEPS, n))

    def __init__(self, artifact: Artifact, device: torch.device, denoiser: Denoiser, sampling: SamplingConfig) -> None:
        super().__init__(artifact, device)
        self.denoiser = denoiser.to(device).eval().requires_grad_(False)
        self.schedule = denoiser.schedule
        self.default_steps = sampling.steps
        self.default_sampler = sampling.sampler
        self.max_steps = min(self.max_steps, self._affordable_steps(artifact))
        self.guidance = sampling.guidance
        self.time_power = sampling.time_power
        lim = denoiser.clip_x0 * denoiser.data_scale if denoiser.clip_x0 else None
        self._clip = lim

    # ----------------------------------------------------------- the family's part
    def to_latent(self, audio: torch.Tensor, hook: Hook) -> torch.Tensor:
        """Clean audio [n, length] on the device -> the clean signal the denoiser works on (its units)."""
        raise NotImplementedError

    def from_latent(self, z: torch.Tensor, items: Sequence[Item], hook: Hook) -> np.ndarray:
        """The denoiser's clean estimate -> raw audio [n, length] float32 at self.sample_rate; items: the kicks' own
        (one per row), for a family whose kick reads more of them than the controls the denoiser saw; hook: called
        between its network passes."""
        raise NotImplementedError

    # ----------------------------------------------------------- shared
    def _denoise_fn(self, cond: torch.Tensor | None, mask: torch.Tensor | None, hook: Hook) -> Callable:
        """The denoiser as the samplers call it (guided over the controls when asked), telling `hook` before each
        call ({"stage": "denoise", "i": calls so far})."""
        batched = self.denoiser

        def den(x: torch.Tensor, t: torch.Tensor, c: torch.Tensor | None = None,
                m: torch.Tensor | None = None) -> torch.Tensor:
            # at its render shape (kickmodel.batching): a kick never depends on its batch, in any family
            return in_render_shape(batched, x, t.expand(x.shape[0]) if t.ndim == 0 else t, c, m)

        calls = iter(range(1 << 62))

        def check() -> None:
            hook({"stage": "denoise", "i": next(calls)})

        if cond is None or self.guidance == 1.0 or not bool(mask.any()):
            def plain(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
                check()
                return den(x, t, cond, mask)

            return plain
        w = self.guidance
        lim = self._clip

        def guided(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            check()
            n = x.shape[0]
            both = den(torch.cat([x, x]), torch.cat([t, t]), torch.cat([cond, cond]),
                       torch.cat([mask, torch.zeros_like(mask)]))
            c, u = both[:n], both[n:]
            out = u + w * (c - u)
            return out.clamp(-lim, lim) if lim is not None else out

        return guided

    def noise(self, items: Sequence[Item], offset: int = 0) -> tuple[torch.Tensor, list[torch.Generator]]:
        """Unit Gaussian noise of latent_shape per item from its own CPU generator seeded by seed + offset
        (the same seed gives the same kick on any device and in any batch), and those generators."""
        gens, noise = [], []
        for it in items:
            g = torch.Generator().manual_seed(int(it.seed) + offset)
            noise.append(torch.randn(*self.latent_shape, generator=g))
            gens.append(g)
        return torch.stack(noise).to(self.device), gens

    def timegrid(self, steps: int, t_start: float) -> torch.Tensor:
        return t_start * self.schedule.timegrid(steps, 1.0) ** self.time_power

    @torch.inference_mode()
    def _sample(self, items: Sequence[Item], settings: Settings, hook: Hook) -> np.ndarray:
        """New kicks, one per item, [n, length] float32 at self.sample_rate (raw: see finish_kick)."""
        return self.from_latent(self._sample_latent(items, settings, hook), items, hook)

    def _sample_latent(self, items: Sequence[Item], settings: Settings, hook: Hook) -> torch.Tensor:
        """The clean signals the sampler draws for new kicks, one per item (what from_latent plays)."""
        steps, sampler = settings.steps, settings.sampler
        cond, mask = self.conditioning(items)
        x, gens = self.noise(items)
        ts = self.timegrid(steps, 1.0)
        x = x * float(self.schedule.alpha_sigma(ts[0])[1])
        return run_sampler(sampler, self._denoise_fn(cond, mask, hook), x, ts, self.schedule, generator=gens)

    @torch.inference_mode()
    def _vary(self, source: np.ndarray, strength: float, items: Sequence[Item], settings: Settings,
              hook: Hook) -> np.ndarray:
        """Variations of source ([length] at self.sample_rate) by SDEdit (Meng et al. 2022): noise its
        clean signal to t = strength (0 < strength <= 1), then denoise; 1 is a fresh kick."""
        return self.from_latent(self._vary_latent(source, strength, items, settings, hook), items, hook)

    def _vary_latent(self, source: np.ndarray, strength: float, items: Sequence[Item], settings: Settings,
                     hook: Hook) -> torch.Tensor:
        """The clean signals of source's variations, one per item (what from_latent plays)."""
        steps, sampler = settings.steps, settings.sampler
        src = self._source_tensor(source, len(items))
        cond, mask = self.conditioning(items)
        noise, gens = self.noise(items)
        n_steps = max(1, math.ceil(steps * strength))
        ts = self.timegrid(n_steps, strength)
        a, s = self.schedule.alpha_sigma(ts[0])
        x = float(a) * self.to_latent(src, hook) + float(s) * noise
        return run_sampler(sampler, self._denoise_fn(cond, mask, hook), x, ts, self.schedule, generator=gens)

    interpolation_samplers = ("dpmpp_2m", "ddim")  # deterministic: a morph's points lie on one smooth path

    def slerp(self, a: torch.Tensor, b: torch.Tensor, t: float) -> torch.Tensor:
        """Spherical interpolation (Shoemake 1985) of two noises; exactly a at 0 and b at 1."""
        if t == 0.0:
            return a.clone()
        if t == 1.0:
            return b.clone()
        af, bf = a.double().flatten(), b.double().flatten()
        cos = float((af @ bf) / (af.norm() * bf.norm()).clamp(min=1e-12))
        theta = math.acos(max(-1.0, min(1.0, cos)))
        if theta < 1e-6:
            return ((1 - t) * a.double() + t * b.double()).to(a.dtype)
        return ((math.sin((1 - t) * theta) * a.double() + math.sin(t * theta) * b.double())
                / math.sin(theta)).to(a.dtype)

    @torch.inference_mode()
    def invert(self, source: np.ndarray, steps: int, hook: Hook | None = None) -> torch.Tensor:
        """The unit noise that the deterministic sampler (DDIM) would turn into source: DDIM inversion,
        the sampling ODE run from t = 0 to 1 (Song et al. 2021). Approximate: the trip back is close, not
        exact."""
        hook = hook or (lambda info: None)
        x = self.to_latent(self._source_tensor(source, 1), hook)
        ts = self.timegrid(steps, 1.0).flip(0)  # 0 -> 1
        den = self._denoise_fn(None, None, hook)
        for i in range(len(ts) - 1):
            t, s = ts[i], ts[i + 1]
            a_t, s_t = self.schedule.alpha_sigma(t.clamp(min=1e-4))
            a_s, s_s = self.schedule.alpha_sigma(s)
            x0 = den(x, t.clamp(min=1e-4).to(x.dtype).expand(1))
            eps = (x - float(a_t) * x0) / max(float(s_t), 1e-8)
            x = float(a_s) * x0 + float(s_s) * eps
        return x[0] / float(self.schedule.alpha_sigma(ts[-1])[1])

    def _endpoint_noise(self, e: Endpoint, steps: int, hook: Hook) -> torch.Tensor:
        if e.seed is not None:
            return self.noise([Item(seed=e.seed)])[0][0]
        return self.invert(e.source, steps, hook).to(self.device)

    @torch.inference_mode()
    def _morph(self, a: Endpoint, b: Endpoint, ts: Sequence[float], items: Sequence[Item], settings: Settings,
               hook: Hook) -> np.ndarray:
        """Kicks along the great circle between a's and b's initial noise (a file's noise by DDIM
        inversion), each sampled with a deterministic sampler (morph checks it): t = 0 is a's kick, 1 is b's."""
        steps, sampler = settings.steps, settings.sampler
        na, nb = self._endpoint_noise(a, steps, hook), self._endpoint_noise(b, steps, hook)
        cond, mask = self.conditioning(items)
        grid = self.timegrid(steps, 1.0)
        x = torch.stack([self.slerp(na, nb, t) for t in ts]) * float(self.schedule.alpha_sigma(grid[0])[1])
        out = run_sampler(sampler, self._denoise_fn(cond, mask, hook), x, grid, self.schedule)
        return self.from_latent(out, items, hook)
