#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of snapshot and fork: CRIU killed
# or stalled past the deadline in the snapshot's dump and in the fork
# child's restore, the workers and the command line killed at each of those
# steps. The parent goes on with all its data and every acknowledged
# write; no half-made child or snapshot is left holding a borrow, a region
# or a link; the next snapshot or fork works.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/faults.sh
. "$ROOT/tests/lib/faults.sh"

fault_setup fsf
# verb      steps                                                    victims/how
MATRIX=(
	"snapshot pre-dump,post-dump                                 criu:kill criu:stall src:kill cli:kill"
	"fork     pre-dump,post-dump                                 criu:kill criu:stall src:kill cli:kill"
	"fork     post-setup-namespaces,post-restore,pre-resume      criu:kill criu:stall src:kill dst:kill cli:kill"
	"fork     pre-restore,setup-namespaces                       criu:kill criu:stall"
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
