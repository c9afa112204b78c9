#!/usr/bin/env bash
# image.sh - build the qMEMO container image (qmemo:local) from Debian packages.
#
#   scripts/image.sh [--base auto|registry|debootstrap] [--ca-bundle FILE | --no-ca-bundle]
#                    [--no-reuse] [--tag TAG]
#
# The base image:
#   registry     debian:bookworm-slim, from the engine's cache or pulled from a registry.
#   debootstrap  qmemo-base:bookworm-<recipe hash>, made here from Debian's packages
#                (`debootstrap --variant=minbase bookworm`, then `docker import`), for
#                engines that reach no image registry; kept by the engine and reused.
#   auto         (default) registry if debian:bookworm-slim can be had, else debootstrap.
#
# The build context is a copy of the checkout (what .dockerignore lets through) plus,
# in its deploy/image/ folder (deploy/image/README.md), what the Containerfile may use:
#   ca-bundle.crt  CA certificates the build trusts for apt, pip and the crate download.
#                  Default: the host's /etc/ssl/certs/ca-certificates.crt, which holds
#                  any local CA the host trusts (a TLS-inspecting proxy's, a company's);
#                  never copied into the final image.
#   crates/        the liboqs and BLAKE3 source crates the host's setup already downloaded
#                  and checked (setup.sh checks their sha256 again inside).
#   liboqs/        the liboqs the host's scripts/setup.sh built, when the host is Debian 12
#                  on the same architecture: the image then skips the liboqs build
#                  (1-3 minutes); setup inside uses it only if its stamp (source pin,
#                  algorithms, flags, compat shim) is the one it would build. --no-reuse
#                  builds liboqs inside whatever the host is.
#
# The image is tagged TAG (default qmemo:local) and qmemo:ctx-<hash of the context and
# the base image>; when that hash is already built, nothing is built again. Prints the
# image's size and the build time on its last line.
#
# Environment: DOCKER (the client, default docker), QMEMO_DEBIAN_MIRROR (debootstrap's
# mirror, default http://deb.debian.org/debian).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKER="${DOCKER:-docker}"
REGISTRY_BASE="debian:bookworm-slim"
DEBOOTSTRAP_BASE="qmemo-base:bookworm"
MIRROR="${QMEMO_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WORK="$ROOT/.deps/image"

base_mode=auto tag=qmemo:local ca_bundle=/etc/ssl/certs/ca-certificates.crt reuse=1
die() { echo "image: ERROR: $*" >&2; exit 1; }
say() { echo "image: $*"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --base) base_mode="${2:-}"; shift 2 ;;
    --ca-bundle) ca_bundle="${2:-}"; shift 2 ;;
    --no-ca-bundle) ca_bundle=""; shift ;;
    --no-reuse) reuse=0; shift ;;
    --tag) tag="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$base_mode" in auto|registry|debootstrap) ;; *) die "--base is auto, registry or debootstrap (got '$base_mode')" ;; esac
[ -z "$ca_bundle" ] || [ -s "$ca_bundle" ] || die "--ca-bundle $ca_bundle: no such file (or empty)"
[ -n "$tag" ] || die "--tag needs a name"

command -v "$DOCKER" >/dev/null || die "no '$DOCKER' client (Debian: apt-get install docker.io)"
engine_error=$("$DOCKER" version --format '{{.Server.Version}}' 2>&1 >/dev/null) ||
  die "no container engine answers ($(tail -n 1 <<<"$engine_error")); start dockerd, or set DOCKER_HOST"

started=$SECONDS

# --- the base image --------------------------------------------------------------------
have_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

registry_base() {
  have_image "$REGISTRY_BASE" && return 0
  "$DOCKER" pull -q "$REGISTRY_BASE" >"$WORK/pull.log" 2>&1
}

