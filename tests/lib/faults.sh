# shellcheck shell=bash
# The fault matrix of tests/t_fault_*.sh (issue 13), sourced after
# tests/lib/common.sh: one case is a verb on a Redis of a two-host pod, held
# by CRIU's action script (tests/lib/criu-kill-hook.sh) at one of CRIU's
# steps, where the test kills or stalls one of the processes the verb runs:
#
#   VICTIM  criu    the CRIU that reached the step
#           cli     the command line (the verb goes on in the daemons)
#           src     the worker of the service's host: in a dump, CRIU's
#                   parent; in a restore, the verb's worker there (migrate's,
#                   or the fork API's)
#           dst     the worker of the restoring host (migrate's restore,
#                   restore, fork-restore)
#   HOW     kill    SIGKILL
#           stall   SIGSTOP, never continued: the verb's deadlines must end
#                   it (the daemons run with a short $CXLCR_RPC_TIMEOUT_MS)
#
# A writer (bench/loadclient --ack-log) writes to the service throughout
# each case. After the fault, whatever the verb said: every process it
# started has ended and nothing holds the service's lease (a killed
# worker's daemon takes it over and resumes what it left frozen); the
# service is settled (a checkpointed one restored, as a user would) and
# runs alone, and the same verb then works; and after that the service
# runs on one host, not stopped, the only process mapping the pool, answers
# at its address with every value and every acknowledged write, and the
# pool holds what a service with one snapshot holds, no more (catalog
# entries and borrows, snapshot, child and image-set regions:
# tests/snapshot_tool census).
#
#   fault_setup PREFIX      the pod, the service (NAME) and its data
#   fault_matrix ROW...     the cases of rows "VERB STEP,... VICTIM:HOW ..."
#   fault_case VERB STEP VICTIM HOW
#                           one case; VERB is migrate, checkpoint, restore,
#                           snapshot or fork (fork dumps only when the
#                           service has no snapshot: for a dump STEP the
#                           case starts the service anew first)
#   fault_done              the summary line
# $FAULT_ONLY, a glob on "VERB STEP VICTIM HOW", runs only the cases it
# matches (to look at one).
# shellcheck disable=SC2154 # addr: set by common.sh's pod_redis
# shellcheck source=tests/lib/loadclient.sh
. "$ROOT/tests/lib/loadclient.sh"

COUNT=1000
SIZE=200
PORT=6379
DEADLINE_MS=2000
SNAPTOOL=$(dirname "$CXLCR")/tests/snapshot_tool
CASES=0
CASE_START=$EPOCHREALTIME
ACKLOGS=()
LC_PID=

fault_setup() {
	[ -x "$SNAPTOOL" ] || die "tests/snapshot_tool is not built"
	need redis-server
	export CXLCR_RPC_TIMEOUT_MS=$DEADLINE_MS
	new_pool 8G
	criu_hook "$1"
	LOADCLIENT=$(loadclient_path)
	# shellcheck disable=SC2016 # expanded on exit
	on_exit '[ -z "$LC_PID" ] || kill -KILL "$LC_PID" 2>/dev/null'
	# shellcheck disable=SC2016
	on_exit '[ -z "${STOPPED:-}" ] || kill -KILL $STOPPED 2>/dev/null'
	CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
	pod_redis "$NAME" h0 256M
	python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 41 --quiet
	# A snapshot, so that a fork restores at once (and the census has one).
	"$CXLCR" snapshot "$NAME" >/dev/null || die "the first snapshot failed"
	STEADY=$("$SNAPTOOL" census)
	[ "$STEADY" = "entries 1 borrows 0 snapshots 1 children 0 images 1" ] ||
		die "after the first snapshot the pool holds '$STEADY'"
}

# The daemon of HOST (not one of its workers).
daemon_of() {
	"$CXLCR" pod up --hosts 2 --json | python3 -c '
import json, sys
print([h["daemon_pid"] for h in json.load(sys.stdin)["hosts"] if h["host"] == sys.argv[1]][0])' "$1"
}

# worker_of HOST: the one worker HOST's daemon runs now.
worker_of() {
	local d w
	d=$(daemon_of "$1")
	w=$(pgrep -P "$d" -x cxlcrd | tr '\n' ' ')
	[ "$(echo "$w" | wc -w)" -eq 1 ] || die "$WHAT: $1's daemon runs workers '$w', not one"
	echo "${w% }"
}

