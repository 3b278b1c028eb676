#!/usr/bin/env bash
# Build a kick-synth model from the starter kit, the way the shipped one (kickserver/models/kick-synth.safetensors)
# was built: synth version 2 (partials, modes, glide, noise per kick: docs/model.md) since 2026-12-06, when this
# script's run (the prior tensor for tensor the 2026-12-05 run's; the map's fits as today's daemon fits) replaced the
# version-1 file (MODEL_CARD.md, "The shipped kick-synth is synth version 2", says why).
#   scripts/train_kick_synth.sh [DEVICE] [STEPS]
# 1. kicktrain fit, family kick-synth, preset small, 20 % held out (the same split as the bundled model's): every
#    clip is fitted by analysis by synthesis first (kept in RUN/synth_fits.safetensors), then the prior trains STEPS
#    steps (1500; the export keeps the step whose dials follow best, train.select_by=dials: for version 2 on the
#    kit the dial miss at steps 250..1500 was 0.46, 0.23, 0.19, 0.13, 0.11, 0.11, so step 1500, where the prior's
#    validation loss, which chose before 2026-12-05 late, would keep step 250);
# 2. export with the map of its 81 training kicks (`--map-data`: kickmodel/kitmap.py, for /kick/map and /kick/near;
#    each kick's numbers fitted again as the daemon fits a file) and 6 sampling steps (as version 1 shipped; 6, 10
#    and 25 give the same share of falling kicks, MODEL_CARD.md), then `kicktrain eval` on the held-out split the
#    artifact records.
# 2026-12-05, the 2-core dev box (no GPU), load 2-6, version 2: 17 minutes in all (the 81 training fits 4.2 min, the
# 20 held-out 1.4 min, the prior 5.6 min, the export's map fits and the eval the rest). Version 1: 12 minutes.
# 2026-12-06, same box, load 1-2, the fits kept from that run (the same bits as fitting again: checked): the prior
# 3.4 min, the export 3.7 min.
set -euo pipefail
cd "$(dirname "$0")/.."
device="${1:-auto}"
steps="${2:-1500}"
py="${PYTHON:-python3}"
runs=runs/kick-synth
kit=kickserver/data/kicks
"$py" -m trainer.cli fit "$kit" --family kick-synth --preset small --run-dir "$runs/run" --device "$device" \
    --train-steps "$steps" --set data.val_fraction=0.2 --no-progress
"$py" -m trainer.cli export "$runs/run" --out "$runs/kick-synth.safetensors" --map-data "$kit" --set sampling.steps=6
"$py" -m trainer.cli eval "$runs/kick-synth.safetensors" --real "$kit" --train "$kit" --run "$runs/run" \
    --out "$runs/eval" --device "$device" --steps 6
echo "to ship it: cp $runs/kick-synth.safetensors kickserver/models/kick-synth.safetensors"
