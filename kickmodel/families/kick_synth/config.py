"""The kick-synth family's own config sections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SynthFitConfig:
    """Analysis by synthesis (fit.py): the synth's numbers for each training kick, by gradient descent."""

    iters: int = 200  # Adam steps from the best start
    restart_iters: int = 40  # Adam steps from each of fit.RESTARTS, before the best is kept
    lr: float = 0.05
    batch: int = 32  # kicks fitted at once
    serve_iters: int = 120  # a variation's or a morph's source file, fitted when the daemon is asked
    # the prior learns from each fit moved by Gaussian noise of this spread (in units of the numbers' spread over the
    # training kicks): a few dozen kicks are a few dozen points, which a prior trained long enough gives back one by
    # one (copies); the jitter makes it learn the region around them (a kernel density's bandwidth)
    jitter: float = 0.1


@dataclass(frozen=True)
class SynthConfig:
    """Which synth plays the numbers (synth.py: params_for / synth_for by version). A config written before versions
    existed (the shipped kick-synth model's) has no such section: version 1, the 34-number synth it was trained on."""

    version: int = 1
