#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of migrate: at each of CRIU's
# steps of the source's dump and of the destination's restore, CRIU killed
# or stalled past the deadline, the command line killed, the source's
# worker killed, and (in the restore) the destination's worker killed. The
# service ends running on one host, alone, with all its data and every
# acknowledged write, and the next migrate works. (Its workers stalled:
# tests/t_fault_migrate_stall.sh.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup fmg
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"migrate pre-dump,post-dump criu:kill criu:stall src:kill cli:kill" \
	"migrate pre-restore,setup-namespaces,post-setup-namespaces,post-restore,pre-resume
	         criu:kill criu:stall src:kill dst:kill cli:kill" \
	"migrate post-resume        criu:kill"
fault_done
