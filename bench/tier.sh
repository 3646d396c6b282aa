#!/usr/bin/env bash
# The cold tier's figures (issue 17, points 1 and 2; docs/cold-tier.md):
#   - CXL bytes per snapshot, tiered against untiered, for a Redis read
#     with a skewed pattern (10% of its keys, over and over, during the hot
#     window): the tiered snapshot's region against the region of the full
#     snapshot of the same freeze it was split from;
#   - the service time of one cold page read (RMA read of 4 KiB from the
#     memory server + its CRC check, tier_read_page()), p50/p99 over
#     READS reads, beside a Redis round trip (PING) on the same pod, both
#     from h0's network namespace; ROUNDS rounds, alternating. (A whole
#     fault served by a copy-mode child's pager, from the read of its
#     message to the wake, CXL and cold: bench/fault_time.sh.)
#
#   bench/tier.sh       (KEYS=200000 x 1000 B, ARENA=1G, READS=10000, ROUNDS=3)
# Output: lines on stdout and bench/out/tier.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=$ROOT/build/cxlcr
TOOL=$ROOT/build/tests/tier_tool
KV=$ROOT/tests/lib/kvclient.py
OUT=$ROOT/bench/out
KEYS=${KEYS:-200000}
ARENA=${ARENA:-1G}
READS=${READS:-10000}
ROUNDS=${ROUNDS:-3}
WINDOW=${WINDOW:-2}
PORT=6379

say() { printf 'tier: %s\n' "$*" | tee -a "$OUT/tier.txt"; }
die() { printf 'tier: error: %s\n' "$*" >&2; exit 1; }
[ -x "$CXLCR" ] && [ -x "$TOOL" ] || die "build first (make)"
mkdir -p "$OUT"
: >"$OUT/tier.txt"
WORK=$(mktemp -d /dev/shm/cxlcr-tier-XXXX)
chmod 700 "$WORK"
export CXLCR_POOL=$WORK/pool
loop=
cleanup() {
	set +e
	[ -n "$loop" ] && kill "$loop" 2>/dev/null
	"$CXLCR" stop redis >/dev/null 2>&1
	"$CXLCR" pod down >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
json() { python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[k]
print(v)' "$@"; }

"$CXLCR" pool format --size 8G >/dev/null
"$CXLCR" pod up --hosts 1 >/dev/null
"$CXLCR" tier up --size 2G >/dev/null
"$CXLCR" run --host h0 --name redis --arena "$ARENA" --log "$WORK/redis.log" -- redis-server --port $PORT \
	--protected-mode no --save '' --appendonly no --dir "$WORK" >/dev/null
addr=$("$CXLCR" status redis --json | json address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null
python3 "$KV" fill --host "$addr" --port $PORT --count "$KEYS" --size 1000 --types strings --seed 3 >/dev/null
h0=$("$CXLCR" hosts --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["hosts"][0]["address"])')
NS=cxlcr$(($(echo "$h0" | cut -d. -f2) - 78))-h0

# The skew: one connection reading the first 10% of the keys over and over.
seq 0 $((KEYS / 10 - 1)) | sed 's/^/GET kv:str:/' >"$WORK/hot.cmds"
feed() { while cat "$WORK/hot.cmds"; do :; done; }
redis-cli -h "$addr" -p $PORT >/dev/null 2>&1 < <(feed) &
loop=$!
out=$("$CXLCR" snapshot redis --tier --hot-window "$WINDOW" --json)
kill "$loop"; wait "$loop" 2>/dev/null || true
loop=
t() { echo "$out" | json tier "$1"; }
say "Redis, $KEYS keys x 1000 B in a $ARENA arena, reads on 10% of them during a ${WINDOW} s hot window"
say "  pages: hot $(t pages_hot), cold $(t pages_cold), zero $(t pages_zero) (present after the window: $(t pages_present))"
say "  CXL bytes per snapshot: tiered $(t cxl_bytes), untiered $(t untiered_cxl_bytes) (ratio $(python3 -c "print(round($(t cxl_bytes) / $(t untiered_cxl_bytes), 3))")); on the memory server: $(t cold_bytes)"
say "  the split took $(t tier_ms) ms, $(t rma_write_ms) ms of it RMA writes; hot window $(t hot_window_ms) ms"

for r in $(seq 1 "$ROUNDS"); do
	say "  round $r: $(ip netns exec "$NS" "$TOOL" time redis "$READS")"
	say "  round $r: $(ip netns exec "$NS" "$TOOL" rtt "$addr" $PORT "$READS")"
done
