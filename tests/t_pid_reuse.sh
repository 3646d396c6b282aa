#!/usr/bin/env bash
# A pid stands for a service only while it is that service's process. A
# service is killed behind cxlcr's back and its pid handed to another
# process (ns_last_pid): `status` must not say it runs, and `stop` must
# not signal the newcomer (it killed it before), yet free the arena.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
[ -w /proc/sys/kernel/ns_last_pid ] || skip "cannot choose the next pid (ns_last_pid)"

new_pool 1G
run_service pr 64M sleep 3600
pid=$(status_field pr pid)
[ "$(status_field pr state)" = running ] || die "the service does not run"
kill -KILL "$pid"
wait_exit "$pid" 10
# Until its parent has reaped it, the pid is not free to be handed out.
for i in $(seq 1 200); do [ -e "/proc/$pid" ] || break; sleep 0.05; done
[ -e "/proc/$pid" ] && skip "pid $pid was not reaped (its parent: $(ps -o ppid= -p "$pid"))"

say "hand pid $pid to another process"
newcomer=
for try in $(seq 1 50); do
	echo $((pid - 1)) >/proc/sys/kernel/ns_last_pid
	sleep 3600 &
	if [ $! -eq "$pid" ]; then
		newcomer=$!
		break
	fi
	kill $! 2>/dev/null
	wait $! 2>/dev/null || true
done
[ -n "$newcomer" ] || skip "could not hand pid $pid to a new process in 50 tries"
on_exit "kill $newcomer 2>/dev/null"

state=$(status_field pr state)
[ "$state" != running ] || die "status says the service runs: pid $pid is a sleep now"
"$CXLCR" ps | grep -q "pr.*running" && die "ps says the service runs"
"$CXLCR" stop pr >/dev/null || die "stop of the dead service failed"
kill -0 "$newcomer" || die "stop killed the process that reused the service's pid"
"$CXLCR" status pr >/dev/null 2>&1 && die "the arena is still there after stop"
ok "a reused pid is not the service: status says $state, stop leaves pid $pid alone and frees the arena"
