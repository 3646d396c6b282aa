#!/usr/bin/env bash
# A write tracker (tracking/tracker.c) never outlives its arena, and an arena
# has one tracker at a time.
#
# A tracker maps its service's arena header. t_continuity once found a
# checkpoint's image set corrupt (pages-1.img: checksum mismatch): a
# memcached had been stopped, its arena freed, the next checkpoint's image
# set placed where that arena was, and the stopped service's tracker, waking
# later, cleared its `tracked` word inside the image set. So:
#   a. once `cxlcr stop` returns, no process of this host maps the freed
#      arena (its tracker included), and a checkpoint placed there restores;
#   b. after a checkpoint and restore, the arena has exactly one tracker (the
#      checkpointed process's one is ended by the restore), and the restored
#      service stays tracked once any older tracker is gone;
#   c. a tracker that dies half-way through its start (the service has made
#      the userfaultfd it asked for, and nobody took it or asked it closed)
#      leaves no dump failing: CRIU cannot dump a userfaultfd, so a snapshot
#      and a checkpoint have the service close it first. (Session 24's CI:
#      a migrate right after a migrate ended the new tracker in that moment,
#      and the migrate back failed with "Can't dump file 10 of that type".)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server memcached

PORT=6379
new_pool 8G
CXLCR_WRITE_TRACKING=1 pod_up 1

# mappers OFFSET SIZE [comm]: pids of this host that map bytes
# [OFFSET, OFFSET + SIZE) of this test's pool (only those named comm, if
# given), ascending, space-separated.
mappers() {
	python3 - "$CXLCR_POOL" "$1" "$2" "${3:-}" <<'EOF'
import os, sys
pool, lo, size, comm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
st = os.stat(pool)
hi = lo + size
found = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        if comm and open(f'/proc/{pid}/comm').read().strip() != comm:
            continue
        for line in open(f'/proc/{pid}/maps'):
            f = line.split()
            if len(f) < 6 or int(f[4]) != st.st_ino:
                continue
            maj, mnr = (int(x, 16) for x in f[3].split(':'))
            if os.makedev(maj, mnr) != st.st_dev:
                continue
            a, b = (int(x, 16) for x in f[0].split('-'))
            off = int(f[2], 16)
            if off < hi and off + (b - a) > lo:
                found.append(int(pid))
                break
    except OSError:
        pass
print(' '.join(map(str, sorted(found))))
EOF
}

pod_redis r h0 64M
python3 "$KV" fill --host "$addr" --port $PORT --count 2000 --size 300 --seed 5
wait_tracked r

SERVICES+=(m)
"$CXLCR" run --host h0 --name m --arena 64M --log "$POOL_DIR/m.log" -- \
	memcached -U 0 -p 11211 -m 32 -u root >/dev/null || die "cxlcr run m failed"
wait_tracked m
m_off=$(status_field m arena_offset)
m_size=$(($(status_field m arena_size) + 64 * 1024 * 1024)) # the header and more: any of it
[ "$(mappers "$m_off" "$m_size" cxlcr-tracker | wc -w)" -eq 1 ] ||
	die "memcached's arena has trackers '$(mappers "$m_off" "$m_size" cxlcr-tracker)', expected one"

"$CXLCR" stop m >/dev/null || die "stop m failed"
left=$(mappers "$m_off" "$m_size")
[ -z "$left" ] || die "after stop, processes still map the freed arena: $left ($(for p in $left; do cat /proc/$p/comm; done | tr '\n' ' '))"
ok "a: once stop returns, nothing maps the freed arena"

"$CXLCR" checkpoint r >/dev/null || die "checkpoint r failed"
"$CXLCR" restore r --host h0 >/dev/null || die "restore r failed: the checkpoint placed in the freed arena's memory changed"
addr=$(status_field r address)
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 5 --quiet || die "values changed"
ok "a: a checkpoint placed where the freed arena was restores with every value"

r_off=$(status_field r arena_offset)
r_trackers=$(mappers "$r_off" 4096 cxlcr-tracker)
[ "$(echo "$r_trackers" | wc -w)" -eq 1 ] || die "after restore, the arena has trackers '$r_trackers', expected one"
wait_tracked r
# Any tracker that is not the current one would be ending now: wait for
# them (pidfd-free: tail waits for a pid to end), then the service must
# still be tracked.
for p in $(mappers "$r_off" 4096 cxlcr-tracker); do
	[ "$p" = "$r_trackers" ] || timeout 10 tail --pid="$p" -f /dev/null || true
done
[ "$(status_field r write_tracking)" = True ] || die "after restore, an older tracker ended the new one's tracking"
ok "b: after checkpoint and restore, one tracker, and the service stays tracked"

# leave_uffd: r's tracker is gone (killed here, or none), and r holds the
# userfaultfd a half-started one asked for (tests/track_tool): its fd number.
TRACK_TOOL=$(dirname "$CXLCR")/tests/track_tool
[ -x "$TRACK_TOOL" ] || die "tests/track_tool is not built"
leave_uffd() {
	local t fd pid
	for t in $(mappers "$(status_field r arena_offset)" 4096 cxlcr-tracker); do
		kill -9 "$t"
		timeout 10 tail --pid="$t" -f /dev/null || die "r's tracker $t did not end"
	done
	fd=$(on h0 env CXLCR_POOL="$CXLCR_POOL" "$TRACK_TOOL" leave r) || die "track_tool leave r failed"
	pid=$(service_pid r)
	[ "$(readlink "/proc/$pid/fd/$fd")" = "anon_inode:[userfaultfd]" ] ||
		die "r's fd $fd is $(readlink "/proc/$pid/fd/$fd"), not the userfaultfd left for it"
	echo "$fd"
}

fd=$(leave_uffd)
out=$("$CXLCR" snapshot r 2>&1) || die "a snapshot of r holding a left userfaultfd (fd $fd) failed: $out"
pid=$(service_pid r)
[ ! -e "/proc/$pid/fd/$fd" ] || die "after the snapshot, r still holds fd $fd: $(readlink "/proc/$pid/fd/$fd")"
ok "c: a snapshot closes the userfaultfd a dead tracker left (fd $fd), then dumps"

fd=$(leave_uffd)
out=$("$CXLCR" checkpoint r 2>&1) || die "a checkpoint of r holding a left userfaultfd (fd $fd) failed: $out"
"$CXLCR" restore r --host h0 >/dev/null || die "restore r failed"
addr=$(status_field r address)
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 5 --quiet || die "values changed"
ok "c: so does a checkpoint (fd $fd), and r comes back with every value"
