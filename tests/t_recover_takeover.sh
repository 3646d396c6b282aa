#!/usr/bin/env bash
# A winner that dies in the middle of a recovery is replaced (issue 16,
# point 2). For each step of the recovery (STEPS, default every one):
#   three hosts; Redis on h0 with recovery points every 200 ms, filled;
#   h0 crashes; of h1 and h2, the one that fences it (its log says so)
#   stops its recovery at that step (the test hook of recovery/test_step.c)
#   and is crashed there. The other host takes the recovery over (its log
#   says so) or, once Redis ran on the dead winner, recovers it from there:
#   either way Redis answers at its address on that host with every value
#   written before its point, exactly one redis-server maps the pool, the
#   pool passes its check, and what the dead winner left half made is
#   quarantined, never handed to anyone (more quarantined regions than h0's
#   arena alone once the winner had made the fresh arena).
# Steps: fenced (before anything), quarantined (h0's arena quarantined),
# copied (the fresh arena filled, not committed), made (committed, before
# CRIU), restored (Redis up on the winner, its fence not yet done).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
STEPS=${STEPS:-fenced quarantined copied made restored}
logs() { "$CXLCR" pod logs "$1"; }
quarantined() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["quarantined"])' "$1"; }
one_step() {
	local step=$1 winner other h dir
	step_pod rd 3 11
	dir=$STEP_DIR
	step_crash "$step"
	h0_winner
	"$CXLCR" pod crash "$winner" >/dev/null || die "$step: pod crash $winner failed"

	local end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do # two leases, then the restore: bounded wait for the outcome
		[ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" = "$other" ] && break
		python3 -c 'import time; time.sleep(0.1)'
	done
	[ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" = "$other" ] ||
		die "$step: rd was not recovered on $other: $(status_field rd state) on $(status_field rd host); $other: $(logs "$other" | tail -n 5)"
	logs "$other" | grep -q "host h0: the recovery of its services by host entry .* this host takes it over" ||
		die "$step: $other's log does not say it took h0's recovery over: $(logs "$other" | tail -n 5)"
	[ "$(status_field rd address)" = "$addr" ] || die "$step: rd came back at $(status_field rd address), not $addr"
	python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "$step: rd does not answer at $addr"
	python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 11 --quiet ||
		die "$step: rd lacks values written before its point"
	[ "$(redis_copies)" = 1 ] || die "$step: $(redis_copies) redis-server processes map the pool, not 1"
	"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "$step: pool check: $(cat "$POOL_DIR/check.json")"
	local q
	q=$(quarantined "$POOL_DIR/check.json")
	case $step in
	fenced | quarantined) [ "$q" -ge 1 ] || die "$step: h0's arena is not quarantined ($q)" ;;
	*) [ "$q" -ge 2 ] || die "$step: what $winner left is not quarantined ($q quarantined regions)" ;;
	esac
	ok "$step: $winner crashed there; $other took over: rd answers at $addr with its values, one copy, $q regions quarantined"
}

for step in $STEPS; do
	say "the winner of h0's recovery crashes at step: $step"
	one_step "$step"
done
