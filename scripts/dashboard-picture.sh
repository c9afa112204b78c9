#!/usr/bin/env bash
# dashboard-picture.sh - the README's picture of the dashboard, rendered from a real run.
#
#   scripts/dashboard-picture.sh                       -> docs/img/dashboard.png
#   scripts/dashboard-picture.sh --tps 2000 --base-port 8390 --out /tmp/dashboard.png
#
# Starts a headless devnet under load (devnet.sh --no-monitor, in a temporary folder), waits
# until the generator has sent for 20 s, renders the dashboard once after six polls (the
# headline's 10 s window: `qmemo monitor --once --rounds 6 --svg`, rich's own SVG export at
# a fixed width), screenshots the SVG with headless Chromium into a PNG, and stops the
# devnet (SIGINT to devnet.sh, which stops every process it started by PID).
#
# Needs Chromium (Debian: apt-get install chromium); the test suite does not, so the
# setup does not install it. The dashboard sets the nodes against this machine's C
# baseline in results/ (./devnet.sh or `qmemo bench c` measures one).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TPS=1500
BASE_PORT=8390
OUT="$ROOT/docs/img/dashboard.png"
WIDTH=150
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --tps) TPS=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --width) WIDTH=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "dashboard-picture.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "dashboard-picture.sh: needs Chromium: apt-get install chromium" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"

WORK=$(mktemp -d /tmp/qmemo-dashboard.XXXXXX)
DEVNET_PID=""
finish() {
  if [ -n "$DEVNET_PID" ] && kill -0 "$DEVNET_PID" 2>/dev/null; then
    kill -INT "$DEVNET_PID" 2>/dev/null || true
    wait "$DEVNET_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap finish EXIT

"$ROOT/devnet.sh" --no-monitor --no-baseline --base-port "$BASE_PORT" --tps "$TPS" --duration 90 \
  --block-txs 20000 --dir "$WORK/devnet" --runs "$WORK/runs" >"$WORK/devnet.log" 2>&1 &
DEVNET_PID=$!
echo "dashboard-picture.sh: devnet at $TPS TPS on ports $BASE_PORT-$((BASE_PORT + 2)) (log: $WORK/devnet.log)"

# Wait (up to 5 minutes: a new devnet makes 1,200 keys and signs its workload first) until
# the generator has sent for 20 s.
LIVE=""
for _ in $(seq 600); do
  kill -0 "$DEVNET_PID" 2>/dev/null || { echo "dashboard-picture.sh: devnet.sh ended early:" >&2; tail -20 "$WORK/devnet.log" >&2; exit 1; }
  LIVE=$(ls -d "$WORK"/runs/*/gen/live.json 2>/dev/null | head -1 || true)
  if [ -n "$LIVE" ] && "$ROOT/.venv/bin/python" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d.get("running") and d.get("elapsed_s", 0) >= 20 else 1)' "$LIVE" 2>/dev/null; then
    break
  fi
  sleep 0.5
done
[ -n "$LIVE" ] || { echo "dashboard-picture.sh: the generator never started" >&2; exit 1; }

URLS="http://127.0.0.1:$BASE_PORT,http://127.0.0.1:$((BASE_PORT + 1)),http://127.0.0.1:$((BASE_PORT + 2))"
"$ROOT/.venv/bin/qmemo" monitor --nodes "$URLS" --generator-status "$LIVE" --target-tps "$TPS" \
  --once --rounds 6 --width "$WIDTH" --svg "$WORK/dashboard.svg" >/dev/null

# The SVG's own size (rich writes width and height in its viewBox) is the window's.
read -r W H < <("$ROOT/.venv/bin/python" -c '
import re, sys
box = re.search(r"viewBox=\"0 0 ([\d.]+) ([\d.]+)\"", open(sys.argv[1]).read())
print(int(float(box[1])) + 1, int(float(box[2])) + 1)' "$WORK/dashboard.svg")
"$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$W,$H" \
  --screenshot="$OUT" "file://$WORK/dashboard.svg" >"$WORK/chromium.log" 2>&1 ||
  { echo "dashboard-picture.sh: Chromium failed:" >&2; tail -5 "$WORK/chromium.log" >&2; exit 1; }
echo "dashboard-picture.sh: $OUT (${W}x${H}, from a run at $TPS TPS, $(date -u +%Y-%m-%d) UTC, load average $(cut -d' ' -f1 /proc/loadavg))"
