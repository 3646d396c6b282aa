# shellcheck shell=bash
# Shared part of the demos (demos/*/run.sh source it; not run on its own).
#
# Before sourcing, a demo sets DEMO (redis, memcached) and NAME (its
# service's name in the pool). It gets:
#   ROOT CXLCR KV          the repository, build/cxlcr, tests/lib/kvclient.py
#   OUT                    $DEMO_OUT or demos/$DEMO/out: logs and JSON of the run
#   step / info / die      progress lines (die: one FAILED line, exit 1)
#   size_bytes SIZE        "1G", "200M", "64MiB" -> bytes
#   now / since T          wall clock in microseconds; seconds (x.y) since T
#   mib BYTES              BYTES in MiB (x.y)
#   jget FILE KEY          a field of a JSON object in FILE
#   demo_pool GIB          formats the demo's pool (see there)
#   demo_pod_up            cxlcr pod up --hosts 2
#   demo_run ARENA -- CMD  cxlcr run --host h0 --name $NAME, sets ADDR
#   show_ps_status         cxlcr ps and cxlcr status $NAME
#   memory_report LABEL BYTES   where the service's memory lives, checked
#   migrate TO             cxlcr migrate $NAME --to TO --json, checked and printed
#   MIGRATES               one summary line per migrate done
# The EXIT trap stops the service and takes the pod down, whatever the
# outcome; on failure it shows the end of the service's log.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
CXLCR=$ROOT/build/cxlcr
# shellcheck disable=SC2034 # used by the demos
KV=$ROOT/tests/lib/kvclient.py
OUT=${DEMO_OUT:-$ROOT/demos/$DEMO/out}
export CXLCR_POOL=${CXLCR_POOL:-/dev/shm/cxlcr-demo/pool}
LOG=$OUT/$DEMO.log        # the service's stdout and stderr
STARTED=0                 # the service runs (stop it on exit)
RAN=0                     # the service was started (its log is of this run)
POD_UP=0                  # we brought the pod up (take it down on exit)
ADDR=                     # the service's address (cxlcr status)
MIGRATES=()

step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
	DIED=1
	printf '\n%s demo: FAILED: %s\n' "$DEMO" "$*" >&2
	exit 1
}
indent() { sed 's/^/    /'; }

need_cmds() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || die "$c is not installed (run make deps)"
	done
}
need_cmds python3 ip iptables nsenter criu
[ -x "$CXLCR" ] && [ -x "$ROOT/build/cxlcrd" ] && [ -f "$ROOT/build/libcxlcr-preload.so" ] ||
	die "cxlcr is not built (run make)"
[ -f "$ROOT/build/criu/cxlcr_criu.so" ] || die "the CRIU plugin is not built (build/criu/cxlcr_criu.so; run make)"
[ "$(id -u)" -eq 0 ] || die "the demo makes network namespaces and runs CRIU: run it as root"

demo_cleanup() {
	local rc=$?
	trap - EXIT ERR
	set +e
	if [ $rc -eq 130 ]; then
		printf '\n%s demo: interrupted; stopping %s and taking the pod down\n' "$DEMO" "$NAME" >&2
	elif [ $rc -ne 0 ] && [ "$DIED" = 0 ]; then
		printf '\n%s demo: FAILED: %s (exit status %s)\n' "$DEMO" "${FAILED_AT:-an unexpected error}" $rc >&2
	fi
	if [ $STARTED = 1 ]; then
		"$CXLCR" stop "$NAME" >/dev/null 2>&1
	fi
	if [ $POD_UP = 1 ]; then
		"$CXLCR" pod down >/dev/null 2>&1 ||
			printf '%s demo: could not take the pod down: CXLCR_POOL=%s %s pod down\n' \
				"$DEMO" "$CXLCR_POOL" "$CXLCR" >&2
	fi
	if [ $rc -ne 0 ] && [ $RAN = 1 ] && [ -s "$LOG" ]; then
		echo "--- last lines of $LOG:" >&2
		tail -n 10 "$LOG" >&2
	fi
	exit $rc
}
# A command that fails outside of die (set -e ends the demo): say which.
DIED=0
FAILED_AT=
set -o errtrace
trap 'FAILED_AT="line $LINENO of $(basename "${BASH_SOURCE[0]}"): $BASH_COMMAND"' ERR
trap demo_cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$OUT"

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

# now: the wall clock in microseconds; since T: seconds (x.y) since now was T.
now() { echo "${EPOCHREALTIME/[.,]/}"; }
since() {
	local d=$(($(now) - $1))
	printf '%d.%d' $((d / 1000000)) $((d % 1000000 / 100000))
}

# mib BYTES: BYTES in MiB, one decimal.
mib() {
	local t=$((($1 * 10 + (1 << 19)) >> 20))
	printf '%d.%d' $((t / 10)) $((t % 10))
}

jget() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# A field of `cxlcr status $NAME --json`.
status_of() {
	"$CXLCR" status "$NAME" --json >"$OUT/status.json" || die "cxlcr status $NAME failed"
	jget "$OUT/status.json" "$1"
}

