#!/usr/bin/env bash
# The demos, small: demos/redis/run.sh and demos/memcached/run.sh with
# DEMO_SIZE=64M, each on a pool of its own. Each must succeed, migrate
# h0 -> h1 -> h0, check every key after each migrate (memcached: the 2 s
# items all gone at the end, every other item there), and leave no service
# and no pod behind. Then a demo interrupted in the middle of a migrate
# must leave nothing behind either.
# `make long` runs it (`make demo` runs the Redis one at its full size).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
[ "${CXLCR_TESTS:-long}" != short ] || skip "the demos take minutes: make long runs them"
need redis-server redis-cli memcached ip iptables nsenter criu
[ -f "$ROOT/build/criu/cxlcr_criu.so" ] || die "the CRIU plugin is not built (build/criu/cxlcr_criu.so)"
[ "$ROOT/build/cxlcr" -ef "$CXLCR" ] || skip "the demos run build/cxlcr, this test was given $CXLCR"

SIZE=64M
POOL_DIR=$(mktemp -d /dev/shm/cxlcr-test-XXXX)   # removed on exit (common.sh)

# Whatever happens, no pod of these pools stays up.
for d in redis memcached interrupted; do
	on_exit "CXLCR_POOL=$POOL_DIR/$d/pool '$CXLCR' pod down >/dev/null 2>&1"
done

# nothing_left DEMO: no service in the demo's pool, no pod for it.
nothing_left() {
	local pool=$POOL_DIR/$1/pool left out
	left=$(CXLCR_POOL=$pool "$CXLCR" ps --json |
		python3 -c 'import json, sys; print(len(json.load(sys.stdin)["services"]))') ||
		die "$1: cxlcr ps failed on its pool"
	[ "$left" -eq 0 ] || die "$1: $left services left in its pool"
	out=$(CXLCR_POOL=$pool "$CXLCR" pod down 2>&1) || die "$1: cxlcr pod down failed: $out"
	echo "$out" | grep -q '^no pod' || die "$1: its pod was still up: $out"
}

# run_demo DEMO: runs it; its output in $POOL_DIR/DEMO.out.
run_demo() {
	local rc=0
	say "demos/$1/run.sh with DEMO_SIZE=$SIZE"
	DEMO_SIZE=$SIZE CXLCR_POOL=$POOL_DIR/$1/pool DEMO_OUT=$POOL_DIR/$1-out \
		"$ROOT/demos/$1/run.sh" >"$POOL_DIR/$1.out" 2>&1 </dev/null || rc=$?
	if [ $rc -ne 0 ]; then
		tail -n 40 "$POOL_DIR/$1.out" >&2
		die "the $1 demo failed (exit status $rc)"
	fi
	[ "$(tail -n 1 "$POOL_DIR/$1.out")" = "$1 demo: OK" ] || die "the $1 demo did not end with '$1 demo: OK'"
	local n
	for n in 1 2; do
		is_json <"$POOL_DIR/$1-out/migrate-$n.json" || die "$1: migrate $n left no JSON"
	done
	grep -E '^    migrate h[01] -> h[01]: frozen' "$POOL_DIR/$1.out" | sed 's/^ */    /'
	nothing_left "$1"
}

# verified DEMO WHAT: the demo's summary has two "verified after" lines
# (h0 -> h1, h1 -> h0), each saying "N of N WHAT" with the same N > 0.
verified() {
	local lines
	lines=$(grep -E "^    verified after migrate h(0 -> h1|1 -> h0): ([0-9]+) of \2 $2" "$POOL_DIR/$1.out" |
		grep -v ': 0 of 0' || true)
	[ "$(echo "$lines" | grep -c .)" -eq 2 ] || {
		grep 'verified after' "$POOL_DIR/$1.out" >&2
		die "$1: not every key was verified after both migrates"
	}
	echo "$lines" | sed 's/^ */    /'
}

run_demo redis
verified redis "keys correct"
ok "the Redis demo: loaded, migrated twice, every key correct each time, nothing left"

run_demo memcached
verified memcached "items present and correct"
expired=$(sed -n 's/^    expired as expected: \([0-9]*\) of \([0-9]*\) items with a 2 s expiry.*/\1 \2/p' \
	"$POOL_DIR/memcached.out")
read -r gone of <<<"$expired"
[ -n "${gone:-}" ] && [ "$gone" -gt 0 ] && [ "$gone" = "$of" ] ||
	die "memcached: not all items with a 2 s expiry were gone at the end: '$expired'"
grep -q "all, as they must be" "$POOL_DIR/memcached.out" || die "memcached: the 2 s items were not checked gone"
ok "the Memcached demo: every item correct after each migrate, all $gone items with a 2 s expiry gone"

# An interrupted demo: SIGTERM as its first migrate starts. It must end
# (status 130) with its service stopped and its pod down.
say "the Redis demo, interrupted during its first migrate"
# (A FIFO, not a coproc: bash drops a coproc's fds as soon as it exits,
# which a demo that is quick to finish can do before the last read.)
mkfifo "$POOL_DIR/demo.fifo"
DEMO_SIZE=16M CXLCR_POOL=$POOL_DIR/interrupted/pool DEMO_OUT=$POOL_DIR/interrupted-out \
	"$ROOT/demos/redis/run.sh" >"$POOL_DIR/demo.fifo" 2>&1 </dev/null &
demo_pid=$!
sent=0
while IFS= read -r line; do
	echo "$line" >>"$POOL_DIR/interrupted.out"
	if [ $sent = 0 ] && [[ $line == "==> Migrating"* ]]; then
		kill -TERM "$demo_pid"
		sent=1
	fi
done <"$POOL_DIR/demo.fifo"
rc=0
wait "$demo_pid" || rc=$?
[ $sent = 1 ] || { tail -n 20 "$POOL_DIR/interrupted.out" >&2; die "the demo never reached its migrate"; }
[ $rc -eq 130 ] || { tail -n 20 "$POOL_DIR/interrupted.out" >&2; die "the interrupted demo exited $rc, not 130"; }
nothing_left interrupted
ok "interrupted: exit status 130, service stopped, pod down"
