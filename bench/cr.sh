#!/usr/bin/env bash
# Checkpoint/restore time against the size of the data, for Redis and
# Memcached, cxlcr against plain CRIU:
#
#   cxlcr       the server under `cxlcr run --host h0` (heap in its arena of
#               the pool), filled with 1000-byte values (kvclient); then
#               rounds of `cxlcr checkpoint` + `cxlcr restore --host h1`
#               (checkpoint_ms, restore_ms, their sum, image_bytes) and
#               `cxlcr migrate --to h0` (freeze_ms, total_ms), the values read
#               back after each step.
#   criu        the same server without the preload (heap in private memory),
#               pid 1 of its own PID namespace, on 127.0.0.1; the same fill;
#               rounds of `criu dump` with the images on local disk
#               (/var/tmp) and `criu restore -d`, each timed as a whole
#               (wall clock; the images are synced to disk between the two,
#               outside the timings); image size with du; values read back.
#
# One server at a time, freed before the next. Each figure is the median of
# BENCH_REPEAT rounds (default 3). Every value is read back after every
# step: that checks them, and it also has the service touch its whole heap
# again before the next round, as a long-running one has (a restored
# process maps its arena lazily, and the teardown of a mapping whose pages
# are all mapped is part of what a checkpoint costs). Prints a table, the ratios
# plain/cxlcr and the growth of cxlcr's time with the size, and writes
# bench/out/cr.csv (server,size_bytes,method,checkpoint_ms,restore_ms,
# total_ms,image_bytes; method cxlcr, cxlcr-migrate or criu), cr.jsonl
# (every step's own JSON), cr.txt (the table and ratios) and cr.png.
#
#   bench/cr.sh                          1, 2 and 4 GiB of values (~20 min)
#   BENCH_SIZES="64M 256M" bench/cr.sh   other sizes (6G works too; needs
#                                        ~1.6x the size in free memory)
#   BENCH_QUICK=1 bench/cr.sh            64M and 256M, unless BENCH_SIZES says
#   BENCH_SERVERS=redis bench/cr.sh      one server only (redis, memcached)
#   BENCH_REPEAT=1 bench/cr.sh           one round per configuration
#   BENCH_VERIFY=sample bench/cr.sh      read back 3 x 20000 keys, not all
#                                        (faster; the service then starts
#                                        rounds 2.. with its arena unmapped)
#
# Needs root, CRIU (>= 4.2), redis-server, memcached, gnuplot for the plot.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${CXLCR_BUILD:-$ROOT/build}
CXLCR=$BUILD/cxlcr   # until the copy below
KV=$ROOT/tests/lib/kvclient.py
HELP=$ROOT/bench/cr.py
OUT=$ROOT/bench/out
CRIU=${CRIU:-criu}
VALUE=1000          # bytes per value
SEED=7
SAMPLE=20000        # keys per window with BENCH_VERIFY=sample
CRIU_TIMEOUT=600    # every criu call
FAIL_PREFIX=cr      # a failed criu call's log: bench/out/cr-fail-*.log
VERB_TIMEOUT=900    # every cxlcr call that runs CRIU
KV_TIMEOUT=3600     # a fill or verify

START=$SECONDS
say() { printf 'cr: [%4ds] %s\n' $((SECONDS - START)) "$*"; }
die() { printf 'cr: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/criu_plain.sh
. "$ROOT/bench/lib/criu_plain.sh"
# shellcheck source=bench/lib/build_copy.sh
. "$ROOT/bench/lib/build_copy.sh"
# shellcheck source=bench/lib/pod.sh
. "$ROOT/bench/lib/pod.sh"

bench_needs redis-server memcached python3 unshare ip iptables nsenter timeout du "$CRIU"
for f in cxlcr cxlcrd libcxlcr-preload.so criu/cxlcr_criu.so; do
	[ -f "$BUILD/$f" ] || die "$BUILD/$f is missing: build first (make)"
done
command -v gnuplot >/dev/null 2>&1 || say "gnuplot is missing (make deps): no cr.png"

if [ -z "${BENCH_SIZES:-}" ]; then
	if [ "${BENCH_QUICK:-0}" != 0 ]; then BENCH_SIZES="64M 256M"; else BENCH_SIZES="1G 2G 4G"; fi
fi
bench_sizes BENCH_SIZES "$BENCH_SIZES"
bench_servers BENCH_SERVERS "${BENCH_SERVERS:-redis memcached}"
REPEAT=${BENCH_REPEAT:-3}
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT: a number of rounds, at least 1"
VERIFY=${BENCH_VERIFY:-all}
case $VERIFY in all | sample) ;; *) die "BENCH_VERIFY: all or sample" ;; esac

POOL_GB=$(pool_gb 16 "${SIZES[@]}")

