#!/usr/bin/env bash
# Copy-mode children of a tiered snapshot (issue 17 points 3 and 4): the
# pager reads a child's cold pages from the memory server by RMA
# (tier_read_page(), CRC checked): all of them before it runs (--fetch
# eager), in the background once it runs (the default: its CXL pages, the
# hot ones, before it runs), or on its faults (--fetch lazy; each cold
# fault reads the pages around its own too). A fork of a
# tiered snapshot is a copy by default, and asking for share is refused
# with one line. With the memory server killed, a child that faults on a
# cold page waits while its pager tries 3 times (a fresh reader each,
# each bounded by CXLCR_TIER_TIMEOUT_MS), then dies (never reads a wrong
# page) with one line in status, and
# the parent and the other child go on. The pagers of a fork's children,
# and the fetch ahead of two, start before CRIU restores them, and end
# with a restore that fails. Two children forked at once share
# one fetch ahead of their cold pages, whose fetcher killed mid-way leaves
# the rest to their pagers.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli
export CXLCR_TIER_TIMEOUT_MS=1000
export CXLCR_TEST_AHEAD_STOP=1 # the fetch ahead of several children stops after its first chunk

COUNT=20000
SIZE=1000
PORT=6379
verify() { python3 "$KV" verify --host "$1" --port $PORT --count $COUNT --size $SIZE --types strings --seed 5 --quiet; }
# have_heap PID: child PID (h1's) comes to own 90% of the parent's arena
# within 10 s; its RssAnon in kB is in $anon either way.
have_heap() {
	for _ in $(seq "${2:-100}"); do
		anon=$(on h1 awk '/^RssAnon:/ { print $2 }' "/proc/$1/status")
		[ $((anon * 1024)) -ge $((used * 9 / 10)) ] && return 0
		sleep 0.1 # polling a condition, bounded: not a synchronisation
	done
	return 1
}
# pager_end KID PID: the end line the pager of child KID (PID on h1) logged
# on h1, once it is there (10 s at most); empty if it is not.
pager_end() {
	local line=
	for _ in $(seq 100); do
		line=$("$CXLCR" pod logs h1 pager | grep " $1 (pid $2): ended " | tail -n 1) && [ -n "$line" ] && break
		sleep 0.1 # polling a condition, bounded: not a synchronisation
	done
	echo "$line"
}

new_pool 4G
criu_hook tier # CRIU's steps, for a restore that fails (below)
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
out=$("$CXLCR" tier up --size 256M --json) || die "cxlcr tier up failed"
memd=$(echo "$out" | json pid)
on_exit "kill -9 $memd 2>/dev/null"

pod_redis redis h0 512M
parent=$addr
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --types strings --seed 5
out=$("$CXLCR" snapshot redis --tier --hot-window 1 --json) || die "cxlcr snapshot --tier failed"
cold=$(echo "$out" | json tier pages_cold)
[ "$cold" -gt $((COUNT * SIZE / 4096 / 2)) ] || die "the tiered snapshot has only $cold cold pages"
say "tiered snapshot: $(echo "$out" | json tier pages_hot) hot, $cold cold pages"

expect_fail() { if "$@" >/dev/null 2>"$POOL_DIR/err"; then die "$* succeeded"; fi; }
expect_fail "$CXLCR" fork redis --to h1 --mode share
grep -q "cold tier: its children can only be copies" "$POOL_DIR/err" || die "share fork of a tiered snapshot: $(cat "$POOL_DIR/err")"
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "more than one line: $(cat "$POOL_DIR/err")"
ok "a share-mode fork of a tiered snapshot is refused: $(cat "$POOL_DIR/err")"

# --- children of it are copies by default; every value, cold ones by RMA
out=$("$CXLCR" fork redis --to h1 --fetch eager --json) || die "an eager fork of a tiered snapshot failed"
[ "$(echo "$out" | json mode)" = copy ] || die "the children of a tiered snapshot are not copies"
read -r kid1 addr1 pid1 < <(echo "$out" | kids_of)
SERVICES+=("$kid1")
verify "$addr1" || die "eager $kid1 does not hold its parent's values"
ok "eager $kid1 holds every value, its cold pages read from the memory server before it ran"
out=$("$CXLCR" fork redis --to h1 --json) || die "a fork of a tiered snapshot failed"
read -r kid3 addr3 pid3 < <(echo "$out" | kids_of)
SERVICES+=("$kid3")
used=$(status_field redis arena_used)
have_heap "$pid3" || die "$kid3 owns $anon kB after 10 s: its cold pages did not come in the background"
ok "$kid3 (default: its CXL pages before it ran, its cold pages in the background) got its whole heap untouched"
out=$("$CXLCR" fork redis --to h1 --fetch lazy --json) || die "a lazy fork of a tiered snapshot failed"
read -r kid2 addr2 pid2 < <(echo "$out" | kids_of)
SERVICES+=("$kid2")
python3 "$KV" verify --host "$addr2" --port $PORT --count $((COUNT / 2)) --size $SIZE --types strings --seed 5 \
	--quiet || die "lazy $kid2 does not hold its parent's values"
