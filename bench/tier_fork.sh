#!/usr/bin/env bash
# Copy-mode children of tiered snapshots (issue 17, point 5; docs/cold-tier.md),
# Redis with KEYS x 1000 B on an emulated pod with a memory server, all in
# one run so that the ratios compare like with like. Each round takes, in
# an order that rotates from round to round, three snapshots of the same
# parent and forks one copy-mode child (--mode copy) of each through the
# fork API (build/bench/fork-probe, as bench/fork.sh):
#
#   cxl      an untiered snapshot (--full): every non-zero page in CXL; the
#            child's hot pages before it runs, the rest in the background
#   tiered   snapshot --tier with HOT_PCT % of the keys read over and over
#            during a WINDOW s hot window (the skew a cache sees): only the
#            pages touched then stay in CXL (at most 10% of the non-zero
#            pages is the issue's case; the run says what it got), the rest
#            go to the memory server; the child's CXL pages before it runs,
#            its cold ones in the background and on its faults
#   remote   snapshot --tier with a 1 ms window on the idle parent (next to
#            no page hot), the child forked --fetch lazy: every page from
#            the cold tier on its first touch, no background fetch
#
# and for each child: the time from the fork request to its first answer
# (FIRST=get: a GET of one key; FIRST=working-set: a script that reads the
# HOT_PCT % of keys the skew reads, as a function's first invocation
# touches its working set),
# then the p50/p99 of its first REQUESTS requests (GETs one at a time, the
# same sequence for every child: SKEW % of them of the HOT_PCT % of keys
# the hot window saw read, the rest of random keys of the whole key space;
# the skew tiering is for. SKEW=0: all of the whole key space, uniformly).
# Then, from the tiered snapshot, CHILDREN copy-mode children at once:
# request to the last one's first answer, and the median child's. Medians
# over ROUNDS rounds, and the ratios tiered/cxl (goal <= 1.15) and
# remote/tiered for the first answer (goal >= 2).
#
#   bench/tier_fork.sh     (KEYS=100000 ROUNDS=5 REQUESTS=10000 HOT_PCT=5 SKEW=95 WINDOW=2 CHILDREN=8 FIRST=get, PIN=1,
#                           CXLCR_TIER_WARM=1: hosts configured for the tier)
#   CXLCR_COLD_AHEAD_MB=0 bench/tier_fork.sh   the CHILDREN children without
#       the one fetch of their cold pages that their pagers share
#       (pager/ahead.h): each pager reads them all, as a single child's does
#   CLIENT_CPU=1 bench/tier_fork.sh   the request client on the children's
#       CPU instead of CPU 0 (with PIN=1 or 2): a client as near as a wakeup
#       on the same CPU (p50 ~11 us), so that what the children's own tail
#       costs is not hidden by the client's cross-CPU wakeups (~80 us)
#   SERVICE=faas bench/tier_fork.sh   (FN_SIZE=128M HOT_WORDS=2)
#       the same with the FaaS demo's function (demos/faas/function.py:
#       CPython, PYTHONMALLOC=malloc, a catalogue of FN_SIZE in its heap)
#       in place of Redis: the hot window and SKEW % of the requests invoke
#       it with one of HOT_WORDS words (of its 4,096), the rest with any
#       word; the first answer is an invocation of a hot word.
# Output: lines on stdout, bench/out/tier_fork.jsonl (every child),
# bench/out/tier_fork.txt (the table) and bench/out/tier_fork.pager.log
# (each child's pager's end line: its fault service times, and where its
# cold fetch spent its time). Needs root, CRIU, redis-server, gcc.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${CXLCR_BUILD:-$ROOT/build}
CXLCR=$BUILD/cxlcr
KV=$ROOT/tests/lib/kvclient.py
HELP=$ROOT/bench/fork.py
OUT=$ROOT/bench/out
KEYS=${KEYS:-100000}
ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-10000}
HOT_PCT=${HOT_PCT:-5}
SKEW=${SKEW:-95}
WINDOW=${WINDOW:-2}
CHILDREN=${CHILDREN:-8}
FIRST=${FIRST:-get}
SERVICE=${SERVICE:-redis}
FN_SIZE=${FN_SIZE:-128M}
HOT_WORDS=${HOT_WORDS:-2}
PORT=6379
NAME=redis
VERB_TIMEOUT=600