# service_pid: this machine's pid of the service (its status pid is its
# host's own: each emulated host has a pid namespace of its own).
service_pid() {
	python3 "$ROOT/tests/lib/hostpid.py" machine "$(status_of host)" "$(status_of pid)" ||
		die "$NAME's process ($(status_of pid) on $(status_of host)) is not found on this machine"
}

# needs_memory BYTES: there is that much memory available.
needs_memory() {
	local avail_mb
	avail_mb=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
	[ "$avail_mb" -gt $(($1 >> 20)) ] ||
		die "DEMO_SIZE=$DEMO_SIZE needs about $(($1 >> 20)) MiB of memory, $avail_mb MiB available"
}

# demo_pool GIB: the demo's pool, a sparse file on tmpfs standing in for CXL
# memory. A pool that already exists is formatted over only if none of its
# services is in use (running, or checkpointed and waiting for a restore).
demo_pool() {
	step "Formatting the emulated pool $CXLCR_POOL (${1} GiB, sparse)"
	case $CXLCR_POOL in /dev/dax*) ;; *) mkdir -p "$(dirname "$CXLCR_POOL")" ;; esac
	if ! "$CXLCR" pool format --size "${1}G" 2>"$OUT/format.err" >"$OUT/format.out"; then
		"$CXLCR" ps --json >"$OUT/ps.json" 2>/dev/null || die "$(cat "$OUT/format.err")"
		local live
		live=$(python3 -c 'import json, sys
print(", ".join("%s (%s%s)" % (s["name"], s["state"], " on " + s["host"] if s.get("host") else "")
                for s in json.load(open(sys.argv[1]))["services"] if s["state"] != "exited"))' "$OUT/ps.json")
		[ -z "$live" ] || die "pool $CXLCR_POOL has services in use: $live; stop them (or \`CXLCR_POOL=$CXLCR_POOL $CXLCR pod down\`), or set CXLCR_POOL to another pool"
		info "the pool holds only arenas of services that have exited: formatting over them"
		"$CXLCR" pool format --size "${1}G" --force >"$OUT/format.out" 2>"$OUT/format.err" ||
			die "$(cat "$OUT/format.err")"
	fi
	indent <"$OUT/format.out"
}

demo_pod_up() {
	step "Bringing up an emulated pod of 2 hosts on this pool"
	POD_UP=1
	"$CXLCR" pod up --hosts 2 >"$OUT/pod.out" 2>"$OUT/pod.err" || die "cxlcr pod up failed: $(cat "$OUT/pod.err")"
	indent <"$OUT/pod.out"
	info "(each host: its own network and UTS namespaces, an address on the pod bridge, a cxlcrd)"
}

# demo_run ARENA -- CMD...: starts the service on h0 with its heap in a new
# arena of ARENA bytes (e.g. 2048M); sets ADDR.
demo_run() {
	local arena=$1
	shift
	[ "$1" = -- ] && shift
	: >"$LOG"
	STARTED=1 RAN=1
	"$CXLCR" run --host h0 --name "$NAME" --arena "$arena" --log "$LOG" -- "$@" \
		>"$OUT/run.out" 2>"$OUT/run.err" || die "cxlcr run failed: $(cat "$OUT/run.err")"
	indent <"$OUT/run.out"
	ADDR=$(status_of address)
	[ "$(status_of host)" = h0 ] || die "$NAME does not run on h0"
}

show_ps_status() {
	step "cxlcr ps"
	"$CXLCR" ps | indent
	step "cxlcr status $NAME"
	"$CXLCR" status "$NAME" | indent
}

# memory_report LABEL BYTES: how the service's memory splits between the
# arena (RssShmem: pool pages) and private memory (RssAnon). LABEL, BYTES:
# what the server itself says it holds. At least 95% must be in the arena
# (or, for a small heap, at most ANON_FIXED_KB private: stacks, the data of
# the libraries, allocations made before the arena was ready), and no
# allocation may have fallen back to glibc.
ANON_FIXED_KB=4096
memory_report() {
	step "Where the memory lives"
	"$CXLCR" status "$NAME" --json >"$OUT/status.json" || die "cxlcr status $NAME failed"
	python3 - "$OUT/status.json" "$1" "$2" "$CXLCR_POOL" $ANON_FIXED_KB >"$OUT/memory.txt" <<'EOF'
import json, os, stat, sys
s = json.load(open(sys.argv[1]))
label, used = sys.argv[2], int(sys.argv[3])
st = os.stat(sys.argv[4])
shmem, anon = s["rss_shmem_kb"] / 1024, s["rss_anon_kb"] / 1024
share = shmem / (shmem + anon)
print("%-32s %9.1f MiB" % (label, used / 2**20))
print("%-32s %9.1f MiB of %.0f MiB" % ("arena in use (cxlcr)", s["arena_used"] / 2**20,
                                       s["arena_size"] / 2**20))
print("%-32s %9.1f MiB" % ("RssShmem: in the pool arena", shmem))
print("%-32s %9.1f MiB" % ("RssAnon: private memory", anon))
if stat.S_ISREG(st.st_mode):
    print("%-32s %9.1f MiB" % ("pool pages held (tmpfs)", st.st_blocks * 512 / 2**20))
print("%-32s %9.2f %%" % ("share of memory in the arena", 100 * share))
print("allocations that fell back to glibc: %d" % s["glibc_fallbacks"])
print("SHARE %.1f OK %d FALLBACKS %d" % (100 * share, share >= 0.95 or s["rss_anon_kb"] <= int(sys.argv[5]),
                                         s["glibc_fallbacks"]))
EOF
	grep -v '^SHARE' "$OUT/memory.txt" | indent
	local ok fallbacks
	read -r _ SHARE_PCT _ ok _ fallbacks < <(grep '^SHARE' "$OUT/memory.txt")
	[ "$ok" = 1 ] ||
		die "only $SHARE_PCT% of the service's resident memory is in the arena (want >= 95%, or private memory <= $((ANON_FIXED_KB >> 10)) MiB)"
	[ "$fallbacks" -eq 0 ] || die "$fallbacks allocations fell back to glibc"
}

