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
# stopped on h0 (the old code continued every process of the source).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

PORT=6379
# state HOST PID: the state letter of process PID of HOST (R, S, T...).
state() { on "$1" cat "/proc/$2/stat" | sed 's/^.*) //' | cut -d' ' -f1; }

new_pool 4G
pod_up 2
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
