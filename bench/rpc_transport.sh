#!/usr/bin/env bash
# The control path's share of a migrate (issue 15 point 3): the TCP path
# (the host table's addresses, requests authenticated with the pod's key,
# output relayed in protobuf frames) against the Unix sockets it replaced.
#
# One run, two pods side by side (made twice, in both orders): one whose daemons and command line have
# $CXLCR_RPC_TRANSPORT=unix, one with tcp. Each has Redis with RPC_SIZE of
# 1000-byte values under `cxlcr run --host h0` and a paced GET load
# (bench/loadclient, RPC_RATE requests/s, one at a time) throughout; the
# services are migrated h0 <-> h1 RPC_ROUNDS times each, the rounds
# alternating between the pods (and which goes first), RPC_PAUSE s apart,
# so that both transports see the same machine. Prints, per transport,
# the medians over the rounds of the migrate's freeze_ms and total_ms (its
# own --json figures) and of the response gap (the longest interval between
# two answers of the load client overlapping the migrate); then the control
# path alone: a verb handed to h1's daemon that fails there at once,
# RPC_CALLS times per transport (median, command line start to exit); then
# the ratios tcp/unix. Figures only: nothing is asserted. Take them on a quiet machine
# (the load average is printed first).
#
#   bench/rpc_transport.sh                  64 MiB, 8 rounds per transport
#   RPC_SIZE=256M RPC_ROUNDS=9 bench/rpc_transport.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CXLCR=$ROOT/build/cxlcr
KV=$ROOT/tests/lib/kvclient.py
HELP=$ROOT/bench/continuity.py
LOADCLIENT=$ROOT/build/bench/loadclient
VALUE=1000
SEED=13
say() { printf 'rpc_transport: %s\n' "$*"; }
die() { printf 'rpc_transport: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/pod.sh
. "$ROOT/bench/lib/pod.sh"

bench_needs redis-server python3 ip iptables nsenter criu timeout gcc
[ -x "$CXLCR" ] && [ -f "$ROOT/build/criu/cxlcr_criu.so" ] || die "build first (make)"
if [ ! -x "$LOADCLIENT" ] || [ "$ROOT/bench/loadclient.c" -nt "$LOADCLIENT" ]; then
	mkdir -p "$(dirname "$LOADCLIENT")"
	gcc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -O2 -o "$LOADCLIENT" \
		"$ROOT/bench/loadclient.c" || die "cannot build bench/loadclient.c"
fi
bench_sizes RPC_SIZE "${RPC_SIZE:-64M}"
SIZE=${SIZES[0]}
ROUNDS=${RPC_ROUNDS:-8}
PAUSE=${RPC_PAUSE:-1}
RATE=${RPC_RATE:-5000}
CALLS=${RPC_CALLS:-50}
[ "$ROUNDS" -ge 5 ] || die "RPC_ROUNDS: at least 5"

WORK=$(mktemp -d /dev/shm/cxlcr-rpc-XXXX)
unset LD_PRELOAD CXLCR_ARENA CXLCR_ARENA_SIZE CXLCR_ARENA_OWNER CXLCR_READY_FD CXLCR_RPC_TRANSPORT
declare -A LC HOST ADDRS
SERVICES=()
POD=0
field() { python3 "$HELP" field "$1" "$2"; }
# Both pods go, whatever ended the run.
cleanup() {
	local rc=$? t
	trap - EXIT
	set +e
	for t in unix tcp; do
		[ -n "${LC[$t]:-}" ] && kill -KILL "${LC[$t]}" 2>/dev/null
		[ -e "$WORK/pool-$t" ] || continue
		CXLCR_POOL=$WORK/pool-$t timeout 60 "$CXLCR" stop "rpc-$t" >/dev/null 2>&1
		CXLCR_POOL=$WORK/pool-$t timeout 120 "$CXLCR" pod down >/dev/null 2>&1
	done
	[ $rc -eq 0 ] || tail -n 5 "$WORK"/*.err "$WORK"/*.log 2>/dev/null >&2
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
count=$(((SIZE + VALUE - 1) / VALUE))
arena=$(server_arena_mb redis "$SIZE")
# Two pods side by side, one per transport (the daemons take theirs from
# the environment of `pod up`), each with its Redis under load: the rounds
# alternate between them, so that both see the same machine. The second pod
# made is slower at its dumps (its pool gets what huge pages are left:
# 1.2x with the tcp pod made second, 0.95x with it made first), so the run
# has two halves, one made in each order, and the figures take both.
migrate() { # TRANSPORT ROUND
	local t=$1 m=$2 to
	if [ "${HOST[$t]}" = h0 ]; then to=h1; else to=h0; fi
	kill -USR1 "${LC[$t]}"
	CXLCR_POOL=$WORK/pool-$t CXLCR_RPC_TRANSPORT=$t timeout 300 "$CXLCR" migrate "rpc-$t" --to $to --json \
		>"$WORK/$t.$m.json" 2>"$WORK/$t.$m.err" || { kill -USR2 "${LC[$t]}"; die "migrate $m ($t) failed"; }
	kill -USR2 "${LC[$t]}"
	HOST[$t]=$to
	sleep "$PAUSE"
}
half() { # HALF FIRST_ROUND LAST_ROUND POD...
	local h=$1 first=$2 last=$3 t m i t0 t1
	shift 3
	for t in "$@"; do
		export CXLCR_POOL=$WORK/pool-$t CXLCR_RPC_TRANSPORT=$t
		pod_up "$(pool_gb 2 "$SIZE")"
		pod_serve redis "$SIZE" "rpc-$t" "$arena" 6379
		ADDRS[$t]=$ADDR
		HOST[$t]=h0
		python3 "$KV" fill --host "$ADDR" --port 6379 --count "$count" --size $VALUE --seed $SEED --jobs 2 \
			--quiet || die "fill failed"
		"$LOADCLIENT" --host "$ADDR" --port 6379 --proto redis --mode get --rate "$RATE" --keys "$count" \
			--key-prefix kv:str: --value-size $VALUE --rate-window 0.5 --json "$WORK/$t.$h.load.json" \
			--quiet &
		LC[$t]=$!
	done
	unset CXLCR_RPC_TRANSPORT
	say "pods made in the order $*: rounds $first to $last"
	sleep "$PAUSE"
	for m in $(seq "$first" "$last"); do
		if [ $((m % 2)) = 1 ]; then migrate unix "$m"; migrate tcp "$m"; else migrate tcp "$m"; migrate unix "$m"; fi
	done
	for t in unix tcp; do
		kill -TERM "${LC[$t]}"
		wait "${LC[$t]}" || die "the load client ($t) failed"
		LC[$t]=
		python3 "$KV" verify --host "${ADDRS[$t]}" --port 6379 --count "$count" --size $VALUE --seed $SEED \
			--jobs 2 --quiet || die "values differ after the migrates ($t)"
	done
	# The control path alone: a verb the command line hands to h1's
	# daemon that fails at once there (a restore of a service with no
	# checkpoint), from the command line's start to its exit, alternating
	# (and which goes first).
	for i in $(seq 1 $((CALLS / 2))); do
		local order=(unix tcp)
		[ $((i % 2)) = 1 ] || order=(tcp unix)
		for t in "${order[@]}"; do
			t0=$(date +%s%N)
			CXLCR_POOL=$WORK/pool-$t CXLCR_RPC_TRANSPORT=$t "$CXLCR" restore no-such --host h1 \
				2>/dev/null && die "a restore of no-such succeeded"
			t1=$(date +%s%N)
			echo $(((t1 - t0) / 1000)) >>"$WORK/$t.calls"
		done
	done
	for t in unix tcp; do
		CXLCR_POOL=$WORK/pool-$t "$CXLCR" stop "rpc-$t" >/dev/null
		CXLCR_POOL=$WORK/pool-$t "$CXLCR" pod down >/dev/null
		rm -f "$WORK/pool-$t"
	done
}
say "redis, $count keys x $VALUE B in each pod, $RATE GETs/s each; $ROUNDS migrates per transport, alternating"
half 1 1 $((ROUNDS / 2)) unix tcp
half 2 $((ROUNDS / 2 + 1)) "$ROUNDS" tcp unix
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
med = {}
for t in ("unix", "tcp"):
    migs = [json.load(open("%s/%s.%d.json" % (work, t, m))) for m in range(1, rounds + 1)]
    gaps = [w["gap_ms"] for h in (1, 2) for w in json.load(open("%s/%s.%d.load.json" % (work, t, h)))["windows"]]
    med[t] = {"freeze_ms": statistics.median(m["freeze_ms"] for m in migs),
              "total_ms": statistics.median(m["total_ms"] for m in migs),
              "gap_ms": statistics.median(gaps),
              "checkpoint_ms": statistics.median(m["checkpoint_ms"] for m in migs),
              "restore_ms": statistics.median(m["restore_ms"] for m in migs)}
    print("rpc_transport: %-4s  freeze %s  total %s  gap %s" % (t,
          " ".join("%.1f" % m["freeze_ms"] for m in migs),
          " ".join("%.1f" % m["total_ms"] for m in migs), " ".join("%.1f" % g for g in gaps)))
for t in ("unix", "tcp"):
    print("rpc_transport: %-4s  medians over %d rounds: freeze %.1f ms (checkpoint %.1f, restore on the "
          "destination %.1f), migrate %.1f ms, response gap %.1f ms"
          % (t, rounds, med[t]["freeze_ms"], med[t]["checkpoint_ms"], med[t]["restore_ms"], med[t]["total_ms"],
             med[t]["gap_ms"]))
for t in ("unix", "tcp"):
    med[t]["call_ms"] = statistics.median(int(l) for l in open("%s/%s.calls" % (work, t))) / 1000
    print("rpc_transport: %-4s  a verb handed to h1's daemon: median %.2f ms (command line start to exit)"
          % (t, med[t]["call_ms"]))
print("rpc_transport: tcp/unix: freeze %.2f, migrate %.2f, response gap %.2f, handed verb %.2f"
      % tuple(med["tcp"][k] / med["unix"][k] for k in ("freeze_ms", "total_ms", "gap_ms", "call_ms")))
PY