# Waits (bounded) until no worker of this pod's daemons runs: a daemon
# answers a fork before it returns its own borrow.
workers_idle() {
	local w
	for w in $(pgrep -x cxlcrd); do
		tr '\0' '\n' <"/proc/$w/environ" 2>/dev/null | grep -qx "CXLCR_POOL=$CXLCR_POOL" || continue
		[ "$(ps -o comm= -p "$(ps -o ppid= -p "$w" | tr -d ' ')")" != cxlcrd ] || wait_exit "$w" 60
	done
}

# Waits (bounded: 30 s) until no verb holds the service's lease.
lease_free() {
	local v
	for _ in $(seq 1 300); do
		v=$(status_field "$NAME" verb)
		[ "$v" = None ] && return 0
		sleep 0.1
	done
	die "$WHAT: the service stays held: $v"
}

other() { [ "$1" = h0 ] && echo h1 || echo h0; }

writer_start() {
	local log=$POOL_DIR/ack.$CASES
	"$LOADCLIENT" --host "$addr" --port $PORT --mode set --keys 500 --key-prefix ack: --value-size 64 \
		--rate 500 --timeout-ms 500 --ack-log "$log" --json "$POOL_DIR/load.json" --quiet &
	LC_PID=$!
	ACKLOGS+=("$log")
}

writer_stop() {
	kill -TERM "$LC_PID"
	wait "$LC_PID" || die "$WHAT: the writer failed"
	LC_PID=
}

# The verb's command line as the user types it (into ARGS), on the
# service's host now.
verb_args() {
	case $VERB in
	migrate) ARGS=(migrate "$NAME" --to "$(other "$HOST")") ;;
	checkpoint) ARGS=(checkpoint "$NAME") ;;
	restore) ARGS=(restore "$NAME" --host "$HOST") ;;
	snapshot) ARGS=(snapshot "$NAME") ;;
	fork) ARGS=(fork "$NAME" --to "$(other "$HOST")") ;;
	esac
}

run_verb() {
	verb_args
	"$CXLCR" "${ARGS[@]}"
}

# Stops the service's fork children (they map its snapshot in the pool).
stop_children() {
	local c
	for c in $("$CXLCR" ps --json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["services"]:
    if s["name"] != sys.argv[1]:
        print(s["name"])' "$NAME"); do
		"$CXLCR" stop "$c" >/dev/null || die "$WHAT: cannot stop fork child $c"
	done
}

# The victim's pid, CRIU being held at the step (CRIU's pid in $1).
victim_pid() {
	local criu=$1
	case $VICTIM in
	criu) echo "$criu" ;;
	cli)
		[ "$(ps -o comm= -p "$CLI")" = cxlcr ] || die "$WHAT: job $CLI is not the command line"
		echo "$CLI"
		;;
	src)
		case $STEP in
		pre-dump | post-dump) ps -o ppid= -p "$criu" | tr -d ' ' ;;
		*) worker_of "$HOST" ;;
		esac
		;;
	dst)
		case $VERB in
		restore) worker_of "$HOST" ;;
		*) worker_of "$(other "$HOST")" ;;
		esac
		;;
	esac
}

# Brings a service a fault left checkpointed back, and checks it runs.
settle() {
	local state
	state=$(status_field "$NAME" state)
	if [ "$state" = checkpointed ]; then
		"$CXLCR" restore "$NAME" --host "$HOST" >/dev/null 2>"$POOL_DIR/settle.err" ||
			die "$WHAT: the restore after the fault failed: $(cat "$POOL_DIR/settle.err")"
	fi
	HOST=$(status_field "$NAME" host)
}

# The same verb again, without a fault: it works.
again() {
	if [ "$VERB" = restore ]; then
		"$CXLCR" checkpoint "$NAME" >/dev/null 2>"$POOL_DIR/again.err" ||
			die "$WHAT: the checkpoint after the fault failed: $(cat "$POOL_DIR/again.err")"
	fi
	run_verb >/dev/null 2>"$POOL_DIR/again.err" || die "$WHAT: the next $VERB failed: $(cat "$POOL_DIR/again.err")"
	[ "$VERB" = checkpoint ] &&
		{ "$CXLCR" restore "$NAME" --host "$HOST" >/dev/null || die "$WHAT: the restore after the next checkpoint failed"; }
	stop_children
	workers_idle
	HOST=$(status_field "$NAME" host)
}

