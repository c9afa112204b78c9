#!/usr/bin/env bash
# setup.sh - make a fresh clone ready to run: system packages, liboqs, the venv.
#
# Called by both README commands (devnet.sh and scripts/test.sh); safe to run any
# number of times. Every step records a stamp of its inputs and is skipped when the
# stamp matches, so a second run builds nothing, installs nothing and takes well
# under five seconds.
#
# Steps, in order:
#   1. apt      Debian packages: compilers, cmake/ninja, OpenSSL, libsodium and
#               libsecp256k1 headers (the admission kernel's classical verifies, the C
#               benchmarks' baselines), the
#               Prometheus server (a test scrapes a live devnet with it), and the
#               container engine's tools (docker.io, docker-compose, debootstrap,
#               iptables, nftables) for the image and the container tests.
#   1b. fetch   the C sources we build, from crates.io's download endpoint (no cargo):
#               liboqs 0.13.0 inside the crate oqs-sys 0.11.0+liboqs-0.13.0 (the only
#               registry that ships liboqs source we can reach) and BLAKE3's C code
#               inside the crate blake3; each pinned by version and sha256, kept in
#               .deps/crates/ and unpacked into .deps/src/ (scripts/lib/fetch_crate.py).
#   2. liboqs   liboqs built from that source with cmake in Release as a shared
#               library, installed in .deps/liboqs, its AVX2 ML-DSA verify made FIPS
#               204's at build time (scripts/liboqs/mldsa_conformance.cmake; docs/setup.md
#               says why). Built and installed aside, then swapped in, so programs using
#               the old one keep working until the swap. Or, with QMEMO_LIBOQS_PREFIX=/path,
#               an existing install is linked there instead and nothing is built.
#   3. native   qmemo/crypto/native/qmemo_batch.c compiled against that liboqs into .deps/native
#               (batch signature verification: one GIL release per chunk, not per verify).
#   3b. admit   the native admission kernel (qmemo/crypto/native/qmemo_admit*.c) with
#               BLAKE3's official C code (the blake3 crate's c/ folder) into
#               .deps/native/libqmemo_admit.so.
#   3c. falcon  the fast Falcon verifier (qmemo/crypto/native/falcon_vt.c) compiled with
#               liboqs 0.13's own PQClean Falcon and SHA3 sources (from the oqs-sys crate,
#               never copied into the repo) into .deps/native/libqmemo_falcon.so, plus
#               its differential harness and instruction counter (falcon_vt.mk).
#   3d. mldsa   the ML-DSA verifier with cached expanded keys (qmemo/crypto/native/mldsa_vt*.c)
#               compiled with liboqs 0.13's own pq-crystals ML-DSA and SHA3 sources (the same
#               oqs-sys crate, never copied into the repo) into .deps/native/libqmemo_mldsa.so,
#               plus its differential harness and instruction counter (mldsa_vt.mk).
#   4. venv     .venv with qmemo installed (editable) plus its dev extra.
#   5. rows     the admission kernel's records-to-transactions extension
#               (qmemo/crypto/native/qmemo_rows.c), a CPython extension built for
#               .venv's interpreter into .deps/native/_qmemo_rows<its ABI suffix>.so.
#
# Cargo is not needed: only `qmemo bench c`'s optional fn-dsa reference builds with it
# (without cargo its rows are null and the run says so).
#
# Arguments: step names (apt fetch liboqs native admit falcon venv rows) run only those
# steps, in the order above; none runs them all. `setup.sh fetch` is how the tests and
# scripts/image.sh get the checked crates without building anything.
#
# Environment:
#   QMEMO_LIBOQS_PREFIX   use this liboqs install (must export OQS_SIG_supports_ctx_str,
#                         see scripts/liboqs/oqs_compat.c) instead of building one.
#   QMEMO_SETUP_PROFILE   `full` (default): everything above. `image`: what the qMEMO
#                         container image needs (the build tools; no test tools, no
#                         container engine), used by the Containerfile.
#   QMEMO_CRATES_URL      another address for crates.io's download endpoint (a mirror);
#                         the pinned sha256 is checked whatever serves the file.
#   QMEMO_SETUP_QUIET=1   print only failures.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
LOGS="$DEPS/logs"
LIBOQS_PREFIX="$DEPS/liboqs"
VENV="$ROOT/.venv"
mkdir -p "$LOGS"

