#!/usr/bin/env bash
# A pod service that execs (a shell or wrapper that ends in `exec server`,
# as pyenv shims and start scripts do) keeps its arena: the preload of the
# new program finds the arena its process already owns. --env reaches the
# service, whose pod daemon starts it with a clean environment. It runs
# from /. The service then migrates like any other.
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
# It runs from /, not from where `cxlcr run` ran (what it writes where it
# stands stays out of the user's directory; a host it moves to has /).
[ "$(readlink "/proc/$pid/cwd")" = / ] || die "the service runs from $(readlink "/proc/$pid/cwd"), not /"
check_heap wrapped $((50 * 1000 * 1000))
ok "the service exec'd into redis-server and kept its arena; --env reached it; it runs from /"
"$CXLCR" migrate wrapped --to h1 >/dev/null || die "migrate after the exec failed"
python3 "$KV" verify --host "$addr" --port 6379 --count 60000 --size 1000 --seed 4 --quiet ||
	die "values differ after the migrate"
ok "migrated to h1 with every value"

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
