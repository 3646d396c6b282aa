#!/usr/bin/env bash
# A fork child on another host keeps its snapshot for as long as it runs
# (issue 12 point 1). The lease is made short (CXLCR_LEASE_MS, read by the
# daemons), and while the first child of a Redis runs on h1, the parent on
# h0 is changed, snapshotted and forked again and again (to h1 and h0, the
# new children stopped: every fork and stop reaps), each new snapshot
# replacing the one before under the parent's name. The first child must
# still hold every value it had at the end: its borrow lives while h1's
# heartbeat goes on, however many leases pass (that a silent host's
# borrows are taken back is snapshot_test's).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

COUNT=20000
SIZE=1000
TYPES=strings,hashes
PORT=6379
LEASE_MS=300
ROUNDS=5
export CXLCR_LEASE_MS=$LEASE_MS

new_pool 8G
pod_up 2

say "cxlcr run --host h0 redis-server; $COUNT keys; lease $LEASE_MS ms"
pod_redis redis h0 1G
parent=$addr
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5
"$CXLCR" snapshot redis >/dev/null || die "cxlcr snapshot failed"
out=$("$CXLCR" fork redis --to h1 --json) || die "cxlcr fork failed"
read -r kid1 addr1 < <(echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["children"][0]
print(c["name"], c["address"])')
SERVICES+=("$kid1")
python3 "$KV" verify --host "$addr1" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5 \
	--quiet || die "$kid1 does not hold its parent's values"
ok "$kid1 on h1 holds every value"

start=$(date +%s%N)
for round in $(seq 1 $ROUNDS); do
	python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
		--seed $((5 + round)) >/dev/null
	"$CXLCR" snapshot redis >/dev/null || die "snapshot $round failed"
	for to in h1 h0; do
		out=$("$CXLCR" fork redis --to $to --json) || die "fork $round to $to failed"
		name=$(echo "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["children"][0]["name"])')
		SERVICES+=("$name")
		stop_service "$name"
	done
done
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
say "$ROUNDS rounds of change + snapshot + 2 forks + 2 stops in $elapsed_ms ms"
# What is asserted needs leases to have passed meanwhile; the rounds take
# seconds, and any time they did not take is waited for here.
if [ "$elapsed_ms" -lt $((4 * LEASE_MS)) ]; then
	sleep "$(python3 -c "print(($((4 * LEASE_MS)) - $elapsed_ms) / 1000)")"
fi
"$CXLCR" status redis --json >/dev/null   # one more reaper
python3 "$KV" verify --host "$addr1" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5 \
	--quiet || die "$kid1 lost values once its snapshot was replaced $ROUNDS times and leases had passed"
ok "$kid1 still holds every value of its snapshot after $ROUNDS newer snapshots and $((elapsed_ms / LEASE_MS)) leases"