# The source we build: pinned exactly, so a rebuild is the same build.
OQS_CRATE="oqs-sys"
OQS_CRATE_VERSION="0.11.0+liboqs-0.13.0"
# The registry index's cksum for that version: a download with any other sha256 is refused.
OQS_CRATE_SHA256="ac6d66ee528a895ce5cc08851698d109c5d7ee5d7a0b3b40d61550eda91e414f"
OQS_VERSION="0.13.0"
# Signature schemes compiled in (liboqs's OQS_MINIMAL_BUILD names). Everything qMEMO
# measures or offers; KEMs are left out because nothing here uses them.
OQS_ALGS="SIG_falcon_512;SIG_falcon_padded_512;SIG_falcon_1024;SIG_falcon_padded_1024"
OQS_ALGS+=";SIG_ml_dsa_44;SIG_ml_dsa_65;SIG_ml_dsa_87"
OQS_ALGS+=";SIG_sphincs_sha2_128f_simple;SIG_sphincs_sha2_128s_simple"
OQS_ALGS+=";SIG_mayo_1;SIG_mayo_2"
# OQS_DIST_BUILD=ON keeps liboqs's run-time CPU dispatch: the AVX2 Falcon and ML-DSA
# code runs where the CPU has AVX2, the portable code elsewhere, from one binary.
# No -ffast-math anywhere: Falcon's floating-point arithmetic must stay exact IEEE-754.
OQS_CMAKE_FLAGS=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=ON
  -DOQS_DIST_BUILD=ON
  -DOQS_USE_OPENSSL=ON
  -DOQS_BUILD_ONLY_LIB=OFF
  "-DOQS_MINIMAL_BUILD=$OQS_ALGS"
)
PROFILE="${QMEMO_SETUP_PROFILE:-full}"
case "$PROFILE" in full|image) ;; *) echo "setup: ERROR: QMEMO_SETUP_PROFILE=$PROFILE (full or image)" >&2; exit 2 ;; esac
# What building qMEMO needs (the image installs these only).
# libsodium and libsecp256k1: the admission kernel's Ed25519 and ECDSA verifies (and the C
# benchmarks' classical baselines).
APT_PACKAGES=(build-essential cmake ninja-build pkg-config libssl-dev python3-venv python3-dev
              libsodium-dev libsecp256k1-dev)
if [ "$PROFILE" = full ]; then
# git: the devnet records its commit.
APT_PACKAGES+=(git valgrind clang libclang-rt-14-dev)
# valgrind: callgrind instruction counts of the Falcon verifiers; clang and its
# compiler-rt (libFuzzer, sanitizers): the differential fuzz targets (Falcon verifier,
# admission kernel).
# The Prometheus server and promtool: tests/integration/test_prometheus.py runs a real
# server against a live devnet and checks deploy/prometheus.yml and the node's exposition.
APT_PACKAGES+=(prometheus)
# The container engine and its tools (scripts/image.sh, tests/integration/test_containers.py):
# Debian's dockerd (docker.io), docker-compose 1.29, debootstrap for a base image where no
# registry serves one, iptables (the engine's NAT, the scenario runner's forwarding rules),
# nftables (the container tests delete the tables a dockerd they started made).
# Installing docker.io starts no daemon here (no init system runs it); the tests start and stop their own.
APT_PACKAGES+=(docker-compose docker.io debootstrap iptables nftables)
fi

say() { [ "${QMEMO_SETUP_QUIET:-0}" = 1 ] || echo "setup: $*"; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }

# run STEP CMD...: run a command with its output in .deps/logs/STEP.log; on failure
# name the step and the log, and show the log's tail.
run() {
  local step="$1"; shift
  local log="$LOGS/$step.log"
  echo "+ $*" >>"$log"
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: ERROR: step '$step' failed; full log: $log" >&2
    tail -n 25 "$log" >&2
    exit 1
  fi
}

