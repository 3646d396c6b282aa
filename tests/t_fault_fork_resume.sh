#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of a fork child's restore, its
# last steps (the first ones are tests/t_fault_fork_restore.sh): CRIU
# killed or stalled past the deadline at pre-resume and post-restore, the
# parent's (fork API) worker, the destination's worker and the command
# line killed; and the fork API's worker stalled while the child is
# restored (the destination then makes the child under the lease it still
# holds), or the destination's worker once CRIU restored it (the child,
# running, ends when the worker is killed past its deadline).
# The parent goes on with all its data and every acknowledged write; no
# half-made child is left holding a borrow, a region, a link or a process;
# the next fork works.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup ffs
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"fork pre-resume    criu:kill criu:stall src:kill dst:kill cli:kill" \
	"fork post-restore  criu:kill criu:stall src:kill src:stall dst:kill dst:stall cli:kill"
fault_done