fault_case() {
	VERB=$1 STEP=$2 VICTIM=$3 HOW=$4
	WHAT="$VERB, $VICTIM ${HOW}ed at $STEP"
	# $FAULT_ONLY (a glob on "VERB STEP VICTIM HOW") runs only those cases.
	# shellcheck disable=SC2053
	[ -z "${FAULT_ONLY:-}" ] || [[ "$1 $2 $3 $4" == $FAULT_ONLY ]] || return 0
	local t0=$EPOCHREALTIME criu victim rc=0 err
	HOST=$(status_field "$NAME" host)
	if [ "$VERB" = fork ] && [[ $STEP == *-dump ]]; then
		# A fork dumps only a service without a snapshot: a new one.
		stop_service "$NAME"
		ACKLOGS=() # what it acknowledged went with it
		pod_redis "$NAME" "$HOST" 256M
		python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 41 --quiet
		[ "$("$SNAPTOOL" census)" = "entries 0 borrows 0 snapshots 0 children 0 images 0" ] ||
			die "$WHAT: a stopped service left '$("$SNAPTOOL" census)' in the pool"
	fi
	writer_start
	if [ "$VERB" = restore ]; then
		"$CXLCR" checkpoint "$NAME" >/dev/null || die "$WHAT: the checkpoint before it failed"
	fi
	rm -f "$HOOK/go" "$HOOK/criu.pid"
	echo "$STEP" >"$HOOK/pause-at"
	verb_args
	"$CXLCR" "${ARGS[@]}" >/dev/null 2>"$POOL_DIR/case.err" &
	CLI=$!
	criu_reached "$CLI" || { cat "$POOL_DIR/case.err" >&2; die "$WHAT: CRIU never reached $STEP"; }
	criu=$(cat "$HOOK/criu.pid")
	victim=$(victim_pid "$criu")
	[ -n "$victim" ] || die "$WHAT: no victim found"
	if [ "$HOW" = kill ]; then
		# (bash says "Killed" of a job at its next command, unless waited)
		{ kill -KILL "$victim"; [ "$VICTIM" != cli ] || wait "$CLI" || rc=$?; } 2>/dev/null
	else
		kill -STOP "$victim"
		STOPPED=$victim
	fi
	touch "$HOOK/go"
	[ "$VICTIM" = cli ] || wait "$CLI" || rc=$?
	rm -f "$HOOK/pause-at"
	err=$(cat "$POOL_DIR/case.err")
	if [ "$VICTIM" != cli ]; then
		[ $rc -ne 0 ] || [ "$VICTIM:$STEP" = criu:post-resume ] ||
			die "$WHAT: the verb succeeded"
		[ $rc -eq 0 ] || [ "$(echo "$err" | wc -l)" -eq 1 ] || die "$WHAT: not one line: $err"
	fi
	# Whatever the verb started has ended with it: CRIU above all.
	wait_exit "$criu" 60
	[ "$VICTIM" = cli ] || [ "$VICTIM" = criu ] || wait_exit "$victim" 60
	# Every worker of the verb ends too (a killed command line's verb
	# goes on in the daemons; a destination's worker cleans up after its
	# CRIU, mapping the pool meanwhile).
	workers_idle
	# A killed worker's daemon takes the lease it held over, and resumes
	# what it left frozen: the service is free again, by itself.
	lease_free
	# shellcheck disable=SC2034 # read by the exit hook
	STOPPED=''
	settle
	# Nothing half made: only a fork whose command line alone was killed
	# may have made its child.
	[ "$VERB:$VICTIM" = fork:cli ] || running_alone "$NAME" "$HOST" "$WHAT"
	writer_stop
	python3 "$ROOT/tests/lib/ackcheck.py" --host "$addr" --port $PORT "${ACKLOGS[@]}" --quiet ||
		die "$WHAT: acknowledged writes lost"
	again
	running_alone "$NAME" "$HOST" "$WHAT"
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 41 --quiet ||
		die "$WHAT: values differ"
	[ "$("$SNAPTOOL" census)" = "$STEADY" ] ||
		die "$WHAT: the pool holds '$("$SNAPTOOL" census)', not '$STEADY'"
	CASES=$((CASES + 1))
	local ms=$(( (${EPOCHREALTIME/[.,]/} - ${t0/[.,]/}) / 1000 ))
	[ -n "$err" ] || { [ "$VICTIM" = cli ] && err="(the command line said nothing: killed)"; } || err=succeeded
	ok "$WHAT: $err ($ms ms)"
}

# fault_matrix ROW...: every case of every row "VERB STEP,STEP... VICTIM:HOW...".
fault_matrix() {
	local row verb steps victims step v
	for row in "$@"; do
		read -r verb steps victims <<<"$row"
		for step in ${steps//,/ }; do
			for v in $victims; do
				fault_case "$verb" "$step" "${v%:*}" "${v#*:}"
			done
		done
	done
}

fault_done() {
	local ms=$(( (${EPOCHREALTIME/[.,]/} - ${CASE_START/[.,]/}) / 1000 ))
	ok "$CASES fault cases, $((ms / 1000)) s"
}
