"""Training the kick-synth family's learned transient (kickmodel/families/kick_synth/transient.py) on pairs of (the
synth playing a clip's fit, the clip), over the transient's window:

    loss = sum over WINDOW_FFTS of fit.spectral_l1 (log and relative magnitude of short STFTs over the window)
           + WAVE_WEIGHT * fit.relative_l1 (the waveform over its first fit.ONSET10_MS)
           + PEAK_WEIGHT * |peak(y) - peak(x)| / peak(x) (the window's peak)

The peak term keeps the attack's level: without it the L1 terms, which cannot line up a synth's cycles with a real
kick's, are lowest for a quieter window, and the net learned to take a third off the attack's peak, so a kick's peak
moved to its first cycle after the window (on the 20 held-out starter kicks, attack-time error 2.8 -> 27 ms at the
median; with weight 5, 7.6 ms; docs/model.md has the figures).

Both kicks are compared at peak 1 (a fit's level is no part of its sound; what the transient adds scales with the
kick). The synth plays each fit once (its fixed noise draw, as a fit hears it): only its head (the window and what the
network reads past it) and its peak are kept, so a step costs the network alone. `Pairs.of` makes them;
`train_transient` descends; `window_loss` is the figure the recipe's validation logs.

    kicktrain fit DATA --family kick-synth --preset tiny --set transient.enabled=true --run-dir runs/t
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from kickmodel.families.kick_synth.fit import ONSET10_MS, relative_l1, spectral_l1, stft_mag
from kickmodel.families.kick_synth.synth import synth_for
from kickmodel.families.kick_synth.transient import TransientNet

WINDOW_FFTS = (64, 128, 256)  # 1.5, 2.9 and 5.8 ms at 44.1 kHz: the attack's time scales
WAVE_WEIGHT = 1.0
PEAK_WEIGHT = 5.0


@dataclass
class Pairs:
    """Clips' heads at peak 1 [n, W] (the transient's window), the synth's heads at peak 1 [n, head] playing their
    fits, and the fits [n, N]."""

    clips: torch.Tensor
    synth: torch.Tensor
    u: torch.Tensor

    @classmethod
    def of(cls, clips: torch.Tensor, u: torch.Tensor, net: TransientNet, version: int, sample_rate: int) -> Pairs:
        """Clips [n, L] and their fits [n, N]: the synth plays each fit at the clips' length (one kick at a time, as
        a model plays it), and each is kept as far as the net reads."""
        clips, u = clips.detach().float().cpu(), u.detach().float().cpu()
        synth = synth_for(version, sample_rate, clips.shape[1])
        w, head = net.window.shape[0], net.head
        with torch.no_grad():
            played = torch.cat([synth(u[i:i + 1]) for i in range(len(u))])
        peak = played.abs().amax(dim=1, keepdim=True).clamp(min=1e-8)
        synth_head = torch.nn.functional.pad(played[:, :head], (0, max(0, head - played.shape[1]))) / peak
        clip_peak = clips.abs().amax(dim=1, keepdim=True).clamp(min=1e-8)
        clip_head = torch.nn.functional.pad(clips[:, :w], (0, max(0, w - clips.shape[1]))) / clip_peak
        return cls(clip_head, synth_head, u)

    def to(self, device: torch.device) -> Pairs:
        return Pairs(self.clips.to(device), self.synth.to(device), self.u.to(device))

    def __len__(self) -> int:
        return len(self.u)


def window_loss(y: torch.Tensor, x: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """Per kick [n]: how far y [n, W] is from x [n, W] over the window (the module docstring's loss)."""
    total = torch.zeros(y.shape[0], device=y.device)
    for n in WINDOW_FFTS:
        n = min(n, 1 << max(4, (y.shape[1] // 2).bit_length() - 1))  # torch.stft's padding needs n < 2 W
        mag_x = stft_mag(x, n)
        total = total + spectral_l1(stft_mag(y, n), mag_x, torch.log(mag_x + 1e-5),
                                    mag_x.sum(dim=(1, 2)).clamp(min=1e-8))
    k = int(sample_rate * ONSET10_MS / 1000)
    total = total + WAVE_WEIGHT * relative_l1(y[:, :k], x[:, :k], x[:, :k].abs().mean(dim=1).clamp(min=1e-4))
    peak_x = x.abs().amax(dim=1).clamp(min=1e-4)
    return total + PEAK_WEIGHT * (y.abs().amax(dim=1) - peak_x).abs() / peak_x


def played(net: TransientNet, pairs: Pairs) -> torch.Tensor:
    """[n, W]: the synth's heads with the transient added (peak 1, as the pairs are)."""
    w = net.window.shape[0]
    return pairs.synth[:, :w] + net.added(pairs.synth, pairs.u, peak=torch.ones(len(pairs), 1, device=pairs.u.device))


@torch.no_grad()
def figures(net: TransientNet, pairs: Pairs, sample_rate: int) -> dict[str, float]:
    """{"transient": the window loss with the transient, "transient_off": the synth's alone} (means over the pairs)."""
    w = net.window.shape[0]
    return {"transient": float(window_loss(played(net, pairs), pairs.clips, sample_rate).mean()),
            "transient_off": float(window_loss(pairs.synth[:, :w], pairs.clips, sample_rate).mean())}


def train_transient(net: TransientNet, pairs: Pairs, sample_rate: int, steps: int, lr: float,
                    log: Callable[[str], None] = print, check: Callable[[], None] | None = None) -> dict[str, float]:
    """Adam over every pair at once (a few dozen clips' heads: one batch), `steps` times; the net is left in eval
    mode without gradients. Its figures before and after (and the synth's alone)."""
    before = figures(net, pairs, sample_rate)
    net.train().requires_grad_(True)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    every = max(1, steps // 5)
    with torch.enable_grad():
        for step in range(steps):
            if check is not None:
                check()
            loss = window_loss(played(net, pairs), pairs.clips, sample_rate).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if (step + 1) % every == 0 or step + 1 == steps:
                log(f"transient: step {step + 1}/{steps}, window loss {float(loss.detach()):.4f} (synth alone "
                    f"{before['transient_off']:.4f})")
    net.eval().requires_grad_(False)
    after = figures(net, pairs, sample_rate)
    return {"before": before["transient"], "after": after["transient"], "synth_alone": after["transient_off"]}
