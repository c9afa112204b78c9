#!/usr/bin/env bash
# count.sh - instructions per Falcon verify, liboqs against falcon_vt, under callgrind.
#
# Usage: bench_c/falcon_vt/count.sh [N] [VARIANT]     (defaults: 200 Falcon-512)
#
# Runs falcon_count (built by scripts/setup.sh) once per mode under
# `valgrind --tool=callgrind --toggle-collect=measured_verifies`: only the N verifies
# are counted (key generation, signing and the cache warm-up fall outside), so the
# count divided by N is instructions per verify, the same on every run of one build.
# Prints one JSON object per mode: {variant, mode, implementation, verifies,
# instructions, instructions_per_verify}. QMEMO_FALCON_IMPL=clean counts the portable code.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
N="${1:-200}"
VARIANT="${2:-Falcon-512}"
PROGRAM="$ROOT/.deps/native/falcon/falcon_count"
[ -x "$PROGRAM" ] || { echo "count.sh: $PROGRAM is missing; run scripts/setup.sh" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "count.sh: valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for mode in liboqs uncached cached; do
  valgrind --tool=callgrind --toggle-collect=measured_verifies --callgrind-out-file="$work/out" \
    "$PROGRAM" count "$mode" "$N" "$VARIANT" >"$work/result" 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  # callgrind's "summary:" line is the total of the collected (toggled-on) events.
  instructions=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$work/out")
  python3 - "$instructions" "$work/result" <<'PY'
import json, sys
instructions, result = int(sys.argv[1]), json.load(open(sys.argv[2]))
result.update(instructions=instructions, instructions_per_verify=round(instructions / result["verifies"]))
print(json.dumps(result))
PY
done
