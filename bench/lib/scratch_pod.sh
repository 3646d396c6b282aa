# shellcheck shell=bash
# A scratch emulated pod for a benchmark that needs nothing else of
# bench/lib/pod.sh (sourced by bench/snapshot.sh, points.sh, heartbeat.sh):
#
#   scratch_pod NAME POOL_SIZE HOSTS
#
# makes WORK (a private directory under /dev/shm, removed on exit with the
# pod), a pool of POOL_SIZE in it (CXLCR_POOL) and hosts h0..HOSTS-1. The
# caller sets CXLCR and defines die. POOL_FLAGS are more options of
# `cxlcr pool format` (--keep-memory).
# The figures are of services without recovery points (a CRIU dump every
# second otherwise: bench/points.sh measures what they cost).
export CXLCR_RECOVERY_INTERVAL_MS=${CXLCR_RECOVERY_INTERVAL_MS:-0}
# A service keeps the 4 KiB mappings of its first snapshot between the
# benchmark's snapshots, however far apart (its daemon would map it with
# 2 MiB pages again after 30 s without one: tracking/idle.c), so that each
# re-snapshot is the incremental one measured; bench/tracking.sh measures
# the remap itself.
export CXLCR_HUGE_AFTER_S=${CXLCR_HUGE_AFTER_S:-0}
scratch_pod() {
	[ -x "$CXLCR" ] || die "build first (make)"
	WORK=$(mktemp -d "/dev/shm/cxlcr-$1-XXXX")
	chmod 700 "$WORK"
	export CXLCR_POOL=$WORK/pool
	trap 'set +e; "$CXLCR" pod down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
	# shellcheck disable=SC2086
	"$CXLCR" pool format --size "$2" ${POOL_FLAGS:-} >/dev/null
	"$CXLCR" pod up --hosts "$3" >/dev/null
}
