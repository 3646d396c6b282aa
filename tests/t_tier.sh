#!/usr/bin/env bash
# The cold tier (issue 17, points 1 and 2; docs/cold-tier.md): a memory
# server on a memory host of its own, and tiered snapshots of a Redis.
#   - `cxlcr tier up` starts cxlcr-memd on m0, registered in the pool with
#     the libfabric provider tcp;ofi_rxm, in m0's own network and mount
#     namespaces: its log is m0's (`cxlcr pod logs m0`), and outlives it;
#   - an RMA write and read of 1 MiB from h0's network namespace into m0's
#     come back equal;
#   - a tiered snapshot of a Redis read with a skewed pattern (10% of its
#     keys) in the hot window: hot + cold + zero = the heap's pages, fewer
#     hot pages than cold, less CXL than the untiered snapshot it came from;
#   - with the Redis idle and then stopped, every cold and zero page read
#     back through the reader (cold ones by RMA, checksum checked) equals
#     its heap page (a hot page may have been written since the freeze);
#   - with no memory server, a tiered snapshot fails with one line and
#     leaves nothing behind (pool check) while the Redis serves on;
#   - a replaced tiered snapshot's cold extent is returned; one replaced
#     while borrowed keeps its extent until the borrow is returned, then
#     everything is free: the server's memory shrinks, and the pool passes
#     its check;
#   - a cold page damaged on the server is refused with one line;
#   - with the server killed, a cold read fails with one line (the reader's
#     own bound, CXLCR_TIER_TIMEOUT_MS); started again (a new incarnation,
#     its memory lost), the reader refuses the snapshot's cold extent as
#     missing with one line, and the server accounts nothing for it;
#   - killed with -9, the hosts mark it dead once its heartbeat has stood
#     still for a lease: tier status says so, no tiered snapshot goes to
#     it, its pages are refused at once;
#   - `tier down` marks it down; `tier up` again makes a memory host that
#     h0 reaches at once (same address and MAC).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli
TOOL=${CXLCR_BUILD:-$ROOT/build}/tests/tier_tool
[ -x "$TOOL" ] || die "build/tests/tier_tool is not built"
export CXLCR_TIER_TIMEOUT_MS=1000

COUNT=40000
SIZE=1000
PORT=6379
ARENA=256M
new_pool 4G
pod_up 1

# --- a Redis; with no memory server a tiered snapshot fails with one line
# and leaves nothing behind
say "cxlcr run --host h0 redis-server; fill $COUNT keys"
pod_redis redis h0 $ARENA
raddr=$addr
python3 "$KV" fill --host "$raddr" --port $PORT --count $COUNT --size $SIZE --types strings --seed 5
pid=$(status_field redis pid) # h0's own pid of it
rpid=$(service_pid redis)     # this machine's
heap_pages=$(( $(status_field redis arena_size) / 4096 ))
for bad in "--tier --hot-window 0" "--tier --hot-window 61" "--tier --hot-window 1x" "--hot-window 1"; do
	rc=0
	# shellcheck disable=SC2086
	"$CXLCR" snapshot redis $bad 2>"$POOL_DIR/err" || rc=$?
	[ $rc -ne 0 ] && [ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "snapshot redis $bad: exit $rc, $(cat "$POOL_DIR/err")"
done
ok "bad --hot-window values refused with one line: $(cat "$POOL_DIR/err")"
if "$CXLCR" snapshot redis --tier --hot-window 0.1 2>"$POOL_DIR/err"; then
	die "a tiered snapshot was taken with no memory server"
fi
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] && grep -q "no memory server" "$POOL_DIR/err" ||
	die "the failure is not one line naming the missing server: $(cat "$POOL_DIR/err")"
"$CXLCR" pool check >/dev/null || die "the failed tiered snapshot left something behind: $("$CXLCR" pool check)"
redis-cli -h "$raddr" -p $PORT ping | grep -q PONG || die "redis does not answer after the failed snapshot"
ok "no memory server: $(cat "$POOL_DIR/err")"

# --- the memory server
out=$("$CXLCR" tier up --size 256M --json) || die "cxlcr tier up failed"
memd=$(echo "$out" | json pid) # this machine's pid of it
memd_there=$(awk '/^NSpid:/ { print $NF }' "/proc/$memd/status") # m0's own (it has a pid namespace of its own)
st=$("$CXLCR" tier status --json)
[ "$(echo "$st" | json servers 0 name)" = m0 ] && [ "$(echo "$st" | json servers 0 up)" = True ] ||
	die "the tier table does not show m0 up: $st"
