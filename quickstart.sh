#!/usr/bin/env bash
# One entry point for the README's quick start.
#   ./quickstart.sh serve [kickserver options]   set up, then run the daemon with the bundled model
#   ./quickstart.sh test  [pytest options]       set up, then run the whole test suite
# Uses the active virtual environment if there is one, else creates ./.venv.
#   KICKSERVER_TORCH=cpu ./quickstart.sh serve   install PyTorch's CPU-only build first (about a tenth of the
#                                                CUDA build's size; for machines without an NVIDIA GPU)
set -euo pipefail
cd "$(dirname "$0")"

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  serve|test) ;;
  *) echo "usage: $0 serve|test [args...]" >&2; exit 2 ;;
esac

if [ -n "${VIRTUAL_ENV:-}" ]; then
  py="$VIRTUAL_ENV/bin/python"
else
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  py="$PWD/.venv/bin/python"
fi

# PyTorch's CPU-only wheels, from PyTorch's own index; versions within pyproject.toml's pins.
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
TORCH_PINS=("torch==2.11.0" "torchaudio==2.11.0")
case "${KICKSERVER_TORCH:-}" in
  "") ;;
  cpu)
    # which torch the environment has: none, cpu (no CUDA/ROCm) or gpu
    have="$("$py" -c 'import torch; print("gpu" if torch.version.cuda or torch.version.hip else "cpu")' \
            2>/dev/null || echo none)"
    if [ "$have" = none ]; then
      "$py" -m pip install -q --disable-pip-version-check --index-url "$TORCH_CPU_INDEX" "${TORCH_PINS[@]}"
    elif [ "$have" = gpu ]; then
      # swap the CUDA build for the CPU one in place; the CUDA libraries stay (a fresh venv reclaims the space)
      echo "quickstart: replacing the CUDA build of torch with the CPU build" >&2
      "$py" -m pip install -q --disable-pip-version-check --index-url "$TORCH_CPU_INDEX" \
          --force-reinstall --no-deps "${TORCH_PINS[@]}"
    fi ;;
  *) echo "quickstart: KICKSERVER_TORCH must be cpu (or unset), got '${KICKSERVER_TORCH}'" >&2; exit 2 ;;
esac

extra=""
[ "$cmd" = test ] && extra="[dev]"
# Install (or refresh) the project; quiet unless something goes wrong.
"$py" -m pip install -q --disable-pip-version-check -e ".$extra"

if [ "$cmd" = serve ]; then
  exec "$py" -m kickserver serve "$@"
fi
export PYTHONUNBUFFERED=1
exec "$py" -m pytest -q "$@"