# run_progress STEP CMD...: `run` for a long step. On a terminal, its output becomes one
# line updating in place: ninja's "[n/N]" as a percentage, other tools' newest line
# (scripts/lib/ninja-progress.sh); the log keeps every line. Not on a terminal (a log, CI) or with QMEMO_SETUP_QUIET=1: exactly `run`.
run_progress() {
  local step="$1"; shift
  if [ ! -t 1 ] || [ "${QMEMO_SETUP_QUIET:-0}" = 1 ]; then run "$step" "$@"; return; fi
  local log="$LOGS/$step.log" status
  echo "+ $*" >>"$log"
  set +o pipefail
  "$@" 2>&1 | "$ROOT/scripts/lib/ninja-progress.sh" "$step" 3>>"$log"
  status=${PIPESTATUS[0]}
  set -o pipefail
  printf '\r\033[K'
  if [ "$status" != 0 ]; then
    echo "setup: ERROR: step '$step' failed; full log: $log" >&2
    tail -n 25 "$log" >&2
    exit 1
  fi
}

stamp_of() { sha256sum | cut -c1-16; }

# has_compat_symbol LIB: does LIB export the symbol liboqs-python 0.16 needs?
# (nm's output is captured first: `nm | grep -q` under pipefail fails on SIGPIPE.)
has_compat_symbol() {
  local syms
  syms=$(nm -D "$1" 2>/dev/null) || return 1
  grep -q " T OQS_SIG_supports_ctx_str$" <<<"$syms"
}

# --- 1. apt ---------------------------------------------------------------------
step_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null ||
    die "missing packages (${missing[*]}) and no apt-get (the setup expects Debian 12): install them, then re-run"
  say "installing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "missing Debian packages (${missing[*]}) and not root: install them, then re-run"
    sudo=(sudo)
  fi
  : >"$LOGS/apt.log"
  run apt "${sudo[@]}" apt-get update
  run apt env DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

# --- 2. liboqs ------------------------------------------------------------------
liboqs_stamp() {
  { echo "$OQS_CRATE $OQS_CRATE_VERSION"; echo "$OQS_ALGS"; echo "${OQS_CMAKE_FLAGS[*]}"
    cat "$ROOT/scripts/liboqs/oqs_compat.c" "$ROOT/scripts/liboqs/compat.cmake" \
        "$ROOT/scripts/liboqs/mldsa_conformance.cmake" "$ROOT/scripts/liboqs/rename_symbols.cmake"; } | stamp_of
}

# The ML-DSA conformance patch's name in build-info.json and the reports: the edits are
# mldsa_conformance.cmake's, so its bytes name them.
mldsa_patch_id() { sha256sum "$ROOT/scripts/liboqs/mldsa_conformance.cmake" | cut -c1-12; }

# --- 1b. fetch: the C sources, from crates.io ---------------------------------------
# crate_source NAME VERSION SHA256: print the folder the crate is unpacked in
# (.deps/src/NAME-VERSION), downloading and checking it first if need be.
crate_source() {
  command -v python3 >/dev/null || die "step 'fetch' needs python3 (apt-get install python3)"
  python3 "$ROOT/scripts/lib/fetch_crate.py" "$1" "$2" "$3" "$DEPS" 2>>"$LOGS/fetch.log" ||
    die "step 'fetch': $(tail -n 1 "$LOGS/fetch.log")"
}

# Print the path of liboqs's source inside the oqs-sys crate.
liboqs_source() {
  local src
  src="$(crate_source "$OQS_CRATE" "$OQS_CRATE_VERSION" "$OQS_CRATE_SHA256")/liboqs"
  grep -q "set(OQS_VERSION_MINOR 13)" "$src/CMakeLists.txt" ||
    die "the $OQS_CRATE crate at $src does not hold liboqs $OQS_VERSION"
  echo "$src"
}

blake3_source() {
  local src
  src="$(crate_source blake3 "$BLAKE3_CRATE_VERSION" "$BLAKE3_CRATE_SHA256")/c"
  grep -q "BLAKE3_VERSION_STRING \"$BLAKE3_CRATE_VERSION\"" "$src/blake3.h" ||
    die "the blake3 crate at $src does not hold BLAKE3 $BLAKE3_CRATE_VERSION"
  echo "$src"
}

step_fetch() {
  : >"$LOGS/fetch.log"
  rm -rf "$DEPS/fetch-liboqs" "$DEPS/fetch-blake3"    # cargo manifests of an older setup
  liboqs_source >/dev/null
  blake3_source >/dev/null
}

