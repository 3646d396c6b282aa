#!/usr/bin/env bash
# Remote fork (issue 5), Redis with its heap in the pool on an emulated pod,
# all figures in one run so that their ratios compare like with like:
#
#   a. fork latency, from the fork request (the fork API, as `cxlcr fork`
#      and a FaaS platform make it) to the child's first answer (a GET of a
#      key, polled by build/bench/fork-probe on CLOCK_MONOTONIC), forking
#      from an existing snapshot, for parents holding BENCH_FORK_SIZES of
#      values (default 64M 512M 2G) and BENCH_FORK_MID (1G); the snapshots
#      taken before (their total time, the parent's freeze, the heap copy)
#      beside it; the largest / smallest ratio (target <= 1.2)
#   b. at BENCH_FORK_MID: the same Redis without the preload (heap in
#      private memory) restored by plain CRIU from image files on local disk
#      (/var/tmp; dumped once, synced, still in the page cache), request to
#      first answer, against the fork of (a); the ratio (target >= 3)
#   c. at BENCH_FORK_MID: a child's private memory (RssAnon) after 20,000
#      GETs and 1% SETs spread over the whole key space, as a share of its
#      parent's heap (arena_used; target <= 15%)
#   d. at BENCH_FORK_MID: BENCH_FORK_CHILDREN (8) children from one
#      snapshot at once: request to the last child's first answer, and
#      each child's own figures
#   e. at BENCH_FORK_MID: copy mode (fork --mode copy: the child's own heap,
#      its pager installs the hot pages before it runs and the rest while
#      it runs; and --fetch eager: every page before it runs) against share
#      mode (copy-on-write views), the order rotating from round to round:
#      request to first answer, the child's RssAnon right after it and, for
#      a copy, once it stops growing (polled every 100 ms: the background
#      fetch is done), how long that took from the request
#
# Each measurement is repeated BENCH_REPEAT times (default 5: single forks
# vary by up to +-2 ms on 2 CPUs); medians are
# reported. Prints a table
# and writes bench/out/fork.csv (figure,size_bytes,metric,median,unit,
# rounds,values), fork.jsonl (every round), fork.txt and fork.png.
#
#   bench/fork.sh                          ~2 minutes on 2 CPUs
#   BENCH_QUICK=1 bench/fork.sh            16M 64M 128M, mid 64M (~1 minute)
#   BENCH_FORK_SIZES="64M 1G" BENCH_FORK_MID=256M BENCH_REPEAT=3 bench/fork.sh
#
# Needs root, CRIU (>= 4.2), redis-server, gcc, gnuplot for the plot.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${CXLCR_BUILD:-$ROOT/build}
KV=$ROOT/tests/lib/kvclient.py
HELP=$ROOT/bench/fork.py
OUT=$ROOT/bench/out
CRIU=${CRIU:-criu}
CRIU_TIMEOUT=600     # every criu call
FAIL_PREFIX=fork     # a failed criu call's log: bench/out/fork-fail-*.log
VERB_TIMEOUT=900     # every cxlcr call
VALUE=1000           # bytes per value
SEED=11
PORT=6379
LOAD_OPS=20000       # (c): requests
LOAD_SET_PCT=1       # (c): of them SETs
PROBE_TIMEOUT=120    # s, until a child or a restored process answers

