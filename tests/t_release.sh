#!/usr/bin/env bash
# Freed heap memory goes back to the pool: a Redis that held 60 MB of
# values and then dropped them (FLUSHALL) gives that memory back (punched
# out of the pool file: it takes no memory and reads as zero), and a
# snapshot taken afterwards stores about what `status` says is used, not
# the deleted data. (mimalloc returns memory a little after it is freed,
# when the service allocates again: the test keeps it busy with a few
# commands first, as any live service is.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

PORT=6379
new_pool 8G
pod_up 1
# What the pool file holds as data (a region's blocks are reserved when it
# is made: those count once written).
pool_bytes() { python3 "$ROOT/tests/lib/poolimg.py" data-bytes "$CXLCR_POOL"; }

SERVICES+=(rel)
"$CXLCR" run --host h0 --name rel --arena 512M --env MIMALLOC_DECOMMIT_DELAY=0 --env MIMALLOC_SEGMENT_DECOMMIT_DELAY=0 --log "$POOL_DIR/rel.log" -- \
	redis-server --port $PORT --protected-mode no --save "" --appendonly no --dir / >/dev/null || die "cxlcr run failed"
addr=$(status_field rel address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"
base=$(pool_bytes)
say "fill 60000 x 1000 B"
python3 "$KV" fill --host "$addr" --port $PORT --count 60000 --size 1000 --seed 21
full=$(pool_bytes)
used_full=$(status_field rel arena_used)
say "pool holds $(((full - base) >> 20)) MiB more, arena_used $((used_full >> 20)) MiB"

redis-cli -h "$addr" -p $PORT flushall >/dev/null
# A service that goes on working: small writes and deletes for a while.
for round in 1 2 3 4 5; do
	python3 "$KV" fill --host "$addr" --port $PORT --count 2000 --size 100 --seed $round --prefix churn$round >/dev/null
	redis-cli -h "$addr" -p $PORT eval "for _,k in ipairs(redis.call('keys','churn$round*')) do redis.call('del',k) end" 0 >/dev/null
done
used=$(status_field rel arena_used)
after=$(pool_bytes)
released=$("$CXLCR" status rel --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["arena_released"])')
say "after FLUSHALL: arena_used $((used >> 20)) MiB, pool holds $(((after - base) >> 20)) MiB more than before the fill, $((released >> 20)) MiB released"
[ $((after - base)) -le $(((full - base) / 4)) ] ||
	die "the pool still holds $(((after - base) >> 20)) of the $(((full - base) >> 20)) MiB the deleted values took"

# Each punch is logged in the arena's header first (pool_format.h,
# punch_log), so that snapshots know its pages without comparing the heap.
punches=$(python3 "$ROOT/tests/lib/arenahdr.py" punches "$CXLCR_POOL" rel)
python3 -c 'import json, sys
p = json.loads(sys.argv[1])
sys.exit(0 if p["begun"] > 0 and p["begun"] == p["done"] and p["logged"] == min(p["begun"], 256) else 1)' "$punches" ||
	die "the punches are not all in the arena's punch log: $punches"
ok "every punch is in the arena's punch log: $punches"

out=$("$CXLCR" snapshot rel --json) || die "snapshot failed"
stored=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot_bytes"])')
say "snapshot stores $((stored >> 20)) MiB (arena_used $((used >> 20)) MiB)"
[ "$stored" -le $((used + (16 << 20))) ] || die "the snapshot stores $stored bytes for $used bytes in use"
ok "after FLUSHALL the pool and the snapshot hold what is in use, not the deleted data"
python3 "$KV" fill --host "$addr" --port $PORT --count 20000 --size 1000 --seed 22
python3 "$KV" verify --host "$addr" --port $PORT --count 20000 --size 1000 --seed 22 --quiet ||
	die "memory given back and reused holds wrong values"
ok "memory given back is reused correctly"