START=$SECONDS
say() { printf 'tier_fork: [%4ds] %s\n' $((SECONDS - START)) "$*"; }
die() { printf 'tier_fork: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/pod.sh
. "$ROOT/bench/lib/pod.sh"
# shellcheck source=bench/lib/build_copy.sh
. "$ROOT/bench/lib/build_copy.sh"
bench_needs redis-server redis-cli python3 gcc ip nsenter criu
[ -x "$CXLCR" ] && [ -f "$BUILD/libcxlcr.a" ] || die "build first (make)"
for v in KEYS ROUNDS REQUESTS HOT_PCT CHILDREN; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: a positive number"
done
case $FIRST in
get) FIRST_ARGS=() ;;
working-set) FIRST_ARGS=(--first-keys $((KEYS * HOT_PCT / 100))) ;;
*) die "FIRST: get or working-set" ;;
esac
case $SERVICE in
redis) ;;
faas)
	[ "$FIRST" = get ] || die "FIRST: the function's first answer is an invocation (FIRST=get)"
	[[ $HOT_WORDS =~ ^[1-9][0-9]*$ ]] && [ "$HOT_WORDS" -le 4096 ] || die "HOT_WORDS: 1 to 4096"
	PORT=8080
	NAME=fn
	# A pod service gets its host daemon's environment (demos/faas/run.sh):
	# with Python's own allocator its objects would not be in the arena.
	export PYTHONMALLOC=malloc
	;;
*) die "SERVICE: redis or faas" ;;
esac

mkdir -p "$OUT"
rm -f "$OUT/tier_fork.jsonl" "$OUT/tier_fork.txt"
WORK=$(mktemp -d /dev/shm/cxlcr-tierfork-XXXX)
chmod 700 "$WORK"
export CXLCR_POOL=$WORK/pool
SERVICES=() PLAIN=() POD=0 LOOP=
field() { python3 "$HELP" field "$@"; }
cleanup() { # pod_cleanup (which removes WORK), with the run's exit status
	local rc=$?
	[ -z "$LOOP" ] || kill "$LOOP" 2>/dev/null
	# The children's pagers' end lines (where each child's cold fetch
	# spent its time, its fault service times) outlive the pod.
	[ "$POD" = 1 ] && timeout 60 "$CXLCR" pod logs h1 pager >"$OUT/tier_fork.pager.log" 2>/dev/null
	(exit "$rc")
	pod_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A copy of the build: build/ may be rebuilt while this runs.
copy_build "$BUILD" "$WORK/bin"
CXLCR=$WORK/bin/cxlcr
PROBE=$WORK/fork-probe
gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$ROOT/include" -I"$ROOT/demos/lib" -o "$PROBE" \
	"$ROOT/bench/fork.c" "$ROOT/demos/lib/first_answer.c" "$BUILD/libcxlcr.a" -ljansson -lsodium -lpthread ||
	die "cannot build bench/fork.c"
unset LD_PRELOAD CXLCR_ARENA CXLCR_ARENA_SIZE CXLCR_ARENA_OWNER CXLCR_READY_FD

# The hosts are configured for the cold tier (docs/cold-tier.md): they
# start libfabric as they start, not on each fork's path (CXLCR_TIER_WARM=0
# measures hosts that are not).
export CXLCR_TIER_WARM=${CXLCR_TIER_WARM:-1}
BYTES=$((KEYS * 1000))
ARENA=$(server_arena_mb redis "$BYTES")
if [ "$SERVICE" = faas ]; then
	BYTES=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from function import parse_size
print(parse_size(sys.argv[2]))' "$ROOT/demos/faas" "$FN_SIZE") || die "FN_SIZE: a size (128M)"
	ARENA=$((((BYTES * 3 / 2 >> 20) + 256 + 63) / 64 * 64)) # as demos/faas/run.sh sizes it
fi
# PIN=1 also keeps the pagers on CPU 0 (cxlcrd's pager_cpus, for every
# kind of child alike), as an operator keeps cxlcr's work off a service's
# CPUs; PIN=2 pins as PIN=1 but leaves the pagers on the children's CPU.
PIN=${PIN:-1}
[ "$(nproc)" -ge 2 ] || PIN=0
[ "$PIN" = 1 ] && export CXLCR_PAGER_CPUS=0
pod_up 16
timeout $VERB_TIMEOUT "$CXLCR" tier up --size 4G >/dev/null || die "cxlcr tier up failed"
if [ "$SERVICE" = redis ]; then
	pod_serve redis "$BYTES" redis "$ARENA" $PORT
	PARENT=$ADDR
	python3 "$KV" fill --host "$PARENT" --port $PORT --count "$KEYS" --size 1000 --types strings --seed 3 \
		--quiet || die "fill failed"
else
	pod_serve faas "$BYTES" "$NAME" "$ARENA" $PORT
	PARENT=$ADDR
	# Its requests: INVOKE of every word, in an order of a fixed seed; the
	# first HOT_WORDS are the hot ones, and the first the first answer's.
	python3 - "$ROOT/demos/faas" >"$WORK/fn.lines" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[1])
