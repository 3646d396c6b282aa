#!/usr/bin/env bash
# An arena is not a cliff. Real servers on an emulated pod:
#  - a Redis (linked with jemalloc) started with a 64 MiB arena, filled to
#    four times that: its arena grows in extents, nothing falls back to
#    glibc, every value reads back; then it is migrated, checkpointed and
#    restored, grows again, is snapshotted and forked (the plugin and the
#    rebase over several extents),
#    and stopping it frees every extent;
#  - a Redis held at --arena-max 64M filled past it: the rest goes to glibc
#    (status says so), every value reads back, and it migrates with that
#    private memory (CRIU dumps it);
#  - a memcached with 64 threads on a 256 MiB arena: every thread's heap in
#    the arena, no fallback;
#  - bad input: --arena-max below --arena, and a pool too small for the
#    first extent: one line each, and nothing left behind.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli memcached

PORT=6379
SIZE=1000
COUNT=230000   # x 1000 B: ~4x a 64 MiB arena with Redis's overhead

new_pool 8G
pod_up 2
field() { status_field "$1" "$2"; }
extents_in_pool() { python3 "$ROOT/tests/lib/poolimg.py" kind "$CXLCR_POOL" 6; }

# --- growth
say "redis on h0 with a 64 MiB arena, filled with $COUNT x $SIZE B"
pod_redis grow h0 64M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 11
used=$(field grow arena_used)
size=$(field grow arena_size)
ext=$(field grow arena_extents)
fb=$(field grow glibc_fallbacks)
say "arena_used $((used >> 20)) MiB, arena_size $((size >> 20)) MiB in $ext extents, $fb fallbacks"
[ "$size" -ge $((4 * 64 << 20)) ] || die "the arena did not grow to 4x its first extent ($size bytes)"
[ "$ext" -gt 1 ] || die "the arena has $ext extent"
[ "$fb" -eq 0 ] || die "$fb allocations fell back to glibc while the pool had room"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 11 --quiet ||
	die "values lost in a grown arena"
ok "grew to $((size >> 20)) MiB in $ext extents, every value read back, no fallback"
"$CXLCR" status grow | grep -q "in $ext extents" || die "status does not show the extents"

say "migrate it h0 -> h1: every extent taken over"
"$CXLCR" migrate grow --to h1 >/dev/null || die "migrate of a grown arena failed"
[ "$(field grow host)" = h1 ] || die "grow is not on h1"
addr=$(field grow address)
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 11 --quiet ||
	die "values lost in the migrate of a grown arena"
ok "migrated with its $ext extents, every value read back"

say "checkpoint it, restore it on h0, and back to h1 by migrate"
"$CXLCR" checkpoint grow >/dev/null || die "checkpoint of a grown arena failed"
"$CXLCR" restore grow --host h0 >/dev/null || die "restore of a grown arena failed"
addr=$(field grow address)
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 11 --quiet ||
	die "values lost in the checkpoint and restore of a grown arena"
"$CXLCR" migrate grow --to h1 >/dev/null || die "second migrate failed"
addr=$(field grow address)
ok "checkpoint + restore with every extent, every value read back"

say "it grows again after the migrate, on h1"
python3 "$KV" fill --host "$addr" --port $PORT --count 60000 --start $COUNT --size $SIZE --seed 11
ext2=$(field grow arena_extents)
[ "$ext2" -gt "$ext" ] || die "no new extent after the migrate ($ext2)"
[ "$(field grow glibc_fallbacks)" -eq 0 ] || die "fallbacks after the migrate"
ok "$ext2 extents now"

say "snapshot and fork it to h0: the child holds every value of all extents"
"$CXLCR" fork grow --to h0 >/dev/null || die "fork of a grown arena failed"
SERVICES+=(grow.1)
child=$(field grow.1 address)
python3 "$KV" verify --host "$child" --port $PORT --count $((COUNT + 60000)) --size $SIZE --seed 11 --quiet ||
	die "the child of a grown arena lost values"
redis-cli -h "$child" -p $PORT set only-in-child 1 >/dev/null
[ -z "$(redis-cli -h "$addr" -p $PORT get only-in-child)" ] || die "a child's write reached its parent"
ok "the child holds every value, its writes are its own"
stop_service grow.1

