#!/usr/bin/env bash
# Copy-mode fork children (fork --mode copy, the only mode on a devdax
# pool) with real Redis on an emulated pod: each child's heap is its own
# anonymous memory, filled by its pager from the snapshot in the pool: the
# hot pages before it runs and the rest while it runs (the default), all
# before it runs (--fetch eager) or all on its faults (--fetch lazy). Every key is
# in each child; a child's writes reach neither its parent, nor a sibling,
# nor the snapshot (a later child of it still reads the old values); a
# child owns its whole heap (RssAnon); a pager killed takes its child with
# it, with one line in status, and the parent and the other children go on.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

COUNT=10000
SIZE=1000
TYPES=strings,hashes,lists,sets,zsets
PORT=6379

json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
redis_at() { redis-cli -h "$1" -p $PORT "${@:2}"; }
kids_of() { python3 -c '
import json, sys
for c in json.load(sys.stdin)["children"]:
    print(c["name"], c["address"], c["pid"])'; }
verify() { python3 "$KV" verify --host "$1" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
	--seed 5 --quiet; }
# The pid of the pager of child pid $1: the process that traces it. The
# children run on h1, and their pids are h1's own: looked at there.
pager_of() { on h1 awk '/^TracerPid:/ { print $2 }' "/proc/$1/status"; }
rss_anon() { on h1 awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }
# The line the pager of child $1 (pid $2) logged on h1 when it ended.
pager_end() {
	local l
	for _ in $(seq 100); do
		l=$("$CXLCR" pod logs h1 pager | grep " $1 (pid $2): ended " | tail -n 1) && [ -n "$l" ] && {
			echo "$l"
			return 0
		}
		sleep 0.1 # polling a condition, bounded: not a synchronisation
	done
	return 1
}

new_pool 8G
# The hosts' pagers kept on one CPU (cxlcrd's pager_cpus, here through its
# environment, as `pod up` passes it on): the first this test may use.
PAGER_CPU=$(awk '/^Cpus_allowed_list:/ { split($2, a, /[-,]/); print a[1] }' /proc/self/status)
export CXLCR_PAGER_CPUS=$PAGER_CPU
pod_up 2

say "cxlcr run --host h0 redis-server, $COUNT keys"
pod_redis redis h0 1G
parent=$addr
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5
"$CXLCR" snapshot redis >/dev/null || die "cxlcr snapshot failed"

# --- two copy-mode children, their pages installed before they run
out=$("$CXLCR" fork redis --to h1 --count 2 --mode copy --json) || die "cxlcr fork --mode copy failed"
[ "$(echo "$out" | json_field mode)" = copy ] || die "fork --mode copy made children of mode $(echo "$out" | json_field mode)"
mapfile -t kids < <(echo "$out" | kids_of)
[ ${#kids[@]} -eq 2 ] || die "fork made ${#kids[@]} children, not 2"
for k in "${kids[@]}"; do
	read -r name addr pid <<<"$k"
	SERVICES+=("$name")
	[ "$(status_field "$name" state)" = running ] || die "$name is not running"
	"$CXLCR" status "$name" | grep -q "copy mode" || die "status of $name does not say copy mode"
	[ "$(pager_of "$pid")" -gt 0 ] || die "$name (pid $pid) has no pager tracing it"
	cpus=$(on h1 sh -c 'cat /proc/$1/task/*/status' sh "$(pager_of "$pid")" | awk '/^Cpus_allowed_list:/ { print $2 }' | sort -u)
	[ "$cpus" = "$PAGER_CPU" ] || die "the pager of $name runs on CPUs '$cpus', not on pager_cpus $PAGER_CPU"
	on h1 grep -q "/dev/shm" "/proc/$pid/maps" && die "$name maps the pool: $(on h1 grep /dev/shm "/proc/$pid/maps" | head -1)"
	verify "$addr" || die "$name does not hold its parent's values"
	ok "$name (copy mode, maps nothing of the pool, its pager on CPU $PAGER_CPU) holds every value of its parent"
done
read -r kid1 addr1 pid1 <<<"${kids[0]}"
read -r kid2 addr2 pid2 <<<"${kids[1]}"

# A copy owns its heap: its RssAnon is at least what the parent's heap holds.
anon=$(status_field "$kid1" rss_anon_kb)
used=$(status_field redis arena_used)
python3 -c "import sys; a, u = $anon * 1024, $used; print('copy-mode child RssAnon %.1f MiB, parent heap used %.1f MiB' % (a / 2**20, u / 2**20)); sys.exit(0 if a >= 0.9 * u else 1)" ||
	die "child $kid1 owns less than its parent's heap: is it a copy?"

# Writes stay where they are made; the snapshot keeps the old values.
redis_at "$addr1" set only-in-child 1 >/dev/null
redis_at "$addr1" set key:1 from-child >/dev/null
redis_at "$addr1" flushdb >/dev/null
redis_at "$addr1" set key:1 from-child >/dev/null
[ -z "$(redis_at "$parent" get only-in-child)" ] || die "a child's write reached its parent"
[ -z "$(redis_at "$addr2" get only-in-child)" ] || die "a child's write reached its sibling"
[ "$(redis_at "$addr1" get key:1)" = from-child ] || die "the child lost its own write"
verify "$parent" || die "the parent's values changed"
verify "$addr2" || die "the sibling's values changed"
out=$("$CXLCR" fork redis --to h1 --mode copy --json) || die "a third copy-mode fork failed"
read -r kid3 addr3 pid3 < <(echo "$out" | kids_of)
SERVICES+=("$kid3")
# Untouched, it gets its whole heap all the same: the background fetch.
for _ in $(seq 100); do
	anon=$(rss_anon "$pid3")
	[ $((anon * 1024)) -ge $((used * 9 / 10)) ] && break
	sleep 0.1 # polling a condition, bounded: not a synchronisation
done
[ $((anon * 1024)) -ge $((used * 9 / 10)) ] || die "$kid3 owns $anon kB after 10 s, less than the parent's heap: no background fetch?"
ok "$kid3 got its whole heap while it ran ($anon kB) without reading a key"
verify "$addr3" || die "a child's writes reached the snapshot: $kid3 does not hold the snapshot's values"
ok "writes stay in the child that made them (parent, sibling and a later child of the snapshot unchanged)"

# --- the pager killed: its child dies with it, and status says why
pager=$(pager_of "$pid2")
on h1 kill -9 "$pager"
for _ in $(seq 100); do
	[ "$(status_field "$kid2" state)" != running ] && "$CXLCR" status "$kid2" | grep -q pager && break
	sleep 0.1 # polling a condition, bounded: not a synchronisation
done
[ "$(status_field "$kid2" state)" = exited ] || die "$kid2 runs on without its pager"
line=$("$CXLCR" status "$kid2" | grep pager) || die "status of $kid2 does not say its pager died"
ok "pager of $kid2 killed: $kid2 ended ($line)"
verify "$parent" || die "the parent lost values when a child's pager died"
[ "$(redis_at "$addr1" get key:1)" = from-child ] || die "$kid1 was disturbed by its sibling's pager's death"
verify "$addr3" || die "$kid3 was disturbed by its sibling's pager's death"
ok "the parent and the other children go on"

# --- eager: every stored page is in before the child runs
"$CXLCR" stop "$kid1" >/dev/null
"$CXLCR" stop "$kid3" >/dev/null
out=$("$CXLCR" fork redis --to h1 --mode copy --fetch eager --json) || die "an eager copy-mode fork failed"
read -r kid addr pid < <(echo "$out" | kids_of)
SERVICES+=("$kid")
anon=$(rss_anon "$pid")
used=$(status_field redis arena_used)
[ $((anon * 1024)) -ge $((used * 9 / 10)) ] || die "eager $kid owned $anon kB when it ran, less than the parent's heap ($used bytes)"
verify "$addr" || die "eager $kid does not hold its parent's values"
ok "eager $kid: RssAnon $anon kB when it ran (parent heap $((used >> 10)) kB), each value right"
"$CXLCR" stop "$kid" >/dev/null

# --- lazy: every page comes on the child's faults
out=$("$CXLCR" fork redis --to h1 --mode copy --fetch lazy --json) || die "a lazy copy-mode fork failed"
read -r kid addr pid < <(echo "$out" | kids_of)
SERVICES+=("$kid")
before=$(rss_anon "$pid")
verify "$addr" || die "lazy $kid does not hold its parent's values"
after=$(rss_anon "$pid")
[ "$after" -gt $((before + COUNT * SIZE / 2048)) ] || die "lazy $kid had its pages before it read them ($before kB, then $after kB)"
ok "lazy $kid: RssAnon $before kB when it ran, $after kB once it had read every key, each value right"
"$CXLCR" stop "$kid" >/dev/null
# Its pager timed each fault it served: every heap page it read was a
# copy from CXL, so its end line counts them (and gives their p50/p99).
line=$(pager_end "$kid" "$pid") || die "the pager of lazy $kid logged no end line on h1"
n=$(echo "$line" | sed -n 's/.* cxl n=\([0-9]*\) p50=[0-9.]* p99=[0-9.]* .*/\1/p')
[ "${n:-0}" -gt 0 ] || die "the pager of lazy $kid timed no fault served from CXL: $line"
ok "the pager of lazy $kid timed its faults: ${line#*fault service }"

# A lazy child's own fork (Redis's BGSAVE) before it has read its values:
# the grandchild's faults are served too (never zeros), and its dump holds
# every value.
out=$("$CXLCR" fork redis --to h1 --mode copy --fetch lazy --json) || die "a second lazy copy-mode fork failed"
read -r kid addr pid < <(echo "$out" | kids_of)
SERVICES+=("$kid")
bgsave_dumps "$addr" "lazy $kid" --count $COUNT --size $SIZE --types $TYPES --seed 5
ok "lazy $kid's BGSAVE (a fork of its own before it read its values) dumped every value"

# --- nothing left behind: once the children are stopped (the one whose
# pager was killed too), the pool checks clean, with no borrow and no
# child region, and no pager of this pool runs.
"$CXLCR" stop "$kid" >/dev/null || die "cxlcr stop $kid failed"
"$CXLCR" stop "$kid2" >/dev/null || die "cxlcr stop $kid2 (its pager killed) failed"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check failed: $(cat "$POOL_DIR/check.json")"
borrows=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["borrows"])' "$POOL_DIR/check.json")
[ "$borrows" -eq 0 ] || die "$borrows borrows left once every child was stopped"
[ -z "$("$CXLCR" ps | awk '$1 ~ /^redis\./')" ] || die "child regions left: $("$CXLCR" ps)"
for p in $(pgrep -x cxlcr-pager || true); do
	grep -q "$POOL_DIR/pool" "/proc/$p/maps" 2>/dev/null && die "pager $p of this pool still runs"
done
ok "every child stopped: pool check clean, no borrow, no child region, no pager left"
