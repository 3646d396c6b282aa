#!/usr/bin/env bash
# A pod service that execs (a shell or wrapper that ends in `exec server`,
# as pyenv shims and start scripts do) keeps its arena: the preload of the
# new program finds the arena its process already owns. --env reaches the
# service, whose pod daemon starts it with a clean environment. It runs
# in a directory of its own on its host's /run (daemon/host_files.h), which
# each host it moves to, and each fork child, makes for itself. The
# service then migrates like any other.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

new_pool 4G
pod_up 2
SERVICES+=(wrapped)
"$CXLCR" run --host h0 --name wrapped --arena 256M --env CXLCR_TEST_MARK=42 --log "$POOL_DIR/wrapped.log" -- \
	sh -c 'exec redis-server --port 6379 --protected-mode no --save "" --appendonly no' >/dev/null ||
	die "cxlcr run of a service that execs failed"
addr=$(status_field wrapped address)
python3 "$KV" wait --host "$addr" --port 6379 --pid "$(service_pid wrapped)" ||
	{ cat "$POOL_DIR/wrapped.log" >&2; die "the exec'd service does not answer"; }
python3 "$KV" fill --host "$addr" --port 6379 --count 60000 --size 1000 --seed 4 --quiet
pid=$(service_pid wrapped) # this machine's pid of it (its status pid is h0's)
[ "$(cat "/proc/$pid/comm")" = redis-server ] || die "pid $pid is $(cat "/proc/$pid/comm"), not the exec'd server"
tr '\0' '\n' <"/proc/$pid/environ" | grep -qx CXLCR_TEST_MARK=42 || die "--env did not reach the service"
# It runs in its own directory on h0's /run, a tmpfs, not from where
# `cxlcr run` ran (what it writes where it stands stays out of the user's
# directory, and CRIU's parasite works there in every dump).
wd=/run/cxlcr/wd/wrapped
cwd_of() { on "$1" readlink "/proc/$(status_field "$2" pid)/cwd"; } # (the host's pids)
[ "$(cwd_of h0 wrapped)" = $wd ] || die "the service runs in $(cwd_of h0 wrapped), not $wd"
[ "$(on h0 stat -f -c %T $wd)" = tmpfs ] || die "$wd is on $(on h0 stat -f -c %T $wd), not a tmpfs"
check_heap wrapped $((50 * 1000 * 1000))
ok "the service exec'd into redis-server and kept its arena; --env reached it; it runs in $wd"
on h1 test ! -e $wd || die "h1 has $wd before the service moved there"
"$CXLCR" migrate wrapped --to h1 >/dev/null || die "migrate after the exec failed"
python3 "$KV" verify --host "$addr" --port 6379 --count 60000 --size 1000 --seed 4 --quiet ||
	die "values differ after the migrate"
[ "$(cwd_of h1 wrapped)" = $wd ] || die "on h1 the service runs in $(cwd_of h1 wrapped), not $wd"
on h0 test ! -e $wd || die "h0 kept $wd after the service left"
ok "migrated to h1 with every value; it runs in h1's own $wd, and h0's is gone"

# A fork child runs in a directory of its own name, made by its host.
"$CXLCR" fork wrapped --to h0 >/dev/null || die "cxlcr fork wrapped failed"
SERVICES+=(wrapped.1)
[ "$(cwd_of h0 wrapped.1)" = /run/cxlcr/wd/wrapped.1 ] || die "the fork child runs in $(cwd_of h0 wrapped.1)"
on h0 test ! -e $wd || die "the fork child's host made the parent's $wd"
python3 "$KV" verify --host "$(status_field wrapped.1 address)" --port 6379 --count 60000 --size 1000 --seed 4 \
	--quiet || die "the fork child's values differ"
"$CXLCR" stop wrapped.1 >/dev/null || die "cxlcr stop wrapped.1 failed"
on h0 test ! -e /run/cxlcr/wd/wrapped.1 || die "the stopped child's directory is still there"
ok "a fork child on h0 runs in /run/cxlcr/wd/wrapped.1, which goes with its stop"

# Stopped, its link is gone when `stop` returns, not when the kernel gets
# round to its network namespace: a service started next gets the same
# address and MAC, and packets for it sent down the old link were answered
# with resets (bench/points.sh's fill, right after a stop, saw them).
link=$("$CXLCR" status wrapped | sed -n 's/^address .*(link \(.*\))$/\1/p')
[ -n "$link" ] || die "status gives no link for wrapped"
pod=$(( $(echo "$addr" | cut -d. -f2) - 78 ))
ip -n "cxlcr$pod-pod" link show "$link" >/dev/null 2>&1 || die "no link $link on the pod's bridge before the stop"
"$CXLCR" stop wrapped >/dev/null || die "cxlcr stop wrapped failed"
if ip -n "cxlcr$pod-pod" link show "$link" >/dev/null 2>&1; then
	die "link $link of the stopped service is still on the pod's bridge"
fi
SERVICES=(next)
"$CXLCR" run --host h0 --name next --arena 256M --log "$POOL_DIR/next.log" -- \
	redis-server --port 6379 --protected-mode no --save "" --appendonly no >/dev/null || die "cxlcr run next failed"
[ "$(status_field next address)" = "$addr" ] || die "next did not get the stopped service's address $addr"
python3 "$KV" wait --host "$addr" --port 6379 --pid "$(service_pid next)" || die "next does not answer"
python3 "$KV" fill --host "$addr" --port 6379 --count 60000 --size 1000 --seed 5 --quiet ||
	die "a fill of the service at the stopped one's address failed"
python3 "$KV" verify --host "$addr" --port 6379 --count 60000 --size 1000 --seed 5 --quiet || die "next lost values"
ok "stopped: its link left with it; the next service at its address ($addr) took a fill and kept it"