before=$(extents_in_pool)
stop_service grow
after=$(extents_in_pool)
[ "$after" -eq 0 ] || die "$after extent regions left after stopping the service (were $before)"
ok "stopping it freed its $before extents"

# --- a limit, and glibc's private memory through a migrate
say "redis held at --arena-max 64M, filled past it"
SERVICES+=(held)
"$CXLCR" run --host h0 --name held --arena 64M --arena-max 64M --log "$POOL_DIR/held.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
	die "cxlcr run --arena-max failed"
addr=$(field held address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "held does not answer"
python3 "$KV" fill --host "$addr" --port $PORT --count 120000 --size $SIZE --seed 12
fb=$(field held glibc_fallbacks)
[ "$fb" -gt 0 ] || die "no fallback past --arena-max"
[ "$(field held arena_extents)" -eq 1 ] || die "the arena grew past --arena-max"
"$CXLCR" status held | grep -q "reached --arena-max" || die "status does not say why it fell back"
python3 "$KV" verify --host "$addr" --port $PORT --count 120000 --size $SIZE --seed 12 --quiet ||
	die "values lost past --arena-max"
ok "$fb allocations in glibc past --arena-max, every value read back"
"$CXLCR" migrate held --to h1 >/dev/null || die "migrate with glibc memory failed"
addr=$(field held address)
python3 "$KV" verify --host "$addr" --port $PORT --count 120000 --size $SIZE --seed 12 --quiet ||
	die "values in glibc memory lost in the migrate"
ok "migrated with its private glibc memory, every value read back"
stop_service held

# --- many threads
say "memcached -t 64 on a 256 MiB arena"
SERVICES+=(mc)
"$CXLCR" run --host h0 --name mc --arena 256M --log "$POOL_DIR/mc.log" -- \
	memcached -U 0 -p 11211 -t 64 -m 64 -u nobody >/dev/null || die "cxlcr run memcached -t 64 failed"
addr=$(field mc address)
python3 "$KV" wait --host "$addr" --port 11211 --proto memcached >/dev/null || die "memcached does not answer"
python3 "$KV" fill --host "$addr" --port 11211 --proto memcached --count 20000 --size 500 --seed 13 --jobs 8
# memcached hands connections to its worker threads in turn, and a worker
# allocates for each connection it takes: 128 connections open at once
# make all 64 allocate.
python3 - "$addr" <<'PYEOF' || die "128 connections to memcached failed"
import socket, sys
conns = [socket.create_connection((sys.argv[1], 11211), timeout=10) for _ in range(128)]
for i, c in enumerate(conns):
    c.sendall(b"set conn:%d 0 0 4\r\n%04d\r\n" % (i, i))
for c in conns:
    assert c.recv(64) == b"STORED\r\n"
for c in conns:
    c.close()
PYEOF
python3 "$KV" verify --host "$addr" --port 11211 --proto memcached --count 20000 --size 500 --seed 13 --quiet ||
	die "memcached lost values"
threads=$(on "$(field mc host)" ls "/proc/$(field mc pid)/task" | wc -l) # (its host's pid)
fb=$(field mc glibc_fallbacks)
[ "$threads" -ge 64 ] || die "memcached runs $threads threads"
[ "$fb" -eq 0 ] || die "$fb allocations of memcached's $threads threads fell back to glibc"
[ "$(field mc arena_extents)" -gt 1 ] || die "64 allocating threads fit in 256 MiB? (no extent added)"
ok "$threads threads, $(field mc arena_extents) extents ($(($(field mc arena_size) >> 20)) MiB of address space), no fallback"
stop_service mc

# --- bad input
say "bad input"
set +e
out=$("$CXLCR" run --name bad --arena 256M --arena-max 128M -- true 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || die "--arena-max below --arena: exit $rc ($out)"
[ "$(echo "$out" | wc -l)" -eq 1 ] || die "more than one line: $out"
ok "--arena-max below --arena: $out"
set +e
out=$("$CXLCR" run --name bad --arena 64G -- true 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || die "an arena larger than the pool started"
[ "$(echo "$out" | wc -l)" -eq 1 ] || die "more than one line: $out"
"$CXLCR" status bad >/dev/null 2>&1 && die "the refused service left an arena behind"
ok "a pool too small for the first extent: $out"
