#!/usr/bin/env bash
# A service that an operator stopped (SIGSTOP) comes back stopped from a
# migrate, as CRIU on its own brings a stopped process back: the restore
# lets the restored tasks run only once it is judged a success, and it
# used to let them all run alike (docs/control-plane.md). Here Redis on h0
# is filled and stopped, migrated to h1: there it must be stopped (state
# T), answer nothing, and once continued (SIGCONT) answer with every value.
# Migrated back to h0 while it runs, it must run there at once (a running
# process is not left stopped). And a migrate that fails (its destination's
# daemon killed) resumes only what ran before it: the stopped Redis stays
# stopped on h0 (the old code continued every process of the source). So
# does a migrate whose worker dies with Redis frozen (killed while CRIU's
# dump waits at post-dump): its daemon takes the lease over and ends the
# freeze, knowing from its host's record which processes were stopped
# before it (control/frozen.h; the old code continued them all).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

PORT=6379
POOLIMG=$ROOT/tests/lib/poolimg.py
# state HOST PID: the state letter of process PID of HOST (R, S, T...).
state() { on "$1" cat "/proc/$2/stat" | sed 's/^.*) //' | cut -d' ' -f1; }

new_pool 4G
criu_hook stp
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
pod_redis redis h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count 5000 --size 200 --seed 41 --quiet

is_stopped() { [ "$(state "$1" "$2")" = T ]; }
on h0 kill -STOP "$(status_field redis pid)" || die "cannot stop redis on h0"
until_true 10 is_stopped h0 "$(status_field redis pid)" || die "redis on h0 is not stopped"

kill -KILL "$(daemon_of h1)"
"$CXLCR" migrate redis --to h1 >/dev/null 2>"$POOL_DIR/migrate.err" &&
	die "a migrate to a host whose daemon is dead succeeded"
# (Failed after the freeze: the source was dumped and resumed.)
grep -q "to h1 failed.*goes on running on h0" "$POOL_DIR/migrate.err" ||
	die "the migrate did not fail after its freeze: $(cat "$POOL_DIR/migrate.err")"
[ "$(status_field redis host)" = h0 ] || die "redis is on $(status_field redis host) after the failed migrate"
is_stopped h0 "$(status_field redis pid)" ||
	die "a failed migrate continued the stopped redis (state $(state h0 "$(status_field redis pid)"))"
"$CXLCR" pod up --hosts 2 >/dev/null || die "pod up did not bring h1 back"
ok "a migrate to h1 whose daemon was dead failed: redis still stopped on h0"

"$CXLCR" migrate redis --to h1 >/dev/null 2>"$POOL_DIR/migrate.err" ||
	die "the migrate of a stopped redis failed: $(cat "$POOL_DIR/migrate.err")"
[ "$(status_field redis host)" = h1 ] || die "redis is on $(status_field redis host), not h1"
grep -q "did not answer a tracking request" "$POOL_DIR/migrate.err" &&
	die "the migrate waited for a stopped redis to answer its tracker: $(cat "$POOL_DIR/migrate.err")"
pid=$(status_field redis pid)
[ "$(state h1 "$pid")" = T ] || die "redis was stopped on h0 and runs on h1 (state $(state h1 "$pid"))"
rc=0
timeout 2 redis-cli -h "$addr" -p $PORT ping >/dev/null 2>&1 || rc=$?
[ $rc = 124 ] || die "the stopped redis on h1 did not keep a ping waiting (redis-cli: $rc)"
ok "stopped on h0, migrated to h1: still stopped there, answers nothing"

# Its restore is over: the copy is not held (by CRIU or its keeper), it
# was stopped by the operator, and a judge of the arena's owner (a failed
# verb's source deciding whether to resume or be fenced) must not wait
# for it to run (control/owner_state.c; the old code waited its whole
# wait, 10 s in a verb, here 10 minutes).
gen=$(python3 "$POOLIMG" list "$CXLCR_POOL" | awk '$2 == 1 && $6 == "redis" { print $3 }')
[ -n "$gen" ] || die "no arena named redis in the pool"
said=$(timeout 60 "$CXLCR" pod exec h1 -- "$CXLCR" owner-state "$gen" "$(status_field redis owner_epoch)" "$pid" held 600000) ||
	die "the judge of redis's owner on h1 waited for the copy left stopped (or failed): '$said'"
[ "$said" = runs ] || die "the judge of redis's owner on h1 said '$said', not runs"
ok "the judge of the arena's owner takes the copy left stopped as running at once"

on h1 kill -CONT "$pid" || die "cannot continue redis on h1"
python3 "$KV" verify --host "$addr" --port $PORT --count 5000 --size 200 --seed 41 --quiet ||
	die "redis lacks values after it was continued on h1"
ok "continued on h1: every value at $addr"

"$CXLCR" migrate redis --to h0 >/dev/null 2>"$POOL_DIR/migrate.err" ||
	die "the migrate back to h0 failed: $(cat "$POOL_DIR/migrate.err")"
pid=$(status_field redis pid)
[ "$(state h0 "$pid")" != T ] || die "redis ran on h1 and is stopped on h0"
python3 "$KV" verify --host "$addr" --port $PORT --count 5000 --size 200 --seed 41 --quiet ||
	die "redis lacks values back on h0"
ok "running on h1, migrated back to h0: it runs there with every value"

# The source's worker dies with Redis frozen: h0's daemon ends the freeze.
pid=$(status_field redis pid)
on h0 kill -STOP "$pid" || die "cannot stop redis on h0"
until_true 10 is_stopped h0 "$pid" || die "redis on h0 is not stopped"
echo post-dump >"$HOOK/pause-at"
"$CXLCR" migrate redis --to h1 >/dev/null 2>"$POOL_DIR/migrate.err" &
cli=$!
criu_reached "$cli" || die "the migrate's CRIU never reached post-dump: $(cat "$POOL_DIR/migrate.err")"
kill -KILL "$(criu_worker "$(hook_pid criu.pid)")"
touch "$HOOK/go"
wait "$cli" && die "a migrate whose worker was killed succeeded"
lease_free() { [ "$(status_field redis verb)" = None ]; }
until_true 60 lease_free || die "h0's daemon did not take the dead worker's lease over: $(status_field redis verb)"
[ "$(status_field redis host)" = h0 ] || die "redis is on $(status_field redis host) after its worker died"
pid=$(status_field redis pid)
is_stopped h0 "$pid" ||
	die "the freeze a dead worker left was ended by continuing the stopped redis (state $(state h0 "$pid"))"
ok "a migrate's worker killed with the stopped redis frozen: its daemon ended the freeze, redis still stopped"
on h0 kill -CONT "$pid" || die "cannot continue redis on h0"
python3 "$KV" verify --host "$addr" --port $PORT --count 5000 --size 200 --seed 41 --quiet ||
	die "redis lacks values after the dead worker's freeze"
ok "continued on h0: every value at $addr"
