#!/usr/bin/env bash
# The fault matrix (tests/lib/faults.sh) of migrate: at each of CRIU's
# steps of the source's dump and of the destination's restore, CRIU killed
# or stalled past the deadline, the command line killed, the source's
# worker killed, and (in the restore) the destination's worker killed. The
# service ends running on one host, alone, with all its data and every
# acknowledged write, and the next migrate works. Its workers stalled
# (SIGSTOP, never continued): the source's worker after the dump and after
# the destination's CRIU restored, the destination's before and after its
# CRIU restored; each is killed by its daemon past the worker deadline
# (changing nothing after), and status says the verb's outcome.
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
	"migrate post-resume        criu:kill src:kill" \
	"migrate post-dump          src:stall" \
	"migrate post-restore       src:stall dst:stall" \
	"migrate pre-restore        dst:stall"
fault_done
