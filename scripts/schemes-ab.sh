#!/usr/bin/env bash
# schemes-ab.sh - one sweep per signature scheme, then one report setting them side by side.
#
#   scripts/schemes-ab.sh                         the figures of docs/schemes.md (24 min on 2 cores)
#   scripts/schemes-ab.sh --update-docs           ... and write its table into docs/schemes.md
#                                                 and its plot into docs/img/
#   scripts/schemes-ab.sh --sweep 100:2:200 --stage 3 --accounts 200
#                                                 a tiny end-to-end check of all five (199 s here)
#
# For each scheme: a devnet of that scheme in its own folder (OUT/devnet-SCHEME, so they
# never mix), `devnet.sh --no-monitor --sweep ...` against it, which stops everything
# when the sweep ends. Then the C baseline the report needs (a quick verify-only one is
# measured if results/ has none of this machine), and `qmemo report --devnet` over every
# run folder into OUT/report. With --update-docs the report's scheme table replaces the
# marked block of docs/schemes.md (qmemo.analysis.scheme_ab_doc) and its plot
# docs/img/schemes_throughput_latency.png: nothing in that table is typed in.
# Each devnet's chain stores and signed plans are removed once its sweep is over (the
# run folders keep every measurement the report reads): at the default stages they come
# to 1.3-8.5 GB a scheme, 26 GB for the five (2026-11-27). --keep-devnets keeps them.
# Unattended: it needs no terminal, and any failing step stops it with that step named.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCHEMES="Falcon-512,Falcon-padded-512,ML-DSA-44,Ed25519,ECDSA-secp256k1"
SWEEP="3000:1.5:20000"
STAGE=30
ACCOUNTS=2000
BLOCK_TXS=100000
BASE_PORT=8100
OUT="$ROOT/runs/schemes-ab-$(date -u +%Y%m%dT%H%M%SZ)"
RESULTS="$ROOT/results"
UPDATE_DOCS=0
KEEP_DEVNETS=0

usage() {
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  cat <<EOF

Options (defaults are the documented figures' settings):
  --schemes LIST     comma-separated (default $SCHEMES)
  --sweep S:F:M      devnet.sh --sweep (default $SWEEP)
  --stage S          seconds per stage (default $STAGE)
  --accounts N       funded accounts per devnet (default $ACCOUNTS)
  --block-txs N      block cap, lifted so the cap is not what is measured (default $BLOCK_TXS)
  --base-port P      the devnets' first port (default $BASE_PORT)
  --out DIR          where devnets, runs and the report go (default runs/schemes-ab-<time>)
  --results DIR      C baselines (default results/)
  --update-docs      write the table into docs/schemes.md and the plot into docs/img/
  --keep-devnets     keep each devnet's chain stores and signed plans (up to ~9 GB a scheme)
EOF
}

need_value() { [ $# -ge 2 ] && [ -n "$2" ] || { echo "schemes-ab.sh: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --schemes) need_value "$@"; SCHEMES=$2; shift 2 ;;
    --sweep) need_value "$@"; SWEEP=$2; shift 2 ;;
    --stage) need_value "$@"; STAGE=$2; shift 2 ;;
    --accounts) need_value "$@"; ACCOUNTS=$2; shift 2 ;;
    --block-txs) need_value "$@"; BLOCK_TXS=$2; shift 2 ;;
    --base-port) need_value "$@"; BASE_PORT=$2; shift 2 ;;
    --out) need_value "$@"; OUT=$(realpath -m "$2"); shift 2 ;;
    --results) need_value "$@"; RESULTS=$(realpath -m "$2"); shift 2 ;;
    --update-docs) UPDATE_DOCS=1; shift ;;
    --keep-devnets) KEEP_DEVNETS=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "schemes-ab.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

bash "$ROOT/scripts/setup.sh"
QMEMO="$ROOT/.venv/bin/qmemo"
PY="$ROOT/.venv/bin/python"
mkdir -p "$OUT"
STARTED_UTC=$(date -u +"%Y-%m-%d %H:%M")
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

IFS=, read -r -a scheme_list <<<"$SCHEMES"
RUN_DIRS=()
for scheme in "${scheme_list[@]}"; do
  echo "schemes-ab.sh: $scheme: sweep $SWEEP, $STAGE s per stage"
  "$ROOT/devnet.sh" --no-monitor --scheme "$scheme" --block-txs "$BLOCK_TXS" --accounts "$ACCOUNTS" \
    --sweep "$SWEEP" --stage "$STAGE" --base-port "$BASE_PORT" --dir "$OUT/devnet-$scheme" \
    --runs "$OUT/runs/$scheme" --results "$RESULTS" >"$OUT/$scheme.log" 2>&1 ||
    { echo "schemes-ab.sh: the $scheme sweep failed; its output: $OUT/$scheme.log" >&2; tail -n 20 "$OUT/$scheme.log" >&2; exit 1; }
  run_dir=$(ls -d "$OUT/runs/$scheme"/*/ | tail -n 1)
  RUN_DIRS+=(--devnet "${run_dir%/}")
  if [ "$KEEP_DEVNETS" = 0 ]; then
    freed=$(du -sh "$OUT/devnet-$scheme/data" "$OUT/devnet-$scheme/workloads" 2>/dev/null | awk '{print $1}' | paste -sd+)
    rm -rf "$OUT/devnet-$scheme/data" "$OUT/devnet-$scheme/workloads"
    echo "schemes-ab.sh: $scheme: chain stores and signed plans removed (${freed:-0}; --keep-devnets keeps them)"
  fi
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# The report's C section needs a baseline of this machine: find one, else measure a quick one.
"$QMEMO" bench c --verify-only --if-missing Falcon-512 --brief --results "$RESULTS"
BASELINE=$("$PY" -c 'import sys; from pathlib import Path
from qmemo.bench.c_baseline import find_c_baseline
from qmemo.bench import fingerprint
print(find_c_baseline("Falcon-512", fingerprint.current(), Path(sys.argv[1])).path.parent)' "$RESULTS")
"$QMEMO" report --results "$BASELINE" "${RUN_DIRS[@]}" --out "$OUT/report"

if [ "$UPDATE_DOCS" = 1 ]; then
  NOTE="Measured $STARTED_UTC UTC by \`scripts/schemes-ab.sh --update-docs\` (sweep $SWEEP, $STAGE s per"
  NOTE+=" stage, $ACCOUNTS accounts, --block-txs $BLOCK_TXS; C baseline $(basename "$BASELINE"); load average"
  NOTE+=" $LOAD_BEFORE before, $LOAD_AFTER after, on $(nproc) cores). Copied from $(realpath --relative-to="$ROOT" "$OUT/report/REPORT.md" 2>/dev/null || echo "$OUT/report/REPORT.md")."
  "$PY" -m qmemo.analysis.scheme_ab_doc "$OUT/report/REPORT.md" "$ROOT/docs/schemes.md" --note "$NOTE"
  cp "$OUT/report/schemes_throughput_latency.png" "$ROOT/docs/img/schemes_throughput_latency.png"
  echo "schemes-ab.sh: docs/schemes.md's table and docs/img/schemes_throughput_latency.png updated"
fi
echo "schemes-ab.sh: report: $OUT/report/REPORT.md"
