#!/usr/bin/env bash
# One entry point for the README's quick start.
#   ./quickstart.sh serve [kickserver options]   set up, then run the daemon with the bundled model (--model default,
#                                                unless the options name --model; it says so before it starts)
#   ./quickstart.sh test  [pytest options]       set up, then run the whole test suite
# Uses the active virtual environment if there is one, else creates ./.venv.
#   KICKSERVER_TORCH=cpu ./quickstart.sh serve   install PyTorch's CPU-only build first (about a tenth of the
#                                                CUDA build's size; for machines without an NVIDIA GPU)
#   KICKSERVER_TORCH_INDEX=URL                   where the CPU build comes from (default PyTorch's own index;
#                                                a mirror or proxy of it: pip's PIP_INDEX_URL cannot override
#                                                the --index-url given here)
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
TORCH_CPU_INDEX="${KICKSERVER_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
TORCH_PINS=("torch==2.11.0" "torchaudio==2.11.0")

# which torch the environment has: none, cpu (no CUDA/ROCm) or gpu
have="$("$py" -c 'import torch; print("gpu" if torch.version.cuda or torch.version.hip else "cpu")' \
        2>/dev/null || echo none)"

cpu_wheels() {
  # pip from the CPU index, with its progress shown; an index it cannot reach is said as such (pip itself reports
  # a resolver error, "ResolutionImpossible" or "No matching distribution", as if the versions did not exist)
  if "$py" -m pip install --disable-pip-version-check --index-url "$TORCH_CPU_INDEX" "$@"; then
    return 0
  fi
  if ! "$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/", timeout=15)' \
       "$TORCH_CPU_INDEX" >/dev/null 2>&1; then
    echo "quickstart: the CPU wheel index $TORCH_CPU_INDEX could not be reached (pip's error above means that, not" \
         "a version conflict): retry once this machine can reach it (a proxy: export https_proxy=...; a mirror:" \
         "KICKSERVER_TORCH_INDEX=URL), or run without KICKSERVER_TORCH=cpu to install torch's default build" \
         "from PyPI (with CUDA libraries, about 4.7 GB)" >&2
  else
    echo "quickstart: installing torch's CPU build from $TORCH_CPU_INDEX failed (pip's error above)" >&2
  fi
  exit 1
}

case "${KICKSERVER_TORCH:-}" in
  "")
    if [ "$have" = none ]; then
      if command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/nvidia0 ]; then
        echo "quickstart: installing torch's default build with its CUDA libraries (about 4.7 GB; pip shows its" \
             "progress)" >&2
      else
        echo "quickstart: no NVIDIA GPU found (no nvidia-smi, no /dev/nvidia0), but torch's default build brings" \
             "about 4.7 GB of CUDA libraries; for the CPU-only build (about a tenth of that) stop now (Ctrl-C) and" \
             "run: KICKSERVER_TORCH=cpu $0 $cmd" >&2
      fi
    fi ;;
  cpu)
    if [ "$have" = none ]; then
      cpu_wheels "${TORCH_PINS[@]}"
    elif [ "$have" = gpu ]; then
      # swap the CUDA build for the CPU one in place; the CUDA libraries stay (a fresh venv reclaims the space)
      echo "quickstart: replacing the CUDA build of torch with the CPU build" >&2
      cpu_wheels --force-reinstall --no-deps "${TORCH_PINS[@]}"
    fi ;;
  *) echo "quickstart: KICKSERVER_TORCH must be cpu (or unset), got '${KICKSERVER_TORCH}'" >&2; exit 2 ;;
esac

extra=""
[ "$cmd" = test ] && extra="[dev]"
# Install (or refresh) the project: quiet unless something goes wrong, except on a first install (torch and the
# other dependencies download for minutes: pip shows what and how far).
quiet=(-q)
[ "$have" = none ] && quiet=()
"$py" -m pip install ${quiet[@]+"${quiet[@]}"} --disable-pip-version-check -e ".$extra"

if [ "$cmd" = serve ]; then
  # the bundled model, as the README says: pinned, so neither a model served last nor a new artifact in the models
  # folder (a running fit's export) serves instead; --model among the options is the user's choice
  pin=(--model default)
  for a in "$@"; do
    case "$a" in --model|--model=*) pin=() ;; esac
  done
  if [ ${#pin[@]} -gt 0 ]; then
    echo "quickstart: serving the bundled model (kickserver serve --model default; /kick/model NAME serves another" \
         "until a restart); to serve your own: $0 serve --model NAME, or run kickserver serve to follow your" \
         "models folder and config (docs/daemon.md: which model serves)" >&2
  fi
  exec "$py" -m kickserver serve ${pin[@]+"${pin[@]}"} "$@"
fi
export PYTHONUNBUFFERED=1
exec "$py" -m pytest -q "$@"