ok "lazy $kid2 holds the values it read, its cold pages read from the memory server on its faults"
# Another lazy child, stopped once it has read some values: its pager's
# end line counts the faults it served by RMA from the cold tier, timed.
out=$("$CXLCR" fork redis --to h1 --fetch lazy --json) || die "a second lazy fork of a tiered snapshot failed"
read -r kid4 addr4 pid4 < <(echo "$out" | kids_of)
SERVICES+=("$kid4")
python3 "$KV" verify --host "$addr4" --port $PORT --count $((COUNT / 4)) --size $SIZE --types strings --seed 5 \
	--quiet || die "lazy $kid4 does not hold its parent's values"
"$CXLCR" stop "$kid4" >/dev/null || die "cxlcr stop $kid4 failed"
line=$(pager_end "$kid4" "$pid4")
[ -n "$line" ] || die "the pager of lazy $kid4 logged no end line on h1"
n=$(echo "$line" | sed -n 's/.* cold n=\([0-9]*\) p50=[0-9.]* p99=[0-9.]* .*/\1/p')
[ "${n:-0}" -gt 0 ] || die "the pager of lazy $kid4 timed no fault served from the cold tier: $line"
ok "the pager of lazy $kid4 timed its faults: ${line#*fault service }"
# Each cold fault read the block of pages around its own (pager.c,
# read_around()), and the values kid4 and kid2 read through them were
# right (verify above).
around=$(echo "$line" | sed -n 's/.* of them on a fault), \([0-9]*\) around cold faults; .*/\1/p')
[ "${around:-0}" -gt 0 ] || die "the pager of lazy $kid4 read no page around its cold faults: $line"
ok "the pager of lazy $kid4 read $around pages around its $n cold faults"

# --- two children at once: one fetch ahead of their pagers reads the cold
# pages for both (pager/ahead.h). The fetcher stops itself after its first
# chunk here (CXLCR_TEST_AHEAD_STOP) and is killed there: each child
# still gets every value (its faults and its pager's lanes read the rest
# by RMA), and its pager says how many pages came from the fetch ahead.
out=$("$CXLCR" fork redis --to h1 --count 2 --json) || die "a fork of two children of a tiered snapshot failed"
mapfile -t pair < <(echo "$out" | kids_of)
[ "${#pair[@]}" -eq 2 ] || die "a fork of two children made ${#pair[@]}"
read -r kid5 addr5 pid5 <<<"${pair[0]}"
read -r kid6 addr6 pid6 <<<"${pair[1]}"
SERVICES+=("$kid5" "$kid6")
fetcher="" state=""
for _ in $(seq 100); do
	fetcher=$(on h1 pgrep -x cxlcr-ahead | head -n 1) || true
	[ -n "$fetcher" ] && state=$(on h1 awk '{ print $3 }' "/proc/$fetcher/stat") && [ "$state" = T ] && break
	sleep 0.1 # polling a condition, bounded: not a synchronisation
done
[ "$state" = T ] || die "no fetch ahead of the two children's cold pages stopped on h1 (pid '$fetcher', state '$state')"
verify "$addr5" || die "$kid5 does not hold its parent's values while its fetch ahead is stopped"
# A fetcher that stands still is given up on (pager.c: after 3 reads'
# timeouts, 3 s here): kid6, untouched so far, gets its whole heap from its
# own pager's lanes.
have_heap "$pid6" 200 ||
	die "$kid6 owns $anon kB after 20 s with its fetch ahead stopped: its pager's lanes waited for the fetcher"
ok "$kid6 got its whole heap while its fetch ahead stood still (its pager's lanes read the chunks themselves)"
on h1 kill -9 "$fetcher"
verify "$addr6" || die "$kid6 does not hold its parent's values once its fetch ahead was killed"
for kid in "$kid5 $pid5" "$kid6 $pid6"; do
	read -r k p <<<"$kid"
	have_heap "$p" || die "$k owns $anon kB after 10 s: its pager did not fetch what the killed fetcher left"
	"$CXLCR" stop "$k" >/dev/null || die "cxlcr stop $k failed"
	line=$(pager_end "$k" "$p")
	ahead=$(echo "$line" | sed -n 's/.* read from the cold tier, \([0-9]*\) fetched ahead .*/\1/p')
	[ "${ahead:-0}" -gt 0 ] && [ "$ahead" -lt "$cold" ] ||
		die "$k: not some of its cold pages from the fetch ahead ('$ahead' of $cold): $line"
	ok "$k: $ahead of $cold cold pages from the fetch ahead before it was killed, the rest by its pager, every value right"
