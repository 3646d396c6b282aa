#!/usr/bin/env bash
# Fork children on a devdax pool, without a device (issue 17): the pool is a
# file formatted --as-devdax, which keeps a devdax device's rules (it is
# never mapped privately; nothing registers userfaultfd on a mapping of it),
# so the same code paths run as on /dev/daxX.Y. With real Redis on an
# emulated pod: a fork with no --mode makes copies (each child's heap its
# own anonymous memory, filled by its pager; nothing of the pool mapped);
# --mode share is refused with one line and leaves nothing behind; a
# child's writes reach neither its parent nor the snapshot; and 8
# copy-mode children at once of one tiered snapshot (hot pages in CXL, the
# rest on the memory server) each hold every value, their pagers forked
# from a daemon that started libfabric as it started (CXLCR_TIER_WARM).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

COUNT=10000
SIZE=1000
PORT=6379
KIDS=8
verify() { python3 "$KV" verify --host "$1" --port $PORT --count $COUNT --size $SIZE --types strings --seed 5 --quiet; }
redis_at() { redis-cli -h "$1" -p $PORT "${@:2}"; }
# (The children run on h1, and their pids are h1's own: looked at there.)
pager_of() { on h1 awk '/^TracerPid:/ { print $2 }' "/proc/$1/status"; }
expect_fail() { if "$@" >/dev/null 2>"$POOL_DIR/err"; then die "$* succeeded"; fi; }
# A copy-mode child: traced by its pager, and maps nothing of the pool.
is_copy() {
	[ "$(pager_of "$2")" -gt 0 ] || die "$1 (pid $2) has no pager tracing it"
	if on h1 grep -q "$POOL_DIR/pool" "/proc/$2/maps"; then
		die "$1 maps the devdax pool: $(on h1 grep "$POOL_DIR/pool" "/proc/$2/maps" | head -1)"
	fi
}

new_pool 4G --as-devdax
"$CXLCR" pool info --json >"$POOL_DIR/info.json" || die "cxlcr pool info failed"
[ "$(json devdax_rules <"$POOL_DIR/info.json")" = True ] || die "a pool formatted --as-devdax does not keep devdax rules: $(cat "$POOL_DIR/info.json")"
"$CXLCR" pool info | grep -q "emulated devdax pool" || die "pool info does not say it is an emulated devdax pool: $("$CXLCR" pool info)"
ok "pool formatted --as-devdax: $("$CXLCR" pool info)"
# The hosts start libfabric as they start (tier_warm): the pagers of the
# tiered snapshot's children below, forked from h1's workers, inherit it.
CXLCR_TIER_WARM=1 pod_up 2
"$CXLCR" pod logs h1 | grep -q "libfabric started for the cold tier" ||
	die "h1 did not start libfabric with CXLCR_TIER_WARM=1: $("$CXLCR" pod logs h1 | tail -3)"

pod_redis redis h0 512M
parent=$addr
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --types strings --seed 5
"$CXLCR" snapshot redis >/dev/null || die "cxlcr snapshot failed"

# --- share mode: the device's rule, one line, nothing left behind
expect_fail "$CXLCR" fork redis --to h1 --mode share
grep -q "cannot be mapped privately" "$POOL_DIR/err" || die "share fork on a devdax pool: $(cat "$POOL_DIR/err")"
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "more than one line: $(cat "$POOL_DIR/err")"
[ -z "$("$CXLCR" ps | awk '$1 ~ /^redis\./')" ] || die "a refused share fork left a child: $("$CXLCR" ps)"
ok "share-mode fork refused: $(cat "$POOL_DIR/err")"

# --- no --mode: a copy, as on a device
out=$("$CXLCR" fork redis --to h1 --json) || die "cxlcr fork on a devdax pool failed"
[ "$(echo "$out" | json mode)" = copy ] || die "a fork on a devdax pool made children of mode $(echo "$out" | json mode)"
read -r kid addr pid < <(echo "$out" | kids_of)
SERVICES+=("$kid")
is_copy "$kid" "$pid"
verify "$addr" || die "$kid does not hold its parent's values"
redis_at "$addr" set key:1 from-child >/dev/null
redis_at "$addr" set only-in-child 1 >/dev/null
[ -z "$(redis_at "$parent" get only-in-child)" ] || die "a child's write reached its parent"
verify "$parent" || die "the parent's values changed"
"$CXLCR" stop "$kid" >/dev/null || die "cxlcr stop $kid failed"
ok "fork with no --mode: $kid is a copy (its pager traces it, nothing of the pool mapped), every value, its writes its own"

# --- 8 copy-mode children at once of one tiered snapshot
out=$("$CXLCR" tier up --size 256M --json) || die "cxlcr tier up failed"
memd=$(echo "$out" | json pid)
on_exit "kill -9 $memd 2>/dev/null"
out=$("$CXLCR" snapshot redis --tier --hot-window 1 --json) || die "cxlcr snapshot --tier failed"
hot=$(echo "$out" | json tier pages_hot)
cold=$(echo "$out" | json tier pages_cold)
[ "$cold" -gt "$hot" ] || die "the tiered snapshot has $cold cold pages and $hot hot ones"
out=$("$CXLCR" fork redis --to h1 --count $KIDS --json) || die "cxlcr fork --count $KIDS of a tiered snapshot failed"
[ "$(echo "$out" | json mode)" = copy ] || die "children of mode $(echo "$out" | json mode)"
mapfile -t kids < <(echo "$out" | kids_of)
[ ${#kids[@]} -eq $KIDS ] || die "fork made ${#kids[@]} children, not $KIDS"
say "$KIDS children of a tiered snapshot ($hot hot, $cold cold pages) in $(echo "$out" | json total_ms) ms"
pids=()
for k in "${kids[@]}"; do
	read -r name addr pid <<<"$k"
	SERVICES+=("$name")
	pids+=("$pid")
	is_copy "$name" "$pid"
done
[ "$(printf '%s\n' "${pids[@]}" | sort -u | wc -l)" -eq $KIDS ] || die "children share a pid: ${pids[*]}"
# All of them read at once: their pagers serve faults side by side.
vpids=()
for k in "${kids[@]}"; do
	read -r name addr pid <<<"$k"
	verify "$addr" >"$POOL_DIR/verify.$name" 2>&1 &
	vpids+=($!)
done
i=0
for k in "${kids[@]}"; do
	read -r name addr pid <<<"$k"
	wait "${vpids[$i]}" || die "$name does not hold its parent's values: $(cat "$POOL_DIR/verify.$name")"
	i=$((i + 1))
done
read -r kid1 addr1 pid1 <<<"${kids[0]}"
redis_at "$addr1" set key:2 from-child >/dev/null
for k in "${kids[@]:1}"; do
	read -r name addr pid <<<"$k"
	[ "$(redis_at "$addr" get key:2)" != from-child ] || die "$kid1's write reached its sibling $name"
done
ok "$KIDS copy-mode children at once of one tiered snapshot: each a copy, each holds every value, read side by side"

for k in "${kids[@]}"; do
	read -r name addr pid <<<"$k"
	"$CXLCR" stop "$name" >/dev/null || die "cxlcr stop $name failed"
done
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check failed: $(cat "$POOL_DIR/check.json")"
[ "$(json borrows <"$POOL_DIR/check.json")" -eq 0 ] || die "borrows left once every child was stopped"
ok "every child stopped: pool check clean, no borrow"
