#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of a fork child's restore: CRIU
# killed or stalled past the deadline at each of its steps, the parent's
# (fork API) worker, the destination's worker and the command line killed.
# The parent goes on with all its data and every acknowledged write; no
# half-made child is left holding a borrow, a region, a link or a process;
# the next fork works.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup ffk
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"fork pre-restore,setup-namespaces                      criu:kill criu:stall" \
	"fork post-setup-namespaces,post-restore,pre-resume     criu:kill criu:stall src:kill dst:kill cli:kill"
fault_done
