# shellcheck shell=bash
# The fault matrix of tests/t_fault_*.sh (issue 13), sourced after
# tests/lib/common.sh: one case is a verb on a Redis of a two-host pod, held
# by CRIU's action script (tests/lib/criu-kill-hook.sh) at one of CRIU's
# steps, where the test kills or stalls one of the processes the verb runs:
#
#   VICTIM  criu    the CRIU that reached the step
#           cli     the command line (the verb goes on in the daemons)
#           src     the worker of the service's host: in a dump, the one
#                   that runs CRIU (under its keeper); in a restore, the
#                   verb's worker there (migrate's, or the fork API's)
#           dst     the worker of the restoring host (migrate's restore,
#                   restore, fork-restore)
#   HOW     kill    SIGKILL
#           stall   SIGSTOP, never continued: the verb's deadlines must end
#                   it (the daemons run with a short $CXLCR_RPC_TIMEOUT_MS);
#                   a stalled worker is killed by its daemon past its own
#                   deadline ($CXLCR_WORKER_DEADLINE_MS, short here too),
#                   which takes its leases over as for a killed one
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
# Longer than any worker of a case may rightly take (a few rpc deadlines:
# a migrate's source waits one for the destination, then undoes there).
WORKER_DEADLINE_MS=8000
SNAPTOOL=$(dirname "$CXLCR")/tests/snapshot_tool
CASES=0
CASE_START=$EPOCHREALTIME
ACKLOGS=()
LC_PID=

fault_setup() {
	[ -x "$SNAPTOOL" ] || die "tests/snapshot_tool is not built"
	need redis-server
	export CXLCR_RPC_TIMEOUT_MS=$DEADLINE_MS CXLCR_WORKER_DEADLINE_MS=$WORKER_DEADLINE_MS
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

# worker_of HOST: the one worker HOST's daemon runs now.
worker_of() {
	local d w
	d=$(daemon_of "$1")
	w=$(pgrep -P "$d" -x cxlcrd | tr '\n' ' ')
	[ "$(echo "$w" | wc -w)" -eq 1 ] || die "$WHAT: $1's daemon runs workers '$w', not one"
	echo "${w% }"
}

# The worker that holds the service's lease ("migrate by pid N on h0", N
# h0's own pid of it: this machine's is given): in a restore step, the
# source's (a fork handed to the parent's daemon runs two workers there:
# the one the command line asked, and the fork API's, which holds the
# lease).
lease_holder() {
	local v
	v=$(status_field "$NAME" verb)
	[[ $v =~ \ by\ pid\ ([0-9]+)\ on\ ([^ ]+) ]] || die "$WHAT: no verb holds the service's lease ($v)"
	machine_pid "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}"
}

# Waits (bounded) until no worker of this pod's daemons runs: a daemon
# answers a fork before it returns its own borrow. (A restore's held
# keeper, a fork of a worker, is named cxlcr-keeper; it may outlive its
# killed worker while it ends what it held.)
workers_idle() {
	local w
	for w in $(pgrep -x cxlcrd) $(pgrep -x cxlcr-keeper); do
		{ tr '\0' '\n' <"/proc/$w/environ"; } 2>/dev/null | grep -qx "CXLCR_POOL=$CXLCR_POOL" || continue
		[[ "$(ps -o comm= -p "$(ps -o ppid= -p "$w" | tr -d ' ')")" != cxlcrd && "$(ps -o comm= -p "$w")" != cxlcr-keeper ]] ||
			wait_exit "$w" 60
	done
}

# The verb's outcome, kept in the pool whoever died (cxlcr status:
# last_verb), is this case's: recorded since the case began (at most
# since_ms ago), of its verb, with the result the victim makes it: a dead
# (or stalled) holder of the lease leaves it abandoned; a dead helper of
# the verb, failed; CRIU, failed (or ok, killed after the restore ended);
# a killed command line, whatever the verb came to in the daemons. A
# stalled destination may keep the migrate's source worker waiting (for
# the restored copy its CRIU holds, at most 10 s) past the short worker
# deadline of these tests: killed, it leaves the verb abandoned.
outcome_recorded() {
	local since_ms=$1 want
	case $VICTIM:$VERB:$STEP in
	src:fork:*-dump) want=failed ;; # the fork's snapshot step, under its lease
	src:*) want=abandoned ;;
	dst:restore:*) want=abandoned ;; # the restore's own worker
	dst:migrate:*) [ "$HOW" = stall ] && want='failed|abandoned' || want=failed ;;
	dst:*) want=failed ;;
	criu:*:post-resume) want='ok|failed' ;;
	criu:*) want=failed ;;
	cli:*) want='ok|failed' ;;
	esac
	"$CXLCR" status "$NAME" --json | python3 -c '
import json, re, sys
v = json.load(sys.stdin)["last_verb"]
verb, want, since = sys.argv[1], sys.argv[2], float(sys.argv[3])
if v is None:
    sys.exit("no last_verb")
