#!/usr/bin/env bash
# What an arena that grew costs a migrate. Two Redis servers on an emulated
# pod hold the same values: "grown" started with a 256 MiB arena and grew
# to about four times that in extents, "single" has one extent of the same
# size from the start. Each is migrated h0 -> h1 -> h0 ... in turn (the
# order alternating each round), every key checked after the last move;
# the median freeze (migrate --json freeze_ms) of each and their ratio
# (target <= 1.1).
#
#   bench/extents.sh              (ROUNDS=6, KEYS=900000 x 1000 B)
# Output: a table on stdout and bench/out/extents.txt, extents.csv.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=$ROOT/build/cxlcr
KV=$ROOT/tests/lib/kvclient.py
OUT=$ROOT/bench/out
ROUNDS=${ROUNDS:-6}
KEYS=${KEYS:-900000}
FIRST=256M

say() { printf 'extents: %s\n' "$*"; }
die() { printf 'extents: error: %s\n' "$*" >&2; exit 1; }
[ -x "$CXLCR" ] || die "build first (make)"
mkdir -p "$OUT"
WORK=$(mktemp -d /dev/shm/cxlcr-extents-XXXX)
chmod 700 "$WORK"
export CXLCR_POOL=$WORK/pool
cleanup() {
	set +e
	"$CXLCR" stop grown >/dev/null 2>&1
	"$CXLCR" stop single >/dev/null 2>&1
	"$CXLCR" pod down >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
field() { "$CXLCR" status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }

"$CXLCR" pool format --size 8G >/dev/null
"$CXLCR" pod up --hosts 2 >/dev/null
run() { # NAME ARENA ARENA_MAX PORT
	"$CXLCR" run --host h0 --name "$1" --arena "$2" --arena-max "$3" --log "$WORK/$1.log" -- \
		redis-server --port "$4" --protected-mode no --save '' --appendonly no >/dev/null
	python3 "$KV" wait --host "$(field "$1" address)" --port "$4" >/dev/null
}
run grown $FIRST 4G 6379
say "fill grown: $KEYS x 1000 B"
python3 "$KV" fill --host "$(field grown address)" --port 6379 --count "$KEYS" --size 1000 --seed 3 --quiet
size=$(field grown arena_size)
run single "$size" "$size" 6380
say "fill single: the same"
python3 "$KV" fill --host "$(field single address)" --port 6380 --count "$KEYS" --size 1000 --seed 3 --quiet
[ "$(field grown glibc_fallbacks)" -eq 0 ] && [ "$(field single glibc_fallbacks)" -eq 0 ] || die "fallbacks"
say "grown: $((size >> 20)) MiB in $(field grown arena_extents) extents; single: $(($(field single arena_size) >> 20)) MiB in $(field single arena_extents)"

echo "variant,round,freeze_ms,total_ms" >"$OUT/extents.csv"
host_of() { field "$1" host; }
move() { # NAME ROUND
	local to=h1
	[ "$(host_of "$1")" = h1 ] && to=h0
	"$CXLCR" migrate "$1" --to $to --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
print("%s,%s,%.3f,%.3f" % (sys.argv[1], sys.argv[2], j["freeze_ms"], j["total_ms"]))' "$1" "$2" >>"$OUT/extents.csv"
}
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then move grown "$r"; move single "$r"; else move single "$r"; move grown "$r"; fi
done
python3 "$KV" verify --host "$(field grown address)" --port 6379 --count "$KEYS" --size 1000 --seed 3 --quiet ||
	die "grown lost values"
python3 "$KV" verify --host "$(field single address)" --port 6380 --count "$KEYS" --size 1000 --seed 3 --quiet ||
	die "single lost values"

python3 - "$OUT/extents.csv" "$size" "$(field grown arena_extents)" <<'EOF' | tee "$OUT/extents.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {v: statistics.median(float(r["freeze_ms"]) for r in rows if r["variant"] == v) for v in ("grown", "single")}
print("Redis, %d MiB heap: migrate freeze, median of %d migrates each (every key checked after)"
      % (int(sys.argv[2]) >> 20, len(rows) // 2))
print("  grown  (%s extents): %.1f ms" % (sys.argv[3], med["grown"]))
print("  single (1 extent):  %.1f ms" % med["single"])
print("  ratio grown/single: %.3f (target <= 1.1)" % (med["grown"] / med["single"]))
EOF
