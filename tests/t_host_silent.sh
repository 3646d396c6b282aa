#!/usr/bin/env bash
# A host whose daemon does not answer (issue 15): a verb that needs another
# host's daemon ends within its deadlines with one line and loses nothing.
# Real Redis on a two-host emulated pod (each host a pid namespace of its
# own: a copy's state is asked of its host's daemon over TCP,
# control/owner_state.c), with requests of a 3 s
# deadline (CXLCR_RPC_TIMEOUT_MS) and a lease long enough that a silent
# host is not judged dead (recovery is tests/t_recovery*.sh's business).
# h1 is made silent two ways: its daemon stopped (SIGSTOP: the kernel still
# accepts connections, nothing answers), or its control port dropping
# every packet (iptables in h1's network namespace: nothing connects).
#   a. migrate --to h1 while h1 is silent: ends with one line naming the
#      deadline; the service stays on h0, running, with every value, and
#      takes writes; once h1 answers again the next migrate to h1 works.
#   b. h1 goes silent while its CRIU holds the restored copy at pre-resume
#      (it took the arena over, it has not run): the source's request
#      passes its deadline, and the source asks h1's daemon whether the
#      copy runs (owner-state); no answer counts as running, so the source
#      is fenced rather than resumed beside a copy that may write the heap.
#      The migrate ends with one line, within the judgement's bound; the
#      copy never runs (h1's worker, its caller gone or itself past its
#      deadline, has its keeper end CRIU and the copy). Nothing is lost:
#      once h1 answers again the service is running or restorable, with
#      every value, and moves again.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

COUNT=2000
SIZE=200
PORT=6379
export CXLCR_RPC_TIMEOUT_MS=3000 CXLCR_LEASE_MS=600000

new_pool 8G
criu_hook silent
STOPPED=
DROPPING=
# shellcheck disable=SC2016 # expanded on exit
on_exit '[ -z "$STOPPED" ] || kill -CONT "$STOPPED" 2>/dev/null'
# shellcheck disable=SC2016
on_exit '[ -z "$DROPPING" ] || "$CXLCR" pod exec h1 -- iptables -D INPUT -p tcp --dport "$DROPPING" -j DROP 2>/dev/null'
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2

pod_redis "$NAME" h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 51 --quiet

# host_field HOST FIELD: a field of HOST's entry in `cxlcr hosts --json`.
host_field() {
	"$CXLCR" hosts --json | python3 -c '
import json, sys
print([h[sys.argv[2]] for h in json.load(sys.stdin)["hosts"] if h["host"] == sys.argv[1]][0])' "$1" "$2"
}
H1_PORT=$(host_field h1 port)
H1_DAEMON=$(daemon_of h1)
if [ -z "$H1_PORT" ] || [ -z "$H1_DAEMON" ]; then die "h1's control port or daemon not found"; fi

silence() { # stop|drop: h1 answers nothing from now on
	case $1 in
	stop)
		kill -STOP "$H1_DAEMON"
		STOPPED=$H1_DAEMON
		;;
	drop)
		"$CXLCR" pod exec h1 -- iptables -I INPUT -p tcp --dport "$H1_PORT" -j DROP ||
			die "cannot drop h1's port $H1_PORT"
		DROPPING=$H1_PORT
		;;
	esac
}
unsilence() {
	if [ -n "$STOPPED" ]; then
		kill -CONT "$STOPPED"
		STOPPED=
	fi
	if [ -n "$DROPPING" ]; then
		"$CXLCR" pod exec h1 -- iptables -D INPUT -p tcp --dport "$DROPPING" -j DROP ||
			die "cannot take the drop off h1's port"
		DROPPING=
	fi
}

# intact HOST WHAT: running alone on HOST, every value there, takes writes.
intact() {
	addr=$(status_field "$NAME" address)
	running_alone "$NAME" "$1" "$2"
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 51 --quiet ||
		die "$2: values differ"
	python3 "$KV" fill --host "$addr" --port $PORT --count 20 --start $COUNT --size 64 --seed 52 --quiet ||
		die "$2: the service takes no writes"
}

# one_line FILE WHAT: FILE holds exactly one line.
one_line() {
	[ "$(wc -l <"$1")" -eq 1 ] || die "$2: not one line: $(cat "$1")"
}