START=$SECONDS
say() { printf 'fork: [%4ds] %s\n' $((SECONDS - START)) "$*"; }
die() { printf 'fork: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/criu_plain.sh
. "$ROOT/bench/lib/criu_plain.sh"
# shellcheck source=bench/lib/build_copy.sh
. "$ROOT/bench/lib/build_copy.sh"
# shellcheck source=bench/lib/pod.sh
. "$ROOT/bench/lib/pod.sh"

bench_needs redis-server python3 gcc unshare ip iptables nsenter timeout du "$CRIU"
[ -f "$BUILD/libcxlcr.a" ] || die "$BUILD/libcxlcr.a is missing: build first (make)"
command -v gnuplot >/dev/null 2>&1 || say "gnuplot is missing (make deps): no fork.png"

if [ "${BENCH_QUICK:-0}" != 0 ]; then
	SIZES_ARG=${BENCH_FORK_SIZES:-16M 64M 128M} MID_ARG=${BENCH_FORK_MID:-64M}
else
	SIZES_ARG=${BENCH_FORK_SIZES:-64M 512M 2G} MID_ARG=${BENCH_FORK_MID:-1G}
fi
bench_sizes BENCH_FORK_SIZES "$SIZES_ARG"
MID=$(python3 "$HELP" size "$MID_ARG") || die "BENCH_FORK_MID: $MID_ARG"
# Every parent to start, smallest first: the sizes of (a) and the mid one.
mapfile -t PARENTS < <(printf '%s\n' "${SIZES[@]}" "$MID" | sort -n -u)
REPEAT=${BENCH_REPEAT:-5}
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT: a number of rounds, at least 1"
CHILDREN=${BENCH_FORK_CHILDREN:-8}
if ! [[ $CHILDREN =~ ^[1-9][0-9]?$ ]] || [ "$CHILDREN" -gt 64 ]; then die "BENCH_FORK_CHILDREN: 1 to 64"; fi

# Arena (MiB) for BYTES of values: Redis's used_memory is ~1.3x the values.
arena_mb() { echo $(((($1 * 16 / 10) >> 20) + 256)); }
LARGEST=${PARENTS[-1]}
# The largest parent's arena, one snapshot of its heap at a time (a new one
# replaces the last once its children are gone), the children's own pages.
POOL_GB=$((($(arena_mb "$LARGEST") * 3 >> 10) + 4))
[ "$POOL_GB" -ge 16 ] || POOL_GB=16

mkdir -p "$OUT"
rm -f "$OUT"/fork.csv "$OUT"/fork.jsonl "$OUT"/fork.txt "$OUT"/fork.png "$OUT"/fork-fail-*.log
WORK=$(mktemp -d /dev/shm/cxlcr-fork-XXXX)   # the pool, logs, JSON of each step
IMAGES=$(mktemp -d /var/tmp/cxlcr-fork-XXXX) # plain CRIU's images (local disk), the build copy
export CXLCR_POOL=$WORK/pool
copy_build "$BUILD" "$IMAGES/bin"
CXLCR=$IMAGES/bin/cxlcr
PROBE=$IMAGES/bin/fork-probe
gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$ROOT/include" -I"$ROOT/demos/lib" -o "$PROBE" \
	"$ROOT/bench/fork.c" "$ROOT/demos/lib/first_answer.c" "$BUILD/libcxlcr.a" -ljansson -lsodium -lpthread ||
	die "cannot build bench/fork.c"
unset LD_PRELOAD CXLCR_ARENA CXLCR_ARENA_SIZE CXLCR_ARENA_OWNER CXLCR_READY_FD
SERVICES=()  # cxlcr services (parents and children) not yet stopped
PLAIN=()     # pids of plain servers
POD=0
trap pod_cleanup EXIT
trap 'exit 130' INT TERM

field() { python3 "$HELP" field "$@"; }
mib() { echo $(($1 >> 20)); }
forget() { # NAME...: no longer to be stopped on exit
	local keep=() n d
	for n in "${SERVICES[@]}"; do
		for d in "$@"; do [ "$n" = "$d" ] && continue 2; done
		keep+=("$n")
	done
	SERVICES=("${keep[@]}")
}
stop() { # NAME...
	local n
	for n in "$@"; do timeout $VERB_TIMEOUT "$CXLCR" stop "$n" >/dev/null || die "cxlcr stop $n failed"; done
	forget "$@"
}
# raw FIG SIZE ROUND [KEY=VALUE | KEY=@FILE.json]...: one line of fork.jsonl.
raw() { python3 "$HELP" raw "$OUT/fork.jsonl" "$@"; }
kv() { # VERB HOST COUNT [kvclient options]
	local verb=$1 host=$2 count=$3
	shift 3
	timeout 3600 python3 "$KV" "$verb" --host "$host" --port $PORT --count "$count" --size $VALUE \
		--seed $SEED --jobs 2 "$@"
}
# settle PID MS: {"rss_anon_kb", "ms"}: the child's RssAnon once it has
# not grown for 300 ms (polled every 100 ms, at most 60 s), and when that
# was, from the fork request (MS: from the request to the API's reply, when
# polling starts). A figure, not a synchronisation.
settle() {
	python3 - "$1" "$2" <<'PY'
import json, sys, time
pid, t_reply = sys.argv[1], float(sys.argv[2])
def rss():
    with open("/proc/%s/status" % pid) as f:
        return int([l for l in f if l.startswith("RssAnon:")][0].split()[1])
t0, last, same, at = time.monotonic(), rss(), 0, 0.0
while same < 3 and time.monotonic() - t0 < 60:
    time.sleep(0.1)
    now = rss()
    if now == last:
        same += 1
    else:
        same, last, at = 0, now, time.monotonic() - t0
print(json.dumps({"rss_anon_kb": last, "ms": t_reply + at * 1000}))
PY
}
# probe_fork NAME N OUTFILE [MODE [FETCH]]: N children of NAME on h1
# through the fork API (mode MODE, share or copy, default: the pool's; in
# copy mode FETCH), each polled to its first answer; registers them for
# clean-up.
probe_fork() {
	local json=$3 mode=()
	[ -n "${4:-}" ] && mode=(--mode "$4")
	[ -n "${5:-}" ] && mode+=(--fetch "$5")
	timeout $VERB_TIMEOUT "$PROBE" api --api "$API" --token-file "$TOKEN_FILE" --service "$1" --to h1 --count "$2" "${mode[@]}" --port $PORT \
		--key "$KEY" --timeout $PROBE_TIMEOUT >"$json" 2>"$WORK/probe.err" || {
		cat "$WORK/probe.err" >&2
		# Children made before the failure are services of the pool.
		mapfile -t -O "${#SERVICES[@]}" SERVICES < <("$CXLCR" ps --json | python3 -c 'import json, sys
for s in json.load(sys.stdin)["services"]:
    if s["name"].startswith(sys.argv[1] + "."):
        print(s["name"])' "$1")
		die "fork of $1 failed"
	}
	mapfile -t KIDS < <(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["children"]:
    print(c["name"])' "$json")
	SERVICES+=("${KIDS[@]}")
}

# --- the pod --------------------------------------------------------------------------------
pod_up "$POOL_GB"
POD_DIR=
for d in /run/cxlcr/pod*; do [ "$(cat "$d/pool" 2>/dev/null)" = "$(realpath "$CXLCR_POOL")" ] && POD_DIR=$d; done
[ -n "$POD_DIR" ] || die "no pod directory for $CXLCR_POOL under /run/cxlcr"
# The fork API of the parents' host, over TCP at its address in the pod's
# host table, with the pod's token (this machine's copy: `pod up`).
API=tcp:$("$CXLCR" hosts --json | python3 -c 'import json, sys
h = [h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0]
print("%s:%d" % (h["address"], h["port"]))') || die "h0 is not in the pod's host table"
TOKEN_FILE=$POD_DIR/api-token
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
say "parents: ${SIZE_ARGS[*]} (a), $MID_ARG (a-d); $REPEAT rounds; pool ${POOL_GB}G at $CXLCR_POOL"
say "load average at start: $LOAD0; $(awk '/^MemAvailable:/ {printf "%d MiB", $2 / 1024}' /proc/meminfo) available"
say "$($CRIU --version | awk '/^Version/ {print "CRIU " $2}'); $(redis-server --version | awk '{print $1, $2, $3}')"

# --- cxlcr: a parent on h0, its children on h1 ----------------------------------------------------
bench_parent() { # BYTES INDEX
	local size=$1 name=fk-$2 count arena addr used r kid
	count=$(((size + VALUE - 1) / VALUE))
	arena=$(arena_mb "$size")
	KEY=kv:str:$((count / 2)) # the key the probe GETs: in the middle of the heap
	say "redis, $count keys x $VALUE B: cxlcr run --host h0 --arena ${arena}M"
	SERVICES+=("$name")
	timeout $VERB_TIMEOUT "$CXLCR" run --host h0 --name "$name" --arena "${arena}M" --log "$WORK/$name.log" -- \
		redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir "$WORK" \
		>/dev/null 2>"$WORK/run.err" || die "cxlcr run $name failed: $(cat "$WORK/run.err")"
	"$CXLCR" status "$name" --json >"$WORK/status.json"
	addr=$(field "$WORK/status.json" address)
	python3 "$KV" wait --host "$addr" --port $PORT \
		--pid "$(python3 "$ROOT/tests/lib/hostpid.py" machine h0 "$(field "$WORK/status.json" pid)")" ||
		die "$name does not answer at $addr"
	kv fill "$addr" "$count" --quiet || die "fill of $name failed"
	"$CXLCR" status "$name" --json >"$WORK/status.json"
	used=$(field "$WORK/status.json" arena_used)
	say "   filled: arena_used $(mib "$used") MiB"

	# a. REPEAT snapshots, then REPEAT forks from the newest, each timed to
	# the child's first answer. The snapshots come first, the way a platform
	# snapshots a warm function and then forks it many times: a snapshot
	# replaced while a child of it still runs is freed by the first fork
	# request after that child has gone (its pool pages given back, ~60 ms
	# per GiB on tmpfs), which is no part of forking from a snapshot.
	# The newest snapshot lists the pages the parent changed since the one
	# before (Redis rehashes and expires in the background): those are
	# prefetched into every child.
	for r in $(seq "$REPEAT"); do
		timeout $VERB_TIMEOUT "$CXLCR" snapshot "$name" --json >"$WORK/snap.json" 2>"$WORK/snap.err" ||
			die "cxlcr snapshot $name failed: $(cat "$WORK/snap.err")"
		raw s "$size" "$r" arena_used="$used" snapshot=@"$WORK/snap.json"
		say "   [s $r/$REPEAT] snapshot $(field "$WORK/snap.json" total_ms) ms (frozen $(field "$WORK/snap.json" freeze_ms)," \
			"copy $(field "$WORK/snap.json" snapshot_ms)), $(field "$WORK/snap.json" pages_changed) pages changed since the last"
	done
	for r in $(seq "$REPEAT"); do
		probe_fork "$name" 1 "$WORK/fork.json"
		kid=${KIDS[0]}
		raw a "$size" "$r" arena_used="$used" fork=@"$WORK/fork.json"
		say "   [a $r/$REPEAT] fork to first answer $(field "$WORK/fork.json" children 0 first_answer_ms) ms" \
			"(API reply $(field "$WORK/fork.json" request_ms), child restored in $(field "$WORK/fork.json" children 0 restore_ms))"
		if [ "$r" = 1 ]; then # the child holds its parent's values (outside the timings)
			kv verify "$(field "$WORK/fork.json" children 0 address)" 2000 --start $((count / 3)) --quiet ||
				die "$kid does not hold its parent's values"
		fi
		stop "$kid"
	done
	[ "$size" = "$MID" ] || { stop "$name"; return; }

	# c. A child's private memory after a read-mostly load.
	for r in $(seq "$REPEAT"); do
		probe_fork "$name" 1 "$WORK/fork.json"
		kid=${KIDS[0]}
		"$CXLCR" status "$kid" --json >"$WORK/before.json"
		python3 "$HELP" load --host "$(field "$WORK/fork.json" children 0 address)" --port $PORT \
			--keys "$count" --ops $LOAD_OPS --set-pct $LOAD_SET_PCT --size $VALUE --seed "$r" \
			>"$WORK/load.json" || die "the load on $kid failed"
		"$CXLCR" status "$kid" --json >"$WORK/after.json"
		raw c "$size" "$r" arena_used="$used" before=@"$WORK/before.json" after=@"$WORK/after.json" \
			load=@"$WORK/load.json"
		say "   [c $r/$REPEAT] $kid after $LOAD_OPS requests ($LOAD_SET_PCT% SET): RssAnon" \
			"$(($(field "$WORK/after.json" rss_anon_kb) >> 10)) MiB (after the fork: $(($(field "$WORK/before.json" rss_anon_kb) >> 10)) MiB)"
		stop "$kid"
	done

	# d. CHILDREN at once from one snapshot (the newest one of a).
	for r in $(seq "$REPEAT"); do
		probe_fork "$name" "$CHILDREN" "$WORK/fork.json"
		[ ${#KIDS[@]} -eq "$CHILDREN" ] || die "the fork made ${#KIDS[@]} children, not $CHILDREN"
		raw d "$size" "$r" fork=@"$WORK/fork.json"
		say "   [d $r/$REPEAT] $CHILDREN children: the last answered $(python3 -c 'import json, sys
print(max(c["first_answer_ms"] for c in json.load(open(sys.argv[1]))["children"]))' "$WORK/fork.json") ms after the request"
		stop "${KIDS[@]}"
	done

	# e. Copy mode (background and eager fetch) against share mode, one
	# child at a time, the order rotating from round to round.
	local mode modes kind fetch
	for r in $(seq "$REPEAT"); do
		case $((r % 3)) in
		1) modes="share copy eager" ;;
		2) modes="copy eager share" ;;
		0) modes="eager share copy" ;;
		esac
		for kind in $modes; do
			mode=$kind fetch=
			[ "$kind" = eager ] && mode=copy fetch=eager
			probe_fork "$name" 1 "$WORK/fork.json" "$mode" "$fetch"
			kid=${KIDS[0]}
			"$CXLCR" status "$kid" --json >"$WORK/after.json"
			# A share-mode child's memory grows with its prefetch, paced
			# to give way to requests: only a copy's is waited for.
			if [ "$kind" = share ]; then
				echo '{"rss_anon_kb": -1, "ms": -1}' >"$WORK/settled.json"
			else
				# (the fork says the child's pid on its host, which has a
				# pid namespace of its own: this machine's reads /proc here)
				settle "$(python3 "$ROOT/tests/lib/hostpid.py" machine "$(field "$WORK/fork.json" children 0 host)" \
					"$(field "$WORK/fork.json" children 0 pid)")" "$(field "$WORK/fork.json" request_ms)" \
					>"$WORK/settled.json"
			fi
			raw e "$size" "$r" copy=$(case $kind in share) echo 0 ;; copy) echo 1 ;; *) echo 2 ;; esac) arena_used="$used" \
				fork=@"$WORK/fork.json" after=@"$WORK/after.json" settled=@"$WORK/settled.json"
			say "   [e $r/$REPEAT] $kind: first answer $(field "$WORK/fork.json" children 0 first_answer_ms) ms," \
				"RssAnon $(($(field "$WORK/after.json" rss_anon_kb) >> 10)) MiB"
			if [ "$r" = 1 ] && [ "$kind" != share ]; then
				kv verify "$(field "$WORK/fork.json" children 0 address)" 2000 --start $((count / 3)) --quiet ||
					die "copy-mode $kid does not hold its parent's values"
			fi
			stop "$kid"
		done
	done
	stop "$name"
}

