#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of snapshots: CRIU killed or
# stalled past the deadline in the dump of a snapshot and of a fork's first
# snapshot, the worker and the command line killed at each of its steps.
# The service goes on with all its data and every acknowledged write; no
# half-made snapshot is left holding a region or an image set; the next
# snapshot or fork works.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup fsn
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"snapshot pre-dump  criu:kill criu:stall src:kill cli:kill" \
	"snapshot post-dump criu:kill criu:stall src:kill src:stall cli:kill" \
	"fork     pre-dump  criu:kill criu:stall src:kill cli:kill" \
	"fork     post-dump criu:kill criu:stall src:kill src:stall cli:kill"
fault_done
