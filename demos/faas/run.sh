#!/usr/bin/env bash
# The FaaS demo: a warm Python function is scaled out onto another pod host
# by remote fork, the way a FaaS platform would, instead of cold-starting it.
#
#   1. formats the demo's emulated pool and brings up a pod of two hosts
#   2. starts the function (demos/faas/function.py, CPython with
#      PYTHONMALLOC=malloc, so its objects are in the arena) on h0 with
#      `cxlcr run --host h0`; it builds DEMO_SIZE of warm state (a catalogue
#      and its index) before it answers: the cold start, timed from the
#      request to the first answer
#   3. shows where its memory lives, and snapshots it (`cxlcr snapshot`)
#   4. records the parent's answers to DEMO_INVOKES invocations
#   5. scales out: demos/faas/faas-scale (C, libcxlcr over TCP with the
#      pod's token) forks DEMO_CHILDREN children onto h1 and times each from
#      the fork request to its first answer
#   6. invokes every child and checks its answers equal the parent's
#   7. stops the children and the function, takes the pod down, and prints
#      cold start against fork, per child
#
# Settings (environment):
#   CXLCR_POOL     the pool (default /dev/shm/cxlcr-demo/pool, the demos' own)
#   DEMO_SIZE      warm state to build (default 256M; 16M for a quick run)
#   DEMO_CHILDREN  children to fork (default 2)
#   DEMO_INVOKES   invocations compared per child (default 300)
#   DEMO_OUT       logs and JSON results (default demos/faas/out)
# Exits non-zero on any failure, or if any answer differs; the function,
# its children and the pod are gone afterwards either way.
set -euo pipefail

DEMO=faas
NAME=demo-faas
# shellcheck source=demos/lib/demo.sh
. "$(dirname "$0")/../lib/demo.sh"

PORT=8080
FUNCTION=$ROOT/demos/faas/function.py
CLIENT=$ROOT/demos/faas/client.py
SCALE=$ROOT/build/demos/faas-scale
[ -x "$SCALE" ] || die "$SCALE is not built (run make)"
# The interpreter itself, not a wrapper such as a pyenv shim, which would
# start it with exec (see below).
PY=$(python3 -c 'import sys; print(sys.executable)')

DEMO_SIZE=${DEMO_SIZE:-256M}
SIZE_BYTES=$(size_bytes "$DEMO_SIZE")
CHILDREN=${DEMO_CHILDREN:-2}
INVOKES=${DEMO_INVOKES:-300}
if ! [[ $CHILDREN =~ ^[1-9][0-9]?$ ]] || [ "$CHILDREN" -gt 64 ]; then die "DEMO_CHILDREN: 1 to 64"; fi
[[ $INVOKES =~ ^[1-9][0-9]*$ ]] || die "DEMO_INVOKES: a number of invocations"
# Python objects take about DEMO_SIZE of arena (function.py sizes them so).
ARENA_MB=$(((SIZE_BYTES * 3 / 2 >> 20) + 256))
ARENA_MB=$(((ARENA_MB + 63) / 64 * 64))
POOL_GB=$(((ARENA_MB * 2 >> 10) + 2)) # the arena, its snapshot, the children's
[ "$POOL_GB" -ge 8 ] || POOL_GB=8
needs_memory $((SIZE_BYTES * 3))

KIDS=() # children not yet stopped
faas_cleanup() {
	local rc=$? k
	set +e
	for k in "${KIDS[@]}"; do "$CXLCR" stop "$k" >/dev/null 2>&1; done
	(exit $rc)
	demo_cleanup
}
trap faas_cleanup EXIT

# field FILE KEY...: a (nested) field of a JSON file; numbers index lists.
field() {
	python3 - "$@" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)
EOF
}

