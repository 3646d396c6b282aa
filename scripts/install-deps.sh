#!/usr/bin/env bash
# Installs everything cxlcr builds against and runs with, and skips what is
# already there: Debian packages, then CRIU >= 4.2 (Debian 12 ships 3.17,
# which does not work on current kernels; see DESIGN.md), built from Debian's
# newest criu source package into /usr/local.
set -euo pipefail

STAMP_DIR=/var/lib/cxlcr
mkdir -p "$STAMP_DIR"
CRIU_MIN=4.2
CRIU_PREFIX=/usr/local
# CRIU keeps its kernel-feature cache (kdat) only on a tmpfs; /run is not
# one on these machines, and without the cache every CRIU call probes the
# kernel again (~0.06 s). /dev/shm is a tmpfs everywhere.
CRIU_RUNDIR=/dev/shm
CRIU_STAMP=$STAMP_DIR/criu-build  # what the CRIU in /usr/local was built with
SRC_LIST=/etc/apt/sources.list.d/cxlcr-sid-src.list

say() { printf 'install-deps: %s\n' "$*"; }

PACKAGES=(
	build-essential pkg-config git
	libmimalloc-dev libdaxctl-dev libfabric-dev
	libprotobuf-c-dev protobuf-c-compiler
	# the control protocol between daemons: its authentication (crypto_auth)
	libsodium-dev
	# the fork API's JSON parser (it refuses a key given twice)
	libjansson-dev
	redis-server redis-tools memcached python3
	# other allocators, for the tests of programs that link one
	libtcmalloc-minimal4 libjemalloc2
	iproute2 iptables procps util-linux
	# the panic tombstone's kernel module (kernel/) builds against these
	linux-headers-amd64 kmod
	# CRIU's build dependencies
	libprotobuf-dev protobuf-compiler python3-protobuf libnl-3-dev
	libnl-route-3-dev libnet1-dev libcap-dev libaio-dev libbsd-dev
	libgnutls28-dev libnftables-dev uuid-dev libdrm-dev
	# plots for the benchmarks
	gnuplot-nox
)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The packaged servers start themselves as system services; cxlcr starts its
# own instances, so stop the packaged ones where an init system runs them.
for svc in redis-server memcached; do
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q "$svc" 2>/dev/null; then
		systemctl disable --now -q "$svc" 2>/dev/null || true
	fi
done

# An emulated pool is a file on /dev/shm. A devdax device maps the pool with
# 2 MiB pages; tmpfs does the same only when mounted with huge pages. With
# 4 KiB pages, a service's page tables over a 4 GiB arena have a million
# entries, which CRIU walks (/proc/PID/smaps) while the service is frozen:
# ~30 ms at 4 GiB, and growing with the heap. within_size gives 2 MiB pages
# only to files that fill them (a pool does), so small shm files stay as
# they were.
# (/dev/shm may be mounted twice; the last mount is the one in use.)
shm=$(findmnt -no FSTYPE,OPTIONS /dev/shm 2>/dev/null | tail -n1)
if [ "${shm%% *}" = tmpfs ] && [[ $shm != *huge=* ]]; then
	say "remounting /dev/shm with huge=within_size (2 MiB pages for emulated pools, as devdax maps them)"
	mount -o remount,huge=within_size /dev/shm
fi

criu_version() {
	local bin=$1
	[ -x "$bin" ] || return 1
	"$bin" --version 2>/dev/null | awk '/^Version:/ {print $2}'
}
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# CRIU's image definitions (images/*.proto): rebase/ reads and writes CRIU
# images with protobuf-c code generated from them at build time. They come
# from the same source package as the CRIU that is installed. The build may
# name another directory (make CRIU_PROTO_DIR=...); a matching copy in the
# default one is then copied rather than fetched again.
CRIU_PROTO_DEFAULT=$CRIU_PREFIX/share/cxlcr/criu-images
CRIU_PROTO_DIR=${CRIU_PROTO_DIR:-$CRIU_PROTO_DEFAULT}

