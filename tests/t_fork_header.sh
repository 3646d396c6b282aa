#!/usr/bin/env bash
# A fork child's arena header is its own (issue 12 point 5): a copy-on-write
# view of the snapshot's copy of it, taken in the same freeze as the heap,
# never of the parent's live arena region (what the child maps there is
# checked in its /proc/PID/maps). A Redis on h0 with a 64 MiB
# arena is forked to h1; then the parent grows its arena by extents (which
# its header records) and is stopped, which frees its region. The child's
# header, read from the child's own memory, keeps what it was: its extent
# count, heap address and command line; and the child keeps every value.
# (Before, the child's header was a private view of the parent's region:
# header pages the child never wrote followed the parent, and read zero
# once the parent's region was freed. Redis's child writes the header pages
# this test reads soon after its restore, its stats and the futex wait of
# its helper thread, which copies them: the maps check is what failed.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

COUNT=5000
SIZE=1000
PORT=6379
HDR=$ROOT/tests/lib/arenahdr.py

new_pool 8G
pod_up 2

say "redis on h0 with a 64 MiB arena, $COUNT keys; snapshot; fork to h1"
pod_redis redis h0 64M
parent=$addr
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --seed 3
at=$(python3 "$HDR" address "$CXLCR_POOL" redis) || die "cannot find the parent's arena header"
"$CXLCR" snapshot redis >/dev/null || die "cxlcr snapshot failed"
out=$("$CXLCR" fork redis --to h1 --json) || die "cxlcr fork failed"
read -r kid kaddr kpid < <(echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["children"][0]
print(c["name"], c["address"], c["pid"])')
SERVICES+=("$kid")
kpid=$(machine_pid h1 "$kpid") # the fork says h1's own pid of it; HDR reads this machine's /proc
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
before=$(python3 "$HDR" read "$kpid" "$at") || die "cannot read $kid's header"
[ "$(field "$before" magic_ok)" = True ] || die "$kid has no arena header at $at: $before"
echo "$before" | grep -q redis-server || die "$kid's header does not name redis-server: $before"
ext0=$(field "$before" extent_count)
# What the child maps there: a region of kind 3 (its snapshot), not its
# parent's arena (kind 1).
maps=$(python3 "$HDR" maps "$kpid" "$at" "$CXLCR_POOL")
[ "${maps%% *}" = 3 ] || die "$kid's header maps pool region '$maps', not its snapshot"
# Past the header's own pages (sizeof(struct cxlcr_arena_header), 5 pages
# since the punch log, rounded up: the snapshot keeps those), zero pages.
maps=$(python3 "$HDR" maps "$kpid" $((at + 32 * 4096)) "$CXLCR_POOL")
[ "$maps" = anon ] || die "$kid's header area past the header maps '$maps', not zero pages"
ok "$kid (pid $kpid) has its header at $at: $ext0 extent(s), $(field "$before" command)"

say "the parent grows its arena after the fork"
python3 "$KV" fill --host "$parent" --port $PORT --count 120000 --start $COUNT --size $SIZE --seed 4 >/dev/null
grown=$(status_field redis arena_extents)
[ "$grown" -gt "$ext0" ] || die "the parent did not grow ($grown extents)"
now=$(python3 "$HDR" read "$kpid" "$at")
[ "$(field "$now" extent_count)" = "$ext0" ] ||
	die "$kid's header follows its parent's: $(field "$now" extent_count) extents, it had $ext0 (the parent has $grown)"
ok "the parent has $grown extents now, $kid's header still says $ext0"

say "the parent stops: its region is freed"
stop_service redis
now=$(python3 "$HDR" read "$kpid" "$at")
for f in magic_ok heap_address heap_size extent_count command; do
	[ "$(field "$now" $f)" = "$(field "$before" $f)" ] ||
		die "$kid's header changed when its parent's region was freed: $f is '$(field "$now" $f)', was '$(field "$before" $f)'"
done
ok "$kid's header is unchanged after its parent's region was freed"
python3 "$KV" verify --host "$kaddr" --port $PORT --count $COUNT --size $SIZE --seed 3 --quiet ||
	die "$kid lost values after its parent stopped"
redis-cli -h "$kaddr" -p $PORT set after-parent 1 >/dev/null
[ "$(redis-cli -h "$kaddr" -p $PORT get after-parent)" = 1 ] || die "$kid cannot write after its parent stopped"
ok "$kid holds every value and still writes"
