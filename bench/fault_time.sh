#!/usr/bin/env bash
# The service time of one fault served by a copy-mode child's pager (issue
# 17 point 5; docs/cold-tier.md), beside a Redis round trip on the same pod.
# The pager times every fault it serves, from the read of its userfaultfd
# message to the return of the UFFDIO_COPY/UFFDIO_ZEROPAGE that wakes the
# faulting thread, by source, and logs count, p50, p99 and max of each in
# its end-of-child line in the host's pager.log (pager/pager.c). Redis
# with KEYS x 1000 B on an emulated pod with a memory server; each round,
# in an order that alternates from round to round, the parent is
# snapshotted and one child forked --mode copy --fetch lazy (every page on
# its first touch, no background fetch) on h1, of
#
#   cxl    an untiered snapshot (--full): every fault on a stored page is
#          a copy from CXL (UFFDIO_COPY from the snapshot in the pool)
#   cold   a tiered snapshot with a 1 ms hot window on the idle parent
#          (--tier --hot-window 0.001, bench/tier_fork.sh's "remote"): next
#          to no page hot, every other fault an RMA read from the memory
#          server (tier_read_page(): 4 KiB + its CRC-32C) and a copy
#
# then random GETs (the same sequence for both children of a round), BATCH
# at a time, until the child's RssAnon has grown by FAULTS pages and 5%
# (zero-page faults do not count there), at most MAX_GETS; the child is
# stopped and its pager's line read (`cxlcr pod logs h1 pager`): fewer
# than FAULTS faults of the child's kind fails the run. Then PINGS Redis
# PINGs, one at a time on one connection, from h1's network namespace to
# the parent on h0 (tests/tier_tool rtt): the pod's network round trip.
# Medians over ROUNDS rounds; `uptime` before and after. It stops by
# itself (every verb under a timeout, the GETs bounded); all its traffic
# goes to the pod's own addresses.
#
#   bench/fault_time.sh   (KEYS=200000 ROUNDS=5 FAULTS=10000 PINGS=10000 BATCH=5000 MAX_GETS=4*KEYS)
# Output: lines on stdout, bench/out/fault_time.jsonl (every child and
# every PING run) and bench/out/fault_time.txt (the table). Needs root,
# CRIU, redis-server, redis-cli.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${CXLCR_BUILD:-$ROOT/build}
CXLCR=$BUILD/cxlcr
KV=$ROOT/tests/lib/kvclient.py
HELP=$ROOT/bench/fault_time.py
OUT=$ROOT/bench/out
KEYS=${KEYS:-200000}
ROUNDS=${ROUNDS:-5}
FAULTS=${FAULTS:-10000}
PINGS=${PINGS:-10000}
BATCH=${BATCH:-5000}
MAX_GETS=${MAX_GETS:-$((KEYS * 4))}
PORT=6379
VERB_TIMEOUT=600

START=$SECONDS
say() { printf 'fault_time: [%4ds] %s\n' $((SECONDS - START)) "$*"; }
die() { printf 'fault_time: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/pod.sh
. "$ROOT/bench/lib/pod.sh"
# shellcheck source=bench/lib/build_copy.sh
. "$ROOT/bench/lib/build_copy.sh"
bench_needs redis-server redis-cli python3 ip criu uptime
[ -x "$CXLCR" ] && [ -x "$BUILD/tests/tier_tool" ] || die "build first (make)"
for v in KEYS ROUNDS FAULTS PINGS BATCH MAX_GETS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: a positive number"
done

mkdir -p "$OUT"
rm -f "$OUT/fault_time.jsonl" "$OUT/fault_time.txt"
WORK=$(mktemp -d /dev/shm/cxlcr-faulttime-XXXX)
chmod 700 "$WORK"
export CXLCR_POOL=$WORK/pool
# shellcheck disable=SC2034 # used by pod_cleanup
SERVICES=() PLAIN=() POD=0
field() { python3 "$HELP" field "$@"; }
trap pod_cleanup EXIT
trap 'exit 130' INT TERM
# A copy of the build: build/ may be rebuilt while this runs.
copy_build "$BUILD" "$WORK/bin"
CXLCR=$WORK/bin/cxlcr
TOOL=$WORK/bin/tier_tool
cp "$BUILD/tests/tier_tool" "$TOOL"
unset LD_PRELOAD CXLCR_ARENA CXLCR_ARENA_SIZE CXLCR_ARENA_OWNER CXLCR_READY_FD

UPTIME_BEFORE=$(uptime)
say "uptime: $UPTIME_BEFORE"
BYTES=$((KEYS * 1000))
ARENA=$(server_arena_mb redis "$BYTES")
# One fault, one page: the daemons' default fault_around (16) reads the
# pages around each cold fault with it, and the child then faults on too
# few pages to count (the run failed so since fault_around came in).
export CXLCR_FAULT_AROUND=${CXLCR_FAULT_AROUND:-1}
pod_up 8
timeout $VERB_TIMEOUT "$CXLCR" tier up --size 2G >/dev/null || die "cxlcr tier up failed"
pod_serve redis "$BYTES" redis "$ARENA" $PORT
PARENT=$ADDR
python3 "$KV" fill --host "$PARENT" --port $PORT --count "$KEYS" --size 1000 --types strings --seed 3 \
	--quiet || die "fill failed"
h1=$("$CXLCR" hosts --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h1"][0]["address"])')
NS_H1=cxlcr$(($(echo "$h1" | cut -d. -f2) - 78))-h1
ip netns exec "$NS_H1" true 2>/dev/null || die "no network namespace $NS_H1 for h1 ($h1)"
say "redis, $KEYS keys x 1000 B, arena ${ARENA}M; $ROUNDS rounds; >= $FAULTS faults of each kind per round"

row() { # KIND ROUND K=JSON...: one line of fault_time.jsonl
	python3 - "$OUT/fault_time.jsonl" "$@" <<'PY'
import json, sys
out, kind, r = sys.argv[1:4]
d = {"kind": kind, "round": int(r)}
for kv in sys.argv[4:]:
    k, _, v = kv.partition("=")
    d[k] = json.loads(v)
open(out, "a").write(json.dumps(d) + "\n")
PY
}
rss_kb() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }

# The end line the pager of child NAME (pid PID) logged on h1.
pager_end() { # NAME PID
	local l
	for _ in $(seq 300); do
		l=$("$CXLCR" pod logs h1 pager | grep " $1 (pid $2): " | grep -v ": background fetch done: " | tail -n 1) &&
			[ -n "$l" ] && {
			case $l in *": ended "*) echo "$l"; return 0 ;; *) die "the pager of $1: $l" ;; esac
		}
		sleep 0.1 # polling a condition, bounded: not a synchronisation
	done
	die "the pager of $1 (pid $2) logged no end line on h1 in 30 s"
}

