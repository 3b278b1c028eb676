#!/usr/bin/env bash
# Rebuild the shipped kick-synth model (kickserver/models/kick-synth.safetensors) from the starter kit.
#   scripts/train_kick_synth.sh [DEVICE] [STEPS]
# 1. kicktrain fit, family kick-synth, preset small, 20 % held out (the same split as the bundled model's): every
#    clip is fitted by analysis by synthesis first (kept in RUN/synth_fits.safetensors; about 8 minutes for the
#    101 kicks on the 2-core development machine), then the prior trains STEPS steps (1500: about 3.5 minutes);
# 2. export with the map of its 81 training kicks (`--map-data`: kickmodel/kitmap.py, for /kick/map and /kick/near;
#    each kick's numbers fitted again as the daemon fits a file, about 3 minutes), then `kicktrain eval` on the
#    held-out split the artifact records.
# 2026-12-05, the 2-core dev box (no GPU): 12 minutes in all.
set -euo pipefail
cd "$(dirname "$0")/.."
device="${1:-auto}"
steps="${2:-1500}"
py="${PYTHON:-python3}"
runs=runs/kick-synth
kit=kickserver/data/kicks
"$py" -m trainer.cli fit "$kit" --family kick-synth --preset small --run-dir "$runs/run" --device "$device" \
    --train-steps "$steps" --set data.val_fraction=0.2 --no-progress
"$py" -m trainer.cli export "$runs/run" --out "$runs/kick-synth.safetensors" --map-data "$kit"
"$py" -m trainer.cli eval "$runs/kick-synth.safetensors" --real "$kit" --train "$kit" --run "$runs/run" \
    --out "$runs/eval" --device "$device" --steps 10
echo "to ship it: cp $runs/kick-synth.safetensors kickserver/models/kick-synth.safetensors"
