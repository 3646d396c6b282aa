# shellcheck shell=bash
# Sourced after tests/lib/common.sh (and its new_pool) by the tests that
# drive bench/loadclient.
#
# loadclient_path: prints the load client to use: the Makefile's
# (build/bench/loadclient) when it is there and newer than its source,
# otherwise one built now into the test's pool directory.
loadclient_path() {
	local built
	built=$(dirname "$CXLCR")/bench/loadclient
	if [ -x "$built" ] && [ ! "$ROOT/bench/loadclient.c" -nt "$built" ]; then
		echo "$built"
		return
	fi
	gcc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -O2 -o "$POOL_DIR/loadclient" \
		"$ROOT/bench/loadclient.c" >&2 || die "cannot build bench/loadclient.c"
	echo "$POOL_DIR/loadclient"
}

# daemon_pids: the pids of this pod's cxlcrd processes, h0 first.
daemon_pids() {
	"$CXLCR" pod up --hosts 2 --json | python3 -c '
import json, sys
print(" ".join(str(h["daemon_pid"]) for h in sorted(json.load(sys.stdin)["hosts"], key=lambda h: h["host"])))'
}