have=$(criu_version "$CRIU_PREFIX/sbin/criu" || true)
want_build="RUNDIR=$CRIU_RUNDIR"
need_build=1
if [ -n "$have" ] && version_ge "$have" "$CRIU_MIN" && [ -f "$CRIU_PREFIX/include/criu/criu-plugin.h" ] &&
	[ "$(cat "$CRIU_STAMP" 2>/dev/null)" = "$want_build" ]; then
	need_build=0
fi
need_protos=1
[ -f "$CRIU_PROTO_DIR/VERSION" ] && [ "$(cat "$CRIU_PROTO_DIR/VERSION")" = "$have" ] && need_protos=0
[ $need_build = 0 ] && [ $need_protos = 0 ] && exit 0
if [ $need_build = 0 ] && [ "$CRIU_PROTO_DIR" != "$CRIU_PROTO_DEFAULT" ] &&
	[ "$(cat "$CRIU_PROTO_DEFAULT/VERSION" 2>/dev/null)" = "$have" ]; then
	mkdir -p "$CRIU_PROTO_DIR"
	cp "$CRIU_PROTO_DEFAULT"/*.proto "$CRIU_PROTO_DEFAULT/VERSION" "$CRIU_PROTO_DIR"/
	say "CRIU $have image definitions in $CRIU_PROTO_DIR (from $CRIU_PROTO_DEFAULT)"
	exit 0
fi

if [ ! -f "$SRC_LIST" ]; then
	echo 'deb-src http://deb.debian.org/debian sid main' >"$SRC_LIST"
	apt-get update -qq
fi
work=$(mktemp -d /var/tmp/cxlcr-criu.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
# Only the upstream tarball is needed; the Debian part may be missing from
# the mirror, which makes apt-get report an error after fetching the rest.
apt-get source --download-only criu >apt-source.log 2>&1 || true
orig=$(ls criu_*.orig.tar.* 2>/dev/null | sort -V | tail -n1)
if [ -z "$orig" ]; then
	echo "install-deps: could not fetch CRIU's source package (see $work/apt-source.log)" >&2
	trap - EXIT
	exit 1
fi
tar xf "$orig"
cd criu-*/

if [ $need_build = 1 ]; then
	say "building CRIU >= $CRIU_MIN from Debian's newest source package (about a minute)"
	make -j"$(nproc)" RUNDIR="$CRIU_RUNDIR" criu lib >build.log 2>&1 || { tail -30 build.log >&2; exit 1; }
	make PREFIX="$CRIU_PREFIX" RUNDIR="$CRIU_RUNDIR" SKIP_PIP_INSTALL=1 install-criu install-lib >>build.log 2>&1 ||
		{ tail -30 build.log >&2; exit 1; }
	echo "$want_build" >"$CRIU_STAMP"
	ldconfig
	have=$(criu_version "$CRIU_PREFIX/sbin/criu")
	version_ge "$have" "$CRIU_MIN" || { echo "install-deps: built CRIU $have, need >= $CRIU_MIN" >&2; exit 1; }
	say "CRIU $have installed in $CRIU_PREFIX"
fi

src_version=$(awk '$1 ~ /^CRIU_VERSION_(MAJOR|MINOR|SUBLEVEL)$/ && $3 != "" {print $3}' Makefile.versions | paste -sd.)
if [ "$src_version" != "$have" ]; then
	echo "install-deps: CRIU's source package is $src_version but CRIU $have is installed; its image definitions would not match" >&2
	exit 1
fi
rm -rf "$CRIU_PROTO_DIR"
mkdir -p "$CRIU_PROTO_DIR"
cp images/*.proto "$CRIU_PROTO_DIR"/
echo "$have" >"$CRIU_PROTO_DIR/VERSION"
say "CRIU $have image definitions in $CRIU_PROTO_DIR"
