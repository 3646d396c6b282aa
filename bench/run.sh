#!/usr/bin/env bash
# The figures of the issue, on this machine:
#   a. heap placement: Redis under `cxlcr run` holding 1 GiB of values;
#      used_memory, RssShmem, RssAnon and the share of resident memory in
#      the arena (target >= 95%);
#   b. throughput: stock redis-server and memcached against the same under
#      `cxlcr run`, alternating runs (A B, B A, A B, ...: each variant goes
#      first in half the rounds), median requests/s of each and the ratio
#      cxlcr/stock (target >= 0.95);
#   c. checkpoint + restore time against the data held, cxlcr against plain
#      CRIU, Redis and Memcached at 1, 2 and 4 GiB of values (bench/cr.sh,
#      which also runs alone; BENCH_CR=0 skips it).
#   d. remote fork: fork latency against the parent's heap, against plain
#      CRIU, a child's private memory, 8 children at once (bench/fork.sh,
#      which also runs alone; BENCH_FORK=0 skips it).
#   e. the cold tier: CXL bytes per snapshot tiered against untiered, one
#      cold page read against a Redis round trip (bench/tier.sh), and
#      copy-mode children of tiered snapshots against all-in-CXL and
#      all-remote ones, and 8 at once (bench/tier_fork.sh), and one fault
#      served by a copy-mode child's pager, from CXL and from the cold
#      tier, against a Redis round trip (bench/fault_time.sh); all also run
#      alone; BENCH_TIER=0 skips them.
# Prints a table and writes bench/out/ (summary.txt, summary.json, raw CSV;
# cr.csv, cr.txt and cr.png for c; fork.csv, fork.txt and fork.png for d).
#
#   bench/run.sh                 full run (6 rounds, 1 GiB; about 5 minutes,
#                                and c about 30 more)
#   BENCH_QUICK=1 bench/run.sh   short run (2 rounds, 128 MiB; c at 64 and
#                                256 MiB; about two minutes)
#   BENCH_CR=0 BENCH_FORK=0 bench/run.sh      a and b only
#
# The servers are pinned to CPU 0 and the load generators to CPU 1 when the
# machine has two CPUs or more, so that they do not take each other's turn.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CXLCR=$ROOT/build/cxlcr
KV=$ROOT/tests/lib/kvclient.py
OUT=$ROOT/bench/out
MCLOAD=$ROOT/build/bench/mcload

