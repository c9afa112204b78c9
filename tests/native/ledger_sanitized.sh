#!/usr/bin/env bash
# ledger_sanitized.sh - the node's ledger (qmemo/node/native) built with AddressSanitizer and
# UBSan, and the differential tests (the ledger against qmemo.core, random histories and
# every block mutation, every receipt rule on a shard's ledger) run against that build. Usage:
#
#   tests/native/ledger_sanitized.sh [SEEDS]     # SEEDS extra random histories (default 0)
#
# Exit 0 when every test passes with no sanitizer report. The suite runs it with no extra
# seeds (tests/integration/test_ledger_sanitized.py); `... 400` is the longer documented run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="$ROOT/.venv/bin/python"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
include=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
cc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
  -Wall -Wextra -Werror -fPIC -shared -pthread -I"$include" -I"$ROOT/qmemo/crypto/native" \
  -I"$ROOT/qmemo/node/native" "$ROOT"/qmemo/node/native/ledger_*.c -L"$ROOT/.deps/native" -lqmemo_admit \
  -Wl,-rpath,"$ROOT/.deps/native" -o "$OUT/_qmemo_ledger$suffix"
export QMEMO_LEDGER_EXTENSION="$OUT/_qmemo_ledger$suffix"
export LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
# Python's own allocations are not ours to judge: leaks off; every sanitizer report fails the run.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$ROOT"
"$PY" -m pytest -q -p no:cacheprovider tests/unit/test_ledger_admission.py tests/unit/test_apply_block.py \
  tests/unit/test_receipts.py tests/unit/test_receipt_room.py
if [ "${1:-0}" -gt 0 ]; then
  "$PY" - "$1" <<'PYEOF'
import sys
from tests.unit.test_ledger_admission import test_random_histories_agree
for seed in range(1000, 1000 + int(sys.argv[1])):
    test_random_histories_agree(seed)
print(f"{sys.argv[1]} more random histories agree under the sanitizers")
PYEOF
fi