# --- 1. the pool and the pod ----------------------------------------------------------
demo_pool $POOL_GB
# A pod service gets the environment of its host's daemon, and `cxlcr run
# --host` has no way to pass one variable: PYTHONMALLOC=malloc goes to the
# daemons (no other service of this pod minds it). `env VAR=... python3`
# as the command would not do: a pod service that execs loses its arena
# (the preload, pid 1 in the service's namespace, cannot claim it again).
daemons_use_plain_malloc() {
	local d pool
	pool=$(realpath "$CXLCR_POOL")
	for d in /run/cxlcr/pod*; do
		[ "$(cat "$d/pool" 2>/dev/null)" = "$pool" ] || continue
		POD_DIR=$d
		# (h0.pid says "PID START": pod_pid_write())
		tr '\0' '\n' <"/proc/$(awk '{ print $1 }' "$d/h0.pid")/environ" 2>/dev/null | grep -qx PYTHONMALLOC=malloc
		return
	done
	return 1
}
POD_DIR=
PYTHONMALLOC=malloc demo_pod_up
if ! daemons_use_plain_malloc; then
	info "the pod was up already, without PYTHONMALLOC=malloc in its daemons: bringing it up again"
	"$CXLCR" pod down >/dev/null
	PYTHONMALLOC=malloc demo_pod_up
	daemons_use_plain_malloc || die "the pod's daemons do not have PYTHONMALLOC=malloc"
