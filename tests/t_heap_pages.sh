#!/usr/bin/env bash
# A tracked service keeps its heap on 2 MiB mappings until its first
# snapshot, and is on 4 KiB ones from then on (tracking/tracker.c,
# cxlcr_track_small_pages_begin; preload/shed.c). Small pages cost a
# service that is never snapshotted (each page-table change traps on some
# guests) and are needed only once scans are read:
#   a. before any snapshot: status says small_pages false, and no heap
#      mapping has VM_NOHUGEPAGE ("nh" in /proc/PID/smaps);
#   b. the first snapshot switches it (its JSON gives small_pages_ms), and
#      after it every heap mapping has "nh" and maps no 2 MiB page;
#   c. the next snapshot is incremental on the first (the switch is in the
#      first one's full round, not a break after it), and a child forked
#      after it (its fork's snapshot stands on it) has every value;
#   d. a checkpoint and restore keeps the small pages;
#   e. a service stopped (SIGSTOP) when its first snapshot asks is
#      snapshotted as it is mapped; its helper remaps once it runs again,
#      the snapshots after are incremental again, and a child forked after
#      them has every value.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 8G
CXLCR_WRITE_TRACKING=1 pod_up 2

pod_redis r h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count 20000 --size 1000 --seed 3
wait_tracked r

[ "$(status_field r small_pages)" = False ] || die "a: status says small pages before any snapshot"
read -r vmas nh pmd <<<"$(heap_maps r)"
[ "$vmas" -ge 1 ] || die "a: no heap mapping found in smaps"
[ "$nh" -eq 0 ] || die "a: $nh of $vmas heap mappings have VM_NOHUGEPAGE before any snapshot"
ok "a: tracked, and on the mappings it had ($vmas mappings, ${pmd} KiB on 2 MiB pages) before a snapshot"

out=$("$CXLCR" snapshot r --json) || die "snapshot r failed"
json small_pages_ms <<<"$out" | python3 -c 'import sys; sys.exit(0 if float(sys.stdin.read()) > 0 else 1)' ||
	die "b: the first snapshot did not switch the heap: $out"
[ "$(status_field r small_pages)" = True ] || die "b: status does not say small pages after the first snapshot"
read -r vmas nh pmd <<<"$(heap_maps r)"
[ "$nh" -eq "$vmas" ] || die "b: $nh of $vmas heap mappings have VM_NOHUGEPAGE after the first snapshot"
# Redis touches its heap all the time; what it maps again is 4 KiB.
python3 "$KV" verify --host "$addr" --port $PORT --count 20000 --size 1000 --seed 3 --quiet || die "b: values changed"
read -r vmas nh pmd <<<"$(heap_maps r)"
[ "$pmd" -eq 0 ] || die "b: $pmd KiB of the heap mapped with 2 MiB pages after the switch"
ok "b: the first snapshot switched the heap to small pages ($vmas mappings, none on 2 MiB pages)"

python3 "$KV" fill --host "$addr" --port $PORT --count 200 --size 1000 --seed 4
out=$("$CXLCR" snapshot r --json) || die "second snapshot failed"
[ "$(json incremental <<<"$out")" = True ] || die "c: the snapshot after the switch is not incremental: $out"
[ "$(json small_pages_ms <<<"$out")" = 0.0 ] || [ "$(json small_pages_ms <<<"$out")" = 0 ] ||
	die "c: the second snapshot switched again: $out"
kid=$("$CXLCR" fork r --to h1 --json | json children 0 name) || die "c: fork failed"
SERVICES+=("$kid")
kaddr=$(status_field "$kid" address)
python3 "$KV" verify --host "$kaddr" --port $PORT --count 200 --size 1000 --seed 4 --quiet || die "c: child's new values wrong"
python3 "$KV" verify --host "$kaddr" --port $PORT --start 200 --count 19800 --size 1000 --seed 3 --quiet ||
	die "c: child's older values wrong"
ok "c: the next snapshot is incremental, and a child forked after it has every value"

"$CXLCR" checkpoint r >/dev/null || die "checkpoint r failed"
"$CXLCR" restore r --host h0 >/dev/null || die "restore r failed"
addr=$(status_field r address)
wait_tracked r
[ "$(status_field r small_pages)" = True ] || die "d: the restored service lost small pages"
read -r vmas nh pmd <<<"$(heap_maps r)"
[ "$nh" -eq "$vmas" ] || die "d: $nh of $vmas heap mappings have VM_NOHUGEPAGE after restore"
python3 "$KV" verify --host "$addr" --port $PORT --count 200 --size 1000 --seed 4 --quiet || die "d: values changed"
ok "d: a restored service keeps its small pages"

# e: the helper cannot answer while the whole process is stopped.
PORT=6380 pod_redis r2 h0 256M
python3 "$KV" fill --host "$addr" --port 6380 --count 5000 --size 1000 --seed 6
r2pid=$(service_pid r2)
kill -STOP "$r2pid"
out=$("$CXLCR" snapshot r2 --json 2>"$POOL_DIR/r2.snap.err") || { kill -CONT "$r2pid"; die "e: snapshot of a stopped service failed: $(cat "$POOL_DIR/r2.snap.err")"; }
grep -q "not remapped with small pages" "$POOL_DIR/r2.snap.err" || { kill -CONT "$r2pid"; die "e: no warning: $(cat "$POOL_DIR/r2.snap.err")"; }
[ "$(status_field r2 small_pages)" = False ] || { kill -CONT "$r2pid"; die "e: status says small pages before the helper answered"; }
kill -CONT "$r2pid"
wait_status r2 small_pages True 5 || die "e: the helper did not remap once the service ran again"
# The remap dropped 2 MiB mappings that the first snapshot's scans had
# protected whole: the kernel reports those pages written (never fewer),
# so the next snapshot may copy them all; the one after is incremental.
python3 "$KV" fill --host "$addr" --port 6380 --count 100 --size 1000 --seed 7
"$CXLCR" snapshot r2 >/dev/null || die "e: second snapshot of r2 failed"
python3 "$KV" fill --host "$addr" --port 6380 --count 50 --size 1000 --seed 8
out=$("$CXLCR" snapshot r2 --json) || die "e: third snapshot of r2 failed"
[ "$(json incremental <<<"$out")" = True ] || die "e: the snapshots after the late remap are not incremental: $out"
kid=$("$CXLCR" fork r2 --to h1 --json | json children 0 name) || die "e: fork failed"
SERVICES+=("$kid")
kaddr=$(status_field "$kid" address)
python3 "$KV" verify --host "$kaddr" --port 6380 --count 50 --size 1000 --seed 8 --quiet || die "e: child's newest values wrong"
python3 "$KV" verify --host "$kaddr" --port 6380 --start 50 --count 50 --size 1000 --seed 7 --quiet ||
	die "e: child's newer values wrong"
python3 "$KV" verify --host "$kaddr" --port 6380 --start 100 --count 4900 --size 1000 --seed 6 --quiet ||
	die "e: child's older values wrong"
ok "e: a stopped service is snapshotted as mapped, remaps when it runs, and its later snapshots are right"