mkdir -p "$OUT"
rm -f "$OUT"/cr.csv "$OUT"/cr.jsonl "$OUT"/cr.txt "$OUT"/cr.png "$OUT"/cr.summary.json "$OUT"/cr-fail-*.log
WORK=$(mktemp -d /dev/shm/cxlcr-cr-XXXX)  # the pool and the servers' logs
IMAGES=$(mktemp -d /var/tmp/cxlcr-cr-XXXX) # plain CRIU's images: local disk, not tmpfs
export CXLCR_POOL=$WORK/pool
# A copy of the build, used throughout: build/ may be rebuilt while this
# runs. cxlcr finds cxlcrd, the preload and the plugin (criu/) next to itself.
copy_build "$BUILD" "$IMAGES/bin"
CXLCR=$IMAGES/bin/cxlcr
unset LD_PRELOAD CXLCR_ARENA CXLCR_ARENA_SIZE CXLCR_ARENA_OWNER CXLCR_READY_FD
SERVICES=()   # cxlcr services not yet stopped
PLAIN=()      # pids of plain servers
POD=0
trap pod_cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
field() { python3 "$HELP" field "$1" "$2"; }
csv_row() { # SERVER SIZE METHOD CHECKPOINT RESTORE TOTAL IMAGE_BYTES
	printf '%s,%s,%s,%s,%s,%s,%s\n' "$@" >>"$OUT/cr.csv"
}
# raw STEP SERVER SIZE WALL_MS [JSON_FILE]: one line of cr.jsonl.
raw() {
	python3 - "$@" >>"$OUT/cr.jsonl" <<'EOF'
import json, sys
step, server, size, wall = sys.argv[1:5]
d = {"step": step, "server": server, "size_bytes": int(size), "wall_ms": float(wall)}
if len(sys.argv) > 5:
    d["result"] = json.load(open(sys.argv[5]))
print(json.dumps(d))
EOF
}

# kv VERB SERVER HOST PORT COUNT [kvclient options]
kv() {
	local verb=$1 server=$2 host=$3 port=$4 count=$5
	shift 5
	timeout $KV_TIMEOUT python3 "$KV" "$verb" --proto "$server" --host "$host" --port "$port" \
		--count "$count" --size $VALUE --seed $SEED --jobs 2 "$@"
}
# check SERVER HOST PORT COUNT WHAT [all|sample]: reads back every value,
# or 3 windows of SAMPLE keys (start, middle, end).
check() {
	local server=$1 host=$2 port=$3 count=$4 what=$5 mode=${6:-$VERIFY} n=$SAMPLE start
	if [ "$mode" = all ] || [ "$count" -le $((3 * SAMPLE)) ]; then
		kv verify "$server" "$host" "$port" "$count" --quiet || die "$server: values differ after $what"
		say "   every value intact after $what"
		return
	fi
	for start in 0 $(((count - n) / 2)) $((count - n)); do
		kv verify "$server" "$host" "$port" "$n" --start "$start" --quiet ||
			die "$server: values differ after $what (keys $start..$((start + n - 1)))"
	done
	say "   3 x $n sampled values intact after $what"
}
used_memory() { # SERVER HOST PORT: redis used_memory, or memcached's bytes
	python3 - "$@" <<'EOF' || echo 0
import socket, sys
server, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.create_connection((host, port), timeout=10)
f = s.makefile("rb")
if server == "redis":
    s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
    n = int(f.readline()[1:])
    info = f.read(n + 2).decode()
    print(next(l.split(":")[1].strip() for l in info.splitlines() if l.startswith("used_memory:")))
else:
    s.sendall(b"stats\r\n")
    for line in iter(f.readline, b"END\r\n"):
        p = line.split()
        if len(p) == 3 and p[1] == b"bytes":
            print(int(p[2]))
EOF
}