child() { # KIND ROUND: a snapshot of KIND, a lazy copy-mode child of it on h1, GETs, its pager's times
	local kind=$1 r=$2 args=(--full) name addr pid mpid rss0 grown=0 sent=0 b=0 line times n
	[ "$kind" = cold ] && args=(--tier --hot-window 0.001)
	timeout $VERB_TIMEOUT "$CXLCR" snapshot redis "${args[@]}" --json >"$WORK/snap.json" 2>"$WORK/snap.err" ||
		die "cxlcr snapshot redis ${args[*]} failed: $(cat "$WORK/snap.err")"
	timeout $VERB_TIMEOUT "$CXLCR" fork redis --to h1 --mode copy --fetch lazy --json >"$WORK/fork.json" \
		2>"$WORK/fork.err" || die "fork ($kind, round $r) failed: $(cat "$WORK/fork.err")"
	read -r name addr pid < <(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["children"][0]
print(c["name"], c["address"], c["pid"])' "$WORK/fork.json")
	SERVICES+=("$name")
	# (the fork says h1's own pid of the child: this machine's reads /proc here)
	mpid=$(python3 "$ROOT/tests/lib/hostpid.py" machine h1 "$pid") || die "$name ($pid on h1) is not found"
	python3 "$KV" wait --host "$addr" --port $PORT --pid "$mpid" >/dev/null || die "$name does not answer at $addr"
	rss0=$(rss_kb "$mpid")
	while [ "$grown" -lt $((FAULTS * 21 / 20)) ]; do
		[ "$sent" -lt "$MAX_GETS" ] ||
			die "$name ($kind): $sent GETs made only $grown pages its own (KEYS too few for $FAULTS faults?)"
		python3 "$HELP" gets "$WORK/gets.cmds" "$BATCH" "$KEYS" $((r * 1000 + b))
		timeout $VERB_TIMEOUT redis-cli -h "$addr" -p $PORT <"$WORK/gets.cmds" >/dev/null ||
			die "GETs to $name failed"
		sent=$((sent + BATCH)) b=$((b + 1))
		grown=$((($(rss_kb "$mpid") - rss0) / 4))
	done
	timeout $VERB_TIMEOUT "$CXLCR" stop "$name" >/dev/null || die "cxlcr stop $name failed"
	SERVICES=("${SERVICES[@]:0:${#SERVICES[@]}-1}")
	line=$(pager_end "$name" "$pid")
	times=$(python3 "$HELP" pager "$line") || die "cannot read the fault times of $name: $line"
	n=$(echo "$times" | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]]["n"])' "$kind")
	[ "$n" -ge "$FAULTS" ] || die "$name ($kind): only $n faults of its kind after $sent GETs: $line"
	row "$kind" "$r" "child=\"$name\"" "gets=$sent" "faults=$times" \
		"tier=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])).get("tier")))' "$WORK/snap.json")"
	say "[$r/$ROUNDS] $kind: $name, $sent GETs: ${line#*fault service us (message read to wake): }"
}

for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then order=(cxl cold); else order=(cold cxl); fi
	for kind in "${order[@]}"; do child "$kind" "$r"; done
	line=$(timeout $VERB_TIMEOUT ip netns exec "$NS_H1" "$TOOL" rtt "$PARENT" $PORT "$PINGS") ||
		die "PINGs from h1 to $PARENT failed"
	row rtt "$r" "ping=$(python3 "$HELP" rtt "$line")"
	say "[$r/$ROUNDS] $line (h1 -> the parent on h0)"
done

UPTIME_AFTER=$(uptime)
say "uptime: $UPTIME_AFTER"
python3 "$HELP" report --out "$OUT" --keys "$KEYS" --gets "$MAX_GETS" --uptime-before "$UPTIME_BEFORE" \
	--uptime-after "$UPTIME_AFTER"
