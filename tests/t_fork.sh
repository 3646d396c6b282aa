#!/usr/bin/env bash
# Remote fork (the CXLfork path) with real Redis on an emulated pod: a
# snapshot of a running parent on h0, children on h1 from it, each with its
# own address, reading the parent's heap through the pool and owning only
# what it writes. Writes on either side stay on that side; eight children
# come from one snapshot at once; the snapshot is freed only when its last
# child is gone; bad requests and a corrupt snapshot are refused and leave
# no child behind.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

COUNT=40000
SIZE=1000
TYPES=strings,hashes,lists,sets,zsets
PORT=6379

new_pool 8G
pod_up 2

say "cxlcr run --host h0 redis-server"
pod_redis redis h0 1G
parent=$addr
say "fill $COUNT keys at $parent"
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5

json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
redis_at() { redis-cli -h "$1" -p $PORT "${@:2}"; }

# --- the snapshot
out=$("$CXLCR" snapshot redis --json) || die "cxlcr snapshot failed"
echo "$out" | is_json || die "snapshot --json is not JSON: $out"
stored=$(echo "$out" | json_field snapshot_bytes)
[ "$stored" -gt $((COUNT * SIZE / 2)) ] || die "the snapshot stored only $stored bytes of heap"
[ "$(echo "$out" | json_field image_bytes)" -lt $((64 << 20)) ] || die "the heap was copied into the images"
ok "snapshot: $(echo "$out" | json_field snapshot_bytes) bytes of heap stored, parent frozen $(echo "$out" | json_field freeze_ms) ms"
redis_at "$parent" ping | grep -q PONG || die "the parent does not answer after its snapshot"

