#!/usr/bin/env bash
# ninja-progress.sh LABEL - follow a build's output on stdin as one terminal line.
#
# The setup's long steps (the liboqs build: 30-80 s on 2 cores; the fast Falcon verifier's
# build, pip's install of the venv: a minute or two each on a fresh clone) would leave a
# silent terminal that looks hung. This filter rewrites one line in place on stdout and
# copies every input line, unchanged, to fd 3 (the step's log):
#
#   ninja's "[n/N] ..." lines      ->  "setup:   liboqs-build [123/456]  27%  34 s"
#   any other line (make, pip)      ->  "setup:   venv  41 s  Collecting numpy>=1.26"
#
# It prints nothing else; the caller clears the line afterwards (printf '\r\033[K').
#
#   cmd 2>&1 | scripts/lib/ninja-progress.sh liboqs 3>>"$log"
set -uo pipefail
label="$1"
started=$SECONDS
WIDTH=60   # of the echoed line: the whole status fits 80 columns
while IFS= read -r line; do
  printf '%s\n' "$line" >&3
  if [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\] ]] && [ "${BASH_REMATCH[2]}" -gt 0 ]; then
    done_edges=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
    printf '\r\033[Ksetup:   %s [%d/%d] %3d%%  %d s ' "$label" "$done_edges" "$total" \
      $((100 * done_edges / total)) $((SECONDS - started))
  elif [[ "$line" =~ [^[:space:]] ]]; then
    line="${line#"${line%%[![:space:]]*}"}"   # leading blanks off
    printf '\r\033[Ksetup:   %s  %d s  %s' "$label" $((SECONDS - started)) "${line:0:WIDTH}"
  fi
done
