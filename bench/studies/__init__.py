"""One-off investigations: each answered a question once, and the docs quote its figures. They are not part of the
suite (`python -m bench`), nothing imports them, and they run from the repository root as
`python -m bench.studies.NAME`, writing to ~/.cache/kickserver/bench unless given --out:

- attacks: a running daemon flooded, budget-drained, fed malformed datagrams and a hostile models folder
  (README's security items 14-17, docs/daemon.md).
- hostile_files: the daemon's peak memory for odd-rate sources, and the cost of refusing a costly artifact.
- contention: one kick's latency on a machine other processes keep busy (why OMP_WAIT_POLICY is PASSIVE).
- loop_ab: the real training loop of two commits side by side (docs/profiling.md).
- profile_changes: the changes `kicktrain profile` led to, against what they replaced (docs/profiling.md).
- synth_ceiling: how close resynthesis gets to a real kick it is given whole (README, MODEL_CARD.md).
- unit_controls: how many kicks asked at pitch_hz / decay_s / click_db measure as asked (README).
- vae_pitch_check (with gpu_vae_variants.sh): mel-VAE variants' pitch and haze on one GPU (MODEL_CARD.md).
"""