debootstrap_base() {
  have_image "$DEBOOTSTRAP_BASE" && return 0
  [ "$(id -u)" = 0 ] || die "debootstrap needs root (or run with --base registry where a registry serves $REGISTRY_BASE)"
  command -v debootstrap >/dev/null || die "no debootstrap (apt-get install debootstrap)"
  local rootfs="$WORK/rootfs" t0=$SECONDS
  say "making $DEBOOTSTRAP_BASE with debootstrap --variant=minbase bookworm (log: $WORK/debootstrap.log)"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { rm -rf "$rootfs"; die "debootstrap failed; log: $WORK/debootstrap.log ($(tail -n 1 "$WORK/debootstrap.log"))"; }
  # The same suites as debian:bookworm-slim (updates and security fixes), and its habits:
  # no downloaded packages or package caches kept after apt runs, no manuals, docs or
  # translations installed (copyright files stay). Every path below is inside $rootfs.
  [ -d "$rootfs/etc/apt" ] || die "debootstrap left no $rootfs/etc/apt"
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
EOF
  local clean='rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true'
  printf '%s\n' "DPkg::Post-Invoke { \"$clean\"; };" "APT::Update::Post-Invoke { \"$clean\"; };" \
    'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' >"$rootfs/etc/apt/apt.conf.d/docker-clean"
  printf '%s\n' 'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
    'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-excludes"
  find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/log/*.log
  tar -C "$rootfs" -c . | "$DOCKER" import --change 'CMD ["bash"]' - "$DEBOOTSTRAP_BASE" >/dev/null ||
    die "docker import of $rootfs failed"
  rm -rf "$rootfs"
  say "$DEBOOTSTRAP_BASE made in $((SECONDS - t0)) s"
}

mkdir -p "$WORK"
# A change to the recipe makes a new base, not a stale one under the old name.
DEBOOTSTRAP_BASE="$DEBOOTSTRAP_BASE-$( { declare -f debootstrap_base; echo "$MIRROR"; } | sha256sum | cut -c1-12)"
case "$base_mode" in
  registry) registry_base || die "cannot get $REGISTRY_BASE ($(tail -n 1 "$WORK/pull.log")); try --base debootstrap"
            base="$REGISTRY_BASE" base_how="from a registry" ;;
  debootstrap) debootstrap_base; base="$DEBOOTSTRAP_BASE" base_how="made with debootstrap" ;;
  auto) if registry_base; then base="$REGISTRY_BASE" base_how="from a registry"
        else say "no $REGISTRY_BASE ($(tail -n 1 "$WORK/pull.log")): using debootstrap"
             debootstrap_base; base="$DEBOOTSTRAP_BASE" base_how="made with debootstrap"; fi ;;
esac

# --- the build context ---------------------------------------------------------------------
context="$WORK/context"
rm -rf "$context"
mkdir -p "$context"
# The checkout less what .dockerignore leaves out (setup's outputs, results, caches, and
# docs/ and the Python tests, which nothing in the image reads: a change to the docs or
# to a test rebuilds nothing; tests/native stays, the setup compiles its harnesses).
tar -C "$ROOT" --exclude-vcs --exclude=./.venv --exclude=./.deps --exclude=./results --exclude=./runs \
  --exclude=./docs/results --exclude=./devnet --exclude=./bench_c/build --exclude=__pycache__ \
  --exclude='*.egg-info' --exclude=.pytest_cache --exclude=.hypothesis --exclude=./deploy/image \
  --exclude=./deploy/devnet --exclude=./deploy/runs --exclude=./docs \
  --exclude=./tests/unit --exclude=./tests/integration --exclude=./tests/fixtures --exclude=./tests/vectors \
  --exclude=./tests/conftest.py --exclude=./tests/__init__.py -c . | tar -C "$context" -x
mkdir -p "$context/deploy/image"
cp "$ROOT/deploy/image/README.md" "$context/deploy/image/README.md"
extras="$context/deploy/image"
[ -z "$ca_bundle" ] || cp "$ca_bundle" "$extras/ca-bundle.crt"
# The crates, checked here by the host's setup (and again inside).
QMEMO_SETUP_QUIET=1 bash "$ROOT/scripts/setup.sh" fetch || die "the host's setup could not fetch the source crates"
mkdir -p "$extras/crates"
cp "$ROOT"/.deps/crates/*.crate "$extras/crates/"
reused="no (liboqs built inside)"
if [ "$reuse" = 1 ]; then
  host_os=$(. /etc/os-release 2>/dev/null && echo "${ID:-}-${VERSION_ID:-}")
  engine_arch=$("$DOCKER" version --format '{{.Server.Arch}}' 2>/dev/null || true)
  host_arch=$(dpkg --print-architecture 2>/dev/null || true)
  if [ "$host_os" = debian-12 ] && [ -n "$host_arch" ] && [ "$engine_arch" = "$host_arch" ] &&
     [ -f "$ROOT/.deps/liboqs/.qmemo-stamp" ] && [ -f "$ROOT/.deps/liboqs/lib/liboqs.so" ]; then
    cp -rL "$ROOT/.deps/liboqs" "$extras/liboqs"
    reused="liboqs from the host's setup ($(readlink -f "$ROOT/.deps/liboqs"))"
  else
    reused="no (host $host_os/$host_arch, engine $engine_arch, or no stamped liboqs in .deps: built inside)"
  fi
fi

# --- build, unless this exact context on this base is built already ----------------------------
base_id=$("$DOCKER" image inspect -f '{{.Id}}' "$base")
hash=$( { echo "$base_id"; cd "$context" && find . \( -type f -o -type l \) -print0 | LC_ALL=C sort -z |
          xargs -0 sha256sum; find . -type l -printf '%p -> %l\n' | LC_ALL=C sort; } | sha256sum | cut -c1-16)
hashed_tag="qmemo:ctx-$hash"
if have_image "$hashed_tag"; then
  "$DOCKER" tag "$hashed_tag" "$tag"
  how="cached: this context and base were built before ($hashed_tag)"
else
  say "building $tag on $base ($base_how); liboqs reused: $reused (log: $WORK/build.log)"
  # The build stage gets a tag of its own (qmemo:build): left untagged it would be a
  # dangling image, and an engine's `image prune` would take the build's cache with it.
  if ! { "$DOCKER" build -f "$context/Containerfile" --build-arg "BASE=$base" --target build -t qmemo:build \
           "$context" && "$DOCKER" build -f "$context/Containerfile" --build-arg "BASE=$base" \
           -t "$hashed_tag" -t "$tag" "$context"; } >"$WORK/build.log" 2>&1; then
    tail -n 25 "$WORK/build.log" >&2
    die "docker build failed; full log: $WORK/build.log"
  fi
  how="built"
fi
rm -rf "$context"
size=$("$DOCKER" image inspect -f '{{.Size}}' "$tag")
elapsed=$((SECONDS - started))
python3 - "$WORK/last-build.json" "$tag" "$hashed_tag" "$base" "$base_how" "$how" "$reused" "$size" "$elapsed" <<'EOF'
import datetime, json, sys
out, tag, hashed, base, base_how, how, reused, size, seconds = sys.argv[1:]
json.dump({"tag": tag, "content_tag": hashed, "base": base, "base_how": base_how, "how": how,
           "liboqs_reused": reused, "size_bytes": int(size), "seconds": int(seconds),
           "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
          open(out, "w"), indent=2)
EOF
say "$tag: $((size / 1000000)) MB, $how in ${elapsed} s (base $base, $base_how)"
