# shellcheck shell=bash
# Shared helpers of the tests/t_*.sh scripts (sourced, not run).
#
# A test sources this file, which
#   - sets ROOT (the repo root, found from this file's location), CXLCR and KV,
#     and cds to ROOT;
#   - gives the test its own pool under /dev/shm/cxlcr-test-XXXX (new_pool);
#   - stops every service it started and removes the pool on exit, whatever
#     the outcome (cleanup, run from an EXIT trap).
# Exit status: 0 pass, 77 skipped (a component is missing), anything else fail.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CXLCR=${CXLCR_BUILD:-$ROOT/build}/cxlcr   # tests/run.sh passes CXLCR_BUILD
KV=$ROOT/tests/lib/kvclient.py
HOSTPID=$ROOT/tests/lib/hostpid.py
cd "$ROOT" || exit 1
# The daemons' lease is 300 ms by default (docs/recovery.md): on a machine
# busy with the whole suite a daemon starved of CPU that long would be
# fenced and its services recovered elsewhere in the middle of a test that
# is about something else. Tests get 3 s unless they set their own
# (t_hard_crash keeps the default's 300 ms).
export CXLCR_LEASE_MS=${CXLCR_LEASE_MS:-3000}
# Pod services take a recovery point every second by default: a CRIU dump
# each, which the tests not about recovery do without (the daemons started
# by pod up read it from here). Tests that want points ask for them.
export CXLCR_RECOVERY_INTERVAL_MS=${CXLCR_RECOVERY_INTERVAL_MS:-0}

TEST_NAME=$(basename "$0" .sh)
POOL_DIR=
SERVICES=()   # names given to `cxlcr run`
POD=          # set by pod_up: the pod comes down on exit
EXIT_HOOKS=() # commands run first by cleanup (see on_exit)

say() { printf '%s: %s\n' "$TEST_NAME" "$*"; }
die() { printf '%s: FAIL: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
skip() { printf '%s: SKIP: %s\n' "$TEST_NAME" "$*"; exit 77; }
ok() { printf '%s: ok: %s\n' "$TEST_NAME" "$*"; }

need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "$c is not installed (scripts/install-deps.sh)"
	done
}

[ -x "$CXLCR" ] && [ -f "$(dirname "$CXLCR")/libcxlcr-preload.so" ] ||
	die "build/cxlcr or build/libcxlcr-preload.so missing: run make first"
need python3
# The interpreter itself, not a version manager's shim in front of it (a
# pyenv shim costs ~200 ms a call, and some tests call python hundreds of
# times).
PYTHON3=$(python3 -c 'import sys; print(sys.executable)') || die "python3 does not run"
python3() { "$PYTHON3" "$@"; }

# on_exit CMD...: cleanup runs CMD (through eval) before its own work.
on_exit() { EXIT_HOOKS+=("$*"); }

