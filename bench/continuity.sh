#!/usr/bin/env bash
# Service continuity during a migrate, for Redis and Memcached:
#
#   The server runs under `cxlcr run --host h0` on an emulated pod, filled
#   with DATA bytes of 1000-byte values (tests/lib/kvclient.py fill). A load
#   client (bench/loadclient: one connection, one request at a time, paced
#   at 10,000 requests/s) runs against the service's address while the
#   service is migrated h0 -> h1 -> h0 ... (CONT_MIGRATIONS times per phase,
#   CONT_PAUSE seconds apart). Phases, one load client run each:
#     get       GETs of the filled keys; then every value is read back
#     get-rto   the same, the client's socket with TCP_RTO_MIN_US set to
#               $CONT_RTO_MIN_US (only when that is set): what the gap is
#               once the client's 200 ms minimum retransmission timeout is
#               out of the way
#     mix       50/50 GETs and SETs of the filled keys, every acknowledged
#               SET logged; afterwards each key must hold its last
#               acknowledged version (tests/lib/ackcheck.py)
#   For every migrate: the response gap (the longest interval between two
#   successful responses that overlaps the migrate), the rates in the pause
#   before and after it and their ratio, errors and reconnects, and the
#   migrate's own timings.
#
# Writes bench/out/continuity.csv (one row per migrate), continuity.txt and
# continuity.summary.csv (one row per server, size and phase),
# continuity-SERVER-SIZE-PHASE.png (the timeline: every response's latency,
# responses per 100 ms, the migrate windows), .timeline.csv (the load
# client's per-response record) and .load.json (its report).
# Targets (issue 4): gap <= 100 ms; rate after >= 95% of the rate before.
#
#   bench/continuity.sh                        1 GiB and 4 GiB (about 10 minutes)
#   CONT_SIZES="64M" bench/continuity.sh       quick
#   CONT_SERVERS=redis                         one server only (redis, memcached)
#   CONT_PHASES="get mix"                      phases (the default; get-rto is
#                                              added when CONT_RTO_MIN_US is set)
#   CONT_RTO_MIN_US=5000                       also run the get-rto phase
#   CONT_MIGRATIONS=3 CONT_PAUSE=2             migrates per phase, seconds between
#   CONT_TAIL=6                                seconds of load after the last one
#   CONT_RATE=10000                            requests/s of the load client
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CXLCR=$ROOT/build/cxlcr
KV=$ROOT/tests/lib/kvclient.py
ACKCHECK=$ROOT/tests/lib/ackcheck.py
HELP=$ROOT/bench/continuity.py
OUT=$ROOT/bench/out
LOADCLIENT=$ROOT/build/bench/loadclient
VALUE=1000
SEED=11
VERB_TIMEOUT=300
KV_TIMEOUT=3600

say() { printf 'continuity: %s\n' "$*"; }
die() { printf 'continuity: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/pod.sh
. "$ROOT/bench/lib/pod.sh"

bench_needs redis-server memcached python3 ip iptables nsenter criu timeout gcc
if [ ! -x "$CXLCR" ] || [ ! -f "$ROOT/build/libcxlcr-preload.so" ]; then die "build first (make)"; fi
[ -f "$ROOT/build/criu/cxlcr_criu.so" ] || die "the CRIU plugin is not built (make)"
command -v gnuplot >/dev/null 2>&1 || say "gnuplot is missing (make deps): no timelines"

# The load client, built here when the Makefile has not built it.
if [ ! -x "$LOADCLIENT" ] || [ "$ROOT/bench/loadclient.c" -nt "$LOADCLIENT" ]; then
	mkdir -p "$(dirname "$LOADCLIENT")"
	gcc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -O2 -o "$LOADCLIENT" \
		"$ROOT/bench/loadclient.c" || die "cannot build bench/loadclient.c"
fi

bench_sizes CONT_SIZES "${CONT_SIZES:-1G 4G}"
bench_servers CONT_SERVERS "${CONT_SERVERS:-redis memcached}"
RATE=${CONT_RATE:-10000}
MIGRATIONS=${CONT_MIGRATIONS:-3}
PAUSE=${CONT_PAUSE:-2}
# After the last migrate: longer than the client's 5 s request timeout, so
# that a stalled connection recovers (or reconnects) before the load stops.
TAIL=${CONT_TAIL:-6}
RTO_MIN_US=${CONT_RTO_MIN_US:-}
read -r -a PHASE_ARGS <<<"${CONT_PHASES:-get mix}"
[ -z "$RTO_MIN_US" ] || PHASE_ARGS+=(get-rto)
for q in "${PHASE_ARGS[@]}"; do
	case $q in get | mix | get-rto) ;; *) die "CONT_PHASES: unknown phase $q" ;; esac
