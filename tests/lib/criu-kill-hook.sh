#!/bin/sh
# CRIU's action script in tests/t_faults.sh and tests/t_verb_race.sh: the
# daemons run with CXLCR_TEST_CRIU_HOOK=DIR and pass DIR/action-script (a
# copy of this) to CRIU, which runs it at each step of a dump or a restore
# with CRTOOLS_SCRIPT_ACTION set. At the step named in DIR/kill-at (or
# DIR/pause-at, which may name several steps, space-separated), CRIU's pid
# goes into DIR/criu.pid and CRIU waits here:
# for the test to kill it (kill-at), or until DIR/go appears (pause-at),
# when it goes on. Either way the first CRIU to get there takes the file.
dir=$CXLCR_TEST_CRIU_HOOK
[ -n "$dir" ] || exit 0
take() { # take FILE: FILE names this step, and FILE is ours alone
	[ -f "$dir/$1" ] || return 1
	case " $(cat "$dir/$1" 2>/dev/null) " in
	*" $CRTOOLS_SCRIPT_ACTION "*) mv "$dir/$1" "$dir/$1.$$" 2>/dev/null && rm -f "$dir/$1.$$" ;;
	*) return 1 ;;
	esac
}
if take kill-at; then
	until=kill
elif take pause-at; then
	until=go
else
	exit 0
fi
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
