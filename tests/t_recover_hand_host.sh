#!/usr/bin/env bash
# An operator's restore of a dead host's service whose own host dies in the
# middle of it: the others take the dead host's recovery over from it.
#
# The restore reopens the dead host's finished recovery while it works, in
# its own name (its host entry, pid and start time). Its host's daemon
# marks the recovery done again if the restore's process ends; but if that
# host dies with it, nobody did: the recovery stayed reopened for good
# (the dead host, back, would wait for ever, and every later restore of
# its services was refused). Here h0 runs Redis with recovery points and
# crashes; its winner's recovery is killed at its first step 4 times, after
# which the winner gives it up (Redis left down, the recovery done). The
# operator's restore on the third host stops once h0's arena is
# quarantined, and that host is crashed. The winner must take the recovery
# over (its log says so) and finish it (rw, given up, stays down), and the
# operator's next restore by hand, on the winner, must bring Redis back at
# its address with its values, one copy. The old code left the recovery
# reopened: `h0's recovery stays reopened`.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
h0_fence() { fence_field h0 "$1"; }

given_up_pod rw 17

# The operator's restore on the other host, which crashes once h0's arena
# is quarantined.
echo quarantined >"$STEP_DIR/stop-at"
"$CXLCR" restore rw --host "$hand" --recovery-point >/dev/null 2>"$POOL_DIR/hand.err" &
cli=$!
until_true 30 stopped_here || die "the restore by hand did not stop at quarantined: $(cat "$POOL_DIR/hand.err")"
h0_recovery_done && die "the restore by hand did not reopen h0's recovery"
[ "$(host_of "$(h0_fence reopened_by_hand_on_entry)")" = "$hand" ] ||
	die "hosts --json does not say h0's recovery is reopened by hand on $hand: $("$CXLCR" hosts --json)"
"$CXLCR" pod crash "$hand" >/dev/null || die "pod crash $hand failed"
wait "$cli" && die "the restore by hand on the crashed $hand succeeded"

until_true 30 h0_recovery_done ||
	die "h0's recovery stays reopened after $hand died in its restore by hand: $("$CXLCR" hosts --json); $winner: $("$CXLCR" pod logs "$winner" | tail -n 5)"
"$CXLCR" pod logs "$winner" | grep -q "host h0: the recovery of its services (fence [0-9]*) was reopened by a restore by hand on host entry [0-9]*, and that host is gone: this host takes it over" ||
	die "$winner's log does not say it took the recovery over: $("$CXLCR" pod logs "$winner" | tail -n 5)"
# The take-over recovers what h0 left that was not given up: rw was, and
# stays down for the operator (its restore died with its host).
[ "$(status_field rw state)" = failed ] || die "rw is $(status_field rw state) after the take-over, not failed"
ok "$hand crashed in its restore by hand: $winner took h0's recovery over and finished it; rw left down"

"$CXLCR" restore rw --host "$winner" --recovery-point >/dev/null 2>"$POOL_DIR/hand2.err" ||
	die "the next restore by hand, on $winner, failed: $(cat "$POOL_DIR/hand2.err")"
[ "$(status_field rw state)" = running ] && [ "$(status_field rw host)" = "$winner" ] ||
	die "rw is $(status_field rw state) on $(status_field rw host) after the restore by hand on $winner"
[ "$(status_field rw address)" = "$addr" ] || die "rw came back at $(status_field rw address), not $addr"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "rw does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 17 --quiet ||
	die "rw lacks values written before its point"
[ "$(redis_copies)" = 1 ] || die "$(redis_copies) redis-server processes map the pool, not 1"
h0_recovery_done || die "h0's recovery is not done after the restore by hand: $("$CXLCR" hosts --json)"
ok "the next restore by hand, on $winner: rw answers at $addr with its values, one copy, h0's recovery done"
