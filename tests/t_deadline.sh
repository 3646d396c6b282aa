#!/usr/bin/env bash
# Deadlines, and a verb whose worker dies with the service frozen (issue
# 13 point 4), with real Redis on an emulated pod whose requests have a
# 3 s deadline (CXLCR_RPC_TIMEOUT_MS):
#   a. the destination's daemon does not accept (stopped): the migrate
#      ends within its deadlines with one line, the source resumed with
#      every value; the requests the daemon finds when it goes on are not
#      served (their caller gave up), and the next migrate works;
#   b. the source's worker is killed while CRIU holds the service frozen
#      (post-dump, its link off the bridge): the next verb on the service
#      finds the dead holder's lease, resumes the frozen source (after
#      claiming the epoch), and does its work; the service answers at its
#      address with every value, one process maps the pool.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

COUNT=2000
SIZE=200
PORT=6379
export CXLCR_RPC_TIMEOUT_MS=3000

new_pool 8G
criu_hook dl
on_exit '[ -n "${stopped_daemon:-}" ] && kill -CONT "$stopped_daemon" 2>/dev/null'
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2

pod_redis "$NAME" h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 31 --quiet

intact() {
	running_alone "$NAME" "$1" "$2"
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 31 --quiet ||
		die "$2: values differ"
	python3 "$KV" fill --host "$addr" --port $PORT --count 20 --start $COUNT --size 64 --seed 32 --quiet ||
		die "$2: the service takes no writes"
}


# ---- a: the destination does not accept ----------------------------------------------------
say "a: h1's daemon stopped; migrate to h1"
stopped_daemon=$(daemon_of h1)
[ -n "$stopped_daemon" ] || die "h1's daemon not found"
kill -STOP "$stopped_daemon"
rc=0
# Bounded here only so that a hang fails the test instead of the suite.
timeout 60 "$CXLCR" migrate "$NAME" --to h1 >/dev/null 2>"$POOL_DIR/a.err" || rc=$?
[ $rc -ne 0 ] || die "a: the migrate succeeded although h1 answers nothing"
[ $rc -ne 124 ] || die "a: the migrate did not end (it waited for h1 without a deadline)"
[ "$(wc -l <"$POOL_DIR/a.err")" -eq 1 ] || die "a: not one line: $(cat "$POOL_DIR/a.err")"
grep -q "no answer within 3000 ms" "$POOL_DIR/a.err" || die "a: the error does not name the deadline: $(cat "$POOL_DIR/a.err")"
ok "a: $(cat "$POOL_DIR/a.err")"
intact h0 "a: after the migrate to a silent host"
epoch=$(status_field "$NAME" owner_epoch)
kill -CONT "$stopped_daemon"
stopped_daemon=
# The daemon goes on with the requests it had queued: their caller is gone.
"$CXLCR" status "$NAME" >/dev/null
intact h0 "a: after h1's daemon went on"
[ "$(status_field "$NAME" owner_epoch)" = "$epoch" ] || die "a: a stale request moved the epoch on"
"$CXLCR" migrate "$NAME" --to h1 >/dev/null || die "a: the next migrate to h1 failed"
intact h1 "a: the next migrate"
ok "a: the next migrate to h1 worked"

# ---- b: the source's worker dies with the service frozen -----------------------------------
say "b: the source worker killed while CRIU holds the service frozen"
rm -f "$HOOK/go" "$HOOK/criu.pid"
echo post-dump >"$HOOK/pause-at"
"$CXLCR" migrate "$NAME" --to h0 >/dev/null 2>"$POOL_DIR/b.err" &
mpid=$!
criu_reached "$mpid" || { cat "$POOL_DIR/b.err" >&2; die "b: CRIU never reached post-dump"; }
criu=$(hook_pid criu.pid)
worker=$(criu_worker "$criu") # (CRIU's parent is its keeper)
kill -KILL "$worker"
rc=0
wait "$mpid" || rc=$?
[ $rc -ne 0 ] || die "b: the migrate succeeded although its worker was killed"
wait_exit "$criu" 30
rm -f "$HOOK/pause-at"
ok "b: worker killed; the migrate said: $(cat "$POOL_DIR/b.err")"
# The next verb finds the dead holder, ends its freeze, and goes on.
"$CXLCR" migrate "$NAME" --to h0 >/dev/null 2>"$POOL_DIR/b2.err" ||
	die "b: the next migrate failed: $(cat "$POOL_DIR/b2.err")"
intact h0 "b: the migrate after the one whose worker was killed"
ok "b: the next migrate resumed the frozen source and moved it; every value there"
stop_service "$NAME"
