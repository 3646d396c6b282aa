#!/usr/bin/env bash
# Where Redis SET throughput goes under the preload. One run, side by side,
# alternating the order each round, median requests/s of each variant:
#
#   stock      Debian's redis-server (jemalloc, private memory)
#   mimalloc   the same with Debian's libmimalloc preloaded: mimalloc's own
#              malloc in private memory (the allocator's share of the cost)
#   cxlcr      under `cxlcr run`: mimalloc heaps in the pool arena, through
#              the preload (the rest: routing, accounting, shared memory)
#
# then a cpu-clock profile of the cxlcr server during one SET run: the
# preload's and mimalloc's functions, and the kernel's page-fault path.
#
#   bench/alloc_cost.sh            (ROUNDS=5; about two minutes)
#   OLD=DIR bench/alloc_cost.sh    adds "cxlcr-old": the same under the build in DIR
#                                  (another checkout's build/), with a pool of its own
# Output: a table on stdout, bench/out/alloc_cost.csv and alloc_cost.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=$ROOT/build/cxlcr
KV=$ROOT/tests/lib/kvclient.py
OUT=$ROOT/bench/out
ROUNDS=${ROUNDS:-5}
N=${N:-2000000}
KEYSPACE=200000
VALUE=256
MIMALLOC=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2

say() { printf 'alloc_cost: %s\n' "$*"; }
die() { printf 'alloc_cost: error: %s\n' "$*" >&2; exit 1; }
for c in redis-server redis-benchmark perf taskset; do
	command -v "$c" >/dev/null || die "$c is not installed"
done
[ -x "$CXLCR" ] || die "build first (make)"
mkdir -p "$OUT"
SERVER_CPU=(taskset -c 0) CLIENT_CPU=(taskset -c 1)

WORK=$(mktemp -d /dev/shm/cxlcr-alloc-cost-XXXX)
export CXLCR_POOL=$WORK/pool
PIDS=()
cleanup() {
	set +e
	"$CXLCR" stop cost >/dev/null 2>&1
	[ -n "${OLD:-}" ] && CXLCR_POOL=$WORK/old.pool "$OLD/cxlcr" stop cost-old >/dev/null 2>&1
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT
"$CXLCR" pool format --size 8G >/dev/null

args=(--bind 127.0.0.1 --save '' --appendonly no --dir "$WORK")
"${SERVER_CPU[@]}" redis-server --port 7001 "${args[@]}" >"$WORK/stock.log" 2>&1 &
PIDS+=($!)
LD_PRELOAD=$MIMALLOC "${SERVER_CPU[@]}" redis-server --port 7002 "${args[@]}" >"$WORK/mi.log" 2>&1 &
PIDS+=($!)
"${SERVER_CPU[@]}" "$CXLCR" run --name cost --arena 2G --log "$WORK/cost.log" -- \
	redis-server --port 7003 "${args[@]}" >/dev/null
ports="7001 7002 7003"
variants=("7001 stock" "7002 mimalloc" "7003 cxlcr")
if [ -n "${OLD:-}" ]; then
	CXLCR_POOL=$WORK/old.pool "$OLD/cxlcr" pool format --size 8G >/dev/null
	CXLCR_POOL=$WORK/old.pool "${SERVER_CPU[@]}" "$OLD/cxlcr" run --name cost-old --arena 2G \
		--log "$WORK/cost-old.log" -- redis-server --port 7004 "${args[@]}" >/dev/null
	ports+=" 7004"
	variants+=("7004 cxlcr-old")
fi
for p in $ports; do
	python3 "$KV" wait --port $p >/dev/null
	# warm up: the keyspace written once, so every measured run finds the same state
	"${CLIENT_CPU[@]}" redis-benchmark -p $p -t set -n $((KEYSPACE * 5)) -c 50 -P 16 -r $KEYSPACE -d $VALUE -q >/dev/null
done

bench() { # PORT VARIANT ROUND
	"${CLIENT_CPU[@]}" redis-benchmark -p "$1" -t set,get -n "$N" -c 50 -P 16 -r $KEYSPACE -d $VALUE --csv |
		python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    if row and row[0] in ("SET", "GET"):
        print("%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" >>"$OUT/alloc_cost.csv"
}
echo "variant,round,test,rps" >"$OUT/alloc_cost.csv"
nv=${#variants[@]}
for r in $(seq "$ROUNDS"); do
	for i in $(seq 0 $((nv - 1))); do
		v=${variants[$(((i + r) % nv))]}
		bench ${v% *} ${v#* } "$r"
	done
	say "round $r/$ROUNDS"
done

pid=$("$CXLCR" status cost --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
perf record -q -e cpu-clock -F 2000 -o "$WORK/perf.data" -p "$pid" -- \
	"${CLIENT_CPU[@]}" redis-benchmark -p 7003 -t set -n "$N" -c 50 -P 16 -r $KEYSPACE -d $VALUE -q >/dev/null 2>&1 || true
{ perf report -i "$WORK/perf.data" --stdio --no-children --sort dso,symbol 2>/dev/null |
	grep -E '^ +[0-9]' | head -40; } >"$WORK/profile.txt" || true

python3 - "$OUT/alloc_cost.csv" "$WORK/profile.txt" <<'EOF' | tee "$OUT/alloc_cost.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {}
names = [v for v in ("stock", "mimalloc", "cxlcr", "cxlcr-old") if any(r["variant"] == v for r in rows)]
for v in names:
    for t in ("SET", "GET"):
        med[v, t] = statistics.median(float(r["rps"]) for r in rows if r["variant"] == v and r["test"] == t)
print("median requests/s of %d rounds (redis-benchmark -c 50 -P 16 -r 200000 -d 256)" % (len(rows) // (2 * len(names))))
print("%-6s" % "" + "".join("%12s" % v for v in names) + "%14s%16s" % ("cxlcr/stock", "cxlcr/mimalloc") +
      ("%18s" % "cxlcr-old/stock" if "cxlcr-old" in names else ""))
for t in ("SET", "GET"):
    print("%-6s" % t + "".join("%12.0f" % med[v, t] for v in names) +
          "%14.3f%16.3f" % (med["cxlcr", t] / med["stock", t], med["cxlcr", t] / med["mimalloc", t]) +
          ("%18.3f" % (med["cxlcr-old", t] / med["stock", t]) if "cxlcr-old" in names else ""))
print("\ncpu-clock profile of the cxlcr server during SET (top entries, % of its samples):")
print(open(sys.argv[2]).read())
EOF
