#!/usr/bin/env bash
# CRIU's parasite mounts a proc in the dumped service's working directory
# ("proc.crtools": a pod service's /proc is not its pid namespace's), and
# services may share a working directory (each runs in its own unless it
# changes directory; here both Redis servers run in one --dir). So:
#   a. a leftover of a dump killed in between (the directory, as it would
#      be left) does not make the next snapshot or migrate fail ("Can't
#      create a directory (-17)"): it is removed first;
#   b. two snapshots of two services on one machine at once, round after
#      round, all succeed (dumps take turns: t_stress saw one fail);
#   c. a CRIU killed while a helper process it forked lives (the CRIU hook
#      starts one, with CRIU's fds, as CRIU's kernel checks do): the helper
#      dies with it, and the next dump gets its turn at once (a helper left
#      behind kept the turn's lock: every later dump of the machine
#      waited out its deadline and failed).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
criu_hook dt
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
pod_redis d1 h0 64M
a1=$addr
pod_redis d2 h0 64M
a2=$addr
python3 "$KV" fill --host "$a1" --port $PORT --count 500 --size 300 --seed 1 --quiet
python3 "$KV" fill --host "$a2" --port $PORT --count 500 --size 300 --seed 2 --quiet

say "a: a proc.crtools left in the services' working directory"
cwd=$(on h0 readlink "/proc/$(status_field d1 pid)/cwd") # (h0's pids)
[ "$cwd" = "$(on h0 readlink "/proc/$(status_field d2 pid)/cwd")" ] || die "the two services run from different directories"
left=$cwd/proc.crtools
mkdir "$left"
"$CXLCR" snapshot d1 >/dev/null 2>"$POOL_DIR/snap.err" || die "snapshot failed: $(cat "$POOL_DIR/snap.err")"
[ ! -e "$left" ] || die "the leftover is still there"
mkdir "$left"
"$CXLCR" migrate d2 --to h1 >/dev/null 2>"$POOL_DIR/mig.err" || die "migrate failed: $(cat "$POOL_DIR/mig.err")"
[ ! -e "$left" ] || die "the leftover is still there after the migrate"
python3 "$KV" verify --host "$(status_field d2 address)" --port $PORT --count 500 --size 300 --seed 2 --quiet ||
	die "d2 lost values"
"$CXLCR" migrate d2 --to h0 >/dev/null || die "migrate back failed"
ok "a: a leftover proc.crtools is removed before a snapshot and before a migrate"

say "b: two snapshots at once, 10 rounds"
for round in $(seq 10); do
	"$CXLCR" snapshot d1 >/dev/null 2>"$POOL_DIR/s1.err" &
	p1=$!
	"$CXLCR" snapshot d2 >/dev/null 2>"$POOL_DIR/s2.err" &
	p2=$!
	wait $p1 || die "round $round: snapshot of d1 failed: $(cat "$POOL_DIR/s1.err")"
	wait $p2 || die "round $round: snapshot of d2 failed: $(cat "$POOL_DIR/s2.err")"
done
python3 "$KV" verify --host "$a1" --port $PORT --count 500 --size 300 --seed 1 --quiet || die "d1 lost values"
ok "b: 20 snapshots of two services, two at a time, all made"

say "c: CRIU killed while a helper of its own lives"
rm -f "$HOOK/criu.pid" "$HOOK/helper.pid"
echo pre-dump >"$HOOK/spawn-at"
echo pre-dump >"$HOOK/kill-at"
"$CXLCR" snapshot d1 >/dev/null 2>"$POOL_DIR/c.err" &
cli=$!
criu_reached $cli || die "c: CRIU never reached pre-dump: $(cat "$POOL_DIR/c.err")"
[ -s "$HOOK/helper.pid" ] || die "c: the hook started no helper"
helper=$(hook_pid helper.pid)
kill -KILL "$(hook_pid criu.pid)"
if wait $cli; then die "c: the snapshot whose CRIU was killed succeeded"; fi
wait_exit "$helper" 30
"$CXLCR" snapshot d2 >/dev/null 2>"$POOL_DIR/c2.err" || die "c: the next snapshot failed: $(cat "$POOL_DIR/c2.err")"
ok "c: the helper of a killed CRIU died with it; the next snapshot had its turn"
