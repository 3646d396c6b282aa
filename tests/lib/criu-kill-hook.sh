#!/bin/sh
# CRIU's action script in tests/t_faults.sh: the daemons run with
# CXLCR_TEST_CRIU_HOOK=DIR and pass DIR/action-script (a copy of this) to
# CRIU, which runs it at each step of a dump or a restore with
# CRTOOLS_SCRIPT_ACTION set. At the step named in DIR/kill-at, CRIU's pid
# goes into DIR/criu.pid and CRIU waits here for the test to kill it.
dir=$CXLCR_TEST_CRIU_HOOK
[ -n "$dir" ] && [ -f "$dir/kill-at" ] && [ "$(cat "$dir/kill-at")" = "$CRTOOLS_SCRIPT_ACTION" ] || exit 0
rm -f "$dir/kill-at"
echo "$PPID" >"$dir/criu.pid.tmp"
mv "$dir/criu.pid.tmp" "$dir/criu.pid"
i=0
while kill -0 "$PPID" 2>/dev/null && [ $i -lt 600 ]; do
	sleep 0.1
	i=$((i + 1))
done
exit 1
