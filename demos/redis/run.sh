#!/usr/bin/env bash
# The Redis demo: a real redis-server whose whole heap lives in a pool arena.
#
#   1. formats an emulated pool (a sparse file on tmpfs standing in for CXL memory)
#   2. starts redis-server under `cxlcr run`
#   3. loads DEMO_SIZE of values (strings, hashes, lists, sets, sorted sets)
#   4. shows `cxlcr ps` and `cxlcr status`, and where the memory lives
#   5. reads every value back and checks it
#   6. stops Redis (the arena is freed) and prints a summary
#
# Settings (environment):
#   CXLCR_POOL  the pool (default /dev/shm/cxlcr-demo/pool, the demo's own);
#               a pool with running services is never formatted over
#   DEMO_SIZE   value bytes to load (default 1G; e.g. 200M for a quick look)
#   DEMO_PORT   Redis port on 127.0.0.1 (default: a free one)
# Exits non-zero on any failure. Redis's log: demos/redis/out/redis.log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
CXLCR=$ROOT/build/cxlcr
KV=$ROOT/tests/lib/kvclient.py
OUT=$ROOT/demos/redis/out
NAME=demo-redis
VALUE=1000                                   # bytes per key
TYPES=strings,hashes,lists,sets,zsets
SEED=2024
STEPS=10                                     # progress lines while loading

step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf '\ndemo: FAILED: %s\n' "$*" >&2; exit 1; }

for c in redis-server redis-cli python3; do
	command -v "$c" >/dev/null 2>&1 || die "$c is not installed (run make deps)"
done
[ -x "$CXLCR" ] && [ -f "$ROOT/build/libcxlcr-preload.so" ] || die "cxlcr is not built (run make)"

size_bytes() {
	python3 - "$1" <<'EOF' || die "DEMO_SIZE=$1 is not a size (try 1G or 200M)"
import sys
t = sys.argv[1].strip().upper().rstrip("B").rstrip("I")
m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
v = int(float(t[:-1] if m > 1 else t) * m)
assert v > 0
print(v)
EOF
}
DEMO_SIZE=${DEMO_SIZE:-1G}
VALUE_BYTES=$(size_bytes "$DEMO_SIZE")
COUNT=$(( (VALUE_BYTES + VALUE - 1) / VALUE ))
[ "$COUNT" -ge "$STEPS" ] || die "DEMO_SIZE=$DEMO_SIZE is too small"
# Redis needs about 1.8 times the value bytes for these types; keep room.
ARENA_MB=$(( (VALUE_BYTES * 5 / 2 >> 20) + 256 ))
ARENA_MB=$(( (ARENA_MB + 63) / 64 * 64 ))
POOL_GB=$(( (ARENA_MB >> 10) + 2 ))
[ "$POOL_GB" -ge 8 ] || POOL_GB=8
avail_mb=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
[ "$avail_mb" -gt $(( VALUE_BYTES * 2 >> 20 )) ] ||
	die "DEMO_SIZE=$DEMO_SIZE needs about $(( VALUE_BYTES * 2 >> 20 )) MiB of memory, $avail_mb MiB available"