if v["age_ms"] > since:
    sys.exit("last_verb is older than the case: %s" % v)
if v["verb"] != verb or not re.fullmatch(want, v["result"]) or not v["host"]:
    sys.exit("last_verb is %s, not %s %s" % (v, verb, want))
if v["result"] != "ok" and not v["reason"]:
    sys.exit("last_verb says no reason: %s" % v)
print(v["result"] + (": " + v["reason"] if v["reason"] else ""))' "$VERB" "$want" "$since_ms" >"$POOL_DIR/outcome" ||
		die "$WHAT: status does not say what happened"
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

# phase WHAT: with $FAULT_TRACE set, how long the case has run at WHAT (to
# see where a case's time goes).
phase() {
	[ -z "${FAULT_TRACE:-}" ] || echo "  $(( (${EPOCHREALTIME/[.,]/} - ${t0/[.,]/}) / 1000 )) ms: $1" >&2
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
	# A fork asks the fork API of the service's host, as the command line
	# run there does (`pod exec`: the API's socket is in the host's own
	# /run); from this machine it would be handed to that host's daemon,
	# which asks its API: a second worker there.
	ON=()
	[ "$VERB" != fork ] || ON=(pod exec "$HOST" -- "$CXLCR")
}

run_verb() {
	verb_args
	"$CXLCR" "${ON[@]}" "${ARGS[@]}"
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
		pre-dump | post-dump) criu_worker "$criu" ;; # (CRIU's parent is its keeper)
		*) lease_holder ;;
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

# half_made_ended PID: the fork child CRIU restored as PID (this machine's
# pid of it; empty: it has ended), which its failed fork did not make, ends
# (bounded: 30 s; its host's daemon ends it once the child's maker has
# died).
half_made_ended() {
	[ -n "$1" ] || return 0
	python3 - "$1" <<'PYEOF' || die "$WHAT: the child CRIU restored (pid $1) still runs, half made"
import os, select, sys
try:
    fd = os.pidfd_open(int(sys.argv[1]))
except ProcessLookupError:
    sys.exit(0)
sys.exit(0 if select.select([fd], [], [], 30)[0] else 1)
PYEOF
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
	# The next snapshot may be incremental on the last one (compared with
	# it page by page when the fault lost track of the writes), which
	# then lives on as its base: a full one brings the pool back to one
	# snapshot, whose census the caller compares with the steady one.
	case $VERB in
	snapshot | fork)
		"$CXLCR" snapshot "$NAME" --full >/dev/null 2>"$POOL_DIR/again.err" ||
			die "$WHAT: a full snapshot after the fault failed: $(cat "$POOL_DIR/again.err")"
		;;
	esac
	[ "$VERB" = checkpoint ] &&
		{ "$CXLCR" restore "$NAME" --host "$HOST" >/dev/null || die "$WHAT: the restore after the next checkpoint failed"; }
	stop_others "$NAME" "$WHAT"
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
	rm -f "$HOOK/go" "$HOOK/criu.pid" "$HOOK/init.pid"
	echo "$STEP" >"$HOOK/pause-at"
	verb_args
	"$CXLCR" "${ON[@]}" "${ARGS[@]}" >/dev/null 2>"$POOL_DIR/case.err" &
	CLI=$!
	phase "verb started"
	criu_reached "$CLI" || { cat "$POOL_DIR/case.err" >&2; die "$WHAT: CRIU never reached $STEP"; }
	criu=$(hook_pid criu.pid)
	# After CRIU's last step (its detach), what it restored is stopped
	# until the verb has judged the restore (daemon/criu.c): a copy killed
	# with a failed restore never ran beside a source that resumes.
	[ "$STEP" != post-resume ] || [ "$VERB" = fork ] || group_stopped "$(hook_pid init.pid)"
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
	phase "victim $victim ${HOW}ed"
	[ "$VICTIM" = cli ] || wait "$CLI" || rc=$?
	rm -f "$HOOK/pause-at"
	err=$(cat "$POOL_DIR/case.err")
	if [ "$VICTIM" != cli ]; then
		[ $rc -ne 0 ] || [ "$VICTIM:$STEP" = criu:post-resume ] ||
			die "$WHAT: the verb succeeded"
		[ $rc -eq 0 ] || [ "$(echo "$err" | wc -l)" -eq 1 ] || die "$WHAT: not one line: $err"
	fi
	phase "the command line ended"
	# Whatever the verb started has ended with it: CRIU above all.
	wait_exit "$criu" 60
	phase "CRIU ended"
	[ "$VICTIM" = cli ] || [ "$VICTIM" = criu ] || wait_exit "$victim" 60
	# Every worker of the verb ends too (a killed command line's verb
	# goes on in the daemons; a destination's worker cleans up after its
	# CRIU, mapping the pool meanwhile).
	workers_idle
	phase "workers ended"
	# A killed worker's daemon takes the lease it held over, and resumes
	# what it left frozen: the service is free again, by itself.
	lease_free
	outcome_recorded $(( (${EPOCHREALTIME/[.,]/} - ${t0/[.,]/}) / 1000 ))
	# A migrate's source worker killed while the destination's CRIU ends
	# (post-resume: the copy is stopped, CRIU's child, no longer traced):
	# the copy is still held, and never runs (the lease went with the
	# source's worker). The source's daemon waits for it, and resumes the
	# source; had it judged the copy running, it would have fenced the
	# source, and the service would be down until restored.
	if [ "$VICTIM:$VERB:$STEP" = src:migrate:post-resume ]; then
		[ "$(status_field "$NAME" state):$(status_field "$NAME" host)" = "running:$HOST" ] ||
			die "$WHAT: the source was not resumed: $(cut -c1-300 "$POOL_DIR/outcome")"
	fi
	# shellcheck disable=SC2034 # read by the exit hook
	STOPPED=''
	settle
	phase "settled"
	# Nothing half made: only a fork whose command line alone was killed,
	# or whose API worker stalled (the destination made the child under
	# the lease it still held), may have made its child. Any other fork's
	# child that CRIU restored (a destination worker stalled after that
	# is killed past its deadline, the child running) ends with its maker.
	case $VERB:$VICTIM:$HOW in
	fork:cli:* | fork:src:stall) ;;
	*)
		[ "$VERB" != fork ] || [ ! -s "$HOOK/init.pid" ] || half_made_ended "$(hook_pid_gone init.pid)"
		running_alone "$NAME" "$HOST" "$WHAT"
		;;
	esac
	writer_stop
	python3 "$ROOT/tests/lib/ackcheck.py" --host "$addr" --port $PORT "${ACKLOGS[@]}" --quiet ||
		die "$WHAT: acknowledged writes lost"
	phase "checked"
	again
	phase "again"
	running_alone "$NAME" "$HOST" "$WHAT"
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 41 --quiet ||
		die "$WHAT: values differ"
	[ "$("$SNAPTOOL" census)" = "$STEADY" ] ||
		die "$WHAT: the pool holds '$("$SNAPTOOL" census)', not '$STEADY'"
	CASES=$((CASES + 1))
	local ms=$(( (${EPOCHREALTIME/[.,]/} - ${t0/[.,]/}) / 1000 ))
	[ -n "$err" ] || { [ "$VICTIM" = cli ] && err="(the command line said nothing: killed; status: $VERB $(cut -c1-200 "$POOL_DIR/outcome"))"; } || err=succeeded
	ok "$WHAT: $err ($ms ms)"
}

