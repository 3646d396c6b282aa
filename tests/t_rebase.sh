#!/usr/bin/env bash
# rebase/: a fork child made from a checkpoint of a running parent and a
# snapshot of its arena, restored with plain CRIU and the cxlcr plugin.
#
# First the unit test (build/tests/rebase_test, and the sanitizer builds'
# when built). Then end to end: Redis on a pod host with known data; frozen
# (SIGSTOP), its arena snapshotted (tests/snapshot_tool) and the rest dumped
# with the parent left running, as daemon/criu.c dumps; resumed. The image
# set is rebased (build/cxlcr-rebase) to a child with another address and
# MAC, which CRIU restores on the pod bridge. Checked: the child answers on
# its own address with the parent's data and maps the pool only privately;
# writes in the child do not reach the parent, nor the parent's the child;
# the parent runs on throughout.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli criu

BUILD=$(dirname "$CXLCR")
for t in "$BUILD/tests/rebase_test" "$BUILD/ubsan/tests/rebase_test" "$BUILD/asan/tests/rebase_test"; do
	case $t in "$BUILD/tests/rebase_test") ;; *) [ -x "$t" ] || continue ;; esac
	[ -x "$t" ] || die "$t is not built"
	"$t" >"${CXLCR_TEST_TMP:-/tmp}/rebase_test.out" 2>&1 ||
		{ cat "${CXLCR_TEST_TMP:-/tmp}/rebase_test.out"; die "$t failed"; }
	ok "$t"
done
REBASE=$BUILD/cxlcr-rebase
SNAPTOOL=$BUILD/tests/snapshot_tool
[ -x "$REBASE" ] && [ -x "$SNAPTOOL" ] || die "cxlcr-rebase or snapshot_tool is not built"

PORT=6379
COUNT=3000
SIZE=512
new_pool 4G
pod_up 1
WORK=$POOL_DIR/work
mkdir -p "$WORK/parent" "$WORK/child"

say "cxlcr run --host h0 redis-server"
SERVICES+=(parent)
"$CXLCR" run --host h0 --name parent --arena 256M --log "$POOL_DIR/parent.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no >/dev/null ||
	die "cxlcr run failed"
addr=$(status_field parent address)
hpid=$(status_field parent pid) # h0's own pid of it
pid=$(service_pid parent)       # this machine's
# The service's link on the bridge: the peer of its eth0.
peer=$(nsenter -t "$pid" -n ip -o link show eth0 | sed -n 's/^[0-9]*: eth0@if\([0-9]*\):.*/\1/p')
line=$(ip -o link show | grep "^$peer: ") || die "no link with index $peer (the peer of the service's eth0)"
link=$(sed 's/^[0-9]*: \([^@:]*\).*/\1/' <<<"$line")
bridge=$(sed -n 's/.* master \([^ ]*\) .*/\1/p' <<<"$line")
[ -n "$link" ] && [ -n "$bridge" ] || die "cannot find the service's link ($link) and bridge ($bridge)"
python3 "$KV" wait --host "$addr" --port $PORT --pid "$pid" || die "redis does not answer at $addr"
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 3 --quiet
redis-cli -h "$addr" -p $PORT set marker parent-before >/dev/null

