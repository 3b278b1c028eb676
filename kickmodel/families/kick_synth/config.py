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
    existed (the kick-synth model shipped until 2026-12-06 among them) has no such section: version 1, the 34-number
    synth it was trained on."""

    version: int = 1


@dataclass(frozen=True)
class TransientConfig:
    """The learned transient over the synth's kick (transient.py): off unless enabled (a config without the section,
    every model made before it, plays the synth alone). Trained after the fits, before the prior (the recipe)."""

    enabled: bool = False
    channels: int = 24  # the TCN's width
    layers: int = 6  # dilated convolutions, dilations 1, 2, 4, ...
    window_ms: float = 30.0  # what is added is 0 at t = 0 and from window_ms on
    max_db: float = -6.0  # what is added is at most this, re the kick's own peak
    steps: int = 300  # Adam steps of its training phase
    lr: float = 0.003
