#!/usr/bin/env bash
# Rebuild the bundled model (kickserver/models/default.safetensors) from the starter kit, then evaluate it.
#   scripts/train_default_model.sh [STEPS] [DEVICE]
# STEPS: training steps (see MODEL_CARD.md for what the shipped artifact used); DEVICE: auto | cpu | cuda.
# The learning rate is constant after warm-up, so a run of N steps is the same whether or not it was stopped
# and resumed on the way; 30 % of the kit (whole kits' velocity layers together) is held out for evaluation.
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-7743}"
device="${2:-auto}"
py="${PYTHON:-python3}"
run=runs/default-model
"$py" -m trainer.cli fit kickserver/data/kicks --run-dir "$run" --preset small --device "$device" \
    --max-steps "$steps" --set data.val_fraction=0.3 --no-progress
# the sampler settings the evaluation chose for the shipped artifact (MODEL_CARD.md)
"$py" -m trainer.cli export "$run" --out "$run/default.safetensors" --set sampling.steps=10 \
    --set sampling.time_power=0.35
"$py" -m trainer.cli eval "$run/default.safetensors" --real kickserver/data/kicks --train kickserver/data/kicks \
    --run "$run" --out "$run/eval" --device "$device" --steps 10,25,50
echo "to ship it: cp $run/default.safetensors kickserver/models/default.safetensors"
