#!/usr/bin/env bash
# The first run on a fresh machine: `make setup` (what `make test` and
# `make demo` start with) in a clean clone, with CRIU's image definitions
# going to a directory that does not exist yet, so that deps creates it
# while make runs. make reads a directory once: a build whose rules were
# read before deps made it failed with "No rule to make target
# .../opts.pb-c.h" on every fresh machine, and passed on every later run.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need git make

work=${CXLCR_TEST_TMP:-$(mktemp -d)}
clone=$work/clone
protos=$work/criu-images-new
[ ! -e "$protos" ] || die "$protos exists before the first run"

say "clone $(git -C "$ROOT" rev-parse --short HEAD) into a fresh directory"
git clone -q "$ROOT" "$clone"
[ ! -e "$clone/build" ] || die "a fresh clone has a build directory"

say "make setup with CRIU_PROTO_DIR=$protos (not there yet)"
if ! make -C "$clone" -j2 CRIU_PROTO_DIR="$protos" setup >"$work/make.log" 2>&1; then
	tail -20 "$work/make.log" >&2
	die "the first run of make setup failed"
fi
[ -f "$protos/opts.proto" ] || die "deps did not install CRIU's image definitions in $protos"
[ -f "$clone/build/rebase/gen/opts.pb-c.h" ] || die "no code was generated from them"
for f in cxlcr cxlcrd libcxlcr-preload.so cxlcr_criu.so cxlcr-rebase; do
	[ -e "$clone/build/$f" ] || die "the first run did not build $f"
done
ok "the first run builds everything"

say "a second run has nothing to do"
make -C "$clone" -q CRIU_PROTO_DIR="$protos" all || die "make all after setup is not up to date"
ok "second run up to date"
