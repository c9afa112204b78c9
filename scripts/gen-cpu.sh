#!/usr/bin/env bash
# gen-cpu.sh - the load generator's own CPU per offered transaction at high rates, against
# stand-in nodes (qmemo/bench/gen_standin.py: every transaction accepted, a block every
# 2 s; no verifying or storing), so that neither the nodes' limits nor their resends enter.
#
#   scripts/gen-cpu.sh                          rates 5000,10000,20000 TPS, 20 s each
#   scripts/gen-cpu.sh --rates 25000 --duration 30 --base-port 8460 --dir /tmp/gen-cpu
#   scripts/gen-cpu.sh --generator-from /tmp/old    another version's generator: a folder holding its
#                                                 qmemo/ package (git archive <commit> qmemo | tar -x -C /tmp/old)
#
# Prints each run's generator_cpu_us_per_tx (its summary.json), and the run folders. The
# first run of a rate signs its plan (cached in DIR/workloads for the next time).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RATES=5000,10000,20000
DURATION=20
BASE_PORT=8460
DIR=""
FROM=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) RATES=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --generator-from) FROM=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gen-cpu.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
QMEMO="$ROOT/.venv/bin/qmemo"
PYTHON="$ROOT/.venv/bin/python"
DIR=${DIR:-$(mktemp -d /tmp/qmemo-gen-cpu.XXXXXX)}
mkdir -p "$DIR"
[ -f "$DIR/genesis.json" ] || "$QMEMO" genesis --out "$DIR" --validators 3 --accounts 1200 >/dev/null
NODES="http://127.0.0.1:$BASE_PORT,http://127.0.0.1:$((BASE_PORT + 1)),http://127.0.0.1:$((BASE_PORT + 2))"
"$PYTHON" -m qmemo.bench.gen_standin --ports "$BASE_PORT,$((BASE_PORT + 1)),$((BASE_PORT + 2))" --devnet "$DIR" \
  >"$DIR/standin.log" 2>&1 &
STANDIN=$!
trap 'kill $STANDIN 2>/dev/null || true; wait $STANDIN 2>/dev/null || true' EXIT
"$QMEMO" health "http://127.0.0.1:$BASE_PORT" --wait 30 >/dev/null
IFS=, read -ra RATE_LIST <<<"$RATES"
for rate in "${RATE_LIST[@]}"; do
  out="$DIR/run-${rate}tps-$(date +%H%M%S)"
  "$QMEMO" gen --devnet "$DIR" --nodes "$NODES" --tps "$rate" --duration "$DURATION" --prepare-only >/dev/null
  if [ -n "$FROM" ]; then     # its package first on the path (and not this checkout's: run from /)
    (cd / && QMEMO_HOME="$ROOT" PYTHONPATH="$FROM" "$PYTHON" -m qmemo.cli gen --devnet "$DIR" --nodes "$NODES" \
      --tps "$rate" --duration "$DURATION" --out "$out" --quiet >"$out.log" 2>&1) || true
  else
    "$QMEMO" gen --devnet "$DIR" --nodes "$NODES" --tps "$rate" --duration "$DURATION" --out "$out" --quiet \
      >"$out.log" 2>&1 || true
  fi
  "$PYTHON" - "$out/summary.json" "$rate" <<'PY' || tail -3 "$out.log"
import json, sys
s = json.load(open(sys.argv[1]))
c = s["counts"]
print(f"{float(sys.argv[2]):>8,.0f} TPS: generator_cpu_us_per_tx {s.get('generator_cpu_us_per_tx', float('nan')):6.2f} "
      f"({s.get('generator_cpu_s', float('nan')):.2f} s CPU, {c['sent']:,} sent, {c['committed']:,} committed, "
      f"send lag p99 {s['schedule_lag_ms']['percentiles_ms']['p99']:,.1f} ms)")
PY
done
echo "gen-cpu.sh: run folders in $DIR"
