#!/usr/bin/env bash
# `cxlcr pool check` (the stress test's checker) passes on a sound pool and
# fails, one line per problem, on one whose region table was damaged: a
# snapshot region that overlaps an arena and that no catalog entry names,
# and an extent of no arena (entries written behind cxlcr's back with
# tests/lib/poolimg.py); and on a catalog entry with a borrow slot left
# half claimed.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

PY=$(python3 -c 'import sys; print(sys.executable)')
new_pool 1G
env CXLCR_ARENA=a CXLCR_ARENA_SIZE=64M LD_PRELOAD="$ROOT/build/libcxlcr-preload.so" "$PY" -c 'b = bytearray(1 << 20)' ||
	die "a process under the preload failed"
"$CXLCR" pool check >"$POOL_DIR/check.out" || die "a sound pool fails the check: $(cat "$POOL_DIR/check.out")"
ok "$(cat "$POOL_DIR/check.out")"

# A borrow slot claimed without its reference is a borrower caught between
# its two steps, or one that died there: the check looks again until it
# settles, and reports only one that stays so.
"$(dirname "$CXLCR")/tests/snapshot_tool" create a snap >/dev/null || die "snapshot_tool create failed"
"$CXLCR" pool check >"$POOL_DIR/check.out" || die "a published snapshot fails the check: $(cat "$POOL_DIR/check.out")"
slot=$(python3 "$ROOT/tests/lib/poolimg.py" half-claim "$CXLCR_POOL" snap) || die "cannot half-claim a slot of snap"
rc=0
"$CXLCR" pool check >"$POOL_DIR/check.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "catalog entry .* (snap) has 1 borrow slot(s) claimed and 0 reference(s)" "$POOL_DIR/check.out" ||
	die "a slot left half claimed passes the check (exit $rc): $(cat "$POOL_DIR/check.out")"
ok "a slot left half claimed (slot $slot): $(grep claimed "$POOL_DIR/check.out")"

offset=$(python3 "$ROOT/tests/lib/poolimg.py" list "$CXLCR_POOL" | awk '$6 == "a" { print $4 }')
python3 "$ROOT/tests/lib/poolimg.py" fake-region "$CXLCR_POOL" 3 stray $((offset + (2 << 20))) $((4 << 20)) >/dev/null
python3 "$ROOT/tests/lib/poolimg.py" fake-region "$CXLCR_POOL" 6 ghost.ext1 $((512 << 20)) $((2 << 20)) >/dev/null
rc=0
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || rc=$?
[ $rc -eq 1 ] || die "the damaged pool passes the check (exit $rc): $(cat "$POOL_DIR/check.json")"
problems() { python3 -c 'import json, sys; [print(p) for p in json.load(open(sys.argv[1]))["problems"]]' "$POOL_DIR/check.json"; }
problems | grep -q "regions a .* and stray .* overlap" || die "no overlap found: $(problems)"
problems | grep -q "snapshot region stray .* is named by no catalog entry" || die "no leaked snapshot found: $(problems)"
problems | grep -q "extent ghost.ext1 belongs to no live arena" || die "no leaked extent found: $(problems)"
ok "the damaged pool fails the check: $(problems | tr '\n' ';')"