# liboqs_to_build: will step 2 build liboqs (no QMEMO_LIBOQS_PREFIX, no matching build)?
liboqs_to_build() {
  [ -z "${QMEMO_LIBOQS_PREFIX:-}" ] || return 1
  [ "$(cat "$LIBOQS_PREFIX/.qmemo-stamp" 2>/dev/null)" != "$(liboqs_stamp)" ]
}

step_liboqs() {
  if [ -n "${QMEMO_LIBOQS_PREFIX:-}" ]; then
    local lib
    lib=$(ls "$QMEMO_LIBOQS_PREFIX"/lib*/liboqs.so 2>/dev/null | head -n1) ||
      true
    [ -n "$lib" ] || die "QMEMO_LIBOQS_PREFIX=$QMEMO_LIBOQS_PREFIX has no lib/liboqs.so"
    has_compat_symbol "$lib" ||
      die "$lib lacks OQS_SIG_supports_ctx_str (needed by liboqs-python 0.16); build it with scripts/liboqs/compat.cmake or unset QMEMO_LIBOQS_PREFIX"
    if [ "$(readlink "$LIBOQS_PREFIX" 2>/dev/null)" != "$QMEMO_LIBOQS_PREFIX" ]; then
      rm -rf "$LIBOQS_PREFIX"
      ln -s "$QMEMO_LIBOQS_PREFIX" "$LIBOQS_PREFIX"
      say "using the liboqs at $QMEMO_LIBOQS_PREFIX (nothing built)"
    fi
    return 0
  fi
  liboqs_to_build || return 0
  local want
  want=$(liboqs_stamp)
  [ -L "$LIBOQS_PREFIX" ] && rm -f "$LIBOQS_PREFIX"
  say "building liboqs $OQS_VERSION (first run only; 1-3 minutes on 2 cores; log: $LOGS/liboqs-build.log)"
  # Built in build.next and installed under stage/ (DESTDIR: the files already hold their
  # final paths), then swapped in: .deps/liboqs is whole, old or new, at every moment.
  # The programs get the installed library's path (CMAKE_BUILD_WITH_INSTALL_RPATH), not
  # the build folder's, so nothing run from .deps/liboqs needs a build folder.
  local started=$SECONDS src build="$DEPS/build/liboqs.next" stage="$DEPS/build/liboqs.stage"
  local staged="$DEPS/build/liboqs.stage$LIBOQS_PREFIX"
  : >"$LOGS/liboqs-build.log"
  src=$(liboqs_source)
  rm -rf "$build" "$stage"
  run_progress liboqs-build cmake -S "$src" -B "$build" "${OQS_CMAKE_FLAGS[@]}" \
    "-DCMAKE_PROJECT_liboqs_INCLUDE=$ROOT/scripts/liboqs/compat.cmake" \
    "-DCMAKE_INSTALL_PREFIX=$LIBOQS_PREFIX" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=$LIBOQS_PREFIX/lib"
  # qmemo_mldsa_bench: the conforming and as-shipped ML-DSA archives bench_c compares
  # (an empty target where liboqs has no AVX2 ML-DSA).
  run_progress liboqs-build cmake --build "$build" --parallel "$(nproc)" --target oqs speed_sig kat_sig qmemo_mldsa_bench
  run liboqs-build env DESTDIR="$stage" cmake --install "$build"
  # liboqs's own benchmark and KAT programs: bench_c measures against them.
  run liboqs-build mkdir -p "$staged/bin" "$staged/share/liboqs"
  run liboqs-build cp "$build/tests/speed_sig" "$build/tests/kat_sig" "$staged/bin/"
  run liboqs-build cp "$src/tests/KATs/sig/kats.json" "$staged/share/liboqs/kats.json"
  has_compat_symbol "$(ls "$staged"/lib*/liboqs.so | head -n1)" ||
    die "step 'liboqs-build': the built liboqs.so lacks OQS_SIG_supports_ctx_str; log: $LOGS/liboqs-build.log"
  run liboqs-build python3 - "$staged/share/liboqs/build-info.json" "$src" "$OQS_ALGS" "${OQS_CMAKE_FLAGS[*]}" "$build/CMakeCache.txt" \
    "$(mldsa_patch_id)" <<'EOF'
import json, re, sys, datetime
out, src, algs, flags, cache, patch = sys.argv[1:]
cache_text = open(cache).read()
def cached(key):
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", cache_text, re.M)
    return m.group(1) if m else None
json.dump({
    "liboqs_version": "0.13.0",
    "source": "crates.io oqs-sys 0.11.0+liboqs-0.13.0",
    "source_path": src,
    "algorithms": algs.split(";"),
    "cmake_flags": flags,
    "c_compiler": cached("CMAKE_C_COMPILER"),
    "c_flags_release": cached("CMAKE_C_FLAGS_RELEASE"),
    "dist_build": cached("OQS_DIST_BUILD"),
    "compat": "OQS_SIG_supports_ctx_str from scripts/liboqs/oqs_compat.c",
    # The build's name wherever a figure measured with it is shown.
    "build_name": f"liboqs 0.13.0 + qMEMO ML-DSA conformance patch {patch}",
    "ml_dsa_conformance_patch": {
        "id": patch,
        "source": "scripts/liboqs/mldsa_conformance.cmake",
        "fixes": ["AVX2 verify: ||z||_inf < gamma1 - beta (FIPS 204 Algorithm 8, line 13)",
                  "AVX2 use_hint: r1 + 1 only where r0 > 0 (FIPS 204 Algorithm 40)"],
    },
    "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
}, open(out, "w"), indent=2)
EOF
  echo "$want" >"$staged/.qmemo-stamp"
  # The swap: two renames, then the old install goes. The build folder stays as a record
  # (compile_commands.json) in build/liboqs; nothing runs from it, nothing rebuilds in it.
  rm -rf "$LIBOQS_PREFIX.old"
  if [ -e "$LIBOQS_PREFIX" ]; then mv "$LIBOQS_PREFIX" "$LIBOQS_PREFIX.old"; fi
  mv "$staged" "$LIBOQS_PREFIX"
  rm -rf "$LIBOQS_PREFIX.old" "$stage" "$DEPS/build/liboqs"
  mv "$build" "$DEPS/build/liboqs"
  say "liboqs built and installed in $LIBOQS_PREFIX ($((SECONDS - started)) s)"
}

