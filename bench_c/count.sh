#!/usr/bin/env bash
# count.sh - instructions per verify, under callgrind, of a verifier counter's modes.
#
# Usage: bench_c/count.sh PROGRAM N VARIANT MODE...
#   bench_c/count.sh .deps/native/falcon/falcon_count 100 Falcon-512 liboqs uncached cached batch
#   bench_c/count.sh .deps/native/mldsa/mldsa_count 50 ML-DSA-44 liboqs uncached cached batch
#   bench_c/count.sh bench_c/build/oqs-count 4 SPHINCS+-SHA2-128s-simple liboqs
#
# Runs PROGRAM (a bench_c/verify_count.h counter) once per mode under
# `valgrind --tool=callgrind --toggle-collect=measured_verifies`: only the N verifies
# are counted (key generation, signing and the cache warm-up fall outside), so the count
# divided by N is instructions per verify, the same on every run of one build. The keys
# and signatures are made once, natively, and read back by each counted run
# (QMEMO_COUNT_INPUTS): signing under valgrind is slow. Prints one JSON object per mode:
# {variant, mode, implementation, verifies, valid, instructions, instructions_per_verify}.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
PROGRAM="$1" N="$2" VARIANT="$3"
shift 3
[ -x "$PROGRAM" ] || { echo "count.sh: $PROGRAM is missing; run scripts/setup.sh" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "count.sh: valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export QMEMO_COUNT_INPUTS="$work"
# The inputs, natively (a 0-second timing run makes and keeps them).
"$PROGRAM" time 0 "$N" "$VARIANT" >/dev/null 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
for mode in "$@"; do
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