# median [--int] VALUES...
median() {
	local fmt=%.3f
	[ "$1" != --int ] || { fmt=%.0f; shift; }
	printf '%s\n' "$@" | sort -g | awk -v fmt="$fmt" '{ v[NR] = $1 }
		END { printf fmt, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# A cxlcr verb with --json, timed; its JSON in $WORK/NAME.STEP.json.
verb() { # STEP SERVER SIZE NAME ARGS...
	local step=$1 server=$2 size=$3 name=$4 t0 t1 rc=0
	shift 4
	t0=$(now)
	timeout $VERB_TIMEOUT "$CXLCR" "$@" --json >"$WORK/$name.$step.json" 2>"$WORK/$name.$step.err" || rc=$?
	t1=$(now)
	if [ $rc -ne 0 ]; then
		cat "$WORK/$name.$step.err" >&2
		local log
		log=$(grep -o '(log [^)]*)' "$WORK/$name.$step.err" | head -n1 | sed 's/^(log //; s/)$//')
		if [ -n "$log" ] && [ -f "$log" ]; then
			cp "$log" "$OUT/cr-fail-$name-$step.log"
			echo "--- last lines of $log (copied to bench/out/cr-fail-$name-$step.log):" >&2
			tail -n 15 "$log" >&2
		fi
		die "cxlcr $step of $name failed (exit $rc)"
	fi
	raw "$step" "$server" "$size" "$(ms "$t0" "$t1")" "$WORK/$name.$step.json"
}

# --- cxlcr: run on h0, checkpoint, restore on h1, migrate to h0 -------------------------
bench_cxlcr() { # SERVER BYTES INDEX
	local server=$1 size=$2 name=cr-$1-$3 count port arena addr used
	count=$(((size + VALUE - 1) / VALUE))
	arena=$(server_arena_mb "$server" "$size")
	case $server in redis) port=6379 ;; memcached) port=11211 ;; esac
	need_memory $(((arena << 20) + (256 << 20))) "$server with $((size >> 20)) MiB of values under cxlcr"
	say "$server, $count keys x $VALUE B: cxlcr run --host h0 --arena ${arena}M"
	local t0 t1
	t0=$(now)
	pod_serve "$server" "$size" "$name" "$arena" $port
	addr=$ADDR
	t1=$(now)
	say "   started and answering at $addr:$port in $(ms "$t0" "$t1") ms"
	t0=$(now)
	kv fill "$server" "$addr" $port "$count" --quiet || die "fill of $name failed"
	t1=$(now)
	used=$(used_memory "$server" "$addr" $port)
	"$CXLCR" status "$name" --json >"$WORK/$name.status.json"
	raw fill "$server" "$size" "$(ms "$t0" "$t1")" "$WORK/$name.status.json"
	say "   filled in $(ms "$t0" "$t1") ms; $server reports $((used >> 20)) MiB, arena_used $(($(field "$WORK/$name.status.json" arena_used) >> 20)) MiB"

	# REPEAT rounds of checkpoint, restore on h1, migrate back to h0; the
	# CSV gets the median of each figure, cr.jsonl every round's JSON.
	local r ck rs img m cks=() rss=() sums=() imgs=() mck=() mrs=() mtot=() mimg=()
	for r in $(seq "$REPEAT"); do
		verb checkpoint "$server" "$size" "$name" checkpoint "$name"
		verb restore "$server" "$size" "$name" restore "$name" --host h1
		ck=$(field "$WORK/$name.checkpoint.json" checkpoint_ms)
		rs=$(field "$WORK/$name.restore.json" restore_ms)
		img=$(field "$WORK/$name.checkpoint.json" image_bytes)
		[ "$(status_field "$name" host)" = h1 ] || die "$name is not on h1 after its restore there"
		cks+=("$ck") rss+=("$rs") imgs+=("$img") sums+=("$(awk -v a="$ck" -v b="$rs" 'BEGIN { printf "%.3f", a + b }')")
		say "   [$r/$REPEAT] checkpoint $ck ms + restore on h1 $rs ms, $img bytes of images"
		addr=$(status_field "$name" address)
		check "$server" "$addr" $port "$count" "checkpoint + restore on h1"

		verb migrate "$server" "$size" "$name" migrate "$name" --to h0
		m=$WORK/$name.migrate.json
		[ "$(status_field "$name" host)" = h0 ] || die "$name is not on h0 after its migrate there"
		mck+=("$(field "$m" checkpoint_ms)") mrs+=("$(field "$m" restore_ms)")
		mtot+=("$(field "$m" total_ms)") mimg+=("$(field "$m" image_bytes)")
		say "   [$r/$REPEAT] migrate h1 -> h0: freeze $(field "$m" freeze_ms) ms (dump $(field "$m" dump_ms)), total $(field "$m" total_ms) ms"
		addr=$(status_field "$name" address)
		check "$server" "$addr" $port "$count" "migrate to h0"
	done
	csv_row "$server" "$size" cxlcr "$(median "${cks[@]}")" "$(median "${rss[@]}")" \
		"$(median "${sums[@]}")" "$(median --int "${imgs[@]}")"
	csv_row "$server" "$size" cxlcr-migrate "$(median "${mck[@]}")" "$(median "${mrs[@]}")" \
		"$(median "${mtot[@]}")" "$(median --int "${mimg[@]}")"

	"$CXLCR" stop "$name" >/dev/null || die "cxlcr stop $name failed"
	SERVICES=()
}

