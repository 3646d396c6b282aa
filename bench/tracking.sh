#!/usr/bin/env bash
# What write tracking costs a service (issue 14, point 5): the same server
# four times under `cxlcr run`: tracked (the default) and never
# snapshotted, tracked and snapshotted once (from its first snapshot a
# tracked heap is mapped with 4 KiB pages: tracking/tracker.c), tracked,
# snapshotted once and given 2 MiB mappings back as its daemon does after
# a while without snapshots (`cxlcr huge-pages`: tracking/idle.c), and
# untracked (CXLCR_WRITE_TRACKING=0). Redis (redis-benchmark) and
# Memcached (bench/mcload) SET and GET throughput, the load going round
# them round by round (each goes first in a quarter of the rounds); the
# medians and the ratios to untracked (target >= 0.97 for SET).
#
#   bench/tracking.sh                 (ROUNDS=6 N=400000 KEYSPACE=100000 SIZE=100 ARENA=1G)
#   KEYSPACE=1000000 SIZE=1000 ARENA=2G bench/tracking.sh   (a 1 GiB heap)
# Output: a table on stdout and bench/out/tracking.csv.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=${CXLCR_BUILD:-$ROOT/build}/cxlcr
KV=$ROOT/tests/lib/kvclient.py
MCLOAD=$ROOT/build/bench/mcload
OUT=$ROOT/bench/out
ROUNDS=${ROUNDS:-6}
N=${N:-400000}
KEYSPACE=${KEYSPACE:-100000}
SIZE=${SIZE:-100}
ARENA=${ARENA:-1G}
say() { printf 'tracking: %s\n' "$*"; }
die() { printf 'tracking: error: %s\n' "$*" >&2; exit 1; }
[ -x "$CXLCR" ] || die "build first (make)"
if [ ! -x "$MCLOAD" ] || [ "$ROOT/bench/mcload.c" -nt "$MCLOAD" ]; then
	mkdir -p "$(dirname "$MCLOAD")"
	gcc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$MCLOAD" "$ROOT/bench/mcload.c"
