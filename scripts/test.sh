#!/usr/bin/env bash
# test.sh - the README's test command: set up what is missing, then run the whole suite.
# Arguments go to pytest (e.g. `scripts/test.sh tests/unit -k merkle`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
