#!/usr/bin/env bash
# ninja-progress.sh LABEL - follow a build's output on stdin as one terminal line.
#
# The setup's long steps (the liboqs build: 1-3 minutes on 2 cores; the fast Falcon verifier's
# build, pip's install of the venv: a minute or two each on a fresh clone) would leave a
# silent terminal that looks hung. This filter rewrites one line in place on stdout and
# copies every input line, unchanged, to fd 3 (the step's log):
#
#   ninja's "[n/N] ..." lines      ->  "setup:   liboqs-build [123/456]  27%  34 s"
#   any other line (make, pip)      ->  "setup:   venv  41 s  Collecting numpy>=1.26"
#
# While no line comes (one long compile, pip resolving), the line is redrawn every
# second with the clock moving on, so a slow step never looks stopped.
# It prints nothing else; the caller clears the line afterwards (printf '\r\033[K').
#
#   cmd 2>&1 | scripts/lib/ninja-progress.sh liboqs 3>>"$log"
set -uo pipefail
label="$1"
started=$SECONDS
WIDTH=60   # of the echoed line: the whole status fits 80 columns
TICK_S=${QMEMO_PROGRESS_TICK_S:-1}   # redraw period (s) while the build is silent; tests set it
status=""  # what the line shows besides the clock: "[n/N] pct%" or "  <line>"

draw() {
  local elapsed=$((SECONDS - started))
  if [[ "$status" == "["* ]]; then
    printf '\r\033[Ksetup:   %s %s  %d s ' "$label" "$status" "$elapsed"
  elif [ -n "$status" ]; then
    printf '\r\033[Ksetup:   %s  %d s  %s' "$label" "$elapsed" "$status"
  else
    printf '\r\033[Ksetup:   %s  %d s ' "$label" "$elapsed"
  fi
}

take() {   # one whole input line: log it, and show it when it says something
  local line="$1"
  printf '%s\n' "$line" >&3
  if [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\] ]] && [ "${BASH_REMATCH[2]}" -gt 0 ]; then
    local done_edges=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
    status=$(printf '[%d/%d] %3d%%' "$done_edges" "$total" $((100 * done_edges / total)))
  elif [[ "$line" =~ [^[:space:]] ]]; then
    line="${line#"${line%%[![:space:]]*}"}"   # leading blanks off
    status="${line:0:WIDTH}"
  else
    return 0
  fi
  draw
}

partial=""   # a line read -t cut off at its timeout: bash keeps what it read in the variable
while :; do
  if IFS= read -r -t "$TICK_S" chunk; then
    take "$partial$chunk"
    partial=""
  else
    code=$?
    if [ "$code" -gt 128 ]; then          # timed out: nothing new, the clock moves on
      partial+="$chunk"
      draw
      continue
    fi
    # end of input; a last line without its newline still counts
    [ -n "$partial$chunk" ] && take "$partial$chunk"
    break
  fi
done
