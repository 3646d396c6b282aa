#!/usr/bin/env bash
# The Memcached demo: a real memcached whose whole heap (its slab pages)
# lives in a pool arena moves between the hosts of an emulated CXL pod, and
# every item is checked after each move, expiring ones included.
#
#   1. formats the demo's own emulated pool (a sparse file on tmpfs standing
#      in for CXL memory) and brings up a pod of two hosts, h0 and h1
#   2. starts memcached on h0 under `cxlcr run`, at the service's own address
#   3. loads DEMO_SIZE of values in six sets of items (see CLASSES below):
#      fixed-size, small (tens of bytes), large (hundreds of KiB), mixed sizes,
#      and expiring items: half with a 2 s expiry, half with a 1 h expiry
#   4. shows `cxlcr ps` and `cxlcr status`, and where the memory lives
#   5. migrates h0 -> h1 and checks every item
#   6. migrates h1 -> h0 and checks every item
#   7. stops memcached (its arena is freed), takes the pod down, prints a summary
#
# Expiring items. The 2 s ones are written first, and when a check runs the
# wall clock says whether their expiry has surely passed: memcached keeps
# time in whole seconds on a clock it advances once a second, so an item
# may outlive its expiry by up to about 2 s; CLOCK_SLACK covers that. Once
# their expiry + CLOCK_SLACK has passed they must all be gone; before, each
# must be gone or hold its value. The last check waits for that point if the
# run got there early (only with a small DEMO_SIZE). The 1 h ones must all
# be there, with their values. No sleep stands in for synchronisation.
#
# Settings (environment):
#   CXLCR_POOL  the pool (default /dev/shm/cxlcr-demo/pool, the demo's own);
#               a pool with services in use is never formatted over
#   DEMO_SIZE   value bytes to load (default 1G; at least 32M)
#   DEMO_OUT    where logs and JSON results go (default demos/memcached/out)
# Exits non-zero on any failure; memcached and the pod are gone afterwards
# either way. memcached's log: $DEMO_OUT/memcached.log.
set -euo pipefail

DEMO=memcached
NAME=demo-memcached
# shellcheck source=demos/lib/demo.sh
. "$(dirname "$0")/../lib/demo.sh"

PORT=11211
SEED=2025
SHORT_EXPTIME=2       # seconds: expired by the time the items are checked
LONG_EXPTIME=3600     # seconds: must outlive the demo
CLOCK_SLACK=3         # seconds memcached's coarse clock may keep an item past its expiry

# The sets of items: name, kvclient --size-dist, --size (fixed only),
# share of DEMO_SIZE in percent, --exptime, description. The expiring sets
# come first: their clock starts while the rest loads.
CLASSES=(exp2s exp1h fixed small large mixed)
declare -A DIST=([exp2s]=fixed [exp1h]=fixed [fixed]=fixed [small]=small [large]=large [mixed]=mixed)
declare -A PCT=([exp2s]=2.5 [exp1h]=2.5 [fixed]=35 [small]=5 [large]=30 [mixed]=25)
declare -A EXP=([exp2s]=$SHORT_EXPTIME [exp1h]=$LONG_EXPTIME [fixed]=0 [small]=0 [large]=0 [mixed]=0)
declare -A DESC=([exp2s]="1000 B, expire in $SHORT_EXPTIME s" [exp1h]="1000 B, expire in 1 h"
	[fixed]="fixed size, 1000 B" [small]="small, 10-99 B" [large]="large, 100-899 KiB"
	[mixed]="mixed sizes, 16 B-512 KiB")
SIZE=1000             # --size of the fixed-size sets
declare -A COUNT=() BYTES=()

need_cmds memcached
DEMO_SIZE=${DEMO_SIZE:-1G}
VALUE_BYTES=$(size_bytes "$DEMO_SIZE")
# Keys per set: its share of DEMO_SIZE over its mean value size.
counts=$(python3 -B - "$ROOT/tests/lib" "$VALUE_BYTES" "$SIZE" \
	"$(for c in "${CLASSES[@]}"; do printf '%s:%s ' "${DIST[$c]}" "${PCT[$c]}"; done)" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import kvclient
total, size = int(sys.argv[2]), int(sys.argv[3])
out = []
for spec in sys.argv[4].split():
    dist, pct = spec.split(":")
    out.append(int(total * float(pct) / 100 / kvclient.mean_value_size(dist, size)))
print(" ".join(map(str, out)))
EOF
) || die "cannot size the sets of items"
read -r -a counts <<<"$counts"
for i in "${!CLASSES[@]}"; do
	c=${CLASSES[$i]}
	COUNT[$c]=${counts[$i]}
	[ "${COUNT[$c]}" -ge 10 ] || die "DEMO_SIZE=$DEMO_SIZE is too small (try 32M or more)"
