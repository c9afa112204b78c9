#!/usr/bin/env bash
# devnet.sh - the main command: a local qMEMO devnet, load at a target rate, the live dashboard.
#
#   ./devnet.sh                      3 nodes on 8000-8002, 1,000 TPS for 60 s, dashboard
#   ./devnet.sh --tps 3000 --duration 120
#   ./devnet.sh --no-load            nodes and dashboard only, until Ctrl-C
#   ./devnet.sh --no-monitor --duration 10 --tps 50     headless (scripts, CI)
#   ./devnet.sh --shards 4 --cross-shard 20              4 shards x 3 nodes, 20% of transfers cross-shard
#   ./devnet.sh --scenario memo-conservative             MEMO's conservative scenario (--list-scenarios)
#
# Every process it starts is stopped by PID on Ctrl-C or at the end of the run. Each run
# has a folder, runs/<time>/, with every process's log and the generator's results.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The chain's and the devnet's defaults are qmemo/core/defaults.py's (DEFAULT_NODES, ...):
# standard-library Python, so they are read before setup.sh has made the environment.
PYTHON=${QMEMO_PYTHON:-python3}
DEFAULTS=$("$PYTHON" "$ROOT/qmemo/core/defaults.py") ||
  { echo "devnet.sh: reading qmemo/core/defaults.py needs python3 (3.11 or later)" >&2; exit 1; }
eval "$DEFAULTS"
NODES=$DEFAULT_NODES
SHARDS=1
CROSS_SHARD=""
BASE_PORT=8000
TPS=1000
DURATION=60
DURATION_SET=0
SCHEME=$DEFAULT_SCHEME
ACCOUNTS=$DEFAULT_ACCOUNTS
BLOCK_TXS=$DEFAULT_BLOCK_TXS
BLOCK_MS=$DEFAULT_BLOCK_MS
BATCH=""
LOAD=1
MONITOR=1
RESET=0
LOG_FORMAT=text
BASELINE=1
SWEEP=""
STAGE=20
GENERATORS=""      # qmemo gen's default: 1 on one chain, one per shard with --shards
VERIFIER=fast
EVENT_LOOP=uvloop
DEVNET_DIR="$ROOT/devnet"
RUNS_DIR="$ROOT/runs"
RESULTS_DIR="$ROOT/results"
SCENARIO=""
DRY_RUN=0
CROSS_SHARD_GIVEN=0

