#!/usr/bin/env bash
# A service whose heap grew past its arena (extents) comes back from its
# recovery point: on its own host after it crashed, and on another host
# after its host crashed (into a fresh arena and fresh extents).
#
# A recovery point's dump is taken with the service left running, and the
# CRIU plugin refuses such a dump unless the arena says its heap was reset
# from that very point; it vouched only for the arena's own record, so
# the extents' records were refused ("the checkpoint was taken with the
# tasks left running") and a grown service could not be brought back from
# a point at all. Now the arena vouches for the extents its header lists.
# Here Redis with a 64 MiB arena is filled with 90,000 values of 1000 B
# (past it: the heap grows), with a point every 200 ms; Redis is killed:
# its host restores it, and it answers with every value; killed again
# before its next point (which the test hook holds), it is restored from
# the same point again (the extents' records must then say their epochs of
# now, which that first restore moved on: before, refused as stale); then
# its host is crashed: h1 recovers it, and it answers with every value,
# one copy.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
COUNT=90000 # x 1000 B: past a 64 MiB arena

new_pool 4G
STEP_DIR=$POOL_DIR/steps
mkdir "$STEP_DIR"
CXLCR_TEST_RECOVERY_STEPS=$STEP_DIR pod_up 2
SERVICES+=(gr)
"$CXLCR" run --host h0 --name gr --arena 64M --recovery-interval 200 --log "$POOL_DIR/gr.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir "$POOL_DIR" >/dev/null ||
	die "cxlcr run gr failed"
addr=$(status_field gr address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 23 --quiet
[ "$(status_field gr arena_extents)" -ge 2 ] || die "gr did not grow past its arena: $(status_field gr arena_extents) extent(s)"
two_new_points gr || die "no recovery point of gr after the writes"
ok "gr grew past its 64 MiB arena ($(status_field gr arena_extents) extents) and has recovery points since"

# restored PID: gr runs again on h0, under another pid than PID.
restored() { [ "$(status_field gr state)" = running ] && [ "$(status_field gr pid)" != "$1" ]; }
# The first point after a restore stops as it begins, holding the lease
# (the test hook of recovery/test_step.c): gr can die again before it has
# a newer point than the one it was restored from.
echo point-after-restore >"$STEP_DIR/stop-at"
pid=$(status_field gr pid)
on h0 kill -KILL "$pid" || die "cannot kill gr (pid $pid on h0)"
until_true 60 restored "$pid" ||
	die "gr was not restored on h0 after it crashed: $(status_field gr state); $("$CXLCR" status gr | tail -n 2); h0: $("$CXLCR" pod logs h0 | tail -n 3)"
from=$(status_field gr restored_from_point)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "gr does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 23 --quiet ||
	die "gr lacks values written before its point"
ok "gr crashed: h0 restored it from its recovery point $from, every value there"

until_true 60 test -s "$STEP_DIR/stopped" || die "no point of the restored gr began: $("$CXLCR" pod logs h0 | tail -n 3)"
read -r point _ <"$STEP_DIR/stopped"
pid=$(status_field gr pid)
on h0 kill -KILL "$pid" || die "cannot kill gr (pid $pid on h0)"
on h0 kill -KILL "$point" || die "cannot kill gr's point (pid $point on h0)"
until_true 60 restored "$pid" ||
	die "gr was not restored on h0 a second time from $from: $(status_field gr state); $("$CXLCR" status gr | tail -n 2); h0: $("$CXLCR" pod logs h0 | tail -n 3)"
[ "$(status_field gr restored_from_point)" = "$from" ] ||
	die "gr was restored from $(status_field gr restored_from_point) the second time, not $from"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "gr does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 23 --quiet ||
	die "gr lacks values written before its point, after its second restore"
ok "gr crashed again before its next point: h0 restored it from $from again, every value there"

two_new_points gr || die "no recovery point of the restored gr"
"$CXLCR" pod crash h0 >/dev/null || die "pod crash h0 failed"
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do # a lease, then the recovery: bounded wait for the outcome
	[ "$(status_field gr state)" = running ] && [ "$(status_field gr host)" = h1 ] && break
	python3 -c 'import time; time.sleep(0.1)'
done
[ "$(status_field gr state)" = running ] && [ "$(status_field gr host)" = h1 ] ||
	die "gr was not recovered on h1: $(status_field gr state) on $(status_field gr host); $("$CXLCR" status gr | tail -n 2); h1: $("$CXLCR" pod logs h1 | tail -n 3)"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "gr does not answer at $addr on h1"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 23 --quiet ||
	die "gr lacks values written before its point, on h1"
[ "$(redis_copies)" = 1 ] || die "$(redis_copies) redis-server processes map the pool, not 1"
ok "h0 crashed: h1 recovered gr into a fresh arena and extents, every value there, one copy"
