#!/bin/sh
# CRIU's action script in tests/t_faults.sh and tests/t_verb_race.sh: the
# daemons run with CXLCR_TEST_CRIU_HOOK=DIR and pass DIR/action-script (a
# copy of this) to CRIU, which runs it at each step of a dump or a restore
# with CRTOOLS_SCRIPT_ACTION set. At the step named in DIR/kill-at (or
# DIR/pause-at, which may name several steps, space-separated), CRIU's pid
# goes into DIR/criu.pid and CRIU waits here:
# for the test to kill it (kill-at), or until DIR/go appears (pause-at),
# when it goes on. Either way the first CRIU to get there takes the file.
# In a restore, the pid of the task CRIU restores (CRTOOLS_INIT_PID, once
# there is one; in a dump it is the dumped task's) goes into DIR/init.pid.
# Those pids are the host's own (each emulated host has a pid namespace of
# its own): the host's name goes into DIR/criu.host first (hook_pid in
# tests/lib/common.sh gives this machine's pid of them).
dir=$CXLCR_TEST_CRIU_HOOK
[ -n "$dir" ] || exit 0
take() { # take FILE: FILE names this step, and FILE is ours alone
	[ -f "$dir/$1" ] || return 1
	case " $(cat "$dir/$1" 2>/dev/null) " in
	*" $CRTOOLS_SCRIPT_ACTION "*) mv "$dir/$1" "$dir/$1.$$" 2>/dev/null && rm -f "$dir/$1.$$" ;;
	*) return 1 ;;
	esac
}
# DIR/spawn-at: at that step, a helper process of CRIU's is started first
# (its pid in DIR/helper.pid), which sleeps with CRIU's fds as CRIU's own
# helpers (its kernel checks' ptrace probe) do, until someone kills it.
if take spawn-at; then
	uname -n >"$dir/criu.host"
	sleep 600 &
	echo $! >"$dir/helper.pid"
fi
if take kill-at; then
	until=kill
elif take pause-at; then
	until=go
else
	exit 0
fi
if [ -n "${CRTOOLS_INIT_PID:-}" ] && [ "${CRTOOLS_SCRIPT_ACTION%-dump}" = "$CRTOOLS_SCRIPT_ACTION" ]; then
	echo "$CRTOOLS_INIT_PID" >"$dir/init.pid.tmp.$$"
	mv "$dir/init.pid.tmp.$$" "$dir/init.pid"
fi
uname -n >"$dir/criu.host.tmp.$$"
mv "$dir/criu.host.tmp.$$" "$dir/criu.host"
echo "$PPID" >"$dir/criu.pid.tmp.$$"
mv "$dir/criu.pid.tmp.$$" "$dir/criu.pid"
i=0
while kill -0 "$PPID" 2>/dev/null && [ $i -lt 600 ]; do
	if [ $until = go ] && [ -f "$dir/go" ]; then
		exit 0
	fi
	sleep 0.1
	i=$((i + 1))
done
exit 1