export CXLCR_POOL=${CXLCR_POOL:-/dev/shm/cxlcr-demo/pool}
mkdir -p "$OUT"
STARTED=0
cleanup() {
	local rc=$?
	trap - EXIT
	if [ $STARTED = 1 ]; then
		"$CXLCR" stop "$NAME" >/dev/null 2>&1 || true
	fi
	[ $rc -eq 0 ] || { [ -s "$OUT/redis.log" ] && { echo "--- last lines of $OUT/redis.log:" >&2; tail -n 10 "$OUT/redis.log" >&2; }; }
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

json_field() { # FILE FIELD
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# --- 1. the pool --------------------------------------------------------------------
step "1. Formatting the emulated pool $CXLCR_POOL (${POOL_GB} GiB, sparse)"
if ! "$CXLCR" pool format --size "${POOL_GB}G" 2>"$OUT/format.err" >"$OUT/format.out"; then
	# It holds arenas. Format over them only if none is in use.
	"$CXLCR" ps --json >"$OUT/ps.json" 2>/dev/null || die "$(cat "$OUT/format.err")"
	live=$(python3 -c 'import json, sys
print(" ".join("%s (%s)" % (s["name"], s["state"]) for s in json.load(open(sys.argv[1]))["services"]
               if s["state"] != "exited"))' "$OUT/ps.json")
	[ -z "$live" ] || die "pool $CXLCR_POOL has services in use: $live; stop them or set CXLCR_POOL"
	info "the pool holds arenas of services that have exited: formatting over them"
	"$CXLCR" pool format --size "${POOL_GB}G" --force >"$OUT/format.out"
fi
sed 's/^/    /' "$OUT/format.out"

# --- 2. Redis -------------------------------------------------------------------------
PORT=${DEMO_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
step "2. Starting redis-server on 127.0.0.1:$PORT under cxlcr run (arena ${ARENA_MB} MiB)"
: >"$OUT/redis.log"
STARTED=1
"$CXLCR" run --name "$NAME" --arena "${ARENA_MB}M" --log "$OUT/redis.log" -- \
	redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" |
	sed 's/^/    /'
pid=$("$CXLCR" status "$NAME" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])')
python3 "$KV" wait --port "$PORT" --pid "$pid" || die "redis-server did not answer on port $PORT"
info "redis-cli -p $PORT ping: $(redis-cli -p "$PORT" ping)"

# --- 3. load -----------------------------------------------------------------------------
step "3. Loading $COUNT keys, $(( VALUE_BYTES >> 20 )) MiB of values ($TYPES), through the Redis protocol"
chunk() { # I -> "start count" of the I-th of STEPS chunks
	local a=$(( COUNT * $1 / STEPS )) b=$(( COUNT * ($1 + 1) / STEPS ))
	echo "$a $(( b - a ))"
}
t0=$(date +%s.%N)
for i in $(seq 0 $((STEPS - 1))); do
	read -r start n < <(chunk "$i")
	python3 "$KV" fill --port "$PORT" --start "$start" --count "$n" --size $VALUE --types $TYPES \
		--seed $SEED --jobs 2 --quiet
	info "$(printf '%3d%%' $(( (i + 1) * 100 / STEPS ))) $(( start + n )) keys, used_memory $(redis-cli -p "$PORT" info memory | awk -F: '/^used_memory_human:/ {print $2}' | tr -d '\r')"
done
load_s=$(python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))")
dbsize=$(redis-cli -p "$PORT" dbsize)
[ "$dbsize" -eq "$COUNT" ] || die "Redis holds $dbsize keys, want $COUNT"
info "loaded in ${load_s} s; DBSIZE $dbsize"

# --- 4. what cxlcr sees -------------------------------------------------------------------
step "4. cxlcr ps"
"$CXLCR" ps | sed 's/^/    /'
step "   cxlcr status $NAME"
"$CXLCR" status "$NAME" | sed 's/^/    /'

step "   Where the memory lives"
"$CXLCR" status "$NAME" --json >"$OUT/status.json"
used_memory=$(redis-cli -p "$PORT" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
python3 - "$OUT/status.json" "$used_memory" "$CXLCR_POOL" >"$OUT/memory.txt" <<'EOF'
import json, os, sys
s = json.load(open(sys.argv[1]))
used_memory = int(sys.argv[2])
pool_mb = os.stat(sys.argv[3]).st_blocks * 512 / 2**20
shmem, anon = s["rss_shmem_kb"] / 1024, s["rss_anon_kb"] / 1024
share = shmem / (shmem + anon)
print("Redis used_memory (INFO)       %9.1f MiB" % (used_memory / 2**20))
print("arena in use (cxlcr)           %9.1f MiB" % (s["arena_used"] / 2**20))
print("RssShmem: in the pool arena    %9.1f MiB" % shmem)
print("RssAnon: private memory        %9.1f MiB" % anon)
print("pool pages in use (tmpfs)      %9.1f MiB" % pool_mb)
print("share of the heap in the arena %9.2f %%" % (100 * share))
print("allocations that fell back to glibc: %d" % s["glibc_fallbacks"])
print("SHARE %.4f FALLBACKS %d" % (share, s["glibc_fallbacks"]))
EOF
grep -v '^SHARE' "$OUT/memory.txt" | sed 's/^/    /'
read -r _ share _ fallbacks < <(grep '^SHARE' "$OUT/memory.txt")
python3 -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" ||
	die "only $(python3 -c "print('%.1f' % (100 * $share))")% of Redis's resident memory is in the arena (want >= 95%)"
[ "$fallbacks" -eq 0 ] || die "$fallbacks allocations fell back to glibc"

# --- 5. verify ------------------------------------------------------------------------------
step "5. Reading back every key and checking its value"
t0=$(date +%s.%N)
for i in $(seq 0 $((STEPS - 1))); do
	read -r start n < <(chunk "$i")
	python3 "$KV" verify --port "$PORT" --start "$start" --count "$n" --size $VALUE --types $TYPES \
		--seed $SEED --jobs 2 --quiet || die "values read back differ from those written"
	info "$(printf '%3d%%' $(( (i + 1) * 100 / STEPS ))) $(( start + n )) keys correct"
done
verify_s=$(python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))")

# --- 6. stop ----------------------------------------------------------------------------------
step "6. Stopping Redis"
"$CXLCR" stop "$NAME" | sed 's/^/    /'
STARTED=0
"$CXLCR" status "$NAME" >/dev/null 2>&1 && die "the arena of $NAME is still in the pool"
info "arena freed; cxlcr ps now lists $("$CXLCR" ps --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["services"]))') services"

step "Summary"
info "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') ran with its heap in arena '$NAME' of pool $CXLCR_POOL"
info "$COUNT keys ($TYPES), $(( VALUE_BYTES >> 20 )) MiB of values: loaded in ${load_s} s, all read back correct in ${verify_s} s"
info "$(sed -n 's/^share of the heap in the arena *\(.*\)/\1/p' "$OUT/memory.txt" | tr -s ' ') of Redis's resident memory (RssShmem vs RssAnon) was in the arena; used_memory $(( used_memory >> 20 )) MiB"
info "the pool stays at $CXLCR_POOL (sparse, empty now): try \`CXLCR_POOL=$CXLCR_POOL $CXLCR ps\`"
echo
echo "demo: OK"