# --- plain CRIU: pid 1 of its own PID namespace, images on /var/tmp -------------------
bench_criu() { # SERVER BYTES INDEX
	local server=$1 size=$2 name=plain-$1-$3 count port pid dir t0 t1 dump rest img used
	count=$(((size + VALUE - 1) / VALUE))
	port=$(free_port)
	need_memory $(((size * 16 / 10) + (512 << 20))) "plain $server with $((size >> 20)) MiB of values"
	say "$server, $count keys x $VALUE B: plain, pid 1 of a PID namespace, 127.0.0.1:$port"
	server_cmd "$server" "$size" "$port" 127.0.0.1
	t0=$(now)
	pid=$(plain_spawn "$WORK/$name.log" "${CMD[@]}") || die "cannot start plain $server"
	PLAIN+=("$pid")
	python3 "$KV" wait --proto "$server" --port "$port" --pid "$pid" || die "plain $server does not answer"
	t1=$(now)
	say "   started (pid $pid) and answering in $(ms "$t0" "$t1") ms"
	t0=$(now)
	kv fill "$server" 127.0.0.1 "$port" "$count" --quiet || die "fill of plain $server failed"
	t1=$(now)
	used=$(used_memory "$server" 127.0.0.1 "$port")
	raw fill-plain "$server" "$size" "$(ms "$t0" "$t1")"
	say "   filled in $(ms "$t0" "$t1") ms; $server reports $((used >> 20)) MiB; RSS $(($(awk '/^VmRSS:/ {print $2}' /proc/"$pid"/status) >> 10)) MiB"

	# REPEAT rounds of dump + restore, each of the process the previous
	# round restored; medians in the CSV.
	local r dumps=() rests=() sums=() imgs=()
	for r in $(seq "$REPEAT"); do
		dir=$IMAGES/$name.$r
		mkdir "$dir"
		t0=$(now)
		plain_dump_cmd "$pid" "$dir"
		"${PLAIN_CMD[@]}" || plain_failed "$dir" dump "$name"
		t1=$(now)
		dump=$(ms "$t0" "$t1")
		plain_wait_exit "$pid" 30 || die "plain $server (pid $pid) did not exit after its dump"
		PLAIN=()
		img=$(plain_image_bytes "$dir")
		sync # the images reach the disk before the restore, outside both timings
		t0=$(now)
		plain_restore_cmd "$dir"
		"${PLAIN_CMD[@]}" || plain_failed "$dir" restore "$name"
		t1=$(now)
		rest=$(ms "$t0" "$t1")
		pid=$(cat "$dir/restored.pid")
		PLAIN+=("$pid")
		rm -rf "$dir"
		dumps+=("$dump") rests+=("$rest") imgs+=("$img") sums+=("$(awk -v a="$dump" -v b="$rest" 'BEGIN { printf "%.1f", a + b }')")
		printf '{"step": "criu", "server": "%s", "size_bytes": %s, "wall_ms": %s, "result": {"dump_ms": %s, "restore_ms": %s, "image_bytes": %s}}\n' \
			"$server" "$size" "${sums[-1]}" "$dump" "$rest" "$img" >>"$OUT/cr.jsonl"
		say "   [$r/$REPEAT] criu dump $dump ms + restore $rest ms, $img bytes of images"
		python3 "$KV" wait --proto "$server" --port "$port" --pid "$pid" || die "restored plain $server does not answer"
		check "$server" 127.0.0.1 "$port" "$count" "criu dump + restore"
	done
	csv_row "$server" "$size" criu "$(median "${dumps[@]}")" "$(median "${rests[@]}")" \
		"$(median "${sums[@]}")" "$(median --int "${imgs[@]}")"
	plain_stop "$pid"
	PLAIN=()
}

# --- the run ----------------------------------------------------------------------------------------
echo "server,size_bytes,method,checkpoint_ms,restore_ms,total_ms,image_bytes" >"$OUT/cr.csv"
: >"$OUT/cr.jsonl"
pod_up "$POOL_GB"
say "sizes: ${SIZE_ARGS[*]}; servers: ${SERVERS[*]}; pool ${POOL_GB}G at $CXLCR_POOL; images in $IMAGES"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(awk '/^MemAvailable:/ {printf "%d MiB", $2 / 1024}' /proc/meminfo) available"
say "$($CRIU --version | awk '/^Version/ {print "CRIU " $2}'); $(redis-server --version | awk '{print $1, $2, $3}'); $(memcached -V)"

i=0
for server in "${SERVERS[@]}"; do
	for size in "${SIZES[@]}"; do
		i=$((i + 1))
		bench_cxlcr "$server" "$size" $i
		bench_criu "$server" "$size" $i
	done
done

python3 "$HELP" report --out "$OUT" \
	--header "$($CRIU --version | awk '/^Version/ {print "CRIU " $2}'), $(redis-server --version | awk '{print $3}' | tr -d v=) redis, $(memcached -V); $(nproc) CPUs, kernel $(uname -r); verify: $VERIFY"