done

# --- the pagers of a fork's children start before CRIU restores them
# (their connections to the memory server, which each child waits for
# before it runs, are made meanwhile), and so does the fetch ahead of two
# children: they are there while CRIU restores the children, and they end
# with a restore that fails, as their keepers do
pagers() { { on h1 pgrep -x "$1" || true; } | wc -l; }
for count in 1 2; do
	before=$(pagers cxlcr-pager) keepers=$(pagers cxlcr-pagerkeep) fetchers=$(pagers cxlcr-ahead)
	echo pre-restore >"$HOOK/kill-at"
	"$CXLCR" fork redis --to h1 --count $count >/dev/null 2>"$POOL_DIR/err" &
	forker=$!
	criu_reached $forker || die "the restore of $count tiered children did not reach CRIU's pre-restore step"
	[ "$(pagers cxlcr-pager)" -eq $((before + count)) ] ||
		die "not a pager each while CRIU restores $count children ($(pagers cxlcr-pager) pagers, $before before)"
	[ "$(pagers cxlcr-ahead)" -eq $((fetchers + count - 1)) ] ||
		die "$count children: $(pagers cxlcr-ahead) fetchers ahead while CRIU restores them, $fetchers before"
	kill -9 "$(hook_pid criu.pid)"
	if wait $forker; then die "a fork whose CRIU was killed succeeded"; fi
	[ "$(pagers cxlcr-pager)" -eq "$before" ] && [ "$(pagers cxlcr-pagerkeep)" -eq "$keepers" ] &&
		[ "$(pagers cxlcr-ahead)" -eq "$fetchers" ] ||
		die "$count children: pagers or a fetcher started before a restore that failed are left: $(pagers cxlcr-pager) pagers ($before before), $(pagers cxlcr-ahead) fetchers ($fetchers)"
	rm -f "$HOOK/criu.pid" "$HOOK/criu.host" "$HOOK/init.pid"
	ok "$count children: their pagers ran while CRIU restored them, and ended with that restore, killed: $(cat "$POOL_DIR/err")"
done

# --- the memory server killed: a child faulting on a cold page dies
kill -9 "$memd"
redis_at() { redis-cli -h "$1" -p $PORT "${@:2}"; }
# A key it has not read yet: its page is cold and not in.
redis_at "$addr2" get kv:str:$((COUNT - 1)) >/dev/null 2>&1 || true
for _ in $(seq 300); do
	[ "$(status_field "$kid2" state)" != running ] && "$CXLCR" status "$kid2" | grep -q pager && break
	sleep 0.1 # polling a condition, bounded: not a synchronisation
done
[ "$(status_field "$kid2" state)" = exited ] || die "$kid2 runs on though its cold pages are unreachable"
line=$("$CXLCR" status "$kid2" | grep "pager") || die "status of $kid2 does not say why it died"
# The faulting thread waited while the pager tried again (a reader opened
# anew each time), within its bound: the whole line is in the pager log.
log=$("$CXLCR" pod logs h1 pager) || die "cannot read h1's pager log"
echo "$log" | grep -q "^.* $kid2 (pid $pid2): killed: .*from the cold tier, 3 tries" ||
	die "the pager of $kid2 did not try the cold page 3 times: $(echo "$log" | grep "$kid2 (pid $pid2)")"
! grep -qs "$kid2 (pid $pid2)" /var/log/cxlcr/pager.log || die "this machine's /var/log/cxlcr has h1's pager log"
ok "memory server killed: $kid2 faulted on a cold page and died ($line)"
verify "$parent" || die "the parent lost values"
verify "$addr1" || die "eager $kid1 (all its pages in) was disturbed"
verify "$addr3" || die "$kid3 (all its pages fetched) was disturbed"
ok "the parent, $kid1 and $kid3 go on"

# --- the end line of a default child's pager says where its time before
# it ran went (taking its userfaultfd, its hot pages, its reader)
"$CXLCR" stop "$kid3" >/dev/null || die "cxlcr stop $kid3 failed"
line=$(pager_end "$kid3" "$pid3")
parts=$(echo "$line" | sed -n 's/.*; \([0-9]*\) pages installed before it ran (\(its userfaultfd [0-9.]* ms, pages [0-9.]* ms, waiting for its reader [0-9.]* ms\)).*/\1: \2/p')
[ "${parts%%:*}" -gt 0 ] 2>/dev/null || die "the pager of $kid3 does not say where its time before it ran went: $line"
ok "the pager of $kid3 installed ${parts%%:*} pages before it ran (${parts#*: })"
