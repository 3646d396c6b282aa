#!/usr/bin/env bash
# A pid stands for a process only while it is that process. Each process
# below dies and its pid is handed to another (ns_last_pid):
#   a. a service killed behind cxlcr's back: `status` must not say it runs,
#      and `stop` must not signal the newcomer (it killed it before), yet
#      free the arena;
#   b. the holder of a restore's claim on a checkpoint (a daemon worker
#      killed mid-restore; here tests/claim_tool, run on h0, whose pids are
#      its own): the next restore takes the dead holder's claim over (it
#      was refused for as long as the newcomer ran: "is being restored on
#      h0 already");
#   c. a host's daemon: `pod down` leaves the newcomer alone (it signalled
#      it before);
#   d. a pod whose pool file is gone, its daemon's pid another process's:
#      it is stale, and the next `pod up` takes its number (it was kept for
#      as long as that process ran).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
[ -w /proc/sys/kernel/ns_last_pid ] || skip "cannot choose the next pid (ns_last_pid)"
need redis-server
CLAIM_TOOL=$(dirname "$CXLCR")/tests/claim_tool
[ -x "$CLAIM_TOOL" ] || die "tests/claim_tool is not built"

# reuse_pid PID: once PID has ended and been reaped, starts a `sleep` that
# gets PID (NEWCOMER), killed on exit.
reuse_pid() {
	local pid=$1 try
	wait_exit "$pid" 10
	# Until its parent has reaped it, the pid is not free to be handed out.
	for _ in $(seq 1 200); do [ -e "/proc/$pid" ] || break; sleep 0.05; done
	[ -e "/proc/$pid" ] && skip "pid $pid was not reaped (its parent: $(ps -o ppid= -p "$pid"))"
	say "hand pid $pid to another process"
	NEWCOMER=
	for try in $(seq 1 50); do
		echo $((pid - 1)) >/proc/sys/kernel/ns_last_pid
		sleep 3600 &
		if [ $! -eq "$pid" ]; then
			NEWCOMER=$!
			break
		fi
		kill $! 2>/dev/null
		wait $! 2>/dev/null || true
	done
	[ -n "$NEWCOMER" ] || skip "could not hand pid $pid to a new process in 50 tries"
	on_exit "kill $NEWCOMER 2>/dev/null"
}

new_pool 1G

say "a: a service's pid"
run_service pr 64M sleep 3600
pid=$(status_field pr pid)
[ "$(status_field pr state)" = running ] || die "the service does not run"
kill -KILL "$pid"
reuse_pid "$pid"
state=$(status_field pr state)
[ "$state" != running ] || die "status says the service runs: pid $pid is a sleep now"
"$CXLCR" ps | grep -q "pr.*running" && die "ps says the service runs"
"$CXLCR" stop pr >/dev/null || die "stop of the dead service failed"
kill -0 "$NEWCOMER" || die "stop killed the process that reused the service's pid"
"$CXLCR" status pr >/dev/null 2>&1 && die "the arena is still there after stop"
ok "a: a reused pid is not the service: status says $state, stop leaves pid $pid alone and frees the arena"

say "b: the pid of a restore's claim on a checkpoint"
pod_up 1
PORT=6379
pod_redis pc h0 64M
python3 "$KV" fill --host "$addr" --port $PORT --count 200 --size 100 --seed 7 --quiet
"$CXLCR" checkpoint pc >/dev/null || die "checkpoint failed"
on h0 "$CLAIM_TOOL" pc h0 >"$POOL_DIR/claim.out" 2>&1 &
job=$!
for _ in $(seq 1 200); do [ -s "$POOL_DIR/claim.out" ] && break; sleep 0.05; done
read -r word holder images <"$POOL_DIR/claim.out" && [ "$word" = claimed ] ||
	die "claim_tool did not claim the checkpoint: $(cat "$POOL_DIR/claim.out")"
if "$CXLCR" restore pc --host h0 >/dev/null 2>"$POOL_DIR/held.err"; then
	die "the checkpoint was restored while its claim's holder ran"
