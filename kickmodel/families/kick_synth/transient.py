"""A learned transient over the synth's kick: a small FiLM-conditioned TCN that shapes the attack from the synth's own
output (drumblender, Shier et al., Forum Acusticum 2023: a TCN of dilated blocks, each scaled and shifted by the
patch's numbers, added to a modal synth's output), bounded so the synth's guarantees still hold.

    added(t) = window(t) * bound * peak * tanh(net(kick / peak, numbers))        bound = 10 ** (max_db / 20)

The net sees the synth's kick at peak 1 (and the window, as its time axis) and is conditioned on the kick's numbers
(each unconstrained number / U_LIMIT: within +-1). window(t) is 0 at t = 0, rises within RISE_MS (a raised cosine),
holds, and falls by a raised cosine to exactly 0 at window_ms, 0 after: the first sample stays exactly 0, every sample
from window_ms on is the synth's own (pitch, read 80-200 ms, the decay and the tail are untouched by construction),
and nothing added is ever louder than bound times the kick's own peak. Scaling the kick scales what is added.

The output layer starts at zero: an untrained transient adds nothing. Its training (trainer/recipes/kick_synth.py)
and its config (config.py: TransientConfig) are elsewhere; a model plays it after the synth (generator.py).
"""

from __future__ import annotations

import math

import torch

from .config import TransientConfig
from .synth import U_LIMIT

RISE_MS = 0.5  # the window's rise from 0 at t = 0
KERNEL = 3


def window(sample_rate: int, window_ms: float) -> torch.Tensor:
    """[ceil(window_ms) samples] float32: 0 at t = 0, a raised-cosine rise over RISE_MS, 1, then a raised-cosine fall
    over the window's second half to 0 at window_ms (the samples from there on are not in it: 0)."""
    n = int(math.ceil(window_ms * sample_rate / 1000))
    t = torch.arange(n, dtype=torch.float64) * (1000.0 / sample_rate)  # ms
    rise = 0.5 - 0.5 * torch.cos(math.pi * (t / RISE_MS).clamp(max=1.0))
    half = window_ms / 2
    fall = 0.5 + 0.5 * torch.cos(math.pi * ((t - half) / half).clamp(0.0, 1.0))
    w = rise * fall
    w[0] = 0.0
    return w.float()


def halo(layers: int) -> int:
    """Samples past the window a centred stack of `layers` dilated convolutions (dilations 1, 2, 4, ...) reads."""
    return (KERNEL // 2) * ((1 << layers) - 1)


class TransientNet(torch.nn.Module):
    """kick [n, L] (the synth's raw output), u [n, N] (its unconstrained numbers) -> the kick with its transient added
    over the first window_ms; `added` gives what is added alone ([n, window samples])."""

    per_kick_on_cpu = True  # played after the synth, one kick a row as it is (kickmodel.batching)

    def __init__(self, cfg: TransientConfig, n_numbers: int, sample_rate: int) -> None:
        super().__init__()
        c = cfg.channels
        self.layers, self.bound = cfg.layers, 10.0 ** (cfg.max_db / 20)
        self.register_buffer("window", window(sample_rate, cfg.window_ms), persistent=False)
        self.inp = torch.nn.Conv1d(2, c, 1)
        self.convs = torch.nn.ModuleList(torch.nn.Conv1d(c, c, KERNEL, dilation=1 << i, padding=1 << i)
                                         for i in range(cfg.layers))
        self.film = torch.nn.Linear(n_numbers, 2 * c * cfg.layers)  # each layer's scale and shift
        self.out = torch.nn.Conv1d(c, 1, 1)
        torch.nn.init.zeros_(self.film.weight)  # FiLM starts at scale 1, shift 0
        torch.nn.init.zeros_(self.film.bias)
        torch.nn.init.zeros_(self.out.weight)  # and the transient at nothing added
        torch.nn.init.zeros_(self.out.bias)

    @property
    def head(self) -> int:
        """Samples of the kick the net reads: the window and its halo."""
        return self.window.shape[0] + halo(self.layers)

    def added(self, kick: torch.Tensor, u: torch.Tensor, peak: torch.Tensor | None = None) -> torch.Tensor:
        """[n, W]: what is added to the kick's first W samples (W = the window's); peak [n, 1]: the kick's own peak
        (given when only the kick's head is at hand, as in training)."""
        n, w = kick.shape[0], self.window.shape[0]
        if peak is None:
            peak = kick.abs().amax(dim=1, keepdim=True)
        peak = peak.clamp(min=1e-8)
        x = kick[:, :self.head] / peak
        if x.shape[1] < self.head:
            x = torch.nn.functional.pad(x, (0, self.head - x.shape[1]))
        win = torch.nn.functional.pad(self.window, (0, self.head - w)).expand(n, -1)
        h = self.inp(torch.stack([x, win], dim=1))
        film = self.film(u.float() / U_LIMIT).view(n, self.layers, 2, -1, 1)
        for i, conv in enumerate(self.convs):
            h = h + torch.nn.functional.gelu(conv(h) * (1 + film[:, i, 0]) + film[:, i, 1])
        y = torch.tanh(self.out(h)[:, 0, :w])
        return self.window * self.bound * peak * y

    def forward(self, kick: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        w = min(self.window.shape[0], kick.shape[1])
        add = self.added(kick, u)[:, :w].to(kick.dtype)
        return torch.cat([kick[:, :w] + add, kick[:, w:]], dim=1)


class WithTransient(torch.nn.Module):
    """A synth followed by its transient: (u [n, N], seeds) -> kicks [n, L], as the synth is called (the codec, the
    unit controls' adjust and the kits play it as they play the synth alone)."""

    def __init__(self, synth: torch.nn.Module, transient: TransientNet) -> None:
        super().__init__()
        self.synth, self.transient = synth, transient
        self.sample_rate, self.version = synth.sample_rate, synth.version
        self.per_kick_on_cpu = getattr(synth, "per_kick_on_cpu", False)
        self.one_thread_on_cpu = getattr(synth, "one_thread_on_cpu", False)

    def forward(self, u: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        return self.transient(self.synth(u, seeds), u)


def transient_net(cfg, n_numbers: int) -> TransientNet:
    """The transient of a model's config (its `transient` section, at its data rate)."""
    return TransientNet(cfg.transient, n_numbers, cfg.data.sample_rate)