# --- two children on h1
out=$("$CXLCR" fork redis --to h1 --count 2 --json) || die "cxlcr fork failed"
echo "$out" | is_json || die "fork --json is not JSON: $out"
mapfile -t kids < <(echo "$out" | python3 -c '
import json, sys
for c in json.load(sys.stdin)["children"]:
    print(c["name"], c["address"], c["host"])')
[ ${#kids[@]} -eq 2 ] || die "fork made ${#kids[@]} children, not 2"
for k in "${kids[@]}"; do
	read -r name addr host <<<"$k"
	SERVICES+=("$name")
	[ "$host" = h1 ] || die "$name runs on $host, not h1"
	[ "$addr" != "$parent" ] || die "$name has its parent's address"
	[ "$(status_field "$name" state)" = running ] || die "$name is not running"
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
		--seed 5 --quiet || die "$name does not hold its parent's values"
	ok "$name at $addr on h1 holds every value of its parent"
done
read -r kid1 addr1 _ <<<"${kids[0]}"
read -r kid2 addr2 _ <<<"${kids[1]}"

# Writes stay where they are made.
redis_at "$addr1" set only-in-child 1 >/dev/null
redis_at "$addr1" set key:1 from-child >/dev/null
redis_at "$parent" set only-in-parent 1 >/dev/null
[ -z "$(redis_at "$parent" get only-in-child)" ] || die "a child's write reached its parent"
[ -z "$(redis_at "$addr2" get only-in-child)" ] || die "a child's write reached its sibling"
[ -z "$(redis_at "$addr1" get only-in-parent)" ] || die "a parent's write after the snapshot reached a child"
[ "$(redis_at "$addr1" get key:1)" = from-child ] || die "the child lost its own write"
ok "writes stay in the process that made them"
redis_at "$parent" del only-in-parent >/dev/null
python3 "$KV" verify --host "$parent" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
	--seed 5 --quiet || die "the parent's values changed"
ok "the parent still holds every value"

# A child reading its heap owns little memory of its own.
anon=$(status_field "$kid2" rss_anon_kb)
used=$(status_field redis arena_used)
python3 -c "import sys; a, u = $anon * 1024, $used; print('child RssAnon %.1f MiB = %.1f%% of the parent heap' % (a / 2**20, 100 * a / u)); sys.exit(0 if a <= 0.15 * u else 1)" ||
	die "child $kid2 owns more than 15% of its parent's heap"

# --- refusals, and nothing left behind
n_services() { "$CXLCR" ps --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["services"]))'; }
before=$(n_services)
set +e
"$CXLCR" fork nosuch --to h1 2>"$POOL_DIR/err"; rc=$?
set -e
[ $rc -eq 3 ] || die "fork of a missing service: exit $rc, not 3"
grep -q "no service named 'nosuch'" "$POOL_DIR/err" || die "unclear error: $(cat "$POOL_DIR/err")"
set +e
"$CXLCR" fork redis --to h7 2>"$POOL_DIR/err"; rc=$?
set -e
[ $rc -ne 0 ] && grep -q "h7" "$POOL_DIR/err" || die "fork to a host that is not up: exit $rc, $(cat "$POOL_DIR/err")"
set +e
"$CXLCR" fork redis --to h1 --count 0 2>/dev/null; rc=$?
set -e
[ $rc -eq 2 ] || die "fork --count 0: exit $rc, not 2"
[ "$(n_services)" -eq "$before" ] || die "a refused fork left a child behind"
ok "bad requests refused, no child left behind"

# --- eight children from one snapshot at once
out=$("$CXLCR" fork redis --to h1 --count 8 --json) || die "fork --count 8 failed"
mapfile -t eight < <(echo "$out" | python3 -c '
import json, sys
for c in json.load(sys.stdin)["children"]:
    print(c["name"], c["address"])')
[ ${#eight[@]} -eq 8 ] || die "fork --count 8 made ${#eight[@]} children"
for k in "${eight[@]}"; do
	read -r name addr <<<"$k"
	SERVICES+=("$name")
	python3 "$KV" verify --host "$addr" --port $PORT --count 500 --size $SIZE --types $TYPES --seed 5 --quiet ||
		die "$name (one of eight) does not hold its parent's values"
done
ok "8 children from one snapshot at once, each with its parent's values"
for k in "${eight[@]}"; do
	read -r name _ <<<"$k"
	stop_service "$name"
done

# --- a new snapshot retires the old one once its last child is gone
snapshots() { python3 "$ROOT/tests/lib/poolimg.py" kind "$CXLCR_POOL" 3; }
# The parent rewrites 2000 keys: the next snapshot lists the pages that
# changed, and a child gets them prefetched (made its own before it runs).
python3 "$KV" fill --host "$parent" --port $PORT --count 2000 --size $SIZE --types $TYPES --seed 6 >/dev/null
out=$("$CXLCR" snapshot redis --json) || die "second snapshot failed"
changed=$(echo "$out" | json_field pages_changed)
[ "$changed" -gt 0 ] || die "the second snapshot lists no changed pages"
[ "$(snapshots)" -eq 2 ] || die "the first snapshot was freed while $kid1 and $kid2 still use it"
python3 "$KV" verify --host "$addr1" --port $PORT --count 200 --start 2 --size $SIZE --types $TYPES --seed 5 --quiet ||
	die "$kid1 lost its values when the snapshot was replaced"
stop_service "$kid1"
stop_service "$kid2"
incremental=$(echo "$out" | json_field incremental)
out=$("$CXLCR" fork redis --to h1 --json) || die "fork from the second snapshot failed"
# An incremental second snapshot shares the first one's unchanged pages:
# the first lives on, held by the second alone; else it goes with its
# last child.
if [ "$incremental" = True ]; then
	[ "$(snapshots)" -eq 2 ] || die "the first snapshot went, though the second shares its pages ($(snapshots) snapshots)"
else
	[ "$(snapshots)" -eq 1 ] || die "the first snapshot outlived its last child ($(snapshots) snapshots)"
fi
ok "the replaced snapshot went with its last child (or, incremental: lives on as the newer one's base alone)"
read -r addr3 prefetched < <(echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["children"][0]
print(c["address"], c["prefetched_pages"])')
[ "$prefetched" -eq "$changed" ] || die "the child got $prefetched of $changed changed pages prefetched"
python3 "$KV" verify --host "$addr3" --port $PORT --count 2000 --size $SIZE --types $TYPES --seed 6 --quiet ||
	die "the child of the second snapshot does not hold the rewritten values"
ok "$changed changed pages prefetched into the child, which holds the rewritten values"

# The prefetch runs while the child already serves: what the child writes
# meanwhile must stay (the prefetch leaves pages the child owns alone).
out=$("$CXLCR" fork redis --to h1 --json) || die "fork for the write-during-prefetch check failed"
read -r addr4 pid4 name4 < <(echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["children"][0]
print(c["address"], c["pid"], c["name"])')
python3 "$KV" fill --host "$addr4" --port $PORT --count 2000 --size $SIZE --types $TYPES --seed 8 >/dev/null ||
	die "writes to $name4 failed"
for _ in $(seq 600); do
	"$CXLCR" pod exec h1 -- grep -q "(pid $pid4 on h1)" /var/log/cxlcr/prefetch.log 2>/dev/null && break
	python3 -c 'import time; time.sleep(0.05)'  # polling a log line, bounded
done
"$CXLCR" pod exec h1 -- grep "(pid $pid4 on h1)" /var/log/cxlcr/prefetch.log | grep -q "changed pages prefetched" ||
	die "the prefetch of $name4 did not finish"
python3 "$KV" verify --host "$addr4" --port $PORT --count 2000 --size $SIZE --types $TYPES --seed 8 --quiet ||
	die "$name4 lost writes it made while its prefetch ran"
ok "writes a child made while its prefetch ran are all kept"
"$CXLCR" stop "$name4" >/dev/null
"$CXLCR" stop redis.1 >/dev/null

# --- a corrupt snapshot is refused, and leaves no child
python3 "$ROOT/tests/lib/poolimg.py" corrupt-snapshot "$CXLCR_POOL" || die "cannot corrupt the snapshot"
before=$(n_services)
set +e
"$CXLCR" fork redis --to h1 2>"$POOL_DIR/err"; rc=$?
set -e
[ $rc -ne 0 ] || die "a fork from a corrupt snapshot succeeded"
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "more than one error line: $(cat "$POOL_DIR/err")"
grep -qi "snapshot" "$POOL_DIR/err" || die "unclear error: $(cat "$POOL_DIR/err")"
[ "$(n_services)" -eq "$before" ] || die "a refused fork left a child behind"
ok "corrupt snapshot refused: $(cat "$POOL_DIR/err")"
redis_at "$parent" ping | grep -q PONG || die "the parent stopped answering"
