#!/usr/bin/env bash
# A copy-mode child whose process is forked by a thread other than its
# main one: that grandchild dies with the child's pager too.
#
# The pager traces the child's main thread (PTRACE_O_EXITKILL,
# PTRACE_O_TRACEFORK), so that the child, and every process that thread
# forks, dies when the pager does: their pages come from the pager, and
# they must never run on without it. Tracing is per thread, so a process
# forked by another thread is not traced; it ends all the same, because
# the child is the init of its own PID namespace, and the kernel kills
# every process of a namespace whose init dies (docs/remote-fork.md said
# otherwise). tests/thread_forker.c forks from a thread of its own when
# asked over TCP; its copy-mode child is asked, its pager killed, and the
# child and the grandchild must both end.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

PORT=7000
FORKER=$ROOT/build/tests/thread_forker
[ -x "$FORKER" ] || die "$FORKER is not built (make)"
pager_of() { on h1 awk '/^TracerPid:/ { print $2 }' "/proc/$1/status"; }
# ask ADDRESS: the service's thread forks; true once it says so.
ask() { python3 - "$1" $PORT <<'PYEOF'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(b"fork\n")
got = b""
while not got.endswith(b"\n"):
    chunk = s.recv(64)
    if not chunk:
        break
    got += chunk
sys.exit(0 if got == b"forked\n" else 1)
PYEOF
}

new_pool 4G
pod_up 2
SERVICES+=(tf)
"$CXLCR" run --host h0 --name tf --arena 64M --log "$POOL_DIR/tf.log" -- "$FORKER" $PORT >/dev/null ||
	die "cxlcr run thread_forker failed"
"$CXLCR" snapshot tf >/dev/null || die "cxlcr snapshot tf failed"
out=$("$CXLCR" fork tf --to h1 --mode copy --json) || die "cxlcr fork tf --mode copy failed"
read -r kid addr pid < <(echo "$out" | kids_of)
SERVICES+=("$kid")
pager=$(pager_of "$pid")
[ "$pager" -gt 0 ] || die "$kid (pid $pid on h1) has no pager tracing it"

ask "$addr" || die "$kid's thread did not fork"
kid_here=$(machine_pid h1 "$pid")
grand=$(pgrep -P "$kid_here" | head -n 1) || die "$kid has no child after its thread forked"
[ -n "$grand" ] || die "$kid has no child after its thread forked"
ok "$kid (copy mode): a thread other than its main one forked process $grand"

on h1 kill -9 "$pager"
wait_exit "$kid_here" 10
wait_exit "$grand" 10
ok "its pager killed: $kid and the process its thread forked both ended"