# --scenario NAME: a named run's settings, written once in qmemo/core/defaults.py
# (DEVNET_SCENARIOS). They are set before the flags are read, so a flag given beside the
# name, before or after it, replaces that one setting.
for ((a = 1; a < $#; a++)); do
  if [ "${!a}" = --scenario ]; then b=$((a + 1)); SCENARIO=${!b}; fi
done
if [ -n "$SCENARIO" ]; then
  PRESET=$("$PYTHON" "$ROOT/qmemo/core/defaults.py" --scenario "$SCENARIO" 2>&1) ||
    { echo "devnet.sh: $PRESET" >&2; exit 2; }
  eval "$PRESET"
fi

usage() {
  cat <<EOF
Usage: ./devnet.sh [options]

Starts a local qMEMO devnet (N nodes on 127.0.0.1), fires signed transactions at a
target rate, and shows the live dashboard. Ctrl-C stops everything it started.

  --scenario NAME    a named run: its shards, validators, cross-shard share, TPS and duration,
                     each replaced by its own flag given beside it (--scenario
                     memo-conservative --duration 20). Named: $("$PYTHON" "$ROOT/qmemo/core/defaults.py" --list-scenarios | sed 's/:.*//' | paste -sd ' ')
  --list-scenarios   the scenarios and their settings, one a line
  --dry-run          print the settings this command line comes to (a scenario's with the
                     flags over it) and exit, starting nothing
  --nodes N          number of nodes/validators (per shard; default $NODES)
  --shards S         shards (default $SHARDS: one chain); S > 1 starts S chains of N validators
                     under one sharded genesis, shard k's node i on port P+k*N+i
  --cross-shard PCT  with --shards > 1: percent of transfers to another shard's accounts
                     (default 20); --tps is the total over all shards
  --base-port P      first node's port; node i listens on P+i (default $BASE_PORT)
  --tps T            target transactions per second (default $TPS)
  --duration S       seconds of load (default $DURATION; with --no-load: run until Ctrl-C)
  --scheme NAME      transaction signature scheme (default $SCHEME; see 'qmemo schemes')
  --accounts N       funded accounts in a new devnet (default $ACCOUNTS)
  --block-ms MS      block interval of a new devnet, ms (default $BLOCK_MS, MEMO's)
  --block-txs N      most transactions per block in a new devnet (default $BLOCK_TXS, MEMO's;
                     with 2 s blocks that caps the chain at N/2 TPS)
  --batch N          transactions per request at most (default: qmemo gen's, which sends
                     20 ms of schedule per request: 200 at 10,000 TPS)
  --sweep S:F:M      instead of one rate: a sweep of constant-rate stages S, S*F, ... up to M
                     TPS, every stage, past saturation too (qmemo gen --sweep; --tps/--duration unused)
  --stage S          seconds per sweep stage (default $STAGE)
  --generators N     send from N generator processes (qmemo gen --generators), into one run
                     folder: for when one process falls behind its schedule (generator_fell_behind).
                     One chain: default 1, each with every Nth account and 1/N of the rate.
                     With --shards S: default S, each driving whole shards (shard k in process
                     k mod N, N <= S) with their cross-shard transfers. Each --sweep stage as well
  --no-load          start the nodes (and dashboard) without the generator
  --no-monitor       no dashboard: headless, for scripts and CI
  --reset            throw away the existing devnet (chain data, keys) and make a new one
  --no-baseline      do not measure a C baseline when this machine has none (the first run
                     otherwise measures a quick, verify-only one, 20-25 s, for the dashboard)
  --verifier V       the nodes' Falcon and ML-DSA verifier: fast (default; qMEMO's, cached
                     keys, variable-time; Falcon: liboqs's verdicts, ML-DSA: FIPS 204's) or liboqs
  --event-loop L     the nodes' event loop: uvloop (default; libuv's, in C) or asyncio
                     (the standard library's)
  --log-format F     text (default) or json: the nodes' and the generator's logs (in the
                     run folder's logs/) as one JSON object per line
  --dir DIR          devnet folder (default ./devnet)
  --runs DIR         where run folders go (default ./runs)
  --results DIR      where C baselines are found and the first one is measured (default ./results)
  -h, --help         this help
EOF
}

need_value() { [ $# -ge 2 ] && [ -n "$2" ] || { echo "devnet.sh: $1 needs a value" >&2; exit 2; }; }
# Whole numbers without leading zeros (bash would read 010 as octal).
need_int() { [[ "$2" =~ ^(0|[1-9][0-9]*)$ ]] && [ "$2" -ge "${3:-0}" ] || { echo "devnet.sh: $1 must be a whole number >= ${3:-0}, got '$2'" >&2; exit 2; }; }
# The command as typed, kept in the run folder: the README's results block names it
# beside each figure (qmemo.analysis.readme_results).
COMMAND_LINE="./devnet.sh${*:+ $*}"
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) need_value "$@"; need_int "$1" "$2" 1; NODES=$2; shift 2 ;;
    --shards) need_value "$@"; need_int "$1" "$2" 1; SHARDS=$2; shift 2 ;;
    --cross-shard) need_value "$@"; [[ "$2" =~ ^[0-9]+([.][0-9]+)?$ ]] && awk "BEGIN{exit !($2 <= 100)}" || { echo "devnet.sh: --cross-shard must be a percentage from 0 to 100" >&2; exit 2; }; CROSS_SHARD=$2; CROSS_SHARD_GIVEN=1; shift 2 ;;
    --scenario) need_value "$@"; shift 2 ;;     # read before this loop (above)
    --list-scenarios) "$PYTHON" "$ROOT/qmemo/core/defaults.py" --list-scenarios; exit 0 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --base-port) need_value "$@"; need_int "$1" "$2" 1024; BASE_PORT=$2; shift 2 ;;
    --tps) need_value "$@"; [[ "$2" =~ ^[0-9]+([.][0-9]+)?$ ]] && [[ ! "$2" =~ ^0+([.]0+)?$ ]] || { echo "devnet.sh: --tps must be a positive number" >&2; exit 2; }; TPS=$2; shift 2 ;;
    --duration) need_value "$@"; need_int "$1" "$2" 1; DURATION=$2; DURATION_SET=1; shift 2 ;;
    --scheme) need_value "$@"; SCHEME=$2; shift 2 ;;
    --accounts) need_value "$@"; need_int "$1" "$2" 1; ACCOUNTS=$2; shift 2 ;;
    --block-ms) need_value "$@"; need_int "$1" "$2" 100; BLOCK_MS=$2; shift 2 ;;
    --block-txs) need_value "$@"; need_int "$1" "$2" 1; BLOCK_TXS=$2; shift 2 ;;
    --batch) need_value "$@"; need_int "$1" "$2" 1; BATCH=$2; shift 2 ;;
    --sweep) need_value "$@"; [[ "$2" =~ ^[0-9]+([.][0-9]+)?:[0-9]+([.][0-9]+)?:[0-9]+([.][0-9]+)?$ ]] || { echo "devnet.sh: --sweep takes START:FACTOR:MAX, e.g. 1000:1.5:4000" >&2; exit 2; }; SWEEP=$2; shift 2 ;;
    --stage) need_value "$@"; need_int "$1" "$2" 1; STAGE=$2; shift 2 ;;
    --generators) need_value "$@"; need_int "$1" "$2" 1; GENERATORS=$2; shift 2 ;;
    --no-load) LOAD=0; shift ;;
    --no-monitor) MONITOR=0; shift ;;
    --reset) RESET=1; shift ;;
    --no-baseline) BASELINE=0; shift ;;
    --verifier) need_value "$@"; [[ "$2" =~ ^(fast|liboqs)$ ]] || { echo "devnet.sh: --verifier must be fast or liboqs" >&2; exit 2; }; VERIFIER=$2; shift 2 ;;
    --event-loop) need_value "$@"; [[ "$2" =~ ^(uvloop|asyncio)$ ]] || { echo "devnet.sh: --event-loop must be uvloop or asyncio" >&2; exit 2; }; EVENT_LOOP=$2; shift 2 ;;
    --log-format) need_value "$@"; [[ "$2" =~ ^(text|json)$ ]] || { echo "devnet.sh: --log-format must be text or json" >&2; exit 2; }; LOG_FORMAT=$2; shift 2 ;;
    --dir) need_value "$@"; DEVNET_DIR=$(realpath -m "$2"); shift 2 ;;
    --runs) need_value "$@"; RUNS_DIR=$(realpath -m "$2"); shift 2 ;;
    --results) need_value "$@"; RESULTS_DIR=$(realpath -m "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "devnet.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$GENERATORS" ] && [ "$GENERATORS" -gt "$SHARDS" ] && [ "$SHARDS" != 1 ]; then
  echo "devnet.sh: --generators $GENERATORS on $SHARDS shards: each process drives whole shards (1 to $SHARDS)" >&2; exit 2
fi
if [ "$SHARDS" = 1 ] && [ "$CROSS_SHARD_GIVEN" = 1 ]; then
  echo "devnet.sh: --cross-shard needs --shards 2 or more" >&2; exit 2
fi
# A scenario's cross-shard share means nothing on one chain (--scenario ... --shards 1).
[ "$SHARDS" = 1 ] && CROSS_SHARD=""
[ "$SHARDS" -gt 1 ] && [ -z "$CROSS_SHARD" ] && CROSS_SHARD=20
TOTAL=$((SHARDS * NODES))     # every node of every shard
[ $((BASE_PORT + TOTAL - 1)) -le 65535 ] || { echo "devnet.sh: ports $BASE_PORT.. do not fit $TOTAL nodes" >&2; exit 2; }
SETTINGS="shards=$SHARDS nodes=$NODES cross_shard=${CROSS_SHARD:-0}"
if [ -n "$SWEEP" ]; then SETTINGS+=" sweep=$SWEEP stage=$STAGE"; else SETTINGS+=" tps=$TPS duration=$DURATION"; fi
SETTINGS+=" block_ms=$BLOCK_MS block_txs=$BLOCK_TXS accounts=$ACCOUNTS load=$LOAD${GENERATORS:+ generators=$GENERATORS}"
if [ "$DRY_RUN" = 1 ]; then
  echo "devnet.sh: ${SCENARIO:+scenario $SCENARIO, flags over it: }$SETTINGS"
  exit 0
fi
[ -n "$SCENARIO" ] && echo "devnet.sh: scenario $SCENARIO, flags over it: $SETTINGS"

# Refuse ports something already listens on: our nodes would fail to bind, and the
# health check and the load would reach someone else's chain.
for ((i = 0; i < TOTAL; i++)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$((BASE_PORT + i))") 2>/dev/null; then
    echo "devnet.sh: port $((BASE_PORT + i)) is already in use (another devnet?); choose --base-port" >&2
    exit 1
  fi
done

bash "$ROOT/scripts/setup.sh"
QMEMO="$ROOT/.venv/bin/qmemo"

# --- the C baseline the dashboard sets the nodes against ----------------------------------
# The first run on a machine (or after liboqs is rebuilt) has none: measure a quick,
# verify-only one so the first screen already says "% of C". Later runs find it (or a
# full `qmemo bench c` run) in results/ and skip this in milliseconds.
if [ "$BASELINE" = 1 ] && [ "$MONITOR" = 1 ]; then
  "$QMEMO" bench c --verify-only --if-missing "$SCHEME" --brief --results "$RESULTS_DIR" ||
    echo "devnet.sh: the C baseline could not be measured (see above); the dashboard runs without it" >&2
fi

# --- the devnet: genesis, validator keys, funded accounts --------------------------------
PARAMS="nodes=$NODES scheme=$SCHEME accounts=$ACCOUNTS block_txs=$BLOCK_TXS"
# Named only when not the default: a devnet made before the option still matches its params.
[ "$BLOCK_MS" != "$DEFAULT_BLOCK_MS" ] && PARAMS+=" block_ms=$BLOCK_MS"
[ "$SHARDS" -gt 1 ] && PARAMS+=" shards=$SHARDS"
if [ "$RESET" = 1 ] || [ ! -f "$DEVNET_DIR/genesis.json" ] || [ "$(cat "$DEVNET_DIR/params" 2>/dev/null)" != "$PARAMS" ]; then
  if [ -d "$DEVNET_DIR" ] && [ -n "$(ls -A "$DEVNET_DIR")" ]; then
    # Only ever delete a folder this script made: it holds `params` or a genesis.
    if [ ! -f "$DEVNET_DIR/params" ] && [ ! -f "$DEVNET_DIR/genesis.json" ]; then
      echo "devnet.sh: $DEVNET_DIR is not empty and is not a devnet; refusing to replace it (choose --dir)" >&2
      exit 1
    fi
    echo "devnet.sh: making a new devnet in $DEVNET_DIR ($PARAMS; the old chain is discarded)"
  fi
  rm -rf "$DEVNET_DIR"
  # qmemo genesis shows a live key count (1,200 Falcon-512 accounts: ~6 s on 2 idle cores,
  # 51 s on busy ones; Ed25519 and ECDSA keys take well under a second).
  echo "devnet.sh: generating $TOTAL validator and $ACCOUNTS account keys ($SCHEME) for a new devnet in $DEVNET_DIR"
  "$QMEMO" genesis --out "$DEVNET_DIR" --validators "$NODES" --accounts "$ACCOUNTS" --scheme "$SCHEME" \
    --max-block-transactions "$BLOCK_TXS" --block-interval-ms "$BLOCK_MS" --shards "$SHARDS" \
    --max-clock-drift-ms $((BLOCK_MS / 2 < DEFAULT_MAX_CLOCK_DRIFT_MS ? BLOCK_MS / 2 : DEFAULT_MAX_CLOCK_DRIFT_MS))    # under the producer timeout (= the interval)
  echo "$PARAMS" >"$DEVNET_DIR/params"
else
  echo "devnet.sh: reusing the devnet in $DEVNET_DIR ($PARAMS; --reset for a new one)"
fi

RUN="$RUNS_DIR/$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$RUN/logs"
echo "$COMMAND_LINE" >"$RUN/command"
URLS=()        # shard by shard: shard k's node i is URLS[k*NODES + i]
NAMES=()       # node-<i>, or shard-<k>-node-<i>
for ((n = 0; n < TOTAL; n++)); do
  URLS+=("http://127.0.0.1:$((BASE_PORT + n))")
  if [ "$SHARDS" = 1 ]; then NAMES+=("node-$n"); else NAMES+=("shard-$((n / NODES))-node-$((n % NODES))"); fi
done
URLS_CSV=$(IFS=,; echo "${URLS[*]}")

# --- process bookkeeping: everything started is stopped, by PID ---------------------------
NODE_PIDS=()
GEN_PID=""
MON_PID=""
SLEEP_PID=""

# stop_pids PID NAME [PID NAME ...]: SIGTERM to each, then wait for them together up to 15 s,
# then SIGKILL each still running (and say so). Together, because a node's stop is mostly
# waiting, not CPU (a sharded node's requests in flight include its peers' receipt long
# polls, held for seconds): the waits overlap instead of adding up.
stop_pids() {
  local pids=() names=() i
  while [ $# -ge 2 ]; do
    if kill -0 "$1" 2>/dev/null && kill -TERM "$1" 2>/dev/null; then pids+=("$1"); names+=("$2"); fi
    shift 2
  done
  for _ in $(seq 150); do
    running "${pids[@]}" || break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "devnet.sh: ${names[$i]} (pid ${pids[$i]}) did not stop in 15 s; killing it" >&2
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" 2>/dev/null || true; done
}

# running PID...: whether any of them is still running.
running() {
  local pid
  for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done
  return 1
}

cleanup() {
  local status=$?
  set +e                      # stop everything, whatever fails on the way
  trap - EXIT INT TERM ERR
  [ -n "$SLEEP_PID" ] && kill "$SLEEP_PID" 2>/dev/null
  [ -n "$MON_PID" ] && stop_pids "$MON_PID" monitor
  if [ -n "$GEN_PID" ]; then
    # A terminal Ctrl-C reached the generator too and it is draining: give it a moment
    # before our SIGTERM, which it would take as a second interrupt (stop waiting at once).
    for _ in $(seq 30); do kill -0 "$GEN_PID" 2>/dev/null || break; sleep 0.1; done
    stop_pids "$GEN_PID" generator
  fi
  local nodes=()
  for i in "${!NODE_PIDS[@]}"; do nodes+=("${NODE_PIDS[$i]}" "${NAMES[$i]}"); done
  stop_pids "${nodes[@]}"
  if [ -s "$RUN/logs/gen.log" ]; then
    echo
    cat "$RUN/logs/gen.log"
  fi
  echo "devnet.sh: stopped everything; run folder: $RUN"
  if [ -f "$RUN/gen/summary.json" ] || [ -f "$RUN/gen/sweep.json" ]; then
    # The report goes to a folder named after this run, so it never replaces another run's.
    echo "devnet.sh: its report (into docs/results/$(basename "$RUN")/): $QMEMO report --devnet $RUN"
  fi
  exit "$status"
}
trap cleanup EXIT
# The shell's convention, 128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'echo "devnet.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

# --- nodes --------------------------------------------------------------------------------
for ((n = 0; n < TOTAL; n++)); do
  k=$((n / NODES)); i=$((n % NODES))
  peers=""; shard_peers=""      # the nodes of its shard; of every other shard (receipts)
  for ((m = 0; m < TOTAL; m++)); do
    if [ $((m / NODES)) = "$k" ]; then [ "$m" != "$n" ] && peers+="${URLS[$m]},"; else shard_peers+="${URLS[$m]},"; fi
  done
  if [ "$SHARDS" = 1 ]; then key="$DEVNET_DIR/validator-$i.keys.json"; else key="$DEVNET_DIR/shard-$k-validator-$i.keys.json"; fi
  "$QMEMO" node --genesis "$DEVNET_DIR/genesis.json" --key "$key" \
    --port $((BASE_PORT + n)) --peers "${peers%,}" --data "$DEVNET_DIR/data/${NAMES[$n]}" --log-format "$LOG_FORMAT" \
    --verifier "$VERIFIER" --event-loop "$EVENT_LOOP" ${shard_peers:+--shard-peers "${shard_peers%,}"} \
    >"$RUN/logs/${NAMES[$n]}.log" 2>&1 &
  NODE_PIDS+=($!)
done
if [ "$SHARDS" = 1 ]; then
  echo "devnet.sh: started $NODES nodes on ports $BASE_PORT-$((BASE_PORT + TOTAL - 1)); waiting until they are healthy"
else
  echo "devnet.sh: started $SHARDS shards of $NODES nodes on ports $BASE_PORT-$((BASE_PORT + TOTAL - 1)) (shard k's node i on $BASE_PORT+k*$NODES+i); waiting until they are healthy"
fi
if ! "$QMEMO" health "${URLS[@]}" --wait $((60 + 5 * TOTAL)) >"$RUN/logs/health.log"; then
  cat "$RUN/logs/health.log" >&2
  for ((i = 0; i < TOTAL; i++)); do
    if ! grep -q "${URLS[$i]}: ready" "$RUN/logs/health.log"; then
      echo "--- ${NAMES[$i]} did not become healthy; the end of its log ($RUN/logs/${NAMES[$i]}.log):" >&2
      tail -n 30 "$RUN/logs/${NAMES[$i]}.log" >&2
    fi
  done
  exit 1
fi
for i in "${!NODE_PIDS[@]}"; do
  kill -0 "${NODE_PIDS[$i]}" 2>/dev/null || { echo "devnet.sh: ${NAMES[$i]} exited; its log:" >&2; tail -n 30 "$RUN/logs/${NAMES[$i]}.log" >&2; exit 1; }
done

# --- load ---------------------------------------------------------------------------------
GEN_ARGS=(--devnet "$DEVNET_DIR" --nodes "$URLS_CSV" --out "$RUN/gen" --live "$RUN/gen/live.json")
if [ -n "$BATCH" ]; then GEN_ARGS+=(--batch "$BATCH"); fi
if [ -n "$CROSS_SHARD" ]; then GEN_ARGS+=(--cross-shard "$CROSS_SHARD"); fi
if [ -n "$GENERATORS" ]; then GEN_ARGS+=(--generators "$GENERATORS"); fi
if [ -n "$SWEEP" ]; then
  GEN_ARGS+=(--sweep "$SWEEP" --stage "$STAGE")
else
  GEN_ARGS+=(--tps "$TPS" --duration "$DURATION")
fi
if [ "$LOAD" = 1 ]; then
  if [ -z "$SWEEP" ]; then
    # Sign the workload first, in the foreground with a progress bar (cached for next time),
    # so the run itself starts at once and the dashboard has the terminal to itself.
    # (A sweep signs each stage's workload before that stage, between measurements.)
    "$QMEMO" gen "${GEN_ARGS[@]}" --prepare-only
  fi
  "$QMEMO" gen "${GEN_ARGS[@]}" --quiet --log-format "$LOG_FORMAT" >"$RUN/logs/gen.log" 2>&1 &
  GEN_PID=$!
  if [ -n "$SWEEP" ]; then
    echo "devnet.sh: generator started: sweep $SWEEP, $STAGE s per stage (its log: $RUN/logs/gen.log)"
  else
    echo "devnet.sh: generator started: $TPS TPS for $DURATION s${CROSS_SHARD:+ over $SHARDS shards, $CROSS_SHARD% cross-shard}"
  fi
fi

# --- dashboard ----------------------------------------------------------------------------
if [ "$MONITOR" = 1 ]; then
  MON_ARGS=(--nodes "$URLS_CSV" --scheme "$SCHEME" --record "$RUN/monitor.jsonl" --results "$RESULTS_DIR")
  [ "$LOAD" = 1 ] && MON_ARGS+=(--generator-status "$RUN/gen/live.json")
  [ "$LOAD" = 1 ] && [ -z "$SWEEP" ] && MON_ARGS+=(--target-tps "$TPS")
  "$QMEMO" monitor "${MON_ARGS[@]}" &
  MON_PID=$!
fi

# --- until the end of the run (or Ctrl-C) -------------------------------------------------
if [ -n "$GEN_PID" ]; then
  GEN_STATUS=0
  wait "$GEN_PID" || GEN_STATUS=$?
  GEN_PID=""
  if [ "$GEN_STATUS" != 0 ]; then
    echo "devnet.sh: the generator exited with status $GEN_STATUS (its log: $RUN/logs/gen.log)" >&2
    exit "$GEN_STATUS"
  fi
elif [ "$DURATION_SET" = 1 ]; then
  # In the background and waited for: bash runs its traps (Ctrl-C, SIGTERM) during
  # `wait`, but only after a foreground `sleep` ends.
  sleep "$DURATION" &
  SLEEP_PID=$!
  wait "$SLEEP_PID"
elif [ -n "$MON_PID" ]; then
  wait "$MON_PID" || true
  MON_PID=""
else
  echo "devnet.sh: nodes running; Ctrl-C stops them"
  sleep infinity &
  SLEEP_PID=$!
  wait "$SLEEP_PID"
fi