# fault_matrix ROW...: every case of every row "VERB STEP,STEP... VICTIM:HOW...".
# Under $CXLCR_TESTS=short (`make test`) a sample: of a file's cases, as few
# as run every step of each verb and every VICTIM:HOW at least once (first
# those that bring a new step and a new victim at once, then those that
# bring either); else (`make long`, or run alone) all of them.
MATRIX_CASES=0
fault_matrix() {
	local row verb steps victims st v
	local -a cases=()
	for row in "$@"; do
		read -r verb steps victims <<<"${row//$'\n'/ }" # a row may span lines
		for st in ${steps//,/ }; do
			for v in $victims; do
				cases+=("$verb $st ${v%:*} ${v#*:}")
			done
		done
	done
	MATRIX_CASES=$((MATRIX_CASES + ${#cases[@]}))
	[ "${CXLCR_TESTS:-long}" = short ] && sample_cases
	local c how
	for c in "${cases[@]}"; do
		read -r verb st v how <<<"$c"
		fault_case "$verb" "$st" "$v" "$how"
	done
}

# sample_cases: cases (fault_matrix's) cut down to a sample, as said above.
sample_cases() {
	local -A step_seen=() victim_seen=()
	local -a picked=()
	local pass c verb st v how new_step new_victim
	for pass in both either; do
		for c in "${cases[@]}"; do
			read -r verb st v how <<<"$c"
			new_step=${step_seen["$verb $st"]:-1}
			new_victim=${victim_seen["$v $how"]:-1}
			if [ "$pass$new_step$new_victim" = both11 ] || { [ $pass = either ] && [ "$new_step$new_victim" != 00 ]; }; then
				picked+=("$c")
				step_seen["$verb $st"]=0
				victim_seen["$v $how"]=0
			fi
		done
	done
	cases=("${picked[@]}")
}

fault_done() {
	local ms=$(( (${EPOCHREALTIME/[.,]/} - ${CASE_START/[.,]/}) / 1000 ))
	ok "$CASES of the matrix's $MATRIX_CASES fault cases (CXLCR_TESTS=${CXLCR_TESTS:-long}), $((ms / 1000)) s"
}