# ---- a: migrate to a silent host ---------------------------------------------------------
for how in drop stop; do
	say "a ($how): h1 silent; migrate to h1"
	silence $how
	rc=0
	# Bounded here only so that a hang fails the test instead of the suite.
	timeout 120 "$CXLCR" migrate "$NAME" --to h1 >/dev/null 2>"$POOL_DIR/a.err" || rc=$?
	[ $rc -ne 0 ] || die "a ($how): the migrate succeeded although h1 answers nothing"
	[ $rc -ne 124 ] || die "a ($how): the migrate did not end (it waited for h1 without a deadline)"
	one_line "$POOL_DIR/a.err" "a ($how)"
	grep -q "within 3000 ms" "$POOL_DIR/a.err" || die "a ($how): the error does not name the deadline: $(cat "$POOL_DIR/a.err")"
	ok "a ($how): $(cat "$POOL_DIR/a.err")"
	intact h0 "a ($how): after the migrate to a silent host"
	unsilence
	"$CXLCR" migrate "$NAME" --to h1 >/dev/null 2>"$POOL_DIR/a2.err" ||
		die "a ($how): the next migrate to h1 failed: $(cat "$POOL_DIR/a2.err")"
	intact h1 "a ($how): the next migrate"
	"$CXLCR" migrate "$NAME" --to h0 >/dev/null 2>"$POOL_DIR/a2.err" ||
		die "a ($how): the migrate back to h0 failed: $(cat "$POOL_DIR/a2.err")"
	intact h0 "a ($how): back on h0"
	ok "a ($how): the service stayed on h0 with every value; once h1 answered, it moved there and back"
done

# ---- b: the copy's host goes silent; the source judges it over TCP ----------------------
for how in stop drop; do
	say "b ($how): h1's CRIU holds the copy at pre-resume; h1 goes silent"
	rm -f "$HOOK/go" "$HOOK/criu.pid" "$HOOK/init.pid"
	echo pre-resume >"$HOOK/pause-at"
	"$CXLCR" migrate "$NAME" --to h1 >/dev/null 2>"$POOL_DIR/b.err" &
	mpid=$!
	criu_reached "$mpid" || { cat "$POOL_DIR/b.err" >&2; die "b ($how): CRIU never reached pre-resume"; }
	criu=$(hook_pid criu.pid)
	copy=$(hook_pid init.pid)
	silence $how
	# Bounded here only so that a hang fails the test: the rpc deadline,
	# then the judgement's (its wait and margin: 20 s), then the fence.
	wait_exit "$mpid" 120 || die "b ($how): the migrate did not end"
	rc=0
	wait "$mpid" || rc=$?
	[ $rc -ne 0 ] || die "b ($how): the migrate succeeded although h1 answered nothing"
	one_line "$POOL_DIR/b.err" "b ($how)"
	ok "b ($how): $(cat "$POOL_DIR/b.err")"
	# Judged in h0's own /proc (hosts not apart), the held copy would be
	# waited for and seen to end (its CRIU stopped once its caller gave
	# up), and the source resumed: fenced, it was judged over TCP.
	grep -q "the source was fenced" "$POOL_DIR/b.err" ||
		die "b ($how): the source was not fenced for a copy on a silent host: $(cat "$POOL_DIR/b.err")"
	# The copy never ran: CRIU's hook did not let it go.
	rm -f "$HOOK/pause-at"
	unsilence
	wait_exit "$criu" 60
	wait_exit "$copy" 60
	state=$(status_field "$NAME" state)
	case $state in
	running) ;;
	checkpointed)
		"$CXLCR" restore "$NAME" --host h0 >/dev/null 2>"$POOL_DIR/b2.err" ||
			die "b ($how): the restore after the fence failed: $(cat "$POOL_DIR/b2.err")"
		;;
	*) die "b ($how): the service is $state after the fence" ;;
	esac
	host=$(status_field "$NAME" host)
	intact "$host" "b ($how): after h1 answered again ($state)"
	"$CXLCR" migrate "$NAME" --to "$([ "$host" = h0 ] && echo h1 || echo h0)" >/dev/null 2>"$POOL_DIR/b2.err" ||
		die "b ($how): the next migrate failed: $(cat "$POOL_DIR/b2.err")"
	host=$([ "$host" = h0 ] && echo h1 || echo h0)
	intact "$host" "b ($how): the next migrate"
	if [ "$host" != h0 ]; then
		"$CXLCR" migrate "$NAME" --to h0 >/dev/null || die "b ($how): the migrate back to h0 failed"
		intact h0 "b ($how): back on h0"
	fi
	ok "b ($how): the source was fenced for a copy it could not judge; the service was $state, every value kept, and moves again"
done
stop_service "$NAME"