fi
mkdir -p "$OUT"
# Snapshots need a pod: h0 tracks (its daemon's default), h1 does not.
# shellcheck source=bench/lib/scratch_pod.sh
. "$ROOT/bench/lib/scratch_pod.sh"
scratch_pod trackbench "${POOL_SIZE:-12G}" 1 # four arenas and two snapshots
CXLCR_WRITE_TRACKING=0 "$CXLCR" pod up --hosts 2 >/dev/null
CLIENT_CPU=()
[ "$(nproc)" -ge 2 ] && CLIENT_CPU=(taskset -c 1)
PORT=6379
addr_of() { "$CXLCR" status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["address"])'; }
start() { # NAME HOST CMD...: the server pinned to CPU 0, the load runs on CPU 1
	local name=$1 host=$2 pid
	shift 2
	"$CXLCR" run --host "$host" --name "$name" --arena "$ARENA" --log "$WORK/$name.log" -- "$@" >/dev/null ||
		die "cxlcr run $name failed"
	pid=$("$CXLCR" status "$name" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
	pid=$(python3 "$ROOT/tests/lib/hostpid.py" machine "$host" "$pid") || die "no pid of $name"
	[ "$(nproc)" -ge 2 ] && taskset -a -p -c 0 "$pid" >/dev/null
	return 0
}
tracked_is() { "$CXLCR" status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["write_tracking"])'; }
small_pages_is() { "$CXLCR" status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["small_pages"])'; }

echo "server,variant,round,test,rps" >"$OUT/tracking.csv"
rb() { # ADDRESS VARIANT ROUND
	"${CLIENT_CPU[@]}" redis-benchmark -h "$1" -p $PORT -t set,get -n "$N" -c 8 -P 16 -r "$KEYSPACE" -d "$SIZE" --csv |
		python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    if row and row[0] in ("SET", "GET"):
        print("redis,%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" >>"$OUT/tracking.csv"
}
mb() { # ADDRESS VARIANT ROUND
	local t
	for t in set get; do
		"${CLIENT_CPU[@]}" "$MCLOAD" -h "$1" -p 11211 -t $t -n "$N" -c 8 -P 16 -r "$KEYSPACE" -d "$SIZE" --csv | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    print("memcached,%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" >>"$OUT/tracking.csv"
	done
}
# round FUNC ROUND ADDRESS:VARIANT...: one round of FUNC on each server, the
# first one rotating with the round.
round() {
	local f=$1 r=$2 i n
	shift 2
	local servers=("$@")
	n=${#servers[@]}
	for i in $(seq 0 $((n - 1))); do
		local s=${servers[$(((i + r) % n))]}
		"$f" "${s%%:*}" "${s#*:}" "$r"
	done
}
alternate() { # FUNC ADDRESS_TRACKED ADDRESS_SNAPSHOTTED ADDRESS_HUGE ADDRESS_UNTRACKED
	local r
	for r in $(seq "$ROUNDS"); do
		round "$1" "$r" "$2:tracked" "$3:snapshotted" "$4:huge" "$5:untracked"
	done
}
# ready NAME...: each one tracked (the tracker registers the heap a moment
# after the start) but the last; then the "snapshotted" one (the second)
# is snapshotted once, which maps its heap with small pages from then on,
# and so is the third, which `cxlcr huge-pages` then maps with 2 MiB ones
# again.
ready() {
	local i
	for i in $(seq 100); do [ "$(tracked_is "$1")" = True ] && [ "$(tracked_is "$2")" = True ] && [ "$(tracked_is "$3")" = True ] && break; python3 -c 'import time; time.sleep(0.05)'; done
	[ "$(tracked_is "$1")" = True ] && [ "$(tracked_is "$2")" = True ] && [ "$(tracked_is "$3")" = True ] &&
		[ "$(tracked_is "$4")" = False ] || die "tracking is not as asked"
	"$CXLCR" snapshot "$2" >/dev/null || die "snapshot $2 failed"
	"$CXLCR" snapshot "$3" >/dev/null || die "snapshot $3 failed"
	"$CXLCR" huge-pages "$3" >/dev/null || die "huge-pages $3 failed"
	[ "$(small_pages_is "$1")" = False ] && [ "$(small_pages_is "$2")" = True ] && [ "$(small_pages_is "$3")" = False ] ||
		die "small pages are not as asked"
}

start rt h0 redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir /
start rs h0 redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir /
start rh h0 redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir /
start ru h1 redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir /
at=$(addr_of rt); as=$(addr_of rs); ah=$(addr_of rh); au=$(addr_of ru)
for a in "$at" "$as" "$ah" "$au"; do python3 "$KV" wait --host "$a" --port $PORT >/dev/null || die "redis"; done
ready rt rs rh ru
say "redis: $ROUNDS rounds, redis-benchmark -t set,get -n $N -c 8 -P 16 -r $KEYSPACE -d $SIZE"
alternate rb "$at" "$as" "$ah" "$au"
for n in rt rs rh ru; do "$CXLCR" stop "$n" >/dev/null; done

start mt h0 memcached -U 0 -p 11211 -m 1024 -t 1 -u root
start ms h0 memcached -U 0 -p 11211 -m 1024 -t 1 -u root
start mh h0 memcached -U 0 -p 11211 -m 1024 -t 1 -u root
start mu h1 memcached -U 0 -p 11211 -m 1024 -t 1 -u root
at=$(addr_of mt); as=$(addr_of ms); ah=$(addr_of mh); au=$(addr_of mu)
for a in "$at" "$as" "$ah" "$au"; do python3 "$KV" wait --host "$a" --port 11211 --proto memcached >/dev/null || die "memcached"; done
ready mt ms mh mu
say "memcached: $ROUNDS rounds, mcload set,get -n $N -c 8 -P 16 -r $KEYSPACE -d $SIZE"
alternate mb "$at" "$as" "$ah" "$au"
for n in mt ms mh mu; do "$CXLCR" stop "$n" >/dev/null; done

python3 - "$OUT/tracking.csv" <<'EOF' | tee "$OUT/tracking.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("server     test  tracked_rps  snapshotted_rps  huge_again_rps  untracked_rps  tracked/untracked  snapshotted/untracked  huge_again/untracked")
for server in ("redis", "memcached"):
    for test in ("SET", "GET"):
        med = {}
        for v in ("tracked", "snapshotted", "huge", "untracked"):
            x = [float(r["rps"]) for r in rows if r["server"] == server and r["variant"] == v and r["test"].upper() == test]
            med[v] = statistics.median(x) if x else None
        if all(med.values()):
            t, s, h, u = med["tracked"], med["snapshotted"], med["huge"], med["untracked"]
            print("%-9s  %-4s  %11.0f  %15.0f  %14.0f  %13.0f  %17.3f  %21.3f  %20.3f" % (server, test, t, s, h, u, t / u, s / u, h / u))
EOF
