#!/bin/sh
# CRIU action script of `cxlcr checkpoint | migrate` (criu dump
# --action-script): the service's network lock. CRIU runs it at each step
# of a dump with CRTOOLS_SCRIPT_ACTION set; "network-lock" comes once the
# tasks are frozen, even with --network-lock skip, so the service's link
# leaves the pod bridge only when nothing in it runs any more (its replies
# already sent are on the wire). "network-unlock" comes when a dump fails
# and CRIU lets the tasks run on: the link goes back first.
#   CXLCR_NETLOCK_LINK    the service's link on the bridge (required)
#   CXLCR_NETLOCK_BRIDGE  the pod bridge (network-unlock only)
# Tests only: with CXLCR_TEST_CRIU_HOOK=DIR (in the daemons' environment),
# at the action named in DIR/kill-at, CRIU's pid goes into DIR/criu.pid
# and CRIU waits here for the test to kill it (tests/t_faults.sh).
if [ -n "$CXLCR_TEST_CRIU_HOOK" ] && [ -f "$CXLCR_TEST_CRIU_HOOK/kill-at" ] &&
	[ "$(cat "$CXLCR_TEST_CRIU_HOOK/kill-at")" = "$CRTOOLS_SCRIPT_ACTION" ]; then
	rm -f "$CXLCR_TEST_CRIU_HOOK/kill-at"
	echo "$PPID" >"$CXLCR_TEST_CRIU_HOOK/criu.pid.tmp"
	mv "$CXLCR_TEST_CRIU_HOOK/criu.pid.tmp" "$CXLCR_TEST_CRIU_HOOK/criu.pid"
	i=0
	while kill -0 "$PPID" 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	exit 1
fi
case "$CRTOOLS_SCRIPT_ACTION" in
network-lock)
	[ -n "$CXLCR_NETLOCK_LINK" ] || { echo "cxlcr: CXLCR_NETLOCK_LINK is not set" >&2; exit 1; }
	# Off the bridge, but up: a link that is down marks the service's routes
	# "linkdown".
	exec ip link set "$CXLCR_NETLOCK_LINK" nomaster
	;;
network-unlock)
	[ -n "$CXLCR_NETLOCK_LINK" ] && [ -n "$CXLCR_NETLOCK_BRIDGE" ] || exit 0
	exec ip link set "$CXLCR_NETLOCK_LINK" master "$CXLCR_NETLOCK_BRIDGE" up
	;;
esac
exit 0