fi
"$CXLCR" pod up --hosts 2 --json >"$OUT/pod.json"
H0_API=$(python3 -c 'import json, sys
print(next(h["address"] for h in json.load(open(sys.argv[1]))["hosts"] if h["host"] == "h0"))' "$OUT/pod.json")
TOKEN_FILE=$POD_DIR/api-token
[ -r "$TOKEN_FILE" ] || die "no API token in $TOKEN_FILE"

# --- 2. the function, cold ------------------------------------------------------------
step "Starting the function on h0: $(basename "$PY") function.py --size $DEMO_SIZE (arena ${ARENA_MB} MiB)"
t0=$(python3 "$CLIENT" now)
demo_run "${ARENA_MB}M" -- "$PY" "$FUNCTION" --port $PORT --size "$SIZE_BYTES"
COLD_MS=$(python3 "$CLIENT" wait --host "$ADDR" --port $PORT --since "$t0" --pid "$(service_pid)") ||
	die "the function did not answer at $ADDR:$PORT"
info "$(grep -m1 '^function:' "$LOG")"
info "cold start: ${COLD_MS} ms from \`cxlcr run\` to the first answer (start + warm-up)"

# --- 3. where its memory lives, and a snapshot ----------------------------------------------
memory_report "arena in use (Python objects)" "$(status_of arena_used)"
ARENA_USED=$(status_of arena_used)
step "Snapshotting the warm function (cxlcr snapshot $NAME)"
"$CXLCR" snapshot "$NAME" --json >"$OUT/snapshot.json" 2>"$OUT/snapshot.err" ||
	die "cxlcr snapshot failed: $(cat "$OUT/snapshot.err")"
info "parent frozen $(printf %.1f "$(field "$OUT/snapshot.json" freeze_ms)") ms (heap copy $(printf %.1f "$(field "$OUT/snapshot.json" snapshot_ms)") ms)," \
	"$(mib "$(field "$OUT/snapshot.json" snapshot_bytes)") MiB of heap pages in the snapshot," \
	"$(mib "$(field "$OUT/snapshot.json" image_bytes)") MiB of CRIU images"

# --- 4. the parent's answers ---------------------------------------------------------------
step "Invoking the parent $INVOKES times"
python3 "$CLIENT" invoke --host "$ADDR" --port $PORT --count "$INVOKES" >"$OUT/parent.answers" ||
	die "invoking the parent failed"
info "$(head -n1 "$OUT/parent.answers")"
info "... $(wc -l <"$OUT/parent.answers") answers in $OUT/parent.answers"

# --- 5. scale out: fork through the API, time each child to its first answer --------------------
step "Scaling out: faas-scale forks $CHILDREN children onto h1 (libcxlcr, tcp:$H0_API:7390 with the pod's token)"
"$SCALE" --api "tcp:$H0_API:7390" --token-file "$TOKEN_FILE" --service "$NAME" --to h1 \
	--port $PORT --count "$CHILDREN" >"$OUT/scale.json" 2>"$OUT/scale.err" || {
	# Children it made are services: find them, so that they are stopped.
	mapfile -t KIDS < <("$CXLCR" ps --json | python3 -c 'import json, sys
for s in json.load(sys.stdin)["services"]:
    if s["name"].startswith(sys.argv[1] + "."):
        print(s["name"])' "$NAME")
	die "faas-scale failed: $(cat "$OUT/scale.err")"
}
mapfile -t KIDS < <(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["children"]:
    print(c["name"])' "$OUT/scale.json")
[ ${#KIDS[@]} -eq "$CHILDREN" ] || die "faas-scale made ${#KIDS[@]} children, not $CHILDREN"
info "fork request answered in $(printf %.1f "$(field "$OUT/scale.json" request_ms)") ms (all children restored concurrently in $(printf %.1f "$(field "$OUT/scale.json" restore_ms)") ms)"

# --- 6. every child answers as its parent -------------------------------------------------------
FORKS=()
probe=$(head -n1 "$OUT/parent.answers" | cut -d' ' -f2-)
for i in "${!KIDS[@]}"; do
	kid=${KIDS[$i]}
	addr=$(field "$OUT/scale.json" children "$i" address)
	first=$(field "$OUT/scale.json" children "$i" first_answer_ms)
	[ "$(field "$OUT/scale.json" children "$i" host)" = h1 ] || die "$kid does not run on h1"
	[ "$addr" != "$ADDR" ] || die "$kid has its parent's address"
	[ "$(field "$OUT/scale.json" children "$i" answer)" = "$probe" ] ||
		die "$kid's first answer differs from the parent's: $(field "$OUT/scale.json" children "$i" answer)"
	step "Invoking $kid at $addr on h1 $INVOKES times"
	python3 "$CLIENT" invoke --host "$addr" --port $PORT --count "$INVOKES" >"$OUT/$kid.answers" ||
		die "invoking $kid failed"
	if ! cmp -s "$OUT/parent.answers" "$OUT/$kid.answers"; then
		diff "$OUT/parent.answers" "$OUT/$kid.answers" | head -n 6 | indent >&2
		die "$kid's answers differ from its parent's"
	fi
	"$CXLCR" status "$kid" --json >"$OUT/$kid.status.json" || die "cxlcr status $kid failed"
	anon_kb=$(field "$OUT/$kid.status.json" rss_anon_kb)
	info "all $INVOKES answers equal the parent's; first answer $(printf %.1f "$first") ms after the fork request"
	info "$kid's private memory: RssAnon $(mib $((anon_kb * 1024))) MiB, the rest read from the pool" \
		"(CPython writes reference counts into the objects it reads, so it copies those pages)"
	FORKS+=("$(printf '%-13s at %-11s first answer %8.1f ms  (cold start %8.1f ms: %5.1fx faster)' \
		"$kid" "$addr" "$first" "$COLD_MS" "$(python3 -c "print($COLD_MS / $first)")")")
done

# --- 7. stop -------------------------------------------------------------------------------------
step "Stopping the children"
for kid in "${KIDS[@]}"; do "$CXLCR" stop "$kid" | indent; done
KIDS=()
demo_stop

step "Summary"
info "function.py with $DEMO_SIZE of warm state ($(mib "$ARENA_USED") MiB of Python objects in arena '$NAME')"
info "cold start on h0 (cxlcr run + warm-up, to the first answer): $COLD_MS ms"
for f in "${FORKS[@]}"; do info "$f"; done
info "every child gave the parent's $INVOKES answers"
echo
echo "faas demo: OK"
