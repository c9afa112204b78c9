#!/usr/bin/env bash
# test.sh - the README's test command: set up what is missing, then run the whole suite.
# Arguments go to pytest (e.g. `scripts/test.sh tests/unit -k merkle`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
# The suite writes devnets, chain stores and a container image: about 1 GB at its peak
# (df every 15 s through a whole run, 2026-11-27), and pytest keeps its last three runs'
# folders. A disk that fills half-way shows as hundreds of unrelated errors, so a low
# one is named here instead.
NEED_MB=${QMEMO_TEST_NEED_MB:-4000}
for dir in "${TMPDIR:-/tmp}" "$ROOT"; do
  if ! free_mb=$(df -Pm "$dir" 2>/dev/null | awk 'NR == 2 {print $4}') || [ -z "$free_mb" ]; then
    echo "test.sh: cannot read the free space of $dir (does it exist?)" >&2
    exit 1
  fi
  if [ "$free_mb" -lt "$NEED_MB" ]; then
    echo "test.sh: $dir has $free_mb MB free; the suite uses about 1 GB at its peak, and this check asks for $NEED_MB MB to be safe." >&2
    echo "test.sh: free some space (old runs/, devnet/ data, /tmp/qmemo-*), or set QMEMO_TEST_NEED_MB lower." >&2
    exit 1
  fi
done
exec "$ROOT/.venv/bin/python" -m pytest "$@"
