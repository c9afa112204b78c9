#!/usr/bin/env bash
# ninja-progress.sh LABEL - follow a build's output on stdin as one terminal line.
#
# ninja (through `cmake --build`) prints "[n/N] Building C object ..." per edge. The
# liboqs build takes 30-80 s on 2 cores: a silent terminal for that long looks hung. This
# filter rewrites one line in place on stdout - "setup:   liboqs [123/456]  27%  34 s" -
# and copies every input line, unchanged, to fd 3 (the setup's log). It prints nothing
# else; the caller clears the line afterwards (printf '\r\033[K').
#
#   cmd 2>&1 | scripts/lib/ninja-progress.sh liboqs 3>>"$log"
set -uo pipefail
label="$1"
started=$SECONDS
while IFS= read -r line; do
  printf '%s\n' "$line" >&3
  if [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\] ]] && [ "${BASH_REMATCH[2]}" -gt 0 ]; then
    done_edges=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
    printf '\rsetup:   %s [%d/%d] %3d%%  %d s ' "$label" "$done_edges" "$total" \
      $((100 * done_edges / total)) $((SECONDS - started))
  fi
done