fi
grep -q "being restored on h0 already" "$POOL_DIR/held.err" ||
	die "the refusal does not name the claim: $(cat "$POOL_DIR/held.err")"
kill -KILL "$(machine_pid h0 "$holder")"
wait "$job" 2>/dev/null || true
reuse_pid_on h0 "$holder"
"$CXLCR" restore pc --host h0 >/dev/null 2>"$POOL_DIR/restore.err" ||
	die "the restore was refused, pid $holder (now a sleep) taken for the claim's holder: $(cat "$POOL_DIR/restore.err")"
kill -0 "$NEWCOMER" || die "the process that reused the holder's pid is gone"
[ "$(status_field pc state)" = running ] || die "pc does not run after its restore"
python3 "$KV" verify --host "$(status_field pc address)" --port $PORT --count 200 --size 100 --seed 7 --quiet ||
	die "pc lost values"
ok "b: a claim on $images whose holder died is taken over though its pid $holder runs another process"

say "c: a host daemon's pid"
pod_file() { grep -lx "$(realpath "$CXLCR_POOL")" /run/cxlcr/pod*/pool | head -n 1 | xargs -r dirname; }
pod_dir=$(pod_file)
[ -n "$pod_dir" ] || die "no pod directory names this test's pool"
read -r daemon _ <"$pod_dir/h0.pid"
[ "$(ps -o comm= -p "$daemon")" = cxlcrd ] || die "$pod_dir/h0.pid does not name h0's daemon"
"$CXLCR" stop pc >/dev/null || die "stop pc failed"
SERVICES=()
kill -KILL "$daemon"
reuse_pid "$daemon"
"$CXLCR" pod down >/dev/null 2>"$POOL_DIR/down.err" || die "pod down failed: $(cat "$POOL_DIR/down.err")"
kill -0 "$NEWCOMER" 2>/dev/null || die "pod down killed the process that reused h0's daemon's pid $daemon"
ok "c: pod down leaves pid $daemon alone, a sleep now"

say "d: a stale pod whose daemon's pid runs another process"
# A pod left by a test killed before `pod down`: its pool file is gone and
# its daemon's pid runs another process (one started later than the pid
# file says). The next `pod up` walks the pod numbers from 0 and takes the
# first it may: the stale pod's, made the lowest free one. (Another pod up
# of this machine may take a lower one freed meanwhile, or take the stale
# one first: then try again.)
sleep 3600 &
other=$!
on_exit "kill $other 2>/dev/null"
reached=
for try in $(seq 1 5); do
	stale=
	for i in $(seq 0 63); do
		mkdir "/run/cxlcr/pod$i" 2>/dev/null && { stale=$i; break; }
	done
	[ -n "$stale" ] || skip "no free pod number"
	on_exit "[ \"\$(cat /run/cxlcr/pod$stale/pool 2>/dev/null)\" != $POOL_DIR/gone ] || rm -rf /run/cxlcr/pod$stale"
	echo "$POOL_DIR/gone" >"/run/cxlcr/pod$stale/pool"
	echo "$other 1" >"/run/cxlcr/pod$stale/h0.pid"
	pod_up 1
	mine=$(pod_file)
	mine=${mine##*/pod}
	if [ "$mine" = "$stale" ]; then
		reached=1
		break
	fi
	[ "$(cat "/run/cxlcr/pod$stale/pool" 2>/dev/null)" != "$POOL_DIR/gone" ] ||
		[ "$mine" -lt "$stale" ] ||
		die "pod up passed the stale pod $stale by (to pod $mine): it took pid $other, started later, for its daemon"
	"$CXLCR" pod down >/dev/null || die "pod down failed"
done
[ -n "$reached" ] || skip "in 5 tries other pods took the stale one's place first"
kill -0 "$other" || die "the process with the stale daemon's pid is gone"
ok "d: the stale pod $stale was taken by the next pod up (try $try), its daemon's pid $other being another process"