done
PHASES=()
for p in get get-rto mix; do # this order: the GET phases read what fill wrote, mix changes it
	if [[ " ${PHASE_ARGS[*]} " == *" $p "* ]]; then PHASES+=("$p"); fi
done
if [[ " ${PHASES[*]} " == *" get-rto "* ]] && [ -z "$RTO_MIN_US" ]; then
	die "the get-rto phase needs CONT_RTO_MIN_US (e.g. 5000)"
fi
RATE_WINDOW=$(awk -v p="$PAUSE" 'BEGIN { printf "%.2f", p * 0.75 }')

POOL_GB=$(pool_gb 8 "${SIZES[@]}")
# need_memory waits this long (s) for memory: the machine may be shared.
MEM_WAIT=${CONT_MEM_WAIT:-900}

mkdir -p "$OUT"
rm -f "$OUT"/continuity.csv "$OUT"/continuity.txt "$OUT"/continuity.summary.csv "$OUT"/continuity-*
WORK=$(mktemp -d /dev/shm/cxlcr-cont-XXXX)
export CXLCR_POOL=$WORK/pool
unset LD_PRELOAD CXLCR_ARENA CXLCR_ARENA_SIZE CXLCR_ARENA_OWNER CXLCR_READY_FD
SERVICES=()
LC_PID=
POD=0
trap 'pod_cleanup log err' EXIT
trap 'exit 130' INT TERM

field() { python3 "$HELP" field "$1" "$2"; }
size_tag() { # BYTES -> 1G, 64M
	if [ $(($1 % (1 << 30))) -eq 0 ]; then echo "$(($1 >> 30))G"; else echo "$(($1 >> 20))M"; fi
}

# run_phase SERVER SIZE NAME PHASE ADDR PORT COUNT: one load client run
# with CONT_MIGRATIONS migrates; HOST (global) is where the service is.
run_phase() {
	local server=$1 size=$2 name=$3 phase=$4 addr=$5 port=$6 count=$7
	local tag base mode=get extra=() m to migs=()
	tag=$server-$(size_tag "$size")-$phase
	base=$OUT/continuity-$tag
	case $phase in
	get) ;;
	get-rto) extra=(--rto-min-us "$RTO_MIN_US") ;;
	mix) mode=mix extra=(--ack-log "$WORK/$tag.ack") ;;
	esac
	say "   $phase: $RATE requests/s, $MIGRATIONS migrates $PAUSE s apart"
	"$LOADCLIENT" --host "$addr" --port "$port" --proto "$server" --mode $mode --rate "$RATE" \
		--keys "$count" --key-prefix kv:str: --value-size $VALUE --rate-window "$RATE_WINDOW" \
		--csv "$base.timeline.csv" --json "$base.load.json" --quiet "${extra[@]}" &
	LC_PID=$!
	sleep "$PAUSE"
	kill -0 "$LC_PID" 2>/dev/null || die "the load client did not start"
	for m in $(seq 1 "$MIGRATIONS"); do
		if [ "$HOST" = h0 ]; then to=h1; else to=h0; fi
		kill -USR1 "$LC_PID"
		timeout $VERB_TIMEOUT "$CXLCR" migrate "$name" --to "$to" --json >"$WORK/$tag.$m.json" \
			2>"$WORK/$tag.$m.err" || { kill -USR2 "$LC_PID"; cat "$WORK/$tag.$m.err" >&2; die "migrate $m of $name failed"; }
		kill -USR2 "$LC_PID"
		HOST=$to
		migs+=("$WORK/$tag.$m.json")
		if [ "$m" -lt "$MIGRATIONS" ]; then sleep "$PAUSE"; else sleep "$TAIL"; fi
	done
	kill -TERM "$LC_PID"
	wait "$LC_PID" || die "the load client failed"
	LC_PID=
	local ack=()
	if [ "$phase" = mix ]; then
		python3 "$ACKCHECK" --host "$addr" --port "$port" --proto "$server" --json "$WORK/$tag.ack" \
			>"$WORK/$tag.ackcheck.json" || true
		ack=(--ack "$WORK/$tag.ackcheck.json")
	fi
	local IFS=,
	python3 "$HELP" row --server "$server" --size "$size" --phase "$phase" --load "$base.load.json" \
		--migrations "${migs[*]}" "${ack[@]}" >>"$OUT/continuity.csv"
	unset IFS
	python3 - "$base.load.json" "${migs[@]}" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for w, p in zip(j["windows"], sys.argv[2:]):
    m = json.load(open(p))
    print("continuity:      %s -> %s: gap %s%.0f ms (freeze %.0f ms); %.0f/s before, %.0f/s after; "
          "%d errors, %d reconnects" % (m["from"], m["to"], ">" if w.get("gap_open") else "", w["gap_ms"],
                                         m["freeze_ms"], w["rate_before"], w["rate_after"], w["errors"],
                                         w["reconnects"]))
