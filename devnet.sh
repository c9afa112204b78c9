#!/usr/bin/env bash
# devnet.sh - the main command: start a local qMEMO devnet, fire load, show the dashboard.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$ROOT/scripts/setup.sh"
echo "devnet.sh: the environment is ready, but the devnet itself is not built yet (issue 6)."
echo "Meanwhile: $ROOT/.venv/bin/qmemo schemes"
exit 1
