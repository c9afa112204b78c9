#!/usr/bin/env bash
# kill-all.sh - SIGKILL every node of a loopback devnet under load, start them again, and
# show what the generator could account for: what a user's own kill -9 script does.
#
#   scripts/kill-all.sh                                   1,500 TPS for 60 s, kill at 33 s, down 5 s
#   scripts/kill-all.sh --tps 3000 --kill-at 20 --down 10 --base-port 8410 --dir /tmp/kill-all
#
# Nodes on BASE-PORT..+2 (default 8410), a devnet made once in DIR (default a new temporary
# folder; its chain data is wiped at every run); the run folder (logs, gen/) is printed at
# the end. Every process it started is stopped by PID.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QMEMO="$ROOT/.venv/bin/qmemo"
TPS=1500; DURATION=60; KILL_AT=33; DOWN=5; BASE_PORT=8410; DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tps) TPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --kill-at) KILL_AT=$2; shift 2 ;;
    --down) DOWN=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "kill-all.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
DIR=${DIR:-$(mktemp -d /tmp/qmemo-kill-all.XXXXXX)}
RUN="$DIR/run-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN/logs"
[ -f "$DIR/genesis.json" ] || "$QMEMO" genesis --out "$DIR" --validators 3 --accounts 1200 >/dev/null
rm -rf "$DIR/data"
URLS=("http://127.0.0.1:$BASE_PORT" "http://127.0.0.1:$((BASE_PORT + 1))" "http://127.0.0.1:$((BASE_PORT + 2))")
NODES=$(IFS=,; echo "${URLS[*]}")
PIDS=(); GEN=""
start_node() {
  local i=$1 peers=""
  for j in 0 1 2; do [ "$j" != "$i" ] && peers+="${URLS[$j]},"; done
  "$QMEMO" node --genesis "$DIR/genesis.json" --key "$DIR/validator-$i.keys.json" --port $((BASE_PORT + i)) \
    --peers "${peers%,}" --data "$DIR/data/node-$i" >>"$RUN/logs/node-$i.log" 2>&1 &
  PIDS[$i]=$!
}
cleanup() {
  for pid in "${PIDS[@]}" $GEN; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
for i in 0 1 2; do start_node "$i"; done
"$QMEMO" health "${URLS[@]}" --wait 60 >/dev/null
GEN_ARGS=(--devnet "$DIR" --nodes "$NODES" --tps "$TPS" --duration "$DURATION")
"$QMEMO" gen "${GEN_ARGS[@]}" --prepare-only >/dev/null
"$QMEMO" gen "${GEN_ARGS[@]}" --out "$RUN/gen" --live "$RUN/gen/live.json" --quiet >"$RUN/logs/gen.log" 2>&1 &
GEN=$!
until [ -f "$RUN/gen/live.json" ] && grep -q '"sent"' "$RUN/gen/live.json"; do sleep 0.1; done
sleep "$KILL_AT"
echo "kill-all.sh: kill -9 of all three nodes at $(date +%T)"
for i in 0 1 2; do kill -9 "${PIDS[$i]}"; wait "${PIDS[$i]}" 2>/dev/null || true; done
sleep "$DOWN"
echo "kill-all.sh: starting them again at $(date +%T)"
for i in 0 1 2; do start_node "$i"; done
wait "$GEN" || true
GEN=""
cat "$RUN/logs/gen.log"
echo "kill-all.sh: nodes answering 500 internal: $(cat "$RUN"/logs/node-*.log | grep -c 'internal error' || true); run folder: $RUN"
