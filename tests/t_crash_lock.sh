#!/usr/bin/env bash
# A host that dies holding the pool's lock (issue 16, point 2): Redis with
# recovery points on h0, and a process of h0 that holds the pool lock as
# one of h0's workers does for a moment while it changes the region table
# (tests/lock_tool: the lock word names its host). h0 is crashed. h1 and
# h2 judge it dead and race to fence it; a fence takes the lock over at
# once from a worker of the host it judged dead (not after the lock's own
# lease of 5 s), and the other waits for that holder, beating meanwhile.
# Exactly one fences h0 (its log says it took the lock from a worker of
# h0) and recovers Redis with its values; the other neither judges the
# winner gone (it judges on what it saw before its own wait) nor dead.
# `pool check` names h0 as the lock's holder before the crash, and counts
# the take-over after it.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server
LOCK_TOOL=$(dirname "$CXLCR")/tests/lock_tool
[ -x "$LOCK_TOOL" ] || die "tests/lock_tool is not built"

PORT=6379
new_pool 4G
pod_up 3
point_redis rd h0
addr=$(status_field rd address)
python3 "$KV" fill --host "$addr" --port $PORT --count 500 --size 100 --seed 11 --quiet
two_new_points rd || die "no recovery points"

say "h0 takes the pool lock and crashes holding it"
on h0 "$LOCK_TOOL" h0 >"$POOL_DIR/lock.out" 2>&1 &
job=$!
on_exit "kill -KILL $job 2>/dev/null"
for _ in $(seq 1 200); do [ -s "$POOL_DIR/lock.out" ] && break; python3 -c 'import time; time.sleep(0.05)'; done
read -r word _ <"$POOL_DIR/lock.out" && [ "$word" = locked ] || die "lock_tool did not lock: $(cat "$POOL_DIR/lock.out")"
"$CXLCR" pool check --json >"$POOL_DIR/held.json" || die "pool check: $(cat "$POOL_DIR/held.json")"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["lock_held"] and d["lock_holder_host"] == "h0", d' "$POOL_DIR/held.json" ||
	die "pool check does not say that a process of h0 holds the lock: $(cat "$POOL_DIR/held.json")"
"$CXLCR" pool check | grep -q "^pool lock: held by a process of host h0" ||
	die "pool check's text does not name the lock's holder"
"$CXLCR" pod crash h0 >/dev/null || die "pod crash h0 failed"
wait $job 2>/dev/null || true
# A host lease, then the restore: bounded wait for the outcome.
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
	[ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" != h0 ] && break
	python3 -c 'import time; time.sleep(0.1)'
done
host=$(status_field rd host)
[ "$(status_field rd state)" = running ] && [ "$host" != h0 ] ||
	die "rd was not recovered: $(status_field rd state) on $host"
other=h1
[ "$host" = h1 ] && other=h2
"$CXLCR" pod logs "$host" >"$POOL_DIR/winner.log"
"$CXLCR" pod logs "$other" >"$POOL_DIR/other.log"
grep -q "host h0 .* is dead .*fenced by this host" "$POOL_DIR/winner.log" ||
	die "$host recovered rd but its log does not say it fenced h0"
grep -q "host h0 .* is dead .*the pool lock taken from a worker of it" "$POOL_DIR/winner.log" ||
	die "$host's fence did not take the lock from h0's worker for h0's silence: $(grep 'is dead' "$POOL_DIR/winner.log")"
for h in "$host" "$other"; do
	log=$POOL_DIR/winner.log
	[ "$h" = "$other" ] && log=$POOL_DIR/other.log
	! grep -E "takes it over|host (h1|h2) .* is dead|declared dead" "$log" ||
		die "$h judged a survivor that waited for the lock gone (above)"
done
! grep -q "fenced by this host" "$POOL_DIR/other.log" || die "both $host and $other fenced h0"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "the recovered redis does not answer at $addr"
"$CXLCR" pool check --json >"$POOL_DIR/after.json" || die "pool check after the recovery: $(cat "$POOL_DIR/after.json")"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["lock_takeovers"] >= 1 and d["lock_holder_host"] != "h0", d' "$POOL_DIR/after.json" ||
	die "pool check does not count the take-over of h0's lock: $(cat "$POOL_DIR/after.json")"
python3 "$KV" verify --host "$addr" --port $PORT --count 500 --size 100 --seed 11 --quiet ||
	die "the recovered redis lacks values written before its point"
grep -h "is dead\|recovered on" "$POOL_DIR/winner.log"
ok "rd recovered on $host alone after h0 died holding the pool lock (its fence took the lock from h0's worker); $other neither fenced h0 nor judged $host gone"
