#!/usr/bin/env bash
# CRIU killed in the middle of a checkpoint, a migrate or a restore (issue
# 3's faults), with real Redis on an emulated pod. The daemons run with
# CXLCR_TEST_CRIU_HOOK: CRIU's action script (tests/lib/criu-kill-hook.sh)
# then stops CRIU at the step the test names and hands the test its pid,
# which the test kills (SIGKILL). Each case must end in one clear error
# line, with the service running somewhere, answering at its address with
# every value intact, one process mapping the pool, and nothing left
# behind that would make the next migrate fail (which then runs).
#   dump:    post-dump (tasks frozen, link off the bridge, images
#            written), in a migrate and in a checkpoint;
#   restore: post-setup-namespaces (the new namespaces and link exist) and
#            post-restore (the tasks are rebuilt, not yet running), in a
#            migrate and in a restore after a checkpoint.
# Every case here is one of the fault matrix's (tests/t_fault_*.sh), whose
# sample `make test` runs: this file runs under `make long`, with all of it.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
[ "${CXLCR_TESTS:-long}" != short ] || skip "its cases are the fault matrix's; make long runs it"
need redis-server

COUNT=5000
SIZE=400
TYPES=strings,hashes,lists,sets,zsets
PORT=6379

new_pool 8G
criu_hook flt
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2

say "cxlcr run --host h0 redis-server"
pod_redis "$NAME" h0 512M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 11 --quiet

# intact HOST WHAT: the service runs on HOST, alone, and has every value.
intact() {
	running_alone "$NAME" "$1" "$2"
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
		--seed 11 --quiet || die "$2: values differ"
	# It takes writes again.
	python3 "$KV" fill --host "$addr" --port $PORT --count 50 --start $COUNT --size 64 --seed 12 \
		--quiet || die "$2: the service takes no writes"
}

# killed ACTION WHAT CMD...: runs CMD with CRIU stopped at ACTION and then
# killed; CMD must fail with one line, which is printed.
killed() {
	local action=$1 what=$2 pid err rc=0 i
	shift 2
	rm -f "$HOOK/criu.pid"
	echo "$action" >"$HOOK/kill-at"
	"$@" >/dev/null 2>"$POOL_DIR/killed.err" &
	pid=$!
	criu_reached "$pid" || { cat "$POOL_DIR/killed.err" >&2; die "$what: CRIU never reached $action"; }
	kill -KILL "$(hook_pid criu.pid)"
	wait "$pid" || rc=$?
	rm -f "$HOOK/kill-at"
	err=$(cat "$POOL_DIR/killed.err")
	[ $rc -ne 0 ] || die "$what: succeeded although CRIU was killed"
	[ "$(echo "$err" | wc -l)" -eq 1 ] || die "$what: not one line: $err"
	echo "$err" | grep -q "criu killed by signal 9" || die "$what: the error does not say criu was killed: $err"
	# The failed verb's work directory keeps CRIU's logs, not a copy of the images.
	local left
	left=$(on_hosts find /var/lib/cxlcr -mindepth 3 -path "*.$NAME.*" -type f ! -name '*.log' 2>/dev/null | head -3)
	[ -z "$left" ] || die "$what: the failed verb left images behind: $left"
	ok "$what: ${err% (log *}"
}

for action in post-dump; do
	# Before the freeze the service drops its page tables over the heap
	# (preload/shed.c): killed after the dump, it has not touched it since.
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
		--seed 11 --quiet || die "values differ before the killed migrate"
	before=$(status_field "$NAME" rss_shmem_kb)
	killed $action "migrate, criu dump killed at $action" "$CXLCR" migrate "$NAME" --to h1
	after=$(status_field "$NAME" rss_shmem_kb)
	[ "$after" -lt "$before" ] || die "the heap's page tables were not shed: RssShmem $before kB, then $after kB"
	ok "page tables shed before the freeze: RssShmem $before kB -> $after kB"
	intact h0 "migrate, criu dump killed at $action"
	killed $action "checkpoint, criu dump killed at $action" "$CXLCR" checkpoint "$NAME"
	intact h0 "checkpoint, criu dump killed at $action"
done