# --- 3. native helpers ------------------------------------------------------------
NATIVE_DIR="$DEPS/native"

step_native() {
  local lib libdir want
  lib=$(ls "$LIBOQS_PREFIX"/lib*/liboqs.so 2>/dev/null | head -n1) || true
  [ -n "$lib" ] || die "step 'native': no liboqs.so under $LIBOQS_PREFIX (the liboqs step did not finish)"
  libdir=$(dirname "$(readlink -f "$lib")")
  want=$( { cat "$ROOT/qmemo/crypto/native/qmemo_batch.c"; echo "$libdir"; cat "$LIBOQS_PREFIX/.qmemo-stamp" 2>/dev/null; } | stamp_of)
  if [ -f "$NATIVE_DIR/libqmemo_batch.so" ] && [ "$(cat "$NATIVE_DIR/.qmemo-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  say "building the native batch verifier (log: $LOGS/native.log)"
  mkdir -p "$NATIVE_DIR"
  : >"$LOGS/native.log"
  run native cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$LIBOQS_PREFIX/include" \
    "$ROOT/qmemo/crypto/native/qmemo_batch.c" -L"$libdir" -loqs -Wl,-rpath,"$libdir" -o "$NATIVE_DIR/libqmemo_batch.so"
  echo "$want" >"$NATIVE_DIR/.qmemo-stamp"
}

# --- 3b. admit: the admission kernel ----------------------------------------------------
# qmemo/crypto/native/qmemo_admit*.c (one native call per POST /txs batch: framing,
# decoding, BLAKE3-512 digests, verification) with BLAKE3's official C code, which
# ships in the `c/` folder of the crates.io crate `blake3` (step 1b; never committed).
# Built into .deps/native/libqmemo_admit.so; .deps/blake3 links to the C sources (the
# libFuzzer target in tests/native builds from them).
BLAKE3_CRATE_VERSION="1.8.7"
BLAKE3_CRATE_SHA256="6d9e454fc11f76977dc803893aff6304ed33d6a26efae8696573bea74baa27ae"

step_admit() {
  local lib libdir want src build="$NATIVE_DIR/admit-build"
  lib=$(ls "$LIBOQS_PREFIX"/lib*/liboqs.so 2>/dev/null | head -n1) || true
  [ -n "$lib" ] || die "step 'admit': no liboqs.so under $LIBOQS_PREFIX (the liboqs step did not finish)"
  libdir=$(dirname "$(readlink -f "$lib")")
  want=$( { cat "$ROOT"/qmemo/crypto/native/qmemo_admit*; echo "blake3 $BLAKE3_CRATE_VERSION $(uname -m)"
            echo "$libdir"; cat "$LIBOQS_PREFIX/.qmemo-stamp" 2>/dev/null; } | stamp_of)
  if [ -f "$NATIVE_DIR/libqmemo_admit.so" ] && [ -e "$DEPS/blake3/blake3.h" ] &&
     [ "$(readlink "$DEPS/blake3")" = "src/blake3-$BLAKE3_CRATE_VERSION/c" ] &&
     [ "$(cat "$NATIVE_DIR/.qmemo-admit-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  say "building the native admission kernel (log: $LOGS/admit.log)"
  : >"$LOGS/admit.log"
  mkdir -p "$build"
  src=$(blake3_source)
  rm -f "$DEPS/blake3"
  ln -s "src/blake3-$BLAKE3_CRATE_VERSION/c" "$DEPS/blake3"
  # x86-64: the SSE2/SSE4.1/AVX2/AVX-512 assembly, chosen at run time by blake3_dispatch.c;
  # elsewhere the portable code only.
  local blake3_src=("$src/blake3.c" "$src/blake3_dispatch.c" "$src/blake3_portable.c") blake3_flags=()
  if [ "$(uname -m)" = x86_64 ]; then
    blake3_src+=("$src"/blake3_{sse2,sse41,avx2,avx512}_x86-64_unix.S)
  else
    blake3_flags=(-DBLAKE3_NO_SSE2 -DBLAKE3_NO_SSE41 -DBLAKE3_NO_AVX2 -DBLAKE3_NO_AVX512 -DBLAKE3_USE_NEON=0)
  fi
  rm -f "$build"/*.o
  (cd "$build" && run admit cc -O3 -fPIC -c "${blake3_flags[@]}" "${blake3_src[@]}")
  # Only qmemo_admit_* is exported: BLAKE3's own symbols stay private to the library.
  echo '{ global: qmemo_admit_*; local: *; };' >"$build/exports.map"
  run admit cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$src" -I"$LIBOQS_PREFIX/include" \
    "$ROOT/qmemo/crypto/native/qmemo_admit.c" "$ROOT/qmemo/crypto/native/qmemo_admit_oqs.c" \
    "$ROOT/qmemo/crypto/native/qmemo_admit_merkle.c" "$ROOT/qmemo/crypto/native/qmemo_admit_classical.c" "$build"/*.o \
    -Wl,--version-script="$build/exports.map" -pthread -L"$libdir" -loqs -Wl,-rpath,"$libdir" -lsodium -lsecp256k1 \
    -o "$NATIVE_DIR/libqmemo_admit.so"
  echo "$want" >"$NATIVE_DIR/.qmemo-admit-stamp"
}

# --- 3c. falcon: the fast Falcon verifier ---------------------------------------------------
FALCON_MK="$ROOT/qmemo/crypto/native/falcon_vt.mk"

# The liboqs source the Falcon verifier compiles: the oqs-sys crate of step 1b, the
# source liboqs is built from (a user-supplied liboqs must be 0.13.0 too: the verifier
# relies on its exact PQClean code).
falcon_source() { liboqs_source; }

step_falcon() {
  local lib libdir want avx2=no
  lib=$(ls "$LIBOQS_PREFIX"/lib*/liboqs.so 2>/dev/null | head -n1) || true
  [ -n "$lib" ] || die "step 'falcon': no liboqs.so under $LIBOQS_PREFIX (the liboqs step did not finish)"
  libdir=$(dirname "$(readlink -f "$lib")")
  # The AVX2 copies need an x86-64 compiler target; which one runs is decided at run time.
  [ "$(uname -m)" = x86_64 ] && avx2=yes
  local src
  src=$(falcon_source) || exit 1
  want=$( { cat "$ROOT"/qmemo/crypto/native/falcon_vt* "$ROOT"/qmemo/crypto/native/oqs_sha3* \
                "$ROOT"/tests/native/falcon_diff.c "$ROOT"/tests/native/falcon_pool.h "$ROOT"/tests/native/native_cases.h \
                "$ROOT"/bench_c/falcon_vt/falcon_count.c "$ROOT"/bench_c/verify_count.h
            echo "$libdir $avx2 $src"; cat "$LIBOQS_PREFIX/.qmemo-stamp" 2>/dev/null; } | stamp_of)
  if [ -f "$NATIVE_DIR/libqmemo_falcon.so" ] && [ "$(cat "$NATIVE_DIR/falcon/.qmemo-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  say "building the fast Falcon verifier (log: $LOGS/falcon.log)"
  : >"$LOGS/falcon.log"
  [ -d "$src/src/sig/falcon" ] || die "step 'falcon': no liboqs source with Falcon found (got '$src')"
  mkdir -p "$NATIVE_DIR/falcon"
  local config
  config=$(printf 'OQS_SRC := %s\nOQS_PREFIX := %s\nOQS_LIBDIR := %s\nAVX2 := %s' \
    "$src" "$LIBOQS_PREFIX" "$libdir" "$avx2")
  # Rewritten only when it changes: every object depends on it, the sanitizer and fuzz
  # builds the tests make included.
  [ "$(cat "$NATIVE_DIR/falcon/config.mk" 2>/dev/null)" = "$config" ] || echo "$config" >"$NATIVE_DIR/falcon/config.mk"
  run_progress falcon make -f "$FALCON_MK" -j "$(nproc)" lib tools
  echo "$want" >"$NATIVE_DIR/falcon/.qmemo-stamp"
}

# --- 3d. mldsa: the ML-DSA verifier with cached expanded keys -------------------------------
# Self-contained like step 3c: the same liboqs source (falcon_source), its own makefile
# and build folder, its own stamp.
step_mldsa() {
  local lib libdir want avx2=no config src mk="$ROOT/qmemo/crypto/native/mldsa_vt.mk" dir="$NATIVE_DIR/mldsa"
  lib=$(ls "$LIBOQS_PREFIX"/lib*/liboqs.so 2>/dev/null | head -n1) || true
  [ -n "$lib" ] || die "step 'mldsa': no liboqs.so under $LIBOQS_PREFIX (the liboqs step did not finish)"
  libdir=$(dirname "$(readlink -f "$lib")")
  [ "$(uname -m)" = x86_64 ] && avx2=yes
  want=$( { cat "$ROOT"/qmemo/crypto/native/mldsa_vt* "$ROOT"/qmemo/crypto/native/oqs_sha3* \
                "$ROOT"/tests/native/mldsa_diff.c "$ROOT"/tests/native/mldsa_pool.h "$ROOT"/tests/native/mldsa_arith.h \
                "$ROOT"/tests/native/native_cases.h "$ROOT"/bench_c/mldsa_vt/mldsa_count.c "$ROOT"/bench_c/verify_count.h
            echo "$libdir $avx2"; cat "$LIBOQS_PREFIX/.qmemo-stamp" 2>/dev/null; } | stamp_of)
  if [ -f "$NATIVE_DIR/libqmemo_mldsa.so" ] && [ "$(cat "$dir/.qmemo-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  say "building the ML-DSA verifier (log: $LOGS/mldsa.log)"
  : >"$LOGS/mldsa.log"
  src=$(falcon_source) || exit 1
  [ -d "$src/src/sig/ml_dsa/pqcrystals-dilithium-standard_ml-dsa-44_ref" ] ||
    die "step 'mldsa': no liboqs source with ML-DSA found (got '$src')"
  mkdir -p "$dir"
  config=$(printf 'OQS_SRC := %s\nOQS_PREFIX := %s\nOQS_LIBDIR := %s\nAVX2 := %s' "$src" "$LIBOQS_PREFIX" "$libdir" "$avx2")
  [ "$(cat "$dir/config.mk" 2>/dev/null)" = "$config" ] || echo "$config" >"$dir/config.mk"
  run_progress mldsa make -f "$mk" -j "$(nproc)" lib tools
  echo "$want" >"$dir/.qmemo-stamp"
}

# --- 4. venv --------------------------------------------------------------------
venv_stamp() { { cat "$ROOT/pyproject.toml" "$ROOT/requirements.txt"; "${QMEMO_PYTHON:-python3}" --version 2>&1; } | stamp_of; }

step_venv() {
  local want
  want=$(venv_stamp)
  if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.qmemo-stamp" ] && [ "$(cat "$VENV/.qmemo-stamp")" = "$want" ]; then
    return 0
  fi
  say "creating the Python environment in .venv (log: $LOGS/venv.log)"
  : >"$LOGS/venv.log"
  local py="${QMEMO_PYTHON:-python3}"
  "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "Python 3.11 or newer is needed (found $("$py" --version 2>&1)); set QMEMO_PYTHON"
  # Every pip call under the live line: creating the venv and upgrading pip alone took
  # 27 s on a busy fresh clone, and pip prints nothing while it installs (28 s more).
  [ -x "$VENV/bin/python" ] || run_progress venv "$py" -m venv "$VENV"
  # The image runs qMEMO, it does not test it: no dev extra there, and Debian's pip
  # (23.0) installs the pinned wheels as well as a newer one would.
  local extra="[dev]"
  if [ "$PROFILE" = image ]; then extra=""
  else run_progress venv "$VENV/bin/python" -m pip install --upgrade pip; fi
  run_progress venv "$VENV/bin/python" -m pip install -e "$ROOT$extra"
  echo "$want" >"$VENV/.qmemo-stamp"
}

# --- 5. rows: the admission kernel's transaction builder ------------------------------------
# A CPython extension (it makes Python objects, which ctypes cannot do cheaply): built
# with the headers of .venv's own interpreter, so it needs the venv first.
step_rows() {
  local native="$ROOT/qmemo/crypto/native" include suffix want
  include=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  suffix=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  want=$( { cat "$native/qmemo_rows.c" "$native/qmemo_admit.h"; "$VENV/bin/python" -VV; echo "$include"; } | stamp_of)
  if [ -f "$NATIVE_DIR/_qmemo_rows$suffix" ] && [ "$(cat "$NATIVE_DIR/.qmemo-rows-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  [ -f "$include/Python.h" ] ||
    die "step 'rows': no Python.h in $include (Debian's python3: apt-get install python3-dev)"
  say "building the admission kernel's transaction builder (log: $LOGS/rows.log)"
  : >"$LOGS/rows.log"
  mkdir -p "$NATIVE_DIR"
  run rows cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$include" -I"$native" \
    "$native/qmemo_rows.c" -o "$NATIVE_DIR/_qmemo_rows$suffix"
  echo "$want" >"$NATIVE_DIR/.qmemo-rows-stamp"
}

# --- 6. ledger: the node's accounts and pool in C ------------------------------------------------
step_ledger() {
  local native="$ROOT/qmemo/crypto/native" ledger="$ROOT/qmemo/node/native" include suffix want
  include=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  suffix=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  want=$( { cat "$ledger"/ledger*.[ch] "$native/qmemo_admit.h" "$NATIVE_DIR/.qmemo-admit-stamp"
            "$VENV/bin/python" -VV; echo "$include"; } | stamp_of)
  if [ -f "$NATIVE_DIR/_qmemo_ledger$suffix" ] && [ "$(cat "$NATIVE_DIR/.qmemo-ledger-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  [ -f "$include/Python.h" ] ||
    die "step 'ledger': no Python.h in $include (Debian's python3: apt-get install python3-dev)"
  say "building the node's ledger (log: $LOGS/ledger.log)"
  : >"$LOGS/ledger.log"
  run ledger cc -std=gnu11 -O2 -Wall -Wextra -Werror -fPIC -shared -pthread -I"$include" -I"$native" -I"$ledger" \
    "$ledger"/ledger_sets.c "$ledger"/ledger_pool.c "$ledger"/ledger_apply.c "$ledger"/ledger_module.c \
    -L"$NATIVE_DIR" -lqmemo_admit -Wl,-rpath,"$NATIVE_DIR" -o "$NATIVE_DIR/_qmemo_ledger$suffix"
  echo "$want" >"$NATIVE_DIR/.qmemo-ledger-stamp"
}

STEPS=(apt fetch liboqs native admit falcon mldsa venv rows ledger)
if [ $# -gt 0 ]; then
  for wanted in "$@"; do
    [[ " ${STEPS[*]} " == *" $wanted "* ]] || die "no step '$wanted' (steps: ${STEPS[*]})"
  done
  selected=()
  for step in "${STEPS[@]}"; do [[ " $* " == *" $step "* ]] && selected+=("$step"); done
  STEPS=("${selected[@]}")
fi
for step in "${STEPS[@]}"; do "step_$step"; done
