#!/usr/bin/env bash
# A service recovered into a fresh arena dies before it has taken a
# recovery point of its own: its host restores it from the point it was
# recovered from.
#
# That point is the dead host's service's: its dump maps the old arena,
# and the restore from a point on a service's own host took only points of
# that very arena, so it was refused each time and the service was left
# failed (the same after a recovery worker died between CRIU's take-over
# and the go). Now the heap is reset from the point and the dump rebased
# onto the fresh arena's regions, as after the recovery itself. Here h0
# runs Redis with recovery points and crashes; h1 recovers it, and its
# first point of its own stops as it begins (the test hook of
# recovery/test_step.c, holding the service's lease); Redis is killed, then
# that point. h1 must restore Redis from the point it was recovered from:
# it answers at its address on h1 with every value written before that
# point, one copy, and status still says it was recovered from h0.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
runs_on_h1() { [ "$(status_field rw state)" = running ] && [ "$(status_field rw host)" = h1 ]; }
recovered_from() { "$CXLCR" status rw --json | python3 -c 'import json, sys
r = json.load(sys.stdin).get("recovered") or {}
print(r.get("from_host", ""), r.get("on_host", ""))'; }

step_pod rw 2 19
# Only a point of a service restored from a point takes this stop (h0's
# are not).
echo point-after-restore >"$STEP_DIR/stop-at"
"$CXLCR" pod crash h0 >/dev/null || die "pod crash h0 failed"
until_true 60 stopped_here || die "no point of the recovered rw stopped: $("$CXLCR" pod logs h1 | tail -n 5)"
read -r point _ <"$STEP_DIR/stopped"
until_true 30 runs_on_h1 || die "rw was not recovered on h1: $(status_field rw state) on $(status_field rw host)"
[ "$(recovered_from)" = "h0 h1" ] || die "status does not say rw was recovered from h0 on h1: $(recovered_from)"
[ "$(status_field rw restored_from_point)" != "" ] || die "status does not name the point rw was recovered from"
from=$(status_field rw restored_from_point)
pid=$(status_field rw pid)
on h1 kill -KILL "$pid" || die "cannot kill rw (pid $pid on h1)"
on h1 kill -KILL "$point" || die "cannot kill rw's first point (pid $point on h1)"
ok "rw recovered on h1 from $from, then killed before its first point of its own"

end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do # the daemon's next tick, then the restore: bounded wait for the outcome
	runs_on_h1 && [ "$(status_field rw pid)" != "$pid" ] && break
	python3 -c 'import time; time.sleep(0.1)'
done
runs_on_h1 && [ "$(status_field rw pid)" != "$pid" ] ||
	die "rw was not restored on h1: $(status_field rw state) on $(status_field rw host); $("$CXLCR" status rw | tail -n 2); h1: $("$CXLCR" pod logs h1 | tail -n 5)"
"$CXLCR" pod logs h1 | grep -q "rw died: restoring it from its recovery point" ||
	die "h1's log does not say it restored rw: $("$CXLCR" pod logs h1 | tail -n 5)"
[ "$(status_field rw address)" = "$addr" ] || die "rw came back at $(status_field rw address), not $addr"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "rw does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 19 --quiet ||
	die "rw lacks values written before its point"
[ "$(redis_copies)" = 1 ] || die "$(redis_copies) redis-server processes map the pool, not 1"
[ "$(recovered_from)" = "h0 h1" ] || die "after its restore, status no longer says rw was recovered from h0: $(recovered_from)"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check: $(cat "$POOL_DIR/check.json")"
ok "h1 restored rw from $from, the point it was recovered from: it answers at $addr with its values, one copy"
