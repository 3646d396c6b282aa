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
case "$CRTOOLS_SCRIPT_ACTION" in
network-lock)
	[ -n "$CXLCR_NETLOCK_LINK" ] || { echo "cxlcr: CXLCR_NETLOCK_LINK is not set" >&2; exit 1; }
	# Off the bridge, but up (see container_link_detach()).
	exec ip link set "$CXLCR_NETLOCK_LINK" nomaster
	;;
network-unlock)
	[ -n "$CXLCR_NETLOCK_LINK" ] && [ -n "$CXLCR_NETLOCK_BRIDGE" ] || exit 0
	exec ip link set "$CXLCR_NETLOCK_LINK" master "$CXLCR_NETLOCK_BRIDGE" up
	;;
esac
exit 0
