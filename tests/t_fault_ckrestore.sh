#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of checkpoint and restore: at each
# of CRIU's steps of the dump and of the restore, CRIU killed or stalled
# past the deadline, the command line killed, and the worker running the
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup fcr
# rows: VERB STEP,STEP... VICTIM:HOW...
fault_matrix \
	"checkpoint pre-dump  criu:kill criu:stall src:kill cli:kill" \
	"checkpoint post-dump criu:kill criu:stall src:kill src:stall cli:kill" \
	"restore    pre-restore,setup-namespaces,post-setup-namespaces,post-restore
	            criu:kill criu:stall dst:kill cli:kill" \
	"restore    pre-resume  criu:kill criu:stall dst:kill dst:stall cli:kill" \
	"restore    post-resume criu:kill"
fault_done
