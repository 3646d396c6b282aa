#!/usr/bin/env bash
# Emulated hosts fail as a whole (cxlcr pod crash | freeze | thaw): every
# process of a host lives in its cgroup (emulation/hostgroup.h), its
# daemon, the services it runs, their trackers, and a service migrated
# there; none of another host's. freeze stops them all and thaw resumes
# them, with every value intact (meanwhile `status` says the frozen host's
# service is unknown: only that host may say whether it runs); crash ends
# them all at once, and the other host goes on; pod down cleans up after a
# crashed host.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

PORT=6379
# The daemons' lease is long here: this test is about what a freeze and a
# crash do to a host's processes; a host declared dead is fenced and its
# services recovered or lost (tests/t_hard_crash.sh, t_fence_thaw.sh).
export CXLCR_LEASE_MS=10000
COUNT=5000
new_pool 4G
pod_up 2
root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$root" ] || skip "no cgroup v2 hierarchy on this machine"
pod=$(basename "$(for d in /run/cxlcr/pod*; do [ "$(cat "$d/pool" 2>/dev/null)" = "$(realpath "$CXLCR_POOL")" ] && echo "$d"; done)")
group() { echo "$root/cxlcr/$pod/$1"; }
members() { cat "$(group "$1")/cgroup.procs"; }
in_group() { grep -qx "$2" <(members "$1"); }
frozen() { awk '$1 == "frozen" {print $2}' "$(group "$1")/cgroup.events"; }
daemon_of() { awk '{ print $1 }' "/run/cxlcr/$pod/$1.pid"; } # "PID START"

for h in h0 h1; do
	in_group "$h" "$(daemon_of $h)" || die "$h's daemon is not in $(group $h)"
done
pod_redis r h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size 500 --seed 3 --quiet
pid=$(service_pid r) # this machine's pid of it (cgroup.procs here names those)
in_group h0 "$pid" || die "the service is not in h0's cgroup"
in_group h1 "$pid" && die "the service is in h1's cgroup"
ok "daemons and services live in their host's cgroup"

say "freeze h0, thaw it"
"$CXLCR" pod freeze h0 >/dev/null || die "pod freeze h0 failed"
[ "$(frozen h0)" = 1 ] || die "h0 is not frozen"
[ "$(frozen h1)" = 0 ] || die "h1 froze with h0"
# Whether the service runs is h0's to say (its pid is h0's own), and h0
# says nothing: its state is unknown, with the reason, and the rest of its
# status is the pool's.
"$CXLCR" status r --json >"$POOL_DIR/frozen.json" || die "status of a frozen host's service failed"
[ "$(json state <"$POOL_DIR/frozen.json")" = unknown ] && [ "$(json state_reason <"$POOL_DIR/frozen.json")" != None ] &&
	[ "$(json host <"$POOL_DIR/frozen.json")" = h0 ] || die "status of a frozen host's service: $(cat "$POOL_DIR/frozen.json")"
"$CXLCR" pod thaw h0 >/dev/null || die "pod thaw h0 failed"
[ "$(frozen h0)" = 0 ] || die "h0 is still frozen"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size 500 --seed 3 --quiet ||
	die "values lost across a freeze"
[ "$(status_field r state)" = running ] || die "the service is $(status_field r state) once h0 is thawed"
ok "a frozen host's processes stop and resume with every value; meanwhile its service's state is unknown ($(json state_reason <"$POOL_DIR/frozen.json"))"

say "migrate the service to h1: it moves to h1's cgroup"
"$CXLCR" migrate r --to h1 >/dev/null || die "migrate failed"
pid=$(service_pid r)
in_group h1 "$pid" || die "the migrated service is not in h1's cgroup ($(cat /proc/$pid/cgroup | tr '\n' ' '))"
in_group h0 "$pid" && die "the migrated service is still in h0's cgroup"
ok "a restored service lives in its new host's cgroup"

say "crash h1"
d1=$(daemon_of h1)
"$CXLCR" pod crash h1 >/dev/null || die "pod crash h1 failed"
wait_exit "$pid" 10
wait_exit "$d1" 10
[ -z "$(members h1)" ] || die "processes left in h1's cgroup: $(members h1 | tr '\n' ' ')"
kill -0 "$(daemon_of h0)" || die "h0's daemon died with h1"
[ "$(status_field r state)" != running ] || die "status says the crashed service runs"
ok "a crash ends every process of the host at once; the other host goes on"

set +e
out=$("$CXLCR" pod crash h7 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || die "pod crash of a host that is not up: exit $rc ($out)"
ok "pod crash of a host that is not up: $out"
