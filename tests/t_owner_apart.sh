#!/usr/bin/env bash
# Hosts on different machines (issue 15): whether the restored copy that
# took a frozen source's arena over runs is judged on the copy's own
# machine, by its host's daemon asked over the network (the internal verb
# owner-state, control/owner_state.h), not in the source's /proc, which on
# a real pod does not show another machine's tasks (nor does an emulated
# host's: each has a pid namespace of its own, emulation/hostpid.h).
#   The fault matrix's cases where that judgement decides (tests/lib/
#   faults.sh): a migrate whose source worker is killed while the
#   destination's CRIU holds the restored task at pre-resume (not run yet:
#   waited for, on its own machine), and whose CRIU is killed at pre-resume
#   (the task never runs: the source takes its arena back). Each ends with
#   the service running on one host, alone, with all its data and every
#   acknowledged write, and the next migrate works; and the destinations'
#   daemons were asked. (The source's worker killed at post-resume is not a
#   case of t_fault_migrate either.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup apart
fault_matrix \
	"migrate pre-resume src:kill" \
	"migrate pre-resume criu:kill"
asked=0
for h in h0 h1; do
	n=$("$CXLCR" pod logs "$h" | grep -c "request done: owner-state, exit 0" || true)
	asked=$((asked + n))
done
[ "$asked" -ge 2 ] || die "the hosts' daemons were asked $asked times whether a copy runs (owner-state), not 2"
ok "owner-state asked of the copy's host $asked times"
fault_done