[ "$(echo "$st" | json servers 0 provider)" = "tcp;ofi_rxm" ] || die "m0 does not use tcp;ofi_rxm: $st"
maddr=$(echo "$st" | json servers 0 address)
[ "$(echo "$st" | json servers 0 bulk_port)" -eq $(( ${maddr##*:} + 1 )) ] ||
	die "the tier table does not give m0's bulk endpoint on the port after ${maddr##*:}: $st"
h0addr=$("$CXLCR" hosts --json | json hosts 0 address)
pod=$(( $(echo "$h0addr" | cut -d. -f2) - 78 ))
NS=cxlcr$pod-h0
# (its network namespace's inode against the memory host's: `ip netns
# identify` walks every namespace of the machine, other tests' too)
[ "$(readlink "/proc/$memd/ns/net")" = "net:[$(stat -L -c %i "/run/netns/cxlcr$pod-m0")]" ] ||
	die "cxlcr-memd (pid $memd) does not run in the namespace of memory host cxlcr$pod-m0"
[ "$(readlink "/proc/$memd/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
	die "cxlcr-memd (pid $memd) shares this machine's file system"
"$CXLCR" pod logs m0 | grep -q "^cxlcr-memd m0: serving 256 MiB at $maddr (tcp;ofi_rxm), pid $memd_there, incarnation 1, spinning 200 us after a bulk request and 0 us after a fault's, bulk endpoint on port $(( ${maddr##*:} + 1 ))$" ||
	die "cxlcr pod logs m0 does not show its memory server starting: $("$CXLCR" pod logs m0 2>&1 | tail -n 3)"
! grep -qs "pid $memd_there," /var/log/cxlcr/*.log || die "this machine's /var/log/cxlcr has m0's log"
ok "memory server m0 up at $maddr in its own namespaces; its log in m0's own /var/log/cxlcr"

out=$(ip netns exec "$NS" "$TOOL" rma) || die "RMA round trip from h0 to m0 failed"
echo "$out" | grep -q "and through its bulk endpoint (port " || die "m0 has no bulk endpoint serving the same memory: $out"
ok "$out (from h0's namespace)"

# --- the Redis read with a skew during the hot window

# One connection that reads the first 10% of the keys over and over (a
# connection being opened while CRIU dumps would fail the dump).
seq 0 $((COUNT / 10 - 1)) | sed 's/^/GET kv:str:/' >"$POOL_DIR/hot.cmds"
feed() { while cat "$POOL_DIR/hot.cmds"; do :; done; }
redis-cli -h "$raddr" -p $PORT get kv:str:1 | grep -q . || die "no key kv:str:1"
redis-cli -h "$raddr" -p $PORT >/dev/null 2>&1 < <(feed) &
loop=$!
on_exit "kill $loop 2>/dev/null"
out=$("$CXLCR" snapshot redis --tier --hot-window 0.5 --json) || die "cxlcr snapshot --tier failed"
kill $loop; wait $loop 2>/dev/null || true
echo "$out" | is_json || die "snapshot --json is not JSON: $out"
hot=$(echo "$out" | json tier pages_hot)
cold=$(echo "$out" | json tier pages_cold)
zero=$(echo "$out" | json tier pages_zero)
cxl=$(echo "$out" | json tier cxl_bytes)
full=$(echo "$out" | json tier untiered_cxl_bytes)
cold1=$(echo "$out" | json tier cold_bytes)
[ $((hot + cold + zero)) -eq "$heap_pages" ] ||
	die "hot $hot + cold $cold + zero $zero != $heap_pages heap pages"
[ "$hot" -gt 0 ] && [ "$cold" -gt "$hot" ] || die "a skewed read should leave fewer hot pages ($hot) than cold ($cold)"
[ "$cxl" -lt "$full" ] || die "the tiered snapshot uses $cxl bytes of CXL, the untiered $full"
[ "$cold1" -eq $((cold * 4096)) ] || die "cold_bytes $cold1 is not $cold pages"
used=$("$CXLCR" tier status --json | json servers 0 used)
[ "$used" -eq "$cold1" ] || die "m0 accounts $used bytes, the snapshot has $cold1 cold"
ok "tiered: $hot hot + $cold cold + $zero zero = $heap_pages pages; CXL $cxl bytes against $full untiered"

# --- exact contents: the Redis idle, a second tiered snapshot, then stopped.
# An idle Redis still writes a few pages now and then (its once-a-second
# cron): a window longer than that period makes them hot, so the cold
# pages are ones nothing writes between the freeze and the stop.
out=$("$CXLCR" snapshot redis --tier --hot-window 1.5 --json) || die "second cxlcr snapshot --tier failed"
cold2=$(echo "$out" | json tier cold_bytes)
kill -STOP "$rpid"
on_exit "kill -CONT $rpid 2>/dev/null"
# On h0, where the service's pid is its own (and its network reaches m0).
res=$(on h0 "$TOOL" verify redis "$pid") || { kill -CONT "$rpid"; die "pages differ: $res"; }
kill -CONT "$rpid"
read -r _ vhot _ vcold _ vzero _ dhot dcold dzero <<<"$res"
[ "$dcold" -eq 0 ] && [ "$dzero" -eq 0 ] && [ "$vcold" -gt 0 ] && [ $((vhot + vcold + vzero)) -eq "$heap_pages" ] ||
	die "verify: $res"
ok "every cold page ($vcold, by RMA) and zero page ($vzero) read back equals the heap's ($dhot of $vhot hot pages written since)"

used=$("$CXLCR" tier status --json | json servers 0 used)
[ "$used" -eq "$cold2" ] || die "m0 accounts $used bytes after the first tiered snapshot was replaced, want $cold2"
ok "the replaced tiered snapshot's cold extent was returned ($used bytes in use)"

# --- a damaged cold page is refused; the others still read
page=$("$TOOL" first-cold redis) || die "no cold page"
"$TOOL" corrupt redis "$page" || die "could not damage page $page on m0"
if "$TOOL" read redis "$page" 2>"$POOL_DIR/err"; then
	die "a damaged cold page was read without complaint"
fi
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] && grep -q "checksum mismatch" "$POOL_DIR/err" ||
	die "the refusal is not one line naming the checksum: $(cat "$POOL_DIR/err")"
ok "damaged cold page refused: $(cat "$POOL_DIR/err")"

# --- an untiered snapshot replaces it while a borrower holds it (as a
# child would): its extent lives as long as the borrow; returned, every
# extent is free, and the server gives the memory back (it looks at the
# table once a second)
rss() { awk '/^RssAnon/ { print $2 }' "/proc/$memd/status"; }
before=$(rss)
coproc HOLD { "$TOOL" hold redis; }
# Bash unsets HOLD_PID and HOLD once it has reaped the coprocess, which it
# may do at any moment after the borrower exits (the test once ended on
# "HOLD_PID: unbound variable" at the wait below): keep copies now.
hold_pid=${HOLD_PID:-} hold_out=${HOLD[0]:-} hold_in=${HOLD[1]:-}
read -r held _ <&"$hold_out" && [ "$held" = held ] || die "could not borrow the tiered snapshot"
"$CXLCR" snapshot redis --json >/dev/null || die "untiered snapshot failed"
used=$("$CXLCR" tier status --json | json servers 0 used)
[ "$used" -eq "$cold2" ] || die "m0 accounts $used bytes while the replaced snapshot is borrowed, want $cold2"
eval "exec ${hold_in}>&-"
wait "$hold_pid" || die "the borrower failed"
used=$("$CXLCR" tier status --json | json servers 0 used)
[ "$used" -eq 0 ] || die "m0 still accounts $used bytes with no tiered snapshot left"
for _ in $(seq 100); do
	[ "$(rss)" -lt $((before - cold2 / 1024 / 2)) ] && break
	sleep 0.1
done
[ "$(rss)" -lt $((before - cold2 / 1024 / 2)) ] || die "cxlcr-memd still holds $(rss) kB (it held $before kB)"
"$CXLCR" pool check >/dev/null || die "pool check: $("$CXLCR" pool check)"
ok "the replaced snapshot kept its extent while borrowed; returned, m0 accounts 0 bytes and its RssAnon went from $before kB to $(rss) kB"

# --- the server killed: a cold read fails with one line, a hot one works
"$CXLCR" snapshot redis --tier --hot-window 0.2 --json >/dev/null || die "third cxlcr snapshot --tier failed"
page=$("$TOOL" first-cold redis) || die "no cold page"
kill -KILL "$memd"
t0=$(date +%s%N)
if ip netns exec "$NS" "$TOOL" read redis "$page" 2>"$POOL_DIR/err"; then
	die "a cold page was read with its server dead"
fi
took=$((($(date +%s%N) - t0) / 1000000))
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "the failure is not one line: $(cat "$POOL_DIR/err")"
ok "server killed: the read failed after $took ms (its bound: CXLCR_TIER_TIMEOUT_MS=$CXLCR_TIER_TIMEOUT_MS): $(cat "$POOL_DIR/err")"

# --- liveness: killed with -9 it could not mark itself down; the hosts,
# its heartbeat standing still for a lease on their clocks, mark it dead:
# no new extent on it, and its pages refused at once
state() { "$CXLCR" tier status --json | json servers 0 state; }
for _ in $(seq 200); do
	[ "$(state)" = dead ] && break
	sleep 0.1 # polling a condition, bounded: not a synchronisation
done
[ "$(state)" = dead ] || die "m0, killed with -9, is still '$(state)' 20 s later (lease $CXLCR_LEASE_MS ms)"
"$CXLCR" tier status | grep -q "^m0 dead" || die "tier status does not say m0 is dead: $("$CXLCR" tier status)"
if "$CXLCR" snapshot redis --tier --hot-window 0.2 >/dev/null 2>"$POOL_DIR/err"; then
	die "a tiered snapshot was taken with its only memory server dead"
fi
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "the refusal is not one line: $(cat "$POOL_DIR/err")"
t0=$(date +%s%N)
if ip netns exec "$NS" "$TOOL" read redis "$page" 2>"$POOL_DIR/err"; then
	die "a cold page of a dead server was read"
fi
took=$((($(date +%s%N) - t0) / 1000000))
grep -q "cold extent is missing" "$POOL_DIR/err" || die "a read from the dead server: $(cat "$POOL_DIR/err")"
ok "m0 taken for dead by the hosts ($("$CXLCR" tier status | head -1)); a tiered snapshot refused, a cold read refused at once ($took ms)"

# --- started again, it is a new incarnation: its memory is gone, and the
# reader says so before reading anything
for opt in --spin-us --fault-spin-us --bulk-port; do
	for bad in x -1 1000001 ""; do
		rc=0
		"${CXLCR_BUILD:-$ROOT/build}/cxlcr-memd" --name m9 --address 127.0.0.1 $opt "$bad" 2>"$POOL_DIR/err" || rc=$?
		[ $rc -eq 2 ] && [ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] || die "cxlcr-memd $opt '$bad': exit $rc, $(cat "$POOL_DIR/err")"
	done
	ok "a bad $opt refused with one line: $(cat "$POOL_DIR/err")"
done
# (this time one that never spins, and spins after each fault: it serves
# all the same)
CXLCR_MEMD_SPIN_US=0 CXLCR_MEMD_FAULT_SPIN_US=50 "$CXLCR" tier up --size 256M >/dev/null ||
	die "cxlcr tier up (again) failed"
"$CXLCR" pod logs m0 | grep -q "incarnation 2, spinning 0 us after a bulk request and 50 us after a fault's, bulk endpoint on port [0-9]*$" ||
	die "m0's second server did not take CXLCR_MEMD_SPIN_US=0 CXLCR_MEMD_FAULT_SPIN_US=50: $("$CXLCR" pod logs m0 2>&1 | tail -n 1)"
[ "$("$CXLCR" tier status --json | json servers 0 incarnation)" -eq 2 ] || die "m0 did not come back as incarnation 2"
[ "$("$CXLCR" pod logs m0 | grep -c "^cxlcr-memd m0: serving")" = 2 ] ||
	die "m0's log did not outlive its killed server: $("$CXLCR" pod logs m0 2>&1 | tail -n 3)"
if ip netns exec "$NS" "$TOOL" read redis "$page" 2>"$POOL_DIR/err"; then
	die "a cold page of the server's previous incarnation was read"
fi
[ "$(wc -l <"$POOL_DIR/err")" -eq 1 ] && grep -q "cold extent is missing" "$POOL_DIR/err" ||
	die "the refusal is not one line naming the missing extent: $(cat "$POOL_DIR/err")"
[ "$("$CXLCR" tier status --json | json servers 0 used)" -eq 0 ] || die "m0 accounts the lost extent"
ok "server restarted: $(cat "$POOL_DIR/err")"

# --- down and up again: a new memory host with the same address and MAC,
# reachable at once (the hosts' neighbour caches still name its MAC)
"$CXLCR" tier down >/dev/null || die "cxlcr tier down failed"
"$CXLCR" tier status --json | json servers 0 up | grep -qx False || die "m0 is not down after tier down"
"$CXLCR" tier up --size 256M >/dev/null || die "cxlcr tier up after tier down failed"
out=$(ip netns exec "$NS" "$TOOL" rma) || die "no RMA round trip to m0 made again"
ok "down and up again: $out"
"$CXLCR" tier down >/dev/null