say() { printf 'bench: %s\n' "$*"; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

for c in redis-server redis-cli redis-benchmark memcached python3 taskset gcc; do
	command -v "$c" >/dev/null 2>&1 || die "$c is not installed (make deps)"
done
[ -x "$CXLCR" ] && [ -f "$ROOT/build/libcxlcr-preload.so" ] || die "build first (make)"

if [ "${BENCH_QUICK:-0}" != 0 ]; then
	MODE=quick ROUNDS=2 HEAP_KEYS=131072 REDIS_N=300000 MC_N=300000
else
	MODE=full ROUNDS=6 HEAP_KEYS=1048576 REDIS_N=2000000 MC_N=2000000
fi
HEAP_VALUE=1024      # HEAP_KEYS x 1 KiB of values: 1 GiB (quick: 128 MiB)
KEYSPACE=200000      # keys of the throughput runs
VALUE=256            # bytes per value in the throughput runs
CONNS=50
PIPELINE=16

if [ "$(nproc)" -ge 2 ]; then
	SERVER_CPU=(taskset -c 0) CLIENT_CPU=(taskset -c 1) PINNING="servers on CPU 0, clients on CPU 1"
else
	SERVER_CPU=() CLIENT_CPU=() PINNING="none (one CPU)"
fi
ROOT_USER=()
[ "$(id -u)" -eq 0 ] && ROOT_USER=(-u root)

# The load generator for memcached (see bench/mcload.c), built here when
# the Makefile has not built it.
if [ ! -x "$MCLOAD" ] || [ "$ROOT/bench/mcload.c" -nt "$MCLOAD" ]; then
	mkdir -p "$(dirname "$MCLOAD")"
	gcc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$MCLOAD" "$ROOT/bench/mcload.c"
fi

mkdir -p "$OUT"
rm -f "$OUT"/throughput.csv "$OUT"/heap.json "$OUT"/summary.*   # bench/cr.sh owns cr.*
WORK=$(mktemp -d /dev/shm/cxlcr-bench-XXXX)
export CXLCR_POOL=$WORK/pool
SERVICES=()
STOCK_PIDS=()

cleanup() {
	local rc=$? n p
	trap - EXIT
	set +e
	for n in "${SERVICES[@]}"; do "$CXLCR" stop "$n" >/dev/null 2>&1; done
	for p in "${STOCK_PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	if [ $rc -ne 0 ]; then
		for n in "$WORK"/*.log; do
			[ -s "$n" ] && { echo "--- $(basename "$n"):" >&2; tail -n 10 "$n" >&2; }
		done
	fi
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_cxlcr NAME ARENA CMD...: under `cxlcr run`, pinned like the stock one.
start_cxlcr() {
	local name=$1 arena=$2
	shift 2
	SERVICES+=("$name")
	"${SERVER_CPU[@]}" "$CXLCR" run --name "$name" --arena "$arena" --log "$WORK/$name.log" \
		-- "$@" >/dev/null || die "cxlcr run $name failed"
}
# start_stock NAME CMD...: the same server, plainly, as a child of this script.
start_stock() {
	local name=$1
	shift
	"${SERVER_CPU[@]}" "$@" >"$WORK/$name.log" 2>&1 &
	STOCK_PIDS+=($!)
}
stop_stock() {
	local p
	for p in "${STOCK_PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
	STOCK_PIDS=()
}
wait_port() { # PORT PROTO
	python3 "$KV" wait --port "$1" --proto "$2" || die "no server on port $1"
}

"$CXLCR" pool format --size 8G >/dev/null
say "mode $MODE: $ROUNDS rounds per variant; pinning: $PINNING"

# --- a. heap placement ------------------------------------------------------------
port=$(free_port)
say "a. redis-server under cxlcr run, filling $HEAP_KEYS keys x $HEAP_VALUE B"
start_cxlcr heap 3G redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$WORK"
wait_port "$port" redis
python3 "$KV" fill --port "$port" --count "$HEAP_KEYS" --size "$HEAP_VALUE" --jobs 2 --quiet
used_memory=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
"$CXLCR" status heap --json >"$WORK/heap.status.json"
python3 - "$WORK/heap.status.json" "$used_memory" "$HEAP_KEYS" "$HEAP_VALUE" >"$OUT/heap.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
shmem, anon = s["rss_shmem_kb"], s["rss_anon_kb"]
json.dump({"keys": int(sys.argv[3]), "value_bytes": int(sys.argv[3]) * int(sys.argv[4]),
           "used_memory": int(sys.argv[2]), "arena_used": s["arena_used"],
           "rss_shmem_kb": shmem, "rss_anon_kb": anon, "rss_file_kb": s["rss_file_kb"],
           "glibc_fallbacks": s["glibc_fallbacks"],
           "arena_share": shmem / (shmem + anon)}, sys.stdout)
EOF
"$CXLCR" stop heap >/dev/null
SERVICES=()

# --- b. throughput ------------------------------------------------------------------
# One stock and one cxlcr server side by side, the load alternating between
# them, each warmed up first (its keyspace written) so that every measured
# run finds the same state.
redis_bench() { # PORT VARIANT ROUND
	"${CLIENT_CPU[@]}" redis-benchmark -p "$1" -t set,get -n "$REDIS_N" -c $CONNS -P $PIPELINE \
		-r $KEYSPACE -d $VALUE --csv | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    if row and row[0] in ("SET", "GET"):
        print("redis,%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" \
		>>"$OUT/throughput.csv"
}
mc_bench() { # PORT VARIANT ROUND
	local t
	for t in set get; do
		"${CLIENT_CPU[@]}" "$MCLOAD" -p "$1" -t $t -n "$MC_N" -c $CONNS -P $PIPELINE -r $KEYSPACE \
			-d $VALUE --csv | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    print("memcached,%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" \
			>>"$OUT/throughput.csv"
	done
}
echo "server,variant,round,test,rps" >"$OUT/throughput.csv"

stock=$(free_port)
start_stock redis-stock redis-server --port "$stock" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$WORK"
cx=$(free_port)
start_cxlcr redis 2G redis-server --port "$cx" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK"
wait_port "$stock" redis
wait_port "$cx" redis
say "b. redis-benchmark -t set,get -n $REDIS_N -c $CONNS -P $PIPELINE -r $KEYSPACE -d $VALUE"
for p in "$stock" "$cx"; do
	"${CLIENT_CPU[@]}" redis-benchmark -p "$p" -t set -n $((KEYSPACE * 5)) -c $CONNS -P $PIPELINE \
		-r $KEYSPACE -d $VALUE -q >/dev/null
done
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		redis_bench "$stock" stock "$r"
		redis_bench "$cx" cxlcr "$r"
	else
		redis_bench "$cx" cxlcr "$r"
		redis_bench "$stock" stock "$r"
	fi
	say "   round $r/$ROUNDS done"
done
stop_stock
"$CXLCR" stop redis >/dev/null
SERVICES=()

stock=$(free_port)
start_stock memcached-stock memcached -U 0 -l 127.0.0.1 -p "$stock" -m 1024 -t 1 "${ROOT_USER[@]}"
cx=$(free_port)
start_cxlcr memcached 2G memcached -U 0 -l 127.0.0.1 -p "$cx" -m 1024 -t 1 "${ROOT_USER[@]}"
wait_port "$stock" memcached
wait_port "$cx" memcached
say "b. mcload set, get -n $MC_N -c $CONNS -P $PIPELINE -r $KEYSPACE -d $VALUE (memcached -t 1)"
for p in "$stock" "$cx"; do
	"${CLIENT_CPU[@]}" "$MCLOAD" -p "$p" -t set -n $((KEYSPACE * 5)) -c $CONNS -P $PIPELINE \
		-r $KEYSPACE -d $VALUE >/dev/null
done
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		mc_bench "$stock" stock "$r"
		mc_bench "$cx" cxlcr "$r"
	else
		mc_bench "$cx" cxlcr "$r"
		mc_bench "$stock" stock "$r"
	fi
	say "   round $r/$ROUNDS done"
done
stop_stock
"$CXLCR" stop memcached >/dev/null
SERVICES=()

# --- report -----------------------------------------------------------------------------
python3 "$ROOT/bench/report.py" --out "$OUT" --mode "$MODE" --rounds "$ROUNDS" \
	--pinning "$PINNING" --redis "$(redis-server --version | head -n1)" \
	--memcached "$(memcached -V)" --params "redis-benchmark/mcload -c $CONNS -P $PIPELINE -r $KEYSPACE -d $VALUE, -n $REDIS_N/$MC_N"

# --- c. checkpoint/restore against plain CRIU -------------------------------------------
# A script of its own, with its own pool and pod (it needs a lot of memory
# at the full sizes: everything above is stopped by now). BENCH_SIZES and
# BENCH_QUICK reach it through the environment.
if [ "${BENCH_CR:-1}" != 0 ]; then
	say "c. checkpoint/restore time, cxlcr against plain CRIU (bench/cr.sh; BENCH_CR=0 skips it)"
	"$ROOT/bench/cr.sh"
fi

# --- d. remote fork ----------------------------------------------------------------------
# Also a script of its own with its own pool and pod. BENCH_FORK_SIZES,
# BENCH_FORK_MID, BENCH_REPEAT and BENCH_QUICK reach it through the environment.
if [ "${BENCH_FORK:-1}" != 0 ]; then
	say "d. remote fork: latency, against plain CRIU, a child's memory, 8 at once (bench/fork.sh; BENCH_FORK=0 skips it)"
	"$ROOT/bench/fork.sh"
fi

# --- e. the cold tier --------------------------------------------------------------------
if [ "${BENCH_TIER:-1}" != 0 ]; then
	say "e. the cold tier: CXL bytes per snapshot, a cold page read against a Redis round trip (bench/tier.sh; BENCH_TIER=0 skips it)"
	"$ROOT/bench/tier.sh"
	say "e. copy-mode children of tiered snapshots: first answer and first requests against all-in-CXL and all-remote children, 8 at once (bench/tier_fork.sh)"
	"$ROOT/bench/tier_fork.sh"
	say "e. one fault served by a copy-mode child's pager, from CXL and from the cold tier, against a Redis round trip (bench/fault_time.sh)"
	"$ROOT/bench/fault_time.sh"
fi
