"""What chooses the step a run exports (train.select_by): the lowest validation loss, or the dials that follow best
(trainer/evaluation/dials.py: each control asked for alone at 0.1..0.9, rendered as served and measured).

A mel-VAE that serves as a codec (the VAE a latent-diffusion model decodes through) chooses by its reconstruction of
the held-out kicks (`recon`): its validation loss also holds its learned prior's likelihood of their latents, which
rises as that prior learns the training kicks while the reconstruction still improves (the starter kit, 3500 steps:
the loss lowest at step 500, reconstruction error 0.058 there against 0.047 from step 1500 on), and a latent
diffusion model never samples that prior.

The kick-synth family chooses by its dials: its validation loss is the prior's loss on the held-out kicks' fitted
numbers, which rises while the prior learns its conditioning, and the step it picks is one whose dials barely work
(the version-2 run of 2026-12-05: the loss at its lowest at step 250, dials r 0.19 / 0.51 / 0.62 there against
0.83 / 0.90 / 0.91 at step 1500, whose KID on the held-out kicks was also the lower, 0.44 against 0.58).
"""

from __future__ import annotations

from typing import Any

from kickmodel.config import TrainConfig

FIGURE = {"loss": "loss", "dials": "dial_miss", "recon": "recon"}  # the validation figure each chooses by (lower wins)
SUMMARY = {"loss": "best_val_loss", "dials": "best_dial_miss", "recon": "best_val_recon"}  # as the summary names it
WORDS = {"loss": "validation loss", "dials": "dial miss (1 - the dials' mean Spearman r)",
         "recon": "validation reconstruction error"}


def figure(tc: TrainConfig, figures: dict[str, Any]) -> float:
    """The number a check is judged by, from its validation figures."""
    return float(figures[FIGURE[tc.select_by]])


def words(tc: TrainConfig) -> str:
    return WORDS[tc.select_by]


def summary_key(tc: TrainConfig) -> str:
    return SUMMARY[tc.select_by]


def exported_because(tc: TrainConfig, validated: bool) -> str:
    """Why an export holds the step it does (its training summary's `exported_because`), for `fit --export-dir` and
    `kicktrain export` alike: validated, a run that has been checked at least once."""
    return f"the best {words(tc)}" if validated else "no validation: the last step"


def select_figures(tc: TrainConfig, generator) -> dict[str, float]:
    """The figures a check adds for its choosing (none when the validation loss chooses)."""
    if tc.select_by != "dials":
        return {}
    from .evaluation.dials import miss

    return miss(generator, tc.select_kicks)