# migrate TO: moves the service to host TO and checks where it is now: on
# TO, running, a new process, the arena's owner epoch moved on, the same
# address. The heap stays in the pool: the images carry only the rest.
migrate() {
	local to=$1 from pid mpid epoch n=$((${#MIGRATES[@]} + 1))
	from=$(status_of host)
	pid=$(status_of pid)
	mpid=$(service_pid)
	epoch=$(status_of owner_epoch)
	local used
	used=$(status_of arena_used)
	step "Migrating $NAME: $from -> $to (cxlcr migrate $NAME --to $to)"
	"$CXLCR" migrate "$NAME" --to "$to" --json >"$OUT/migrate-$n.json" 2>"$OUT/migrate.err" ||
		die "cxlcr migrate $NAME --to $to failed: $(cat "$OUT/migrate.err")"
	local line
	line=$(python3 - "$OUT/migrate-$n.json" "$used" "$from" "$to" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
used = int(sys.argv[2])
for k in ("freeze_ms", "checkpoint_ms", "restore_ms", "total_ms", "image_bytes"):
    if k not in j:
        sys.exit("cxlcr migrate --json has no %s: %s" % (k, j))
if j["image_bytes"] >= min(64 << 20, used // 2):
    sys.exit("the images are %d bytes for a heap of %d bytes: the heap was copied"
             % (j["image_bytes"], used))
print("%s -> %s: frozen %.1f ms (checkpoint %.1f ms + restore %.1f ms), total %.1f ms, "
      "images %.2f MiB for %.0f MiB of heap" % (sys.argv[3], sys.argv[4], j["freeze_ms"],
      j["checkpoint_ms"], j["restore_ms"], j["total_ms"], j["image_bytes"] / 2**20, used / 2**20))
EOF
	) || die "$line"
	info "$line"
	MIGRATES+=("$line")
	[ "$(status_of host)" = "$to" ] || die "after the migrate, $NAME is not on $to"
	[ "$(status_of state)" = running ] || die "after the migrate, $NAME is not running"
	local pid2 epoch2
	pid2=$(status_of pid)
	epoch2=$(status_of owner_epoch)
	# (Pids are each host's own, the same number on another host another
	# process: this machine's pids tell them apart.)
	[ "$(service_pid)" != "$mpid" ] || die "after the migrate, $NAME is still process $pid"
	[ "$epoch2" -gt "$epoch" ] || die "the arena's owner epoch did not move on ($epoch -> $epoch2)"
	[ "$(status_of address)" = "$ADDR" ] || die "the service's address changed: $(status_of address), was $ADDR"
	info "now on $to: pid $pid2 (was $pid on $from), arena owner epoch $epoch -> $epoch2, address $ADDR kept"
}

# rss_line: the service's memory now, in one line.
rss_line() {
	"$CXLCR" status "$NAME" --json >"$OUT/status.json" || die "cxlcr status $NAME failed"
	python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
import os, stat
st = os.stat(sys.argv[2])
pool = ", pool pages held %.1f MiB" % (st.st_blocks * 512 / 2**20) if stat.S_ISREG(st.st_mode) else ""
print("memory on %s: RssShmem %.1f MiB (arena), RssAnon %.1f MiB, arena in use %.1f MiB%s"
      % (s["host"], s["rss_shmem_kb"] / 1024, s["rss_anon_kb"] / 1024, s["arena_used"] / 2**20, pool))' \
		"$OUT/status.json" "$CXLCR_POOL"
}

# demo_stop: stops the service (its arena is freed) and takes the pod down.
demo_stop() {
	step "Stopping $NAME and taking the pod down"
	"$CXLCR" stop "$NAME" | indent
	STARTED=0
	"$CXLCR" status "$NAME" >/dev/null 2>&1 && die "the arena of $NAME is still in the pool"
	"$CXLCR" pod down | indent
	POD_UP=0
	info "cxlcr ps now lists $("$CXLCR" ps --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["services"]))') services"
}