host=h0
for action in post-setup-namespaces post-restore; do
	to=$([ $host = h0 ] && echo h1 || echo h0)
	killed $action "migrate, criu restore killed at $action" "$CXLCR" migrate "$NAME" --to $to
	intact $host "migrate, criu restore killed at $action"
	"$CXLCR" migrate "$NAME" --to $to >/dev/null || die "the next migrate to $to failed"
	intact $to "the next migrate"
	host=$to
	"$CXLCR" checkpoint "$NAME" >/dev/null || die "checkpoint failed"
	killed $action "restore, criu restore killed at $action" "$CXLCR" restore "$NAME" --host $host
	[ "$(status_field "$NAME" state)" = checkpointed ] || die "the service is $(status_field "$NAME" state)"
	"$CXLCR" restore "$NAME" --host $host >/dev/null || die "a second restore after the killed one failed"
	intact $host "restore, criu restore killed at $action, then restored again"
done

# Killed at pre-resume: after the plugin took the arena over for the
# restored tasks, before they run. The half-restored tasks are ended; the
# source, fenced by the new epoch, takes its arena back with a
# compare-and-set and resumes: never two writers, nothing lost.
to=$([ $host = h0 ] && echo h1 || echo h0)
epoch=$(status_field "$NAME" owner_epoch)
killed pre-resume "migrate, criu restore killed at pre-resume" "$CXLCR" migrate "$NAME" --to $to
intact $host "migrate, criu restore killed at pre-resume"
[ "$(status_field "$NAME" owner_epoch)" -ge $((epoch + 2)) ] ||
	die "the epoch went from $epoch to $(status_field "$NAME" owner_epoch): no take-over and take-back"
"$CXLCR" migrate "$NAME" --to $to >/dev/null || die "the next migrate to $to failed"
intact $to "the migrate after the one killed at pre-resume"
host=$to

# The same in a plain restore: the checkpoint, stale once the plugin took
# the arena over, is published again with the new epoch; the next restore
# works and finds every value.
"$CXLCR" checkpoint "$NAME" >/dev/null || die "checkpoint failed"
killed pre-resume "restore, criu restore killed at pre-resume" "$CXLCR" restore "$NAME" --host $host
[ "$(status_field "$NAME" state)" = checkpointed ] || die "after the killed restore the service is $(status_field "$NAME" state)"
"$CXLCR" restore "$NAME" --host $host >/dev/null || die "a restore after the one killed at pre-resume failed"
intact $host "restore, criu restore killed at pre-resume, then restored again"

# The destination's worker killed while its CRIU waits at post-restore
# (issue 13 point 2): the source resumes, and the CRIU that worker started
# must not go on to restore and take the arena over behind its back (it
# dies with its worker, and the source claimed the epoch before it
# resumed). Then CRIU is let go: one process maps the arena, nothing lost.
to=$([ $host = h0 ] && echo h1 || echo h0)
rm -f "$HOOK/go" "$HOOK/criu.pid"
echo post-restore >"$HOOK/pause-at"
"$CXLCR" migrate "$NAME" --to $to >/dev/null 2>"$POOL_DIR/worker.err" &
mpid=$!
criu_reached "$mpid" || { cat "$POOL_DIR/worker.err" >&2; die "CRIU never reached post-restore"; }
criu=$(hook_pid criu.pid)
worker=$(criu_worker "$criu")
kill -KILL "$worker"
rc=0
wait "$mpid" || rc=$?
[ $rc -ne 0 ] || die "the migrate succeeded although its destination worker was killed"
[ "$(wc -l <"$POOL_DIR/worker.err")" -eq 1 ] || die "not one line: $(cat "$POOL_DIR/worker.err")"
touch "$HOOK/go"
wait_exit "$criu" 60
rm -f "$HOOK/pause-at" "$HOOK/go"
intact $host "migrate, the destination's worker killed while CRIU waited at post-restore"
ok "destination worker killed: $(cat "$POOL_DIR/worker.err")"
"$CXLCR" migrate "$NAME" --to $to >/dev/null || die "the migrate after the killed destination worker failed"
intact $to "the migrate after the killed destination worker"
host=$to

left=$(on_hosts find /var/lib/cxlcr -mindepth 2 -maxdepth 2 -name "*.$NAME.*" 2>/dev/null | wc -l)
say "$left work directories (with CRIU's logs) left by the failed runs"
stop_service "$NAME"
