#!/usr/bin/env bash
# An operator's restore of a dead host's service (`cxlcr restore NAME
# --host H --recovery-point`) that dies half-way: the dead host's recovery,
# which it had reopened, is done again, and the restore can be run again.
#
# The restore reopens the dead host's finished recovery while it works (so
# that the host, should it come back, does not free what it quarantined
# meanwhile); before, a restore killed in between left the recovery open
# for good: the host would have waited for ever, and every later restore
# of its services was refused ("its services are being recovered"). Here
# h0 runs Redis with recovery points and crashes; h1's recovery of it is
# killed at its first step 4 times (the test hook of recovery/test_step.c),
# after which h1 gives it up (Redis left down, the recovery done); the
# operator's restore on h1 is then killed once h0's arena is quarantined.
# h1's daemon must mark h0's recovery done again and say so. A second
# restore is killed once it has committed its fresh arena (before CRIU);
# the third must undo that arena (it says so) and bring Redis back at its
# address with its values, one copy, with nothing of h1's held back.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
# Whether the recovery of h0's last fence is done (`cxlcr hosts --json`).
h0_recovered() { fence_field h0 recovered; }
is_recovered() { [ "$(h0_recovered)" = True ]; }

step_pod rw 2 13
# h1's recovery, killed at "fenced" in each of its 4 runs (the first and 3
# more): h1 gives it up. The next stop is asked before each kill.
step_crash fenced
give_up_recovery h1
until_true 30 is_recovered || die "h1 did not give h0's recovery up: $("$CXLCR" hosts --json)"
[ "$(status_field rw state)" = failed ] || die "rw is $(status_field rw state), not failed"
ok "h1's recovery of h0 killed 4 times: given up, rw left down ($(status_field rw state)), the recovery done"

# The operator's restore, killed once h0's arena is quarantined.
echo quarantined >"$STEP_DIR/stop-at"
"$CXLCR" restore rw --host h1 --recovery-point >/dev/null 2>"$POOL_DIR/hand.err" &
cli=$!
until_true 30 stopped_here || die "the restore by hand did not stop at quarantined: $(cat "$POOL_DIR/hand.err")"
read -r pid _ <"$STEP_DIR/stopped"
is_recovered && die "the restore by hand did not reopen h0's recovery"
on h1 kill -KILL "$pid" || die "cannot kill the restore's worker (pid $pid on h1)"
wait "$cli" && die "the killed restore by hand succeeded"
until_true 30 is_recovered ||
	die "h0's recovery stays reopened after the restore by hand died: $("$CXLCR" hosts --json); h1: $("$CXLCR" pod logs h1 | tail -n 3)"
"$CXLCR" pod logs h1 | grep -q "worker $pid ended in a restore by hand: the recovery it had reopened is done again" ||
	die "h1's log does not say it marked the recovery done again: $("$CXLCR" pod logs h1 | tail -n 5)"
ok "the restore by hand killed half-way: h1 marked h0's recovery done again"

# A second one, killed once it has committed the fresh arena (before CRIU):
# the next restore undoes that arena and makes it again.
rm -f "$STEP_DIR/stopped"
echo made >"$STEP_DIR/stop-at"
"$CXLCR" restore rw --host h1 --recovery-point >/dev/null 2>"$POOL_DIR/hand1.err" &
cli=$!
until_true 30 stopped_here || die "the restore by hand did not stop at made: $(cat "$POOL_DIR/hand1.err")"
read -r pid _ <"$STEP_DIR/stopped"
on h1 kill -KILL "$pid" || die "cannot kill the restore's worker (pid $pid on h1)"
wait "$cli" && die "the killed restore by hand succeeded"
until_true 30 is_recovered || die "h0's recovery stays reopened after the second restore by hand died"
ok "the restore by hand killed once its fresh arena was committed: h0's recovery done again"

"$CXLCR" restore rw --host h1 --recovery-point >/dev/null 2>"$POOL_DIR/hand2.err" ||
	die "the next restore by hand failed: $(cat "$POOL_DIR/hand2.err")"
grep -q "what an earlier restore here left half made: 0 region(s) freed, 1 fresh arena(s) undone" "$POOL_DIR/hand2.err" ||
	die "the next restore by hand did not undo the fresh arena the killed one committed: $(cat "$POOL_DIR/hand2.err")"
[ "$(status_field rw state)" = running ] && [ "$(status_field rw host)" = h1 ] ||
	die "rw is $(status_field rw state) on $(status_field rw host) after the restore by hand"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "rw does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 13 --quiet ||
	die "rw lacks values written before its point"
[ "$(redis_copies)" = 1 ] || die "$(redis_copies) redis-server processes map the pool, not 1"
is_recovered || die "h0's recovery is not done after the restore by hand: $("$CXLCR" hosts --json)"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check: $(cat "$POOL_DIR/check.json")"
python3 - "$POOL_DIR/check.json" <<'PY' || die "regions of h1 are held back: $(cat "$POOL_DIR/check.json")"
import json, sys
q = json.load(open(sys.argv[1]))["quarantined_regions"]
assert all(r.endswith(" of h0") for r in q), q
PY
ok "the next restore by hand: rw answers at $addr on h1 with its values, one copy, h0's recovery done"
