#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of a fork child's restore, its
# first steps: CRIU killed or stalled past the deadline at each, the
# parent's (fork API) worker, the destination's worker and the command
# line killed. (The later steps are tests/t_fault_fork_resume.sh: the two
# halves of the matrix run as two tests, each well within the runner's
# per-test limit under load; as one they took 245 s of its 300 in CI.)
# The parent goes on with all its data and every acknowledged write; no
# half-made child is left holding a borrow, a region, a link or a process;
# the next fork works.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup ffr
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"fork pre-restore,setup-namespaces,post-setup-namespaces
	      criu:kill criu:stall src:kill dst:kill cli:kill"
fault_done
