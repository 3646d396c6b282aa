#!/usr/bin/env bash
# What write tracking costs a service (issue 14, point 5): the same server
# twice under `cxlcr run`, one with tracking (the default) and one without
# (CXLCR_WRITE_TRACKING=0), Redis (redis-benchmark) and Memcached
# (bench/mcload) SET and GET throughput, the load alternating between them
# round by round (each goes first in half the rounds); the medians and the
# ratio tracked/untracked (target >= 0.97 for SET).
#
#   bench/tracking.sh                 (ROUNDS=6)
# Output: a table on stdout and bench/out/tracking.csv.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=${CXLCR_BUILD:-$ROOT/build}/cxlcr
KV=$ROOT/tests/lib/kvclient.py
MCLOAD=$ROOT/build/bench/mcload
OUT=$ROOT/bench/out
ROUNDS=${ROUNDS:-6}
N=${N:-400000}
KEYSPACE=100000
say() { printf 'tracking: %s\n' "$*"; }
die() { printf 'tracking: error: %s\n' "$*" >&2; exit 1; }
[ -x "$CXLCR" ] || die "build first (make)"
if [ ! -x "$MCLOAD" ] || [ "$ROOT/bench/mcload.c" -nt "$MCLOAD" ]; then
	mkdir -p "$(dirname "$MCLOAD")"
	gcc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$MCLOAD" "$ROOT/bench/mcload.c"
fi
mkdir -p "$OUT"
WORK=$(mktemp -d /dev/shm/cxlcr-trackbench-XXXX)
chmod 700 "$WORK"
export CXLCR_POOL=$WORK/pool
NAMES=()
cleanup() {
	set +e
	for n in "${NAMES[@]}"; do "$CXLCR" stop "$n" >/dev/null 2>&1; done
	rm -rf "$WORK"
}
trap cleanup EXIT
SERVER_CPU=() CLIENT_CPU=()
if [ "$(nproc)" -ge 2 ]; then SERVER_CPU=(taskset -c 0) CLIENT_CPU=(taskset -c 1); fi
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() { # NAME TRACKING(0|1) CMD...
	local name=$1 t=$2
	shift 2
	NAMES+=("$name")
	CXLCR_WRITE_TRACKING=$t "${SERVER_CPU[@]}" "$CXLCR" run --name "$name" --arena 1G --log "$WORK/$name.log" \
		-- "$@" >/dev/null || die "cxlcr run $name failed"
}
tracked_is() { "$CXLCR" status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["write_tracking"])'; }

"$CXLCR" pool format --size 8G >/dev/null
echo "server,variant,round,test,rps" >"$OUT/tracking.csv"
rb() { # PORT VARIANT ROUND
	"${CLIENT_CPU[@]}" redis-benchmark -p "$1" -t set,get -n "$N" -c 8 -P 16 -r $KEYSPACE -d 100 --csv |
		python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    if row and row[0] in ("SET", "GET"):
        print("redis,%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" >>"$OUT/tracking.csv"
}
mb() { # PORT VARIANT ROUND
	local t
	for t in set get; do
		"${CLIENT_CPU[@]}" "$MCLOAD" -p "$1" -t $t -n "$N" -c 8 -P 16 -r $KEYSPACE -d 100 --csv | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    print("memcached,%s,%s,%s,%s" % (sys.argv[1], sys.argv[2], row[0], row[1]))' "$2" "$3" >>"$OUT/tracking.csv"
	done
}
alternate() { # FUNC PORT_TRACKED PORT_UNTRACKED
	local r
	for r in $(seq "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then "$1" "$2" tracked "$r"; "$1" "$3" untracked "$r"
		else "$1" "$3" untracked "$r"; "$1" "$2" tracked "$r"; fi
	done
}

pt=$(port); pu=$(port)
start rt 1 redis-server --port "$pt" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK"
start ru 0 redis-server --port "$pu" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK"
python3 "$KV" wait --port "$pt" >/dev/null && python3 "$KV" wait --port "$pu" >/dev/null || die "redis"
# The tracker registers the heap a moment after the start: wait for it.
for _ in $(seq 100); do [ "$(tracked_is rt)" = True ] && break; python3 -c 'import time; time.sleep(0.05)'; done
[ "$(tracked_is rt)" = True ] && [ "$(tracked_is ru)" = False ] || die "tracking is not as asked"
say "redis: $ROUNDS rounds, redis-benchmark -t set,get -n $N -c 8 -P 16 -r $KEYSPACE -d 100"
alternate rb "$pt" "$pu"
"$CXLCR" stop rt >/dev/null; "$CXLCR" stop ru >/dev/null

pt=$(port); pu=$(port)
start mt 1 memcached -U 0 -l 127.0.0.1 -p "$pt" -m 1024 -t 1 -u root
start mu 0 memcached -U 0 -l 127.0.0.1 -p "$pu" -m 1024 -t 1 -u root
python3 "$KV" wait --port "$pt" --proto memcached >/dev/null && python3 "$KV" wait --port "$pu" --proto memcached >/dev/null ||
	die "memcached"
for _ in $(seq 100); do [ "$(tracked_is mt)" = True ] && break; python3 -c 'import time; time.sleep(0.05)'; done
say "memcached: $ROUNDS rounds, mcload set,get -n $N -c 8 -P 16 -r $KEYSPACE -d 100"
alternate mb "$pt" "$pu"

python3 - "$OUT/tracking.csv" <<'EOF' | tee "$OUT/tracking.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("server     test  tracked_rps  untracked_rps  tracked/untracked")
for server in ("redis", "memcached"):
    for test in ("SET", "GET"):
        t = [float(r["rps"]) for r in rows if r["server"] == server and r["variant"] == "tracked" and r["test"].upper() == test]
        u = [float(r["rps"]) for r in rows if r["server"] == server and r["variant"] == "untracked" and r["test"].upper() == test]
        if t and u:
            mt, mu = statistics.median(t), statistics.median(u)
            print("%-9s  %-4s  %11.0f  %13.0f  %17.3f" % (server, test, mt, mu, mt / mu))
EOF
