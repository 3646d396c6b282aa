#!/usr/bin/env bash
# The worker that recovers a dead host's services dies while its host
# lives (killed, crashed, or past its deadline): its daemon runs it again.
#
# Nobody takes a recovery over from a winner that lives, and only the end
# of the worker's run marks the recovery done: before, such a death left
# the services down and the fence not done for good. Here h0 runs Redis
# with recovery points and crashes; h1 fences it, and its recovery worker
# stops at a step (the test hook of recovery/test_step.c) and is killed
# there: at "fenced" (before anything), "quarantined" (h0's arena
# quarantined, nothing made yet), "copied" (the fresh arena's regions made
# and filled, not committed) and "made" (the fresh arena committed, before
# CRIU). h1's log must say the recovery ended early and runs again, Redis
# must answer at its address on h1 with every value written before its
# point, one copy of it, and h0's fence must be done (`cxlcr hosts --json`:
# recovered). Nothing the dead worker made may be left: the only regions
# held back are h0's (none of h1's being made), and there is one arena of
# the service. (Before, killed at "copied" the regions it made stayed for
# good, and at "made" the run again found the service replaced, and it
# stayed down.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
STEPS=${STEPS:-fenced quarantined copied made}
logs() { "$CXLCR" pod logs "$1"; }
# Whether the recovery of h0's last fence is done (`cxlcr hosts --json`).
h0_recovered() { fence_field h0 recovered; }
one_step() {
	local step=$1 dir pid
	step_pod rw 2 13
	dir=$STEP_DIR
	step_crash "$step"
	read -r pid _ <"$dir/stopped"
	on h1 kill -KILL "$pid" || die "$step: cannot kill h1's recovery worker (pid $pid on h1)"

	local end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do # the daemon's next tick, then the restore: bounded wait for the outcome
		[ "$(status_field rw state)" = running ] && [ "$(status_field rw host)" = h1 ] && break
		python3 -c 'import time; time.sleep(0.1)'
	done
	[ "$(status_field rw state)" = running ] && [ "$(status_field rw host)" = h1 ] ||
		die "$step: rw was not recovered on h1 after its worker was killed: $(status_field rw state) on $(status_field rw host); h1: $(logs h1 | tail -n 5)"
	logs h1 | grep -q "host h0: the recovery of its services (fence [0-9]*) ended before it was done: running it again" ||
		die "$step: h1's log does not say it ran the recovery again: $(logs h1 | tail -n 5)"
	[ "$(status_field rw address)" = "$addr" ] || die "$step: rw came back at $(status_field rw address), not $addr"
	python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "$step: rw does not answer at $addr"
	python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 13 --quiet ||
		die "$step: rw lacks values written before its point"
	[ "$(redis_copies)" = 1 ] || die "$step: $(redis_copies) redis-server processes map the pool, not 1"
	end=$((SECONDS + 30))
	while [ $SECONDS -lt $end ] && [ "$(h0_recovered)" != True ]; do
		python3 -c 'import time; time.sleep(0.1)' # polling a condition, bounded
	done
	[ "$(h0_recovered)" = True ] || die "$step: h0's recovery is not done: $("$CXLCR" hosts --json)"
	"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "$step: pool check: $(cat "$POOL_DIR/check.json")"
	python3 - "$POOL_DIR/check.json" <<'PY' || die "$step: the dead worker's regions are left: $(cat "$POOL_DIR/check.json")"
import json, sys
c = json.load(open(sys.argv[1]))
q = c["quarantined_regions"]
assert c["quarantined"] == len(q) and all(r.endswith(" of h0") for r in q), q
PY
	case $step in
	copied | made)
		logs h1 | grep -q "what an earlier recovery here left half made: " ||
			die "$step: h1's log does not say what it undid: $(logs h1 | tail -n 5)" ;;
	esac
	ok "$step: h1's recovery worker killed there; h1 ran it again: rw answers at $addr with its values, one copy, fence done, nothing of h1's held back"
}

for step in $STEPS; do
	say "h1's recovery worker is killed at step: $step"
	one_step "$step"
done