cleanup() {
	local rc=$? name hook
	trap - EXIT
	set +e
	for hook in "${EXIT_HOOKS[@]}"; do
		eval "$hook"
	done
	if [ -n "$POOL_DIR" ]; then
		for name in "${SERVICES[@]}"; do
			"$CXLCR" stop "$name" >/dev/null 2>&1
		done
	fi
	if [ -n "$POD" ]; then
		if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
			local h
			for h in $(pod_hosts_made); do
				echo "--- last lines of $h's daemon log (cxlcr pod logs $h):" >&2
				"$CXLCR" pod logs "$h" 2>&1 | tail -n 8 >&2
				# $CXLCR_TEST_KEEP_LOGS: a directory that keeps the whole logs of a failed test.
				[ -z "${CXLCR_TEST_KEEP_LOGS:-}" ] ||
					"$CXLCR" pod logs "$h" >"$CXLCR_TEST_KEEP_LOGS/$(basename "$0" .sh).$h.daemon.log" 2>&1
			done
		fi
		"$CXLCR" pod down >/dev/null 2>&1
	fi
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -n "$POOL_DIR" ]; then
		local log
		for log in "$POOL_DIR"/*.log; do
			[ -s "$log" ] || continue
			[ -z "${CXLCR_TEST_KEEP_LOGS:-}" ] || cp "$log" "$CXLCR_TEST_KEEP_LOGS/$(basename "$0" .sh).$(basename "$log")"
			echo "--- last lines of $(basename "$log"):" >&2
			tail -n 15 "$log" >&2
		done
	fi
	[ -n "$POOL_DIR" ] && rm -rf "$POOL_DIR"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Makes this test's own pool and exports CXLCR_POOL. $1: size (default 8G,
# sparse: only what the arenas touch takes memory); more `pool format`
# arguments may follow (--as-devdax).
new_pool() {
	POOL_DIR=$(mktemp -d /dev/shm/cxlcr-test-XXXX)
	export CXLCR_POOL=$POOL_DIR/pool
	"$CXLCR" pool format --size "${1:-8G}" "${@:2}" >/dev/null || die "cxlcr pool format failed"
}

# pod_up N [ARGS...]: emulated hosts h0..hN-1 on this test's pool (more
# `cxlcr pod up` arguments may follow), down again on exit.
pod_up() {
	need ip iptables nsenter criu
	[ -f "$ROOT/build/criu/cxlcr_criu.so" ] || die "the CRIU plugin is not built (build/criu/cxlcr_criu.so)"
	POD=1
	# A daemon gives a service its 2 MiB mappings back after this long
	# without a snapshot (tracking/idle.c): not in tests that are not
	# about it, whose assertions on mappings and incremental snapshots
	# would otherwise depend on how fast the machine runs them.
	export CXLCR_HUGE_AFTER_S=${CXLCR_HUGE_AFTER_S:-0}
	"$CXLCR" pod down >/dev/null 2>&1 || true
	local n=$1
	shift
	"$CXLCR" pod up --hosts "$n" "$@" >/dev/null || die "cxlcr pod up failed"
}

# pod_hosts: the hosts of this test's pod that are up (h0, h1, ...).
pod_hosts() {
	local i
	for i in $(seq 0 15); do
		"$CXLCR" pod exec "h$i" -- true 2>/dev/null && echo "h$i"
	done
	return 0
}

# pod_hosts_made: the hosts of this test's pod that were made, up or not
# (a crashed host's log can still be read).
pod_hosts_made() {
	local i
	for i in $(seq 0 15); do
		"$CXLCR" pod logs "h$i" >/dev/null 2>&1 && echo "h$i"
	done
	return 0
}

# on HOST CMD...: CMD run on HOST (`cxlcr pod exec`): in its own file
# system, network and processes (its /proc).
on() {
	local h=$1
	shift
	"$CXLCR" pod exec "$h" -- "$@"
}

# machine_pid HOST PID: this machine's pid of process PID of HOST. Each
# emulated host has a pid namespace of its own (emulation/hostpid.h): the
# pids a host says (status's, a lease holder's, CRIU's) are its own. The
# test, on this machine, sees every host's processes under other pids
# (tests/lib/hostpid.py). Fails the test if HOST has no such process.
machine_pid() {
	python3 "$HOSTPID" machine "$1" "$2" || die "$1 has no process $2"
}

# daemon_of HOST: this machine's pid of HOST's daemon (the oldest cxlcrd
# there: its workers are forks of it). Unlike `pod up --json`, it starts
# no host that crashed.
daemon_of() {
	local pid
	pid=$(on "$1" pgrep -o -x cxlcrd) || die "$1 runs no cxlcrd"
	machine_pid "$1" "$pid"
}

# reuse_pid_on HOST PID [COMMAND...]: on emulated host HOST, whose pids
# are its own (emulation/hostpid.h), once HOST's process PID has ended, a
# new process there gets PID (ns_last_pid): COMMAND (default: sleep 3600).
# NEWCOMER is this machine's pid of it; it is killed when the test ends.
reuse_pid_on() {
	local host=$1 pid=$2
	shift 2
	[ $# -gt 0 ] || set -- sleep 3600
	# shellcheck disable=SC2016 # expanded on the host
	on "$host" bash -c '
		pid=$1
		shift
		for _ in $(seq 1 200); do [ -e "/proc/$pid" ] || break; sleep 0.05; done
		[ -e "/proc/$pid" ] && { echo "it was not reaped"; exit 1; }
		for _ in $(seq 1 50); do
			echo $((pid - 1)) >/proc/sys/kernel/ns_last_pid
			"$@" </dev/null >/dev/null 2>&1 &
			[ $! -eq "$pid" ] && exit 0
			kill $! 2>/dev/null
			wait $! 2>/dev/null
		done
		echo "not handed out in 50 tries"
		exit 1' _ "$pid" "$@" >"$POOL_DIR/reuse.out" 2>&1 || skip "pid $pid of $host: $(cat "$POOL_DIR/reuse.out")"
	say "pid $pid of $host handed to another process"
	NEWCOMER=$(machine_pid "$host" "$pid")
	on_exit "kill $NEWCOMER 2>/dev/null"
}

# service_pid NAME: this machine's pid of service NAME's process (its
# status pid is its host's).
service_pid() {
	machine_pid "$(status_field "$1" host)" "$(status_field "$1" pid)"
}

# on_hosts CMD...: CMD run on every host of the pod, as on each machine of
# a real pod (`cxlcr pod exec`): a host's work directories and logs are
# its own. Their outputs, one after the other.
on_hosts() {
	local h
	for h in $(pod_hosts); do
		"$CXLCR" pod exec "$h" -- "$@"
	done
}

# A TCP port nobody listens on now (the kernel's pick, on loopback).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run_service NAME ARENA CMD...: `cxlcr run` with the log in the pool dir;
# its stderr goes to $POOL_DIR/NAME.run.err.
run_service() {
	local name=$1 arena=$2
	shift 2
	SERVICES+=("$name")
	"$CXLCR" run --name "$name" --arena "$arena" --log "$POOL_DIR/$name.log" -- "$@" \
		2>"$POOL_DIR/$name.run.err" || {
		cat "$POOL_DIR/$name.run.err" >&2
		die "cxlcr run $name failed"
	}
}

# pod_redis NAME HOST ARENA: redis-server (port $PORT, default 6379, no
# persistence) under `cxlcr run --host HOST`, stopped on exit; sets addr to
# its address once it answers there.
pod_redis() {
	SERVICES+=("$1")
	"$CXLCR" run --host "$2" --name "$1" --arena "$3" --log "$POOL_DIR/$1.log" -- \
		redis-server --port "${PORT:-6379}" --protected-mode no --save '' --appendonly no \
		--dir "$POOL_DIR" >/dev/null || die "cxlcr run --host $2 failed"
	addr=$(status_field "$1" address)
	python3 "$KV" wait --host "$addr" --port "${PORT:-6379}" >/dev/null || die "redis does not answer at $addr"
}

# point_redis NAME HOST: redis-server (port $PORT, no persistence) under
# `cxlcr run --host HOST` with a 64M arena and a recovery point every
# 200 ms, stopped on exit; sets addr to its address once it answers there.
# The service of the tests of recovery (its log $POOL_DIR/NAME.log, its
# working directory /).
point_redis() {
	SERVICES+=("$1")
	"$CXLCR" run --host "$2" --name "$1" --arena 64M --recovery-interval 200 --log "$POOL_DIR/$1.log" -- \
		redis-server --port "${PORT:-6379}" --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
		die "cxlcr run $1 failed"
	addr=$(status_field "$1" address)
	python3 "$KV" wait --host "$addr" --port "${PORT:-6379}" >/dev/null || die "redis does not answer"
}

# heap_maps NAME: "VMAS NH PMD_KB" over the service's heap mappings: how
# many, how many have VM_NOHUGEPAGE, and the ShmemPmdMapped they sum to.
heap_maps() {
	local pid lo size
	pid=$(service_pid "$1")
	lo=$(status_field "$1" arena_address)
	size=$(status_field "$1" arena_size)
	python3 - "$pid" "$lo" "$size" <<'EOF'
import sys
pid, lo, size = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3])
hi = lo + size
vmas = nh = pmd = 0
inside = False
for line in open(f'/proc/{pid}/smaps'):
    f = line.split()
    if '-' in f[0] and len(f) >= 5 and not f[0].endswith(':'):
        a, b = (int(x, 16) for x in f[0].split('-'))
        inside = a < hi and b > lo
        vmas += inside
    elif inside and f[0] == 'ShmemPmdMapped:':
        pmd += int(f[1])
    elif inside and f[0] == 'VmFlags:':
        nh += 'nh' in f[1:]
print(vmas, nh, pmd)
EOF
}

# wait_status NAME FIELD VALUE SECONDS: waits (bounded: SECONDS) until
# FIELD of `cxlcr status NAME --json` reads VALUE; 1 if it never does.
wait_status() {
	local _
	for _ in $(seq $(($4 * 20))); do
		[ "$(status_field "$1" "$2")" = "$3" ] && return 0
		sleep 0.05
	done
	return 1
}

# wait_tracked NAME: waits (bounded) until the service's tracker has
# registered its heap (a moment after its start); fails the test if it
# never does.
wait_tracked() {
	wait_status "$1" write_tracking True 5 || die "$1 is not tracked"
}

# A field of `cxlcr status NAME --json`.
status_field() {
	"$CXLCR" status "$1" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

# wait_up NAME PORT PROTO: waits (bounded) until the service answers.
wait_up() {
	local pid
	pid=$(status_field "$1" pid) || die "no status for $1"
	python3 "$KV" wait --port "$2" --proto "$3" --pid "$pid" || die "$1 did not come up on port $2"
}

# check_heap NAME MIN_USED_BYTES: the service's heap is in its arena:
# RssShmem / (RssShmem + RssAnon) >= 0.95, arena_used > MIN_USED_BYTES,
# and no allocation fell back to glibc (see heapcheck.py).
check_heap() {
	"$CXLCR" status "$1" --json >"$POOL_DIR/$1.status.json" || die "cxlcr status $1 failed"
	python3 "$ROOT/tests/lib/heapcheck.py" "$POOL_DIR/$1.status.json" --min-used "$2" \
		--tag "$TEST_NAME" || die "$1: heap is not in its arena"
}

# stop_service NAME: `cxlcr stop`, and the service is gone from the pool.
stop_service() {
	"$CXLCR" stop "$1" >/dev/null || die "cxlcr stop $1 failed"
	local left
	left=$("$CXLCR" ps --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["services"]))')
	local keep=() n
	for n in "${SERVICES[@]}"; do [ "$n" = "$1" ] || keep+=("$n"); done
	SERVICES=("${keep[@]}")
	[ "$left" -eq "${#SERVICES[@]}" ] || die "after stopping $1, cxlcr ps lists $left services"
}

# wait_exit PID [SECONDS]: waits (pidfd, bounded) until PID has exited.
wait_exit() {
	python3 - "$1" "${2:-30}" <<'PYEOF' || die "pid $1 did not exit within ${2:-30} s"
import os, select, sys
try:
    fd = os.pidfd_open(int(sys.argv[1]))
except ProcessLookupError:
    sys.exit(0)
sys.exit(0 if select.select([fd], [], [], float(sys.argv[2]))[0] else 1)
PYEOF
}

# group_stopped PID: waits (bounded: 10 s) until process PID is in a group
# stop (state T, a SIGSTOP's); fails the test if it does not get there.
group_stopped() {
	local st
	for _ in $(seq 1 200); do
		st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || true
		[ "$st" = T ] && return 0
		[ -n "$st" ] || break
		sleep 0.05
	done
	die "process $1 is not stopped (state ${st:-gone})"
}

# criu_hook PREFIX: the CRIU action script of tests/lib/criu-kill-hook.sh in
# HOOK=$POOL_DIR/hook (new_pool first), a service name NAME=PREFIX-XXXX
# whose CRIU work directories are recognisable (they go with the pod's
# hosts: emulation/hostfs.h). Start
# the pod with CXLCR_TEST_CRIU_HOOK=$HOOK pod_up N.
criu_hook() {
	NAME=$1-${POOL_DIR##*-}
	HOOK=$POOL_DIR/hook
	mkdir "$HOOK"
	cp "$ROOT/tests/lib/criu-kill-hook.sh" "$HOOK/action-script"
}

# criu_reached [PID]: waits (bounded: 30 s) until CRIU, run by the verb PID
# (without PID: by a daemon's own verb, a recovery), stops at the hook's
# step and writes HOOK/criu.pid (its pid on its host, HOOK/criu.host), or
# until the verb ends first; true if CRIU got there.
criu_reached() {
	local i
	for i in $(seq 1 600); do
		[ -s "$HOOK/criu.pid" ] && return 0
		[ -z "${1:-}" ] || kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	[ -s "$HOOK/criu.pid" ]
}

# hook_pid FILE: this machine's pid of the process whose pid the hook
# wrote into HOOK/FILE (criu.pid: CRIU's; init.pid: the task it restores),
# on the host of that CRIU (HOOK/criu.host).
hook_pid() {
	machine_pid "$(cat "$HOOK/criu.host")" "$(cat "$HOOK/$1")"
}

# hook_pid_gone FILE: hook_pid, or nothing once that process has gone.
hook_pid_gone() {
	python3 "$HOSTPID" machine "$(cat "$HOOK/criu.host")" "$(cat "$HOOK/$1")" || true
}

# criu_worker CRIU_PID: the daemon worker that runs this CRIU (of CRIU's
# cxlcrd ancestors, the one just below the daemon); fails the test if CRIU
# runs under none.
criu_worker() {
	local chain=() p
	p=$(ps -o ppid= -p "$1" | tr -d ' ')
	while [ -n "$p" ] && [ "$p" != 1 ] && [[ "$(ps -o comm= -p "$p")" =~ ^(cxlcrd|cxlcr-keeper)$ ]]; do
		chain+=("$p")
		p=$(ps -o ppid= -p "$p" | tr -d ' ')
	done
	[ ${#chain[@]} -ge 2 ] || die "CRIU ($1) does not run under a cxlcrd worker: ${chain[*]}"
	echo "${chain[${#chain[@]} - 2]}"
}

# recovery_point NAME: the name of service NAME's newest recovery point
# (`status --json`), empty if none.
recovery_point() {
	"$CXLCR" status "$1" --json |
		python3 -c 'import json,sys; p=json.load(sys.stdin)["recovery_point"]; print(p["name"] if p else "")'
}

# next_recovery_point NAME AFTER: waits (bounded: 15 s) for a newest
# recovery point of NAME other than AFTER, and prints it.
next_recovery_point() {
	local i p
	for i in $(seq 300); do
		p=$(recovery_point "$1")
		[ -n "$p" ] && [ "$p" != "$2" ] && { echo "$p"; return 0; }
		python3 -c 'import time; time.sleep(0.05)'  # polling the pool, bounded
	done
	return 1
}

# two_new_points NAME: waits (bounded) for two new recovery points of NAME,
# so that every write acknowledged before the call is in its newest point:
# the first new one may have begun before the call, the second begins
# after it. False if they do not come.
two_new_points() {
	local p
	p=$(next_recovery_point "$1" "$(recovery_point "$1")") && next_recovery_point "$1" "$p" >/dev/null
}

# step_pod NAME HOSTS SEED: a fresh pool (the previous one taken down and
# removed) and a pod of HOSTS hosts whose recoveries stop at the step named
# in $STEP_DIR/stop-at (recovery/test_step.c); Redis NAME on h0 with a
# recovery point every 200 ms, 2,000 values of 300 B (seed SEED), and two
# points since. Sets addr.
step_pod() {
	if [ -n "${POOL_DIR:-}" ]; then
		"$CXLCR" pod down >/dev/null 2>&1 || true
		rm -rf "$POOL_DIR"
	fi
	SERVICES=()
	new_pool 4G
	STEP_DIR=$POOL_DIR/steps
	mkdir "$STEP_DIR"
	CXLCR_TEST_RECOVERY_STEPS=$STEP_DIR pod_up "$2"
	SERVICES+=("$1")
	"$CXLCR" run --host h0 --name "$1" --arena 64M --recovery-interval 200 --log "$POOL_DIR/$1.log" -- \
		redis-server --port "${PORT:-6379}" --protected-mode no --save '' --appendonly no --dir "$POOL_DIR" \
		>/dev/null || die "cxlcr run $1 failed"
	addr=$(status_field "$1" address)
	python3 "$KV" wait --host "$addr" --port "${PORT:-6379}" >/dev/null || die "redis does not answer"
	python3 "$KV" fill --host "$addr" --port "${PORT:-6379}" --count 2000 --size 300 --seed "$3" --quiet
	two_new_points "$1" || die "no recovery point of $1 after the writes"
}

# fence_field HOST FIELD: FIELD of HOST's last fence in `cxlcr hosts
# --json` (recovered, by_entry, reopened_by_hand_on_entry...), "" if it
# was never fenced.
fence_field() { "$CXLCR" hosts --json | python3 -c 'import json, sys
for h in json.load(sys.stdin)["hosts"]:
    if h.get("host") == sys.argv[1]:
        print(h["fence"][sys.argv[2]] if h["fence"] else "")' "$1" "$2"; }

# host_of N: the name of host table entry N.
host_of() { "$CXLCR" hosts --json | python3 -c 'import json, sys
print([h["host"] for h in json.load(sys.stdin)["hosts"] if h["entry"] == int(sys.argv[1])][0])' "$1"; }

# h0_recovery_done: the recovery of the crashed h0 is done (its fence word
# says recovered), and not reopened.
h0_recovery_done() { [ "$(fence_field h0 recovered)" = True ]; }

# h0_winner: $winner, the host that fenced the crashed h0 (its fence in
# `cxlcr hosts --json`), and $other, the third host of h0, h1, h2.
h0_winner() {
	winner=$(host_of "$(fence_field h0 by_entry)")
	case $winner in h1) other=h2 ;; h2) other=h1 ;; *) die "h0 was fenced by '$winner'" ;; esac
}

# given_up_pod NAME SEED: three hosts; NAME (Redis, SEED's values) on h0
# with recovery points; h0 crashes, and the host that fences it ($winner)
# gives its recovery up (4 runs killed at their first step): NAME left
# down, failed, and h0's recovery done. $hand: the third host, where an
# operator's restore by hand can bring NAME back.
given_up_pod() {
	step_pod "$1" 3 "$2"
	step_crash fenced
	h0_winner
	hand=$other
	give_up_recovery "$winner"
	until_true 30 h0_recovery_done ||
		die "$winner did not give h0's recovery up: $("$CXLCR" hosts --json)"
	[ "$(status_field "$1" state)" = failed ] || die "$1 is $(status_field "$1" state), not failed"
	ok "$winner's recovery of h0 killed 4 times: given up, $1 left down, the recovery done"
}

# until_true SECONDS CMD...: waits (bounded) until CMD succeeds; the last
# try's status.
until_true() {
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		python3 -c 'import time; time.sleep(0.1)' # polling a condition, bounded
	done
	"$@"
}

# give_up_recovery HOST: the recovery of the crashed h0 that HOST runs
# (step_crash fenced) is killed at "fenced" in each of its 4 runs (the
# first and 3 more), so that HOST gives it up: h0's services left down,
# its recovery done.
give_up_recovery() {
	local run pid
	for run in 1 2 3 4; do
		until_true 30 test -s "$STEP_DIR/stopped" ||
			die "run $run of $1's recovery did not stop at fenced: $("$CXLCR" pod logs "$1" | tail -n 3)"
		read -r pid _ <"$STEP_DIR/stopped"
		rm -f "$STEP_DIR/stopped"
		[ $run = 4 ] || echo fenced >"$STEP_DIR/stop-at"
		on "$1" kill -KILL "$pid" || die "cannot kill $1's recovery worker (pid $pid)"
	done
}

# stopped_here: a recovery (or a restore) stopped at the step the test
# named in $STEP_DIR/stop-at (recovery/test_step.c).
stopped_here() { [ -s "$STEP_DIR/stopped" ]; }

# step_crash STEP: the next recovery stops at STEP (step_pod); h0 crashes;
# waits (bounded) until a recovery has stopped there, or dies with the
# other hosts' last log lines.
step_crash() {
	echo "$1" >"$STEP_DIR/stop-at"
	"$CXLCR" pod crash h0 >/dev/null || die "$1: pod crash h0 failed"
	local end=$((SECONDS + 30)) h said=
	while [ $SECONDS -lt $end ] && [ ! -s "$STEP_DIR/stopped" ]; do python3 -c 'import time; time.sleep(0.05)'; done
	[ -s "$STEP_DIR/stopped" ] && return 0
	for h in $(pod_hosts); do
		[ "$h" = h0 ] || said+="$h: $("$CXLCR" pod logs "$h" | tail -n 3); "
	done
	die "$1: no recovery stopped at $1: $said"
}

# redis_copies: how many redis-server processes map this test's pool.
redis_copies() {
	local p n=0
	for p in $(pgrep -x redis-server || true); do
		grep -qF "$CXLCR_POOL" "/proc/$p/maps" 2>/dev/null && n=$((n + 1))
	done
	echo $n
}

# bgsave_dumps ADDR WHAT VERIFY...: BGSAVE in the Redis at ADDR (port
# $PORT) into $POOL_DIR/dump.rdb; once it is done, a Redis of this machine
# loads the dump, and VERIFY... (kvclient.py verify's arguments, after
# --host and --port) must find every value in it. WHAT names the Redis in
# the failures. A fork of a copy-mode child: its grandchild's pages.
bgsave_dumps() {
	local at=$1 what=$2 port reload
	shift 2
	rm -f "$POOL_DIR/dump.rdb"
	timeout 20 redis-cli -h "$at" -p "$PORT" bgsave >/dev/null ||
		die "BGSAVE in $what did not return within 20 s (its fork waits for a pager that does not read its event?)"
	for _ in $(seq 300); do
		timeout 20 redis-cli -h "$at" -p "$PORT" info persistence | grep -q '^rdb_bgsave_in_progress:0' && break
		sleep 0.1 # polling a condition, bounded: not a synchronisation
	done
	timeout 20 redis-cli -h "$at" -p "$PORT" info persistence | grep -q '^rdb_last_bgsave_status:ok' ||
		die "BGSAVE of $what failed: $(timeout 20 redis-cli -h "$at" -p "$PORT" info persistence |
			grep -E 'bgsave|fork' | tr -d '\r' | tr '\n' ' ')"
	port=$(free_port)
	redis-server --port "$port" --bind 127.0.0.1 --dir "$POOL_DIR" --dbfilename dump.rdb --save '' \
		--appendonly no >"$POOL_DIR/reload.log" 2>&1 &
	reload=$!
	on_exit "kill $reload 2>/dev/null"
	python3 "$KV" wait --host 127.0.0.1 --port "$port" >/dev/null || die "redis does not load the dump of $what"
	python3 "$KV" verify --host 127.0.0.1 --port "$port" "$@" --quiet ||
		die "the dump made by $what's own fork lacks values (its grandchild read pages its pager had not served)"
}

# pool_mappers: the processes that map this test's pool, of every host
# and of this machine, as HOST:PID (PID: the host's own; machine:PID
# outside the hosts), each followed by a space. Left out: trackers
# (tracking/tracker.c, process name cxlcr-tracker), which map only an
# arena's header, never its heap; and the daemons (cxlcrd), which map the
# pool's metadata for a moment on their own ticks (heartbeats, recovery
# points) whatever the test does: whether a verb's workers have ended is
# each test's own check.
pool_mappers() {
	python3 "$HOSTPID" mappers
}

# stop_others NAME [WHAT]: stops every service of the pool but NAME (its
# fork children, which map its snapshot); WHAT names the case in a failure.
stop_others() {
	local c
	for c in $("$CXLCR" ps --json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["services"]:
    if s["name"] != sys.argv[1]:
        print(s["name"])' "$1"); do
		"$CXLCR" stop "$c" >/dev/null || die "${2:+$2: }cannot stop fork child $c"
	done
}

# running_alone NAME HOST WHAT: service NAME runs on HOST, not stopped, and
# is the only process that maps the pool, on any host (no second writer);
# WHAT names the case in the failure.
running_alone() {
	local name=$1 host=$2 what=$3 pid
	[ "$(status_field "$name" host)" = "$host" ] || die "$what: the service is on $(status_field "$name" host), not $host"
	[ "$(status_field "$name" state)" = running ] || die "$what: the service is $(status_field "$name" state)"
	pid=$(status_field "$name" pid)
	on "$host" grep -q '^State:[[:space:]]*T' "/proc/$pid/status" && die "$what: the service is stopped (frozen)"
	[ "$(pool_mappers)" = "$host:$pid " ] ||
		die "$what: processes mapping the pool: $(pool_mappers); expected only $host:$pid"
	return 0
}

# json KEY...: the value at KEY... of the JSON document on stdin (a list's
# keys are indexes), as Python prints it (True, None).
json() { python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$@"; }

# kids_of: "NAME ADDRESS PID", a line each, of the children in the answer
# of `cxlcr fork --json` on stdin.
kids_of() { python3 -c '
import json, sys
for c in json.load(sys.stdin)["children"]:
    print(c["name"], c["address"], c["pid"])'; }

# is_json: stdin parses as JSON.
is_json() {
	python3 -c 'import json, sys; json.load(sys.stdin)'
}