done
# Memcached's own limit (-m): the values, item headers and keys (small
# items take about 2.7 times their value bytes), slab rounding, and room.
MEM_MB=$((VALUE_BYTES * 3 / 2 >> 20))
MEM_MB=$((MEM_MB + 64))
# The arena: that plus the hash table, connection buffers and threads.
ARENA_MB=$(((MEM_MB * 5 / 4 + 256 + 63) / 64 * 64))
POOL_GB=$(((ARENA_MB >> 10) + 2))
[ "$POOL_GB" -ge 8 ] || POOL_GB=8
needs_memory $((VALUE_BYTES * 2))

# Python: mc_stats(addr, port) -> memcached's `stats` as a dict.
MC_STATS_PY='
import socket, sys
def mc_stats(addr, port):
    s = socket.create_connection((addr, int(port)), timeout=10)
    s.sendall(b"stats\r\n")
    f = s.makefile("rb")
    stats = {}
    while True:
        line = f.readline()
        if not line.endswith(b"\r\n"):
            sys.exit("memcached closed the connection")
        parts = line.decode().split()
        if parts == ["END"]:
            return stats
        if len(parts) == 3 and parts[0] == "STAT":
            stats[parts[1]] = parts[2]
'

# mc_stat NAME...: values of memcached's `stats`, in that order.
mc_stat() {
	python3 -c "$MC_STATS_PY"'
s = mc_stats(sys.argv[1], sys.argv[2])
print(" ".join(s.get(k, "?") for k in sys.argv[3:]))' "$ADDR" "$PORT" "$@"
}

# kv VERB CLASS [ARGS...]: kvclient on one set of items; its JSON summary
# goes to $OUT/VERB-CLASS.json.
kv() {
	local verb=$1 c=$2
	shift 2
	python3 "$KV" "$verb" --proto memcached --host "$ADDR" --port $PORT --prefix "$c" \
		--size-dist "${DIST[$c]}" --size $SIZE --exptime "${EXP[$c]}" --count "${COUNT[$c]}" \
		--seed $SEED --jobs 2 --json "$@" >"$OUT/$verb-$c.json"
}

no_evictions() {
	local ev
	ev=$(mc_stat evictions) || die "memcached's stats cannot be read"
	[ "$ev" = 0 ] || die "memcached evicted $ev items $1 (its -m ${MEM_MB} is too small)"
}