EOF
	if [ "$phase" = mix ]; then
		say "      acknowledged writes: $(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print("%d keys, %d lost, %d bad" % (j["keys"], j["lost"], j["bad"]))' "$WORK/$tag.ackcheck.json" 2>/dev/null || echo "ackcheck failed")"
	fi
	python3 "$HELP" plot --csv "$base.timeline.csv" --load "$base.load.json" --png "$base.png" \
		--title "$server, $(size_tag "$size") of values: $phase load at $RATE/s, migrate h0 <-> h1 (shaded)" ||
		say "      no timeline plot"
}

bench_one() { # SERVER BYTES INDEX
	local server=$1 size=$2 name=cont-$1-$3 count port arena addr t0 t1 phase
	count=$(((size + VALUE - 1) / VALUE))
	arena=$(server_arena_mb "$server" "$size")
	case $server in redis) port=6379 ;; memcached) port=11211 ;; esac
	need_memory $(((size * 14 / 10) + (512 << 20))) "$server with $((size >> 20)) MiB of values"
	say "$server, $count keys x $VALUE B: cxlcr run --host h0 --arena ${arena}M"
	pod_serve "$server" "$size" "$name" "$arena" $port
	HOST=h0
	addr=$ADDR
	t0=$(date +%s.%N)
	timeout $KV_TIMEOUT python3 "$KV" fill --proto "$server" --host "$addr" --port $port --count "$count" \
		--size $VALUE --seed $SEED --jobs 2 --quiet || die "fill of $name failed"
	t1=$(date +%s.%N)
	say "   filled in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s; arena_used $(($(status_field "$name" arena_used) >> 20)) MiB"
	for phase in "${PHASES[@]}"; do
		if [ "$phase" = mix ]; then
			timeout $KV_TIMEOUT python3 "$KV" verify --proto "$server" --host "$addr" --port $port \
				--count "$count" --size $VALUE --seed $SEED --jobs 2 --quiet ||
				die "$server: values differ after the migrates"
			say "   every value intact after the GET phases"
		fi
		run_phase "$server" "$size" "$name" "$phase" "$addr" $port "$count"
	done
	if [[ " ${PHASES[*]} " != *" mix "* ]]; then
		timeout $KV_TIMEOUT python3 "$KV" verify --proto "$server" --host "$addr" --port $port \
			--count "$count" --size $VALUE --seed $SEED --jobs 2 --quiet ||
			die "$server: values differ after the migrates"
		say "   every value intact after the migrates"
	fi
	timeout 60 "$CXLCR" stop "$name" >/dev/null || die "cxlcr stop $name failed"
	SERVICES=()
}

python3 "$HELP" header >"$OUT/continuity.csv"
pod_up "$POOL_GB"
say "sizes: ${SIZE_ARGS[*]}; servers: ${SERVERS[*]}; phases: ${PHASES[*]}; pool ${POOL_GB}G at $CXLCR_POOL"

i=0
for server in "${SERVERS[@]}"; do
	for size in "${SIZES[@]}"; do
		i=$((i + 1))
		bench_one "$server" "$size" $i
	done
done

python3 "$HELP" report --out "$OUT" \
	--header "continuity: $(criu --version | awk '/^Version/ {print "CRIU " $2}'), redis $(redis-server --version | awk '{print $3}' | tr -d v=), $(memcached -V); $(nproc) CPUs, kernel $(uname -r); load: one connection, $RATE requests/s, $MIGRATIONS migrates per phase, $PAUSE s apart${RTO_MIN_US:+; get-rto: TCP_RTO_MIN_US $RTO_MIN_US}"
