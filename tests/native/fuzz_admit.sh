#!/usr/bin/env bash
# fuzz_admit.sh - build and run the admission kernel's libFuzzer target (tests/native/fuzz_admit.c).
#
#   tests/native/fuzz_admit.sh [SECONDS] [WORKDIR]     # default: 60 s in .deps/fuzz-admit
#   tests/native/fuzz_admit.sh 36000                   # a long run (10 h); the corpus is kept in WORKDIR
#
# Needs clang with libFuzzer (Debian's `clang` package) and the setup's BLAKE3 C sources
# (.deps/blake3, from scripts/setup.sh). BLAKE3 is built portable-only here: its SIMD
# assembly is not instrumented, the portable C is, and the digests are the same.
# The seed corpus is every body in tests/vectors/admit_kernel.json. A crash leaves its
# input as WORKDIR/crash-* and the script exits non-zero; reproduce with
# WORKDIR/fuzz_admit WORKDIR/crash-<hash>.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_TO_RUN="${1:-60}"
WORK="${2:-$ROOT/.deps/fuzz-admit}"
BLAKE3="$ROOT/.deps/blake3"
PYTHON="${QMEMO_PYTHON:-$ROOT/.venv/bin/python}"
CC="${CLANG:-clang}"

command -v "$CC" >/dev/null || { echo "fuzz_admit: $CC not found (apt-get install clang)" >&2; exit 2; }
[ -f "$BLAKE3/blake3.h" ] || { echo "fuzz_admit: no BLAKE3 sources at $BLAKE3; run scripts/setup.sh" >&2; exit 2; }
mkdir -p "$WORK/corpus" "$WORK/seeds"
WORK="$(cd "$WORK" && pwd)"   # absolute: the fuzzer runs from inside it

"$CC" -g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -DBLAKE3_NO_SSE2 -DBLAKE3_NO_SSE41 -DBLAKE3_NO_AVX2 -DBLAKE3_NO_AVX512 -DBLAKE3_USE_NEON=0 \
  -I"$ROOT/qmemo/crypto/native" -I"$BLAKE3" \
  "$ROOT/tests/native/fuzz_admit.c" "$ROOT/qmemo/crypto/native/qmemo_admit.c" \
  "$BLAKE3/blake3.c" "$BLAKE3/blake3_dispatch.c" "$BLAKE3/blake3_portable.c" \
  -pthread -o "$WORK/fuzz_admit"

# Seeds: [max_count][flags: verify, chain id 1][body] for every vector body.
"$PYTHON" - "$ROOT/tests/vectors/admit_kernel.json" "$WORK/seeds" <<'EOF'
import json, sys
from pathlib import Path
vectors = json.loads(Path(sys.argv[1]).read_text())
for i, batch in enumerate(vectors["batches"]):
    header = bytes((min(batch["max_count"], 255), 1 | (vectors["chain_id"] << 1)))
    Path(sys.argv[2], f"vector-{i:02d}").write_bytes(header + bytes.fromhex(batch["body"]))
EOF

cd "$WORK"
exec ./fuzz_admit -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$WORK/" corpus seeds
