"""A kick synth's numbers as a codec: encode fits the synth's numbers to audio (analysis by synthesis, by gradient
descent), decode plays them. The kick-synth family pairs it with a prior over the numbers; a better
synth body (or an amortised fit) replaces this piece. The synth and its fit are the family's
(kickmodel.families.kick_synth: synth.py, fit.py), handed in when the family builds the codec."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..batching import in_render_shape
from ..generator import Hook

Fit = Callable[[torch.Tensor, Callable[[], None]], torch.Tensor]  # (clips [n, length] on the CPU, check) -> numbers


class SynthCodec:
    """synth: numbers [n, N] -> audio [n, length] (a torch module); fit: (clips, check) -> the numbers that play
    them, calling check() between its gradient steps."""

    def __init__(self, synth: torch.nn.Module, fit: Fit, n_numbers: int, device: torch.device) -> None:
        self.synth, self.fit = synth, fit
        self.latent_dim = int(n_numbers)
        self.device = device

    def encode(self, audio: torch.Tensor, hook: Hook) -> torch.Tensor:
        """Clips [n, length] -> their fitted numbers [n, N] on the device (a fit descends gradients, even when
        serving under torch.inference_mode)."""
        with torch.inference_mode(False), torch.enable_grad():
            x = audio.detach().float().cpu().clone()
            u = self.fit(x, lambda: hook({"stage": "fit"}))
        return u.to(self.device)

    def decode(self, u: torch.Tensor, hook: Hook, seeds: torch.Tensor | None = None) -> np.ndarray:
        """Numbers [n, N] -> raw audio [n, length] float32, played at the synth's render shape (kickmodel.batching).
        seeds [n] (int64): each kick's seed, for a synth that draws its noise per kick (None: its fixed draw)."""
        hook({"stage": "play"})
        return in_render_shape(self.synth, u, seeds).float().cpu().numpy()
