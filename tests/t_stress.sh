#!/usr/bin/env bash
# The pool's shared metadata under load for a while (issue 12): two Redis
# parents (on h0 and h1) each rewrite their keys, snapshot and fork a child
# to a random host of three, over and over, at the same time; a third worker
# checks and removes older children meanwhile, stopping most and killing
# some (their borrows are then reaped by the next verb or daemon that
# looks). Each parent's first child lives through every generation. Leases
# are short (CXLCR_LEASE_MS), so the daemons watch each other's heartbeats
# and reap throughout.
#
# At the end every child still alive must hold the values of the
# generation it was forked from; then all children go, and the pool must
# pass `cxlcr pool check` (no overlap, no entry left half done, no snapshot
# or extent leaked, no tombstone left) with no child region, no borrow, and
# one snapshot per parent left.
#
#   STRESS_SECONDS   how long the workers run (default 20; `make stress`
#                    runs it for 300)
#   STRESS_KIDS      children of a parent kept alive at most (default 4)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

SECONDS_TO_RUN=${STRESS_SECONDS:-20}
KIDS=${STRESS_KIDS:-4}
COUNT=1500
SIZE=400
PORT=6379
HOSTS=(h0 h1 h2)
export CXLCR_LEASE_MS=2000

new_pool 16G
pod_up 3
W=$POOL_DIR/stress
mkdir "$W"

say "two parents: pa on h0, pb on h1; $COUNT keys each"
pod_redis pa h0 256M
echo "$addr" >"$W/pa.addr"
pod_redis pb h1 256M
echo "$addr" >"$W/pb.addr"

# seed_of PARENT GENERATION: the seed of a parent's values at a generation.
seed_of() { if [ "$1" = pa ]; then echo $((1000 + $2)); else echo $((2000 + $2)); fi; }
verify() { python3 "$KV" verify --host "$1" --port $PORT --count $COUNT --size $SIZE --seed "$2" --quiet; }
json_of() { python3 -c 'import json, sys; c = json.load(sys.stdin)["children"][0]; print(c["name"], c["address"], c["host"])'; }
failed() { echo "$*" >>"$W/failures"; }
stamp() { date +%s.%N; }

# The children, one line each: "name address host seed parent generation";
# lines are added by the parents' workers and removed by the remover, under
# a lock.
touch "$W/kids" "$W/keep"
locked() { flock "$W/kids.lock" "$@"; }
add_kid() { locked sh -c 'echo "$1" >>"$2"' _ "$1" "$W/kids"; }

# parent_worker NAME: rewrite, snapshot, fork, until the deadline.
parent_worker() {
	set +e
	local p=$1 paddr gen=0 out line
	paddr=$(cat "$W/$p.addr")
	while [ "$(date +%s)" -lt "$DEADLINE" ] && [ ! -s "$W/failures" ]; do
		gen=$((gen + 1))
		python3 "$KV" fill --host "$paddr" --port $PORT --count $COUNT --size $SIZE --seed "$(seed_of $p $gen)" \
			>/dev/null || { failed "$p: fill of generation $gen failed"; return; }
		"$CXLCR" snapshot "$p" >/dev/null 2>"$W/$p.err" ||
			{ failed "$p: snapshot of generation $gen failed: $(cat "$W/$p.err")"; return; }
		local to=${HOSTS[$((RANDOM % 3))]}
		out=$("$CXLCR" fork "$p" --to "$to" --json 2>"$W/$p.err") ||
			{ failed "$p: fork of generation $gen to $to failed: $(cat "$W/$p.err")"; return; }
		read -r name addr host < <(echo "$out" | json_of)
		line="$name $addr $host $(seed_of $p $gen) $p $gen"
		if [ $gen -eq 1 ]; then
			echo "$line" >>"$W/keep"     # lives through every generation
		else
			add_kid "$line"
		fi
		echo "$gen" >"$W/$p.generations"
	done
}

