#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of checkpoint and restore: at each
# of CRIU's steps of the dump and of the restore, CRIU killed or stalled
# past the deadline, the command line killed, and the worker running the
# verb killed. The service ends running (a checkpointed one restored), alone,
# with all its data and every acknowledged write, and the verb works again.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup fcr
# verb        steps                                               victims:how
MATRIX=(
	"checkpoint pre-dump,post-dump                            criu:kill criu:stall src:kill cli:kill"
	"restore    post-setup-namespaces,post-restore,pre-resume criu:kill criu:stall dst:kill cli:kill"
	"restore    pre-restore,setup-namespaces                  criu:kill criu:stall"
	"restore    post-resume                                   criu:kill"
)
for row in "${MATRIX[@]}"; do
	read -r verb steps victims <<<"$row"
	for step in ${steps//,/ }; do
		for v in $victims; do
			fault_case "$verb" "$step" "${v%:*}" "${v#*:}"
		done
	done
done
fault_done
