#!/usr/bin/env bash
# One entry point for the README's quick start.
#   ./quickstart.sh serve [kickserver options]   set up, then run the daemon with the bundled model
#   ./quickstart.sh test  [pytest options]       set up, then run the whole test suite
# Uses the active virtual environment if there is one, else creates ./.venv.
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

extra=""
[ "$cmd" = test ] && extra="[dev]"
# Install (or refresh) the project; quiet unless something goes wrong.
"$py" -m pip install -q --disable-pip-version-check -e ".$extra"

if [ "$cmd" = serve ]; then
  exec "$py" -m kickserver serve "$@"
fi
export PYTHONUNBUFFERED=1
exec "$py" -m pytest -q "$@"
