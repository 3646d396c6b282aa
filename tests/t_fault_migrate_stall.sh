#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of migrate, its workers stalled
# (SIGSTOP, never continued): the source's worker after the dump and after
# the destination's CRIU restored, the destination's before and after its
# CRIU restored. Each is killed by its daemon past the worker deadline
# (changing nothing after); the service ends running on one host, alone,
# with all its data and every acknowledged write, status says the verb's
# outcome, and the next migrate works.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup fms
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"migrate post-dump    src:stall" \
	"migrate post-restore src:stall dst:stall" \
	"migrate pre-restore  dst:stall"
fault_done