# remover: while the parents work, takes the oldest child of the list when a
# parent has more than KIDS, checks its values and stops it (every third
# one is killed first: its borrow is left for a reaper).
remover() {
	set +e
	local n=0 line name addr host seed p gen pid
	while [ "$(date +%s)" -lt "$DEADLINE" ] && [ ! -s "$W/failures" ]; do
		line=$(locked sh -c '
			for p in pa pb; do
				if [ "$(grep -c " $p [0-9]*$" "$1")" -gt "$2" ]; then
					l=$(grep -m 1 " $p [0-9]*$" "$1")
					grep -vxF "$l" "$1" >"$1.new" || true
					mv "$1.new" "$1"
					echo "$l"
					exit 0
				fi
			done' _ "$W/kids" "$KIDS")
		if [ -z "$line" ]; then
			python3 -c 'import time; time.sleep(0.2)'  # nothing to remove yet: let the parents fork
			continue
		fi
		read -r name addr host seed p gen <<<"$line"
		verify "$addr" "$seed" || { failed "$name (of $p, generation $gen, on $host) lost its values"; return; }
		n=$((n + 1))
		if [ $((n % 3)) -eq 0 ]; then
			# (its status pid is its host's own: $host runs it)
			on "$host" kill -KILL "$(status_field "$name" pid)" 2>/dev/null || true
			echo killed >>"$W/removed"
		else
			echo stopped >>"$W/removed"
		fi
		"$CXLCR" stop "$name" >/dev/null 2>"$W/remover.err" ||
			{ failed "stop of $name failed: $(cat "$W/remover.err")"; return; }
	done
}

DEADLINE=$(($(date +%s) + SECONDS_TO_RUN))
say "workers run for $SECONDS_TO_RUN s (at most $KIDS children of a parent besides its first)"
start=$(stamp)
parent_worker pa >"$W/pa.log" 2>&1 &
wa=$!
parent_worker pb >"$W/pb.log" 2>&1 &
wb=$!
remover >"$W/remover.log" 2>&1 &
wr=$!
wait $wa $wb $wr || true
took=$(python3 -c "print('%.0f' % ($(stamp) - $start))")
if [ -s "$W/failures" ]; then
	cat "$W"/*.log >&2 || true
	die "$(head -3 "$W/failures")"
fi
ga=$(cat "$W/pa.generations" 2>/dev/null || echo 0)
gb=$(cat "$W/pb.generations" 2>/dev/null || echo 0)
removed=$(wc -l <"$W/removed" 2>/dev/null || echo 0)
killed=$(grep -c killed "$W/removed" 2>/dev/null || true)
[ "$ga" -ge 3 ] && [ "$gb" -ge 3 ] || die "too little was done: $ga and $gb generations"
say "$took s: $ga + $gb generations (a snapshot and a fork each), $removed children removed ($killed killed)"

say "every child still alive holds the values of its generation"
alive=0
while read -r name addr host seed p gen; do
	verify "$addr" "$seed" || die "$name (of $p, generation $gen of $([ $p = pa ] && echo $ga || echo $gb), on $host) lost its values"
	alive=$((alive + 1))
done < <(cat "$W/keep" "$W/kids")
ok "$alive children hold their values (the first of each parent across $ga and $gb newer snapshots)"

check() { "$CXLCR" pool check --json >"$W/check.json" || die "pool check failed: $(cat "$W/check.json")"; }
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$W/check.json" "$1"; }
check
ok "pool check with $alive children: $(field regions) regions, $(field snapshots) snapshots, $(field borrows) borrows"

while read -r name _; do
	"$CXLCR" stop "$name" >/dev/null || die "cxlcr stop $name failed"
done < <(cat "$W/keep" "$W/kids")
# The killed children's borrows go once a reaper has seen them dead: the
# daemons reap every quarter lease. Bounded: five leases.
for _ in $(seq 100); do
	check
	[ "$(field borrows)" -eq 0 ] && break
	python3 -c 'import time; time.sleep(0.1)'  # polling the catalog, bounded
done
kinds() { python3 "$ROOT/tests/lib/poolimg.py" kind "$CXLCR_POOL" "$1"; }
[ "$(kinds 5)" -eq 0 ] || die "$(kinds 5) child regions are left after every child was stopped"
[ "$(field borrows)" -eq 0 ] || die "$(field borrows) borrows are left after every child was stopped"
# One published snapshot per parent; older ones may live on, held by it
# (incremental snapshots share their pages), and the check found none
# that nothing names or holds.
[ "$(field published)" -eq 2 ] || die "$(field published) snapshots are published, not one per parent"
images=$(kinds 2)
[ "$images" -le 2 ] || die "$images image sets are left for two parents"
ok "all children gone: pool check passed, no child region, no borrow, 2 snapshots published ($(field snapshots) in all, $(field holds) held as bases), $images image set(s), $(field regions) regions in all"
echo "STRESS seconds=$took generations=$((ga + gb)) forks=$((ga + gb)) removed=$removed killed=$killed alive_at_end=$alive regions_at_end=$(field regions)"
