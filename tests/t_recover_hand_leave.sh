#!/usr/bin/env bash
# A host whose daemon is stopped in order (systemctl stop: SIGTERM) while an
# operator's restore by hand runs there finishes that restore before it
# leaves the pod.
#
# The restore reopens the dead host's recovery in its host's name. A host
# that left is gone to the others, who took such a recovery over at once
# and fenced it: the restore failed at its next change, and the service
# stayed down. Here h0 runs Redis with recovery points and crashes; its
# winner gives the recovery up (Redis left down); the operator's restore on
# the third host stops once h0's arena is quarantined, and that host's
# daemon gets SIGTERM. It must say that it waits, stay in the pod (alive,
# not left), let the restore finish (Redis back at its address with its
# values, one copy, h0's recovery done, nobody's take-over), and only then
# leave. The old code left at once: the daemon never says it waits, and
# the winner takes h0's recovery over.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
host_state() { "$CXLCR" hosts --json | python3 -c 'import json, sys
print([h["state"] for h in json.load(sys.stdin)["hosts"] if h.get("host") == sys.argv[1]][0])' "$1"; }
said_waiting() { "$CXLCR" pod logs "$hand" | grep -q "stopping: waiting for the recovery of host entry [0-9]*'s services"; }

given_up_pod rw 23

echo quarantined >"$STEP_DIR/stop-at"
"$CXLCR" restore rw --host "$hand" --recovery-point >/dev/null 2>"$POOL_DIR/hand.err" &
cli=$!
until_true 30 stopped_here || die "the restore by hand did not stop at quarantined: $(cat "$POOL_DIR/hand.err")"
read -r worker _ <"$STEP_DIR/stopped"
h0_recovery_done && die "the restore by hand did not reopen h0's recovery"
dpid=$(daemon_of "$hand")
kill -TERM "$dpid"
until_true 30 said_waiting ||
	die "$hand's daemon did not wait for the restore by hand before leaving: $("$CXLCR" pod logs "$hand" | tail -n 3)"
kill -0 "$dpid" 2>/dev/null || die "$hand's daemon exited with a restore by hand under way"
[ "$(host_state "$hand")" = alive ] || die "$hand is $(host_state "$hand") while its daemon waits, not alive"
ok "$hand's daemon got SIGTERM during a restore by hand: it waits, alive in the pod"

on "$hand" kill -CONT "$worker" || die "cannot let $hand's restore worker (pid $worker) go on"
wait "$cli" || die "the restore by hand failed while its host's daemon stopped in order: $(cat "$POOL_DIR/hand.err")"
timeout 60 tail --pid="$dpid" -f /dev/null || die "$hand's daemon did not stop once the restore was done"
"$CXLCR" pod logs "$hand" | grep -q "stopping: the recoveries this host worked on are done" ||
	die "$hand's daemon does not say the restore was done before it left: $("$CXLCR" pod logs "$hand" | tail -n 3)"
[ "$(host_state "$hand")" = left ] || die "$hand is $(host_state "$hand") after its daemon stopped, not left"
"$CXLCR" pod logs "$winner" | grep -q "host h0: the recovery of its services .* this host takes it over" &&
	die "$winner took h0's recovery over from the restore by hand on $hand"
h0_recovery_done || die "h0's recovery is not done after the restore by hand: $("$CXLCR" hosts --json)"
[ "$(status_field rw host)" = "$hand" ] || die "rw is on $(status_field rw host), not $hand"
[ "$(status_field rw address)" = "$addr" ] || die "rw came back at $(status_field rw address), not $addr"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "rw does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 23 --quiet ||
	die "rw lacks values written before its point"
[ "$(redis_copies)" = 1 ] || die "$(redis_copies) redis-server processes map the pool, not 1"
ok "the restore by hand finished, then $hand left: rw answers at $addr with its values, one copy, h0's recovery done, no take-over"
