#!/usr/bin/env bash
# The Redis demo: a real redis-server whose whole heap lives in a pool arena
# moves between the hosts of an emulated CXL pod, and every key is checked
# after each move.
#
#   1. formats the demo's own emulated pool (a sparse file on tmpfs standing
#      in for CXL memory) and brings up a pod of two hosts, h0 and h1
#   2. starts redis-server on h0 under `cxlcr run`, at the service's own address
#   3. loads DEMO_SIZE of values: strings, hashes, lists, sets, sorted sets
#   4. shows `cxlcr ps` and `cxlcr status`, and where the memory lives
#   5. migrates h0 -> h1 and reads back and checks every key
#   6. migrates h1 -> h0 and reads back and checks every key
#   7. stops Redis (its arena is freed), takes the pod down, prints a summary
#
# Settings (environment):
#   CXLCR_POOL  the pool (default /dev/shm/cxlcr-demo/pool, the demo's own);
#               a pool with services in use is never formatted over
#   DEMO_SIZE   value bytes to load (default 1G; e.g. 200M for a quick look)
#   DEMO_OUT    where logs and JSON results go (default demos/redis/out)
# Exits non-zero on any failure; Redis and the pod are gone afterwards
# either way. Redis's log: $DEMO_OUT/redis.log.
set -euo pipefail

DEMO=redis
NAME=demo-redis
# shellcheck source=demos/lib/demo.sh
. "$(dirname "$0")/../lib/demo.sh"

PORT=6379
VALUE=1000                              # bytes of values per key
TYPES=strings,hashes,lists,sets,zsets
SEED=2024
LOAD_STEPS=10                           # progress lines while loading
VERIFY_STEPS=4                          # and while verifying

need_cmds redis-server redis-cli
DEMO_SIZE=${DEMO_SIZE:-1G}
VALUE_BYTES=$(size_bytes "$DEMO_SIZE")
COUNT=$(((VALUE_BYTES + VALUE - 1) / VALUE))
[ "$COUNT" -ge "$LOAD_STEPS" ] || die "DEMO_SIZE=$DEMO_SIZE is too small"
# Redis needs about 1.8 times the value bytes for these types; keep room.
ARENA_MB=$(((VALUE_BYTES * 5 / 2 >> 20) + 256))
ARENA_MB=$(((ARENA_MB + 63) / 64 * 64))
POOL_GB=$(((ARENA_MB >> 10) + 2))
[ "$POOL_GB" -ge 8 ] || POOL_GB=8
needs_memory $((VALUE_BYTES * 2))

rcli() { redis-cli -h "$ADDR" -p $PORT "$@"; }
used_memory() { rcli info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }
used_memory_human() { rcli info memory | awk -F: '/^used_memory_human:/ {print $2}' | tr -d '\r'; }

# chunk I STEPS -> "start count" of the I-th of STEPS chunks of the keys.
chunk() {
	local a=$((COUNT * $1 / $2)) b=$((COUNT * ($1 + 1) / $2))
	echo "$a $((b - a))"
}

# check_all WHEN: reads back every key and checks its value; DBSIZE must be
# exactly the keys loaded.
VERIFIED=()
check_all() {
	step "Reading back all $COUNT keys at $ADDR:$PORT and checking every value ($1)"
	local t0 i start n
	t0=$(now)
	for ((i = 0; i < VERIFY_STEPS; i++)); do
		read -r start n < <(chunk $i $VERIFY_STEPS)
		python3 "$KV" verify --host "$ADDR" --port $PORT --start "$start" --count "$n" --size $VALUE \
			--types $TYPES --seed $SEED --jobs 2 --quiet ||
			die "after $1, values read back differ from those written"
		info "$(printf '%3d%%' $(((i + 1) * 100 / VERIFY_STEPS))) $((start + n)) keys correct"
	done
	local dbsize secs
	dbsize=$(rcli dbsize)
	[ "$dbsize" -eq "$COUNT" ] || die "after $1, Redis holds $dbsize keys, want $COUNT"
	secs=$(since "$t0")
	info "all $COUNT keys hold exactly what was written (DBSIZE $dbsize), checked in $secs s"
	info "$(rss_line)"
	VERIFIED+=("$1: $COUNT of $COUNT keys correct ($secs s)")
}

# --- 1. the pool and the pod -------------------------------------------------------
demo_pool $POOL_GB
demo_pod_up

# --- 2. Redis ------------------------------------------------------------------------
step "Starting redis-server on h0 under cxlcr run (arena ${ARENA_MB} MiB)"
demo_run "${ARENA_MB}M" -- redis-server --port $PORT --protected-mode no --save '' --appendonly no \
	--dir "$OUT"
python3 "$KV" wait --host "$ADDR" --port $PORT --pid "$(service_pid)" ||
	die "redis-server did not answer at $ADDR:$PORT"
info "redis-cli -h $ADDR -p $PORT ping: $(rcli ping)"

# --- 3. load -------------------------------------------------------------------------
step "Loading $COUNT keys, $((VALUE_BYTES >> 20)) MiB of values ($TYPES), through the Redis protocol"
t0=$(now)
for ((i = 0; i < LOAD_STEPS; i++)); do
	read -r start n < <(chunk $i $LOAD_STEPS)
	python3 "$KV" fill --host "$ADDR" --port $PORT --start "$start" --count "$n" --size $VALUE \
		--types $TYPES --seed $SEED --jobs 2 --quiet || die "loading keys $start.. failed"
	info "$(printf '%3d%%' $(((i + 1) * 100 / LOAD_STEPS))) $((start + n)) keys, used_memory $(used_memory_human)"
done
load_s=$(since "$t0")
dbsize=$(rcli dbsize)
[ "$dbsize" -eq "$COUNT" ] || die "Redis holds $dbsize keys, want $COUNT"
info "loaded in ${load_s} s; DBSIZE $dbsize"

# --- 4. what cxlcr sees ----------------------------------------------------------------
show_ps_status
used_bytes=$(used_memory)
memory_report "Redis used_memory (INFO)" "$used_bytes"
arena_used=$(status_of arena_used)

# --- 5, 6. migrate there and back, checking every key each time -------------------------
migrate h1
check_all "migrate h0 -> h1"
migrate h0
check_all "migrate h1 -> h0"

# --- 7. stop ------------------------------------------------------------------------------
demo_stop

step "Summary"
info "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') ran with its heap in arena '$NAME' of pool $CXLCR_POOL"
info "loaded: $COUNT keys ($TYPES), $((VALUE_BYTES >> 20)) MiB of values in ${load_s} s;" \
	"used_memory $((used_bytes >> 20)) MiB, arena in use $((arena_used >> 20)) MiB, $SHARE_PCT% of resident memory in the arena"
for m in "${MIGRATES[@]}"; do info "migrate $m"; done
for v in "${VERIFIED[@]}"; do info "verified after $v"; done
echo
echo "redis demo: OK"