# load CLASS: writes one set of items and says what memcached holds then.
load() {
	local c=$1 t out
	t=$(now)
	kv fill "$c" || die "loading set '$c' failed"
	LOAD_US=$((LOAD_US + $(now) - t))
	# Every item of the set was written before this point.
	[ "$c" = exp2s ] && SHORT_SET_AT=$(now)
	out=$(python3 -c "$MC_STATS_PY"'
import json
j = json.load(open(sys.argv[3]))
s = mc_stats(sys.argv[1], sys.argv[2])
print(j["value_bytes"], "%-6s %9d items %8.1f MiB  (%s); memcached holds %s items, %.1f MiB" % (
    sys.argv[4], j["keys"], j["value_bytes"] / 2**20, sys.argv[5], s["curr_items"],
    int(s["bytes"]) / 2**20))' "$ADDR" "$PORT" "$OUT/fill-$c.json" "$c" "${DESC[$c]}") ||
		die "memcached's stats cannot be read"
	BYTES[$c]=${out%% *}
	info "${out#* }"
}

# check_all WHEN FINAL: reads back every item of every set. FINAL=1: the
# last check, where the 2 s items must be gone.
VERIFIED=()
check_all() {
	local when=$1 final=$2 t0 c present=0
	step "Checking every item at $ADDR:$PORT ($when)"
	t0=$(now)
	for c in fixed small large mixed exp1h; do
		kv verify "$c" || die "after $when, items of set '$c' are missing or wrong (listed above)"
		info "$(printf '%-6s %9d items present, every value correct (%s)' "$c" "${COUNT[$c]}" "${DESC[$c]}")"
		present=$((present + COUNT[$c]))
	done
	# The 2 s items: gone for sure once their expiry and memcached's clock
	# slack have passed (wall clock since they were all written).
	local age_us due_us expect
	age_us=$(($(now) - SHORT_SET_AT))
	due_us=$(((SHORT_EXPTIME + CLOCK_SLACK) * 1000000))
	if [ $age_us -ge $due_us ]; then
		expect=absent
	elif [ "$final" = 1 ]; then
		local wait_us=$((due_us - age_us + 100000))
		info "the $SHORT_EXPTIME s items were written $(since "$SHORT_SET_AT") s ago: waiting" \
			"$((wait_us / 1000000)).$((wait_us % 1000000 / 100000)) s more, until memcached's clock has surely" \
			"passed their expiry ($SHORT_EXPTIME s + $CLOCK_SLACK s for its whole-second clock)"
		sleep "$((wait_us / 1000000)).$(printf '%06d' $((wait_us % 1000000)))"
		expect=absent
	else
		expect=any
	fi
	local age
	age=$(since "$SHORT_SET_AT")
	kv verify exp2s --expect $expect || die "after $when, items of set 'exp2s' are wrong (expected: $expect)"
	local gone
	gone=$(jget "$OUT/verify-exp2s.json" missing)
	if [ $expect = absent ]; then
		info "$(printf '%-6s %9d items gone, as they must be: written %s s ago with a %d s expiry' exp2s \
			"$gone" "$age" "$SHORT_EXPTIME")"
		EXPIRED=$gone
	else
		info "$(printf '%-6s %9d items gone, %d still there with correct values: written %s s ago, not surely expired yet' \
			exp2s "$gone" $((COUNT[exp2s] - gone)) "$age")"
	fi
	no_evictions "after $when"
	local secs
	secs=$(since "$t0")
	info "$((present + COUNT[exp2s])) items checked in $secs s"
	info "$(rss_line)"
	local all=""
	[ $expect = absent ] && all=" (all, as they must be)"
	VERIFIED+=("$when: $present of $present items present and correct, $gone of ${COUNT[exp2s]} ${SHORT_EXPTIME} s items gone$all ($secs s)")
}

# --- 1. the pool and the pod -------------------------------------------------------
demo_pool $POOL_GB
demo_pod_up

# --- 2. memcached ----------------------------------------------------------------------
step "Starting memcached on h0 under cxlcr run (-m $MEM_MB, arena ${ARENA_MB} MiB)"
demo_run "${ARENA_MB}M" -- memcached -u root -p $PORT -m $MEM_MB -t 4 -U 0
python3 "$KV" wait --proto memcached --host "$ADDR" --port $PORT --pid "$(service_pid)" ||
	die "memcached did not answer at $ADDR:$PORT"
info "memcached $(mc_stat version) answers at $ADDR:$PORT"

# --- 3. load -------------------------------------------------------------------------
step "Loading $((VALUE_BYTES >> 20)) MiB of values in ${#CLASSES[@]} sets of items, through the text protocol"
LOAD_US=0
total_items=0 total_bytes=0
for c in "${CLASSES[@]}"; do
	load "$c"
	total_items=$((total_items + COUNT[$c]))
	total_bytes=$((total_bytes + BYTES[$c]))
done
load_s=$((LOAD_US / 1000000)).$((LOAD_US % 1000000 / 100000))
no_evictions "while loading"
info "loaded $total_items items, $((total_bytes >> 20)) MiB of values, in ${load_s} s"

# --- 4. what cxlcr sees ----------------------------------------------------------------
show_ps_status
mc_bytes=$(mc_stat bytes)
memory_report "memcached item bytes (stats)" "$mc_bytes"
arena_used=$(status_of arena_used)

# --- 5, 6. migrate there and back, checking every item each time ------------------------
EXPIRED=0
migrate h1
check_all "migrate h0 -> h1" 0
migrate h0
check_all "migrate h1 -> h0" 1

# --- 7. stop ------------------------------------------------------------------------------
demo_stop

step "Summary"
info "memcached $(memcached -V | awk '{print $2}') ran with its heap in arena '$NAME' of pool $CXLCR_POOL"
info "loaded: $total_items items, $((total_bytes >> 20)) MiB of values in ${load_s} s:"
for c in "${CLASSES[@]}"; do
	info "$(printf '  %-6s %9d items %8s MiB  %s' "$c" "${COUNT[$c]}" "$(mib "${BYTES[$c]}")" "${DESC[$c]}")"
done
info "memcached item bytes $((mc_bytes >> 20)) MiB, arena in use $((arena_used >> 20)) MiB, $SHARE_PCT% of resident memory in the arena"
for m in "${MIGRATES[@]}"; do info "migrate $m"; done
for v in "${VERIFIED[@]}"; do info "verified after $v"; done
info "expired as expected: $EXPIRED of ${COUNT[exp2s]} items with a $SHORT_EXPTIME s expiry;" \
	"all ${COUNT[exp1h]} with a 1 h expiry present"
echo
echo "memcached demo: OK"