from function import vocabulary
words = vocabulary()
random.Random(7).shuffle(words)
print("\n".join("INVOKE " + w for w in words))
PY
	head -n "$HOT_WORDS" "$WORK/fn.lines" >"$WORK/hot.cmds"
fi
API=tcp:$("$CXLCR" hosts --json | python3 -c 'import json, sys
h = [h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0]
print("%s:%d" % (h["address"], h["port"]))')
POD_DIR=
for d in /run/cxlcr/pod*; do [ "$(cat "$d/pool" 2>/dev/null)" = "$(realpath "$CXLCR_POOL")" ] && POD_DIR=$d; done
[ -n "$POD_DIR" ] || die "no pod directory for $CXLCR_POOL under /run/cxlcr"
# PIN=1: the children's host h1 (its daemon, and so everything it starts:
# CRIU's restores, the children, their pagers) on CPU 1, the rest (the
# parent's host, the memory host, this script's request client) on CPU 0,
# as if the pod's hosts were machines of their own. Unpinned, on this
# 2-vCPU guest, each round drew at random whether a child and its client
# shared a CPU (p50 ~11 us) or not (~70 us: a wakeup across vCPUs), which
# swamped the difference between kinds that the figures are about.
# The CHILDREN children at once run with h1 on both CPUs again (eight
# children and their pagers on one vCPU would measure that vCPU).
TASKSET=()
CG=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)/cxlcr/$(basename "$POD_DIR")
pin_hosts() { # CPU-LIST-FOR-h1 CPU-LIST-FOR-THE-REST: each host's processes (and so all they start)
	local h p cpus
	for h in "$CG"/*/; do
		cpus=$2
		[ "$(basename "$h")" = h1 ] && cpus=$1
		while read -r p; do taskset -a -p -c "$cpus" "$p" >/dev/null 2>&1 || true; done <"$h/cgroup.procs"
	done
}
if [ "$PIN" != 0 ]; then
	pin_hosts 1 0
	TASKSET=(taskset -c "${CLIENT_CPU:-0}")
fi
WHAT="redis, $KEYS keys x 1000 B"
HOT="the hot $HOT_PCT% of keys"
[ "$SERVICE" = faas ] && WHAT="the FaaS function, $FN_SIZE of catalogue" HOT="$HOT_WORDS hot words of 4096"
say "$WHAT, arena ${ARENA}M; $ROUNDS rounds; requests: $SKEW% of $HOT; CXLCR_TIER_WARM=$CXLCR_TIER_WARM; CXLCR_COLD_AHEAD_MB=${CXLCR_COLD_AHEAD_MB:-default}; first answer: $FIRST; PIN=$PIN; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# The skew: one connection reading the first HOT_PCT % of the keys (or
# invoking the function with the hot words) over and over.
[ "$SERVICE" = redis ] && seq 0 $((KEYS * HOT_PCT / 100 - 1)) | sed 's/^/GET kv:str:/' >"$WORK/hot.cmds"
feed() { while cat "$WORK/hot.cmds"; do :; done; }
skew() { # in the background (exec: $! is the process that loads), until killed
	if [ "$SERVICE" = redis ]; then
		exec redis-cli -h "$PARENT" -p $PORT >/dev/null 2>&1 < <(feed)
	else
		exec python3 - "$PARENT" $PORT "$WORK/hot.cmds" 2>/dev/null <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
f = s.makefile("rb")
lines = [l.encode() for l in open(sys.argv[3])]
while True:
    for l in lines:
        s.sendall(l)
        f.readline()
PY
	fi
}

snapshot() { # KIND: the parent's snapshot of that kind, its JSON in $WORK/snap.json
	local args=(--full)
	case $1 in
	tiered) args=(--tier --hot-window "$WINDOW") ;;
	remote) args=(--tier --hot-window 0.001) ;;
	esac
	if [ "$1" = tiered ]; then
		skew &
		LOOP=$!
	fi
	timeout $VERB_TIMEOUT "$CXLCR" snapshot "$NAME" "${args[@]}" --json >"$WORK/snap.json" 2>"$WORK/snap.err" ||
		die "cxlcr snapshot $NAME ${args[*]} failed: $(cat "$WORK/snap.err")"
	if [ -n "$LOOP" ]; then
		kill "$LOOP"
		wait "$LOOP" 2>/dev/null || true
		LOOP=
	fi
}

fork_kids() { # KIND ROUND COUNT [FETCH]: COUNT copy-mode children, timed, then stopped
	local kind=$1 r=$2 n=$3 fetch=() reqs=() kids
	[ -n "${4:-}" ] && fetch=(--fetch "$4")
	[ "$n" -eq 1 ] && reqs=(--requests "$REQUESTS" --keys "$KEYS" --hot-keys $((KEYS * HOT_PCT / 100)) --hot-pct "$SKEW")
	[ "$n" -eq 1 ] && [ "$SERVICE" = faas ] && reqs=(--requests "$REQUESTS" --hot-keys "$HOT_WORDS" --hot-pct "$SKEW")
	[ "$SERVICE" = faas ] && reqs+=(--lines "$WORK/fn.lines")
	timeout $VERB_TIMEOUT "${TASKSET[@]}" "$PROBE" api --api "$API" --token-file "$POD_DIR/api-token" --service "$NAME" --to h1 \
		--count "$n" --mode copy "${fetch[@]}" --port $PORT --key "kv:str:$((KEYS / 2))" --timeout 120 \
		"${FIRST_ARGS[@]}" "${reqs[@]}" >"$WORK/fork.json" 2>"$WORK/probe.err" || {
		mapfile -t -O "${#SERVICES[@]}" SERVICES < <("$CXLCR" ps | awk -v n="$NAME." 'index($1, n) == 1 { print $1 }')
		die "fork ($kind, round $r) failed: $(cat "$WORK/probe.err")"
	}
	python3 - "$OUT/tier_fork.jsonl" "$kind" "$r" "$WORK/snap.json" "$WORK/fork.json" <<'PY'
import json, sys
out, kind, r, snap, fork = sys.argv[1:]
d = {"kind": kind, "round": int(r), "snapshot": json.load(open(snap)), "fork": json.load(open(fork))}
open(out, "a").write(json.dumps(d) + "\n")
PY
	mapfile -t kids < <(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["children"]:
    print(c["name"])' "$WORK/fork.json")
	SERVICES+=("${kids[@]}")
	local k
	for k in "${kids[@]}"; do timeout $VERB_TIMEOUT "$CXLCR" stop "$k" >/dev/null || die "cxlcr stop $k failed"; done
	SERVICES=("${SERVICES[@]:0:${#SERVICES[@]}-${#kids[@]}}")
}

KINDS=(cxl tiered remote)
for r in $(seq "$ROUNDS"); do
	order=("${KINDS[@]:$(((r - 1) % 3))}" "${KINDS[@]:0:$(((r - 1) % 3))}")
	for kind in "${order[@]}"; do
		snapshot "$kind"
		if [ "$kind" = remote ]; then fork_kids remote "$r" 1 lazy; else fork_kids "$kind" "$r" 1; fi
		line=$(python3 - "$OUT/tier_fork.jsonl" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])][-1]
t, f = d["snapshot"].get("tier", {}), d["fork"]
hot = "" if not t else ", hot %d of %d non-zero pages (%.1f%%)" % (
    t["pages_hot"], t["pages_hot"] + t["pages_cold"], 100.0 * t["pages_hot"] / (t["pages_hot"] + t["pages_cold"]))
print("%-6s first answer %7.1f ms, first %d requests p50 %.1f us p99 %.1f us%s" % (
    d["kind"], f["children"][0]["first_answer_ms"], f["requests"]["n"], f["requests"]["p50_us"],
    f["requests"]["p99_us"], hot))
PY
)
		say "[$r/$ROUNDS] $line"
		if [ "$kind" = tiered ]; then
			[ "$PIN" != 0 ] && pin_hosts 0-1 0-1
			fork_kids tiered-x$CHILDREN "$r" "$CHILDREN"
			[ "$PIN" != 0 ] && pin_hosts 1 0
			say "[$r/$ROUNDS] $CHILDREN copy-mode children at once of the tiered snapshot: last first answer $(python3 -c 'import json, sys
print(max(c["first_answer_ms"] for c in json.load(open(sys.argv[1]))["children"]))' "$WORK/fork.json") ms"
		fi
	done
done

python3 - "$OUT/tier_fork.jsonl" "$WHAT" "$CHILDREN" "$(cut -d' ' -f1-3 /proc/loadavg)" "$FIRST" <<'PY' | tee "$OUT/tier_fork.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
what, children, load, first = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
med = statistics.median
def of(kind, f):
    return [f(d) for d in rows if d["kind"] == kind]
fa = lambda d: d["fork"]["children"][0]["first_answer_ms"]
p50 = lambda d: d["fork"]["requests"]["p50_us"]
p99 = lambda d: d["fork"]["requests"]["p99_us"]
def hot_pct(d):
    t = d["snapshot"]["tier"]
    return 100.0 * t["pages_hot"] / (t["pages_hot"] + t["pages_cold"])
n = len(of("cxl", fa))
print("%s; copy-mode children; first answer: %s; medians of %d rounds (load average at the end %s)"
      % (what[0].upper() + what[1:], first, n, load))
# The child's restore as its host's fork-restore counts it: CRIU's restore,
# then its pager's start (the connection to the memory server a child with
# cold pages waits for, its hot pages going in); the rest of the first
# answer is the fork request around it and the first request itself.
rs = lambda d: d["fork"]["children"][0]["restore_ms"]
print("%-8s %16s %12s %12s %14s %12s %12s" % ("child", "first answer ms", "p50 us", "p99 us", "hot pages %", "CXL MB",
                                              "restore ms"))
for k in ("cxl", "tiered", "remote"):
    cxl = med(of(k, lambda d: d["snapshot"]["tier"]["cxl_bytes"] if "tier" in d["snapshot"] else
                 d["snapshot"].get("snapshot_bytes", 0))) / 1e6
    hp = "%.1f" % med(of(k, hot_pct)) if k != "cxl" else "100"
    print("%-8s %16.1f %12.1f %12.1f %14s %12.1f %12.1f" % (k, med(of(k, fa)), med(of(k, p50)), med(of(k, p99)), hp,
                                                           cxl, med(of(k, rs))))
c, t, r = (med(of(k, fa)) for k in ("cxl", "tiered", "remote"))
print("tiered / cxl: first answer %.2fx, p50 %.2fx, p99 %.2fx (goal <= 1.15)" % (
    t / c, med(of("tiered", p50)) / med(of("cxl", p50)), med(of("tiered", p99)) / med(of("cxl", p99))))
print("remote / tiered: first answer %.2fx (goal >= 2), p50 %.2fx, p99 %.2fx" % (
    r / t, med(of("remote", p50)) / med(of("tiered", p50)), med(of("remote", p99)) / med(of("tiered", p99))))
x = "tiered-x%d" % children
last = of(x, lambda d: max(ch["first_answer_ms"] for ch in d["fork"]["children"]))
mid = of(x, lambda d: med(ch["first_answer_ms"] for ch in d["fork"]["children"]))
print("%d copy-mode children at once of one tiered snapshot: request to the last first answer %.1f ms, "
      "the median child's %.1f ms (one child: %.1f ms)" % (children, med(last), med(mid), t))
print("per round, first answer ms: " + "; ".join("%s %s" % (k, " ".join("%.0f" % v for v in of(k, fa)))
                                                for k in ("cxl", "tiered", "remote")))
PY
