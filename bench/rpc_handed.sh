#!/usr/bin/env bash
# The control path alone (issue 15 point 6): a verb handed to a host's
# daemon over TCP (the host table's address, the request authenticated
# with the pod's key, the answers sealed and relayed in protobuf frames)
# against the daemon's Unix socket ($CXLCR_RPC_TRANSPORT=unix).
#
# Since each emulated host has its own /run, only a command line on that
# host can reach its Unix socket: the calls run on h1 (`cxlcr pod exec
# h1`), in one loop, alternating the transports (and which goes first).
# Each is a verb h1's daemon refuses at once (a restore of a service that
# does not exist), timed from the command line's start to its exit; the
# median of each transport and the ratio tcp/unix are printed. A migrate
# makes one such call while the service is frozen (the restore on the
# destination), which is always TCP now (the source's worker cannot see the
# destination's /run): the whole-migrate comparison, bench/rpc_transport.sh
# at commit 3318484, cannot be run any more. Figures only; take them on a
# quiet machine (the load average is printed first).
#
#   bench/rpc_handed.sh                  200 calls per transport
#   RPC_CALLS=50 bench/rpc_handed.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CXLCR=$ROOT/build/cxlcr
CALLS=${RPC_CALLS:-200}
say() { printf 'rpc_handed: %s\n' "$*"; }
die() { printf 'rpc_handed: error: %s\n' "$*" >&2; exit 1; }
[ "$CALLS" -ge 5 ] || die "RPC_CALLS: at least 5"
[ "$(id -u)" -eq 0 ] || die "run as root (the pod needs it)"
[ -x "$CXLCR" ] || die "build first (make)"

WORK=$(mktemp -d /dev/shm/cxlcr-handed-XXXX)
export CXLCR_POOL=$WORK/pool
unset CXLCR_RPC_TRANSPORT
cleanup() {
	local rc=$?
	trap - EXIT
	timeout 120 "$CXLCR" pod down >/dev/null 2>&1
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
"$CXLCR" pool format --size 1G >/dev/null || die "cxlcr pool format failed"
"$CXLCR" pod up --hosts 2 >/dev/null || die "cxlcr pod up failed"

# On h1: CALLS calls per transport, alternating; "TRANSPORT MICROSECONDS"
# per call. The clock is read by the loop's own shell ($EPOCHREALTIME).
# shellcheck disable=SC2016 # expanded on h1
"$CXLCR" pod exec h1 -- env CXLCR="$CXLCR" CXLCR_POOL="$CXLCR_POOL" CALLS="$CALLS" bash -c '
for ((i = 0; i < CALLS; i++)); do
	order="unix tcp"
	[ $((i % 2)) = 0 ] || order="tcp unix"
	for t in $order; do
		t0=$EPOCHREALTIME
		if CXLCR_RPC_TRANSPORT=$t "$CXLCR" restore no-such --host h1 2>"/tmp/handed.err"; then
			echo "a restore of no-such succeeded" >&2
			exit 1
		fi
		t1=$EPOCHREALTIME
		echo "$t $(( (${t1/./} - ${t0/./}) ))"
	done
done
grep -q "no-such" /tmp/handed.err || { echo "the refusal does not name the service: $(cat /tmp/handed.err)" >&2; exit 1; }
' >"$WORK/calls" || die "the calls on h1 failed"
# Both transports reached h1's daemon (it logs every request it serves).
served=$("$CXLCR" pod logs h1 | grep -c "restore, exit" || true)
[ "$served" -ge $((2 * CALLS)) ] || die "h1's daemon served $served of $((2 * CALLS)) requests"

python3 - "$WORK/calls" <<'PYEOF'
import statistics, sys
us = {"unix": [], "tcp": []}
for line in open(sys.argv[1]):
    t, v = line.split()
    us[t].append(int(v) / 1000.0)
med = {t: statistics.median(v) for t, v in us.items()}
for t in ("unix", "tcp"):
    v = sorted(us[t])
    print("rpc_handed: %-4s %3d calls: median %.2f ms (p10 %.2f, p90 %.2f)"
          % (t, len(v), med[t], v[len(v) // 10], v[len(v) * 9 // 10]))
print("rpc_handed: ratio tcp/unix (medians): %.2f" % (med["tcp"] / med["unix"]))
PYEOF