# --- b. plain CRIU: the same Redis, heap in private memory, restored from disk ------------------------
bench_plain() { # BYTES
	local size=$1 name=plain count port pid dir t0 r
	count=$(((size + VALUE - 1) / VALUE))
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	say "redis, $count keys x $VALUE B: plain, pid 1 of a PID namespace, 127.0.0.1:$port"
	pid=$(plain_spawn "$WORK/$name.log" redis-server --port "$port" --bind 127.0.0.1 --protected-mode no \
		--save '' --appendonly no --dir "$WORK") || die "cannot start plain redis"
	PLAIN+=("$pid")
	python3 "$KV" wait --port "$port" --pid "$pid" || die "plain redis does not answer"
	timeout 3600 python3 "$KV" fill --port "$port" --count "$count" --size $VALUE --seed $SEED --jobs 2 --quiet ||
		die "fill of plain redis failed"
	dir=$IMAGES/$name
	mkdir "$dir"
	t0=$(python3 "$HELP" now)
	plain_dump_cmd "$pid" "$dir"
	"${PLAIN_CMD[@]}" || plain_failed "$dir" dump "$name"
	local dump_ms
	dump_ms=$(python3 "$HELP" since "$t0")
	plain_wait_exit "$pid" 30 || die "plain redis (pid $pid) did not exit after its dump"
	PLAIN=()
	local img
	img=$(plain_image_bytes "$dir")
	sync # the images are on the disk before any restore, outside the timings
	say "   dumped in $dump_ms ms: $(mib "$img") MiB of images in $dir"
	for r in $(seq "$REPEAT"); do
		plain_restore_cmd "$dir"
		timeout $VERB_TIMEOUT "$PROBE" exec --addr 127.0.0.1 --port "$port" --key "kv:str:$((count / 2))" \
			--timeout $PROBE_TIMEOUT -- "${PLAIN_CMD[@]}" >"$WORK/restore.json" ||
			plain_failed "$dir" restore "$name"
		pid=$(cat "$dir/restored.pid")
		PLAIN+=("$pid")
		raw b "$size" "$r" restore=@"$WORK/restore.json" dump_ms="$dump_ms" image_bytes="$img"
		say "   [b $r/$REPEAT] criu restore to first answer $(field "$WORK/restore.json" first_answer_ms) ms" \
			"(criu restore ended after $(field "$WORK/restore.json" cmd_ms) ms)"
		if [ "$r" = 1 ]; then
			timeout 600 python3 "$KV" verify --port "$port" --count 2000 --start $((count / 3)) --size $VALUE \
				--seed $SEED --quiet || die "the restored plain redis lost values"
		fi
		plain_stop "$pid"
		PLAIN=()
	done
}

i=0
for size in "${PARENTS[@]}"; do
	i=$((i + 1))
	bench_parent "$size" $i
done
bench_plain "$MID"

python3 "$HELP" report --out "$OUT" --sizes "${SIZES[*]}" --mid "$MID" --children "$CHILDREN" \
	--load "$LOAD_OPS requests, $LOAD_SET_PCT% SET" \
	--header "$($CRIU --version | awk '/^Version/ {print "CRIU " $2}'), redis $(redis-server --version | awk '{print $3}' | tr -d v=); $(nproc) CPUs, kernel $(uname -r); load average $LOAD0 at start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; $((SECONDS - START)) s"