# stopped PID: every thread of PID is in state T (bounded poll of /proc).
stopped() {
	local t s
	for t in /proc/"$1"/task/*; do
		s=$(sed 's/^.*) //' "$t/stat" | cut -d' ' -f1) || return 1
		[ "$s" = T ] || return 1
	done
}
on_exit 'kill -CONT '"$pid"' 2>/dev/null'
kill -STOP "$pid"
for _ in $(seq 2000); do stopped "$pid" && break; done
stopped "$pid" || die "the parent did not stop"

say "snapshot the frozen arena, dump the parent, resume it"
read -r gen pages_cxl pages_zero < <("$SNAPTOOL" create parent parent-snap) || die "snapshot failed"
say "snapshot $gen: $pages_cxl pages copied, $pages_zero zero"
[ "$pages_cxl" -gt 100 ] || die "the snapshot holds only $pages_cxl pages: the heap is not in the arena"
# CRIU dumps the parent on its host (`pod exec`: in h0's mount namespace,
# as a task in another one would be a nested mount namespace to CRIU, and
# in its pid namespace, where the parent's pid is $hpid).
timeout 60 "$CXLCR" pod exec h0 -- criu dump -t "$hpid" -D "$WORK/parent" -o dump.log -v2 --leave-running \
	--external "veth[eth0]:$link" --tcp-established --network-lock skip --lib "$ROOT/build/criu" ||
	{ tail -n 20 "$WORK/parent/dump.log" >&2; die "criu dump failed"; }
kill -CONT "$pid"
python3 "$KV" wait --host "$addr" --port $PORT --pid "$pid" --tries 100 || die "the parent does not answer"
[ -f "$WORK/parent/cxlcr-arena-1.img" ] || die "the dump has no arena record"

# The child: same /16 as the parent, another host part, a MAC of its own.
IFS=. read -r o1 o2 _ _ <<<"$addr"
child_ip=$o1.$o2.250.1
child_mac=02:00:$(printf '%02x:%02x' "$o1" "$o2"):fa:01
say "rebase to $child_ip ($child_mac)"
out=$("$REBASE" "$WORK/parent" "$WORK/child" --snapshot "$gen" --ip "$child_ip" --mac "$child_mac") ||
	die "cxlcr-rebase failed"
echo "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["runs_cxl"] >= 1 and j["runs_zero"] >= 1, j
assert j["vmas_out"] > j["vmas_in"], j
print("rebase: %d -> %d VMAs, %d CXL runs, %d zero runs, %d images linked, %.2f ms"
      % (j["vmas_in"], j["vmas_out"], j["runs_cxl"], j["runs_zero"], j["files_linked"], j["rebase_ms"]))' ||
	die "cxlcr-rebase said: $out"
cmp -s "$WORK/parent/pages-1.img" "$WORK/child/pages-1.img" || die "pages-1.img was not taken over"
! cmp -s "$WORK/parent/mm-1.img" "$WORK/child/mm-1.img" || die "mm-1.img was not rewritten"

say "criu restore the child on $bridge"
child_link=cxrb$$
# The parent ran in its own directory on h0's /run (daemon/host_files.h);
# the child gets one of its own here, in its place, as a restoring host
# hands CRIU its own.
mkdir -p "$WORK/child-wd"
exec 7<"$WORK/child-wd"
timeout 60 criu restore -D "$WORK/child" -o restore.log -v2 -d --tcp-close \
	--veth-pair "eth0=$child_link@$bridge" --network-lock skip --pidfile "$WORK/child/pid" \
	--inherit-fd "fd[7]:run/cxlcr/wd/parent" \
	--lib "$ROOT/build/criu" || { tail -n 20 "$WORK/child/restore.log" >&2; die "criu restore failed"; }
exec 7<&-
child=$(cat "$WORK/child/pid")
on_exit 'kill -KILL '"$child"' 2>/dev/null'
[ "$child" != "$pid" ] || die "the child has the parent's pid"
[ "$(readlink "/proc/$child/cwd")" = "$WORK/child-wd" ] || die "the child runs in $(readlink "/proc/$child/cwd")"
# The parent was dumped stopped (SIGSTOP froze it for the snapshot), and
# CRIU restores a task in the state it was dumped in.
for _ in $(seq 2000); do stopped "$child" && break; done
stopped "$child" || die "the child was not restored stopped, as its parent was dumped"
kill -CONT "$child"

python3 "$KV" wait --host "$child_ip" --port $PORT --pid "$child" --tries 200 ||
	die "the child does not answer at $child_ip"
python3 "$KV" verify --host "$child_ip" --port $PORT --count $COUNT --size $SIZE --seed 3 --quiet ||
	die "the child does not have the parent's data"
[ "$(redis-cli -h "$child_ip" -p $PORT get marker)" = parent-before ] || die "child: marker differs"
ok "the child answers at $child_ip with all $COUNT of the parent's values"

nsenter -t "$child" -n ip -o link show eth0 | grep -qi "$child_mac" || die "the child's eth0 has not MAC $child_mac"
nsenter -t "$child" -n ip -o -4 addr show eth0 | grep -q " $child_ip/" || die "the child's eth0 has not $child_ip"
! nsenter -t "$child" -n ip -o -4 addr show | grep -q " $addr/" || die "the child has the parent's address"
# (one grep per file: `grep | grep -q` fails under pipefail when the first
# one is cut off by SIGPIPE)
grep -qE " r[w-]-p .* $CXLCR_POOL\$" "/proc/$child/maps" || die "the child has no private view of the pool"
! grep -qE " ...s .* $CXLCR_POOL\$" "/proc/$child/maps" || die "the child maps the pool shared"
ok "the child has its own MAC and address, and maps the pool only privately"

say "writes on either side stay there"
redis-cli -h "$child_ip" -p $PORT set marker child >/dev/null
redis-cli -h "$child_ip" -p $PORT set child-only 1 >/dev/null
python3 "$KV" fill --host "$child_ip" --port $PORT --count $COUNT --size $SIZE --seed 4 --quiet
redis-cli -h "$addr" -p $PORT set marker parent-after >/dev/null
redis-cli -h "$addr" -p $PORT set parent-only 1 >/dev/null
[ "$(redis-cli -h "$addr" -p $PORT get marker)" = parent-after ] || die "parent: marker"
[ -z "$(redis-cli -h "$addr" -p $PORT get child-only)" ] || die "a write of the child reached the parent"
[ "$(redis-cli -h "$child_ip" -p $PORT get marker)" = child ] || die "a write of the parent reached the child"
[ -z "$(redis-cli -h "$child_ip" -p $PORT get parent-only)" ] || die "a write of the parent reached the child"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 3 --quiet ||
	die "the child's writes changed the parent's values"
python3 "$KV" verify --host "$child_ip" --port $PORT --count $COUNT --size $SIZE --seed 4 --quiet ||
	die "the child lost its own writes"
ok "child and parent are copy-on-write of each other"

[ "$(status_field parent pid)" = "$hpid" ] && [ "$(status_field parent state)" = running ] ||
	die "the parent is not the same running service"
kill -KILL "$child"
wait_exit "$child" 30
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 3 --quiet ||
	die "the parent lost data when the child ended"
ok "the parent ran on throughout, with all its data"
