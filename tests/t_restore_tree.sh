#!/usr/bin/env bash
# A restore of a service of two processes with an arena each is all or
# nothing (issue 12 point 6): the plugin checks every task's records before
# any task takes its arena, and releases the network lock only after all
# did. The service (tests/lib/two_arenas.py: a Python whose child Python has
# an arena of its own) is checkpointed on h0; its restore on h1 is held by
# CRIU's action script at post-restore (after the plugin's first check),
# the child's arena is taken over meanwhile (its owner epoch bumped in the
# pool, tests/lib/poolimg.py), and the restore is let go: it must
# fail naming that arena, leave the service's own arena as it was (owner
# epoch unchanged: not taken by the root task that was then killed), and
# never put the service's link on the bridge. (Task by task, the root took
# its arena and released the network lock before the child was refused.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need criu

PY=$(python3 -c 'import sys; print(sys.executable)')
new_pool 4G
criu_hook tree
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2

say "cxlcr run --host h0 two_arenas.py: two processes, arenas $NAME and $NAME-b"
SERVICES+=("$NAME" "$NAME-b")
"$CXLCR" run --host h0 --name "$NAME" --arena 256M --log "$POOL_DIR/$NAME.log" -- \
	"$PY" "$ROOT/tests/lib/two_arenas.py" "$NAME-b" >/dev/null || die "cxlcr run failed"
# The child's arena is in use once its owner is set (its host is the
# service's own UTS name: the service runs in a namespace of its own).
child_pid() { "$CXLCR" status "$NAME-b" --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null || echo 0; }
for _ in $(seq 200); do
	[ "$(child_pid)" -gt 0 ] && break
	python3 -c 'import time; time.sleep(0.05)'  # polling the child's arena, bounded
done
[ "$(child_pid)" -gt 0 ] || die "the child's arena $NAME-b is not in use"
ok "$NAME (pid $(status_field "$NAME" pid)) and its child (pid $(child_pid)) each own an arena"

"$CXLCR" checkpoint "$NAME" >/dev/null || die "cxlcr checkpoint failed"
epoch=$(status_field "$NAME" owner_epoch)
say "checkpointed (epoch $epoch); restore on h1, held at post-restore"
rm -f "$HOOK/go" "$HOOK/criu.pid"
echo post-restore >"$HOOK/pause-at"
rc=0
"$CXLCR" restore "$NAME" --host h1 >/dev/null 2>"$POOL_DIR/restore.err" &
rpid=$!
criu_reached "$rpid" || { cat "$POOL_DIR/restore.err" >&2; die "CRIU never reached post-restore"; }
python3 "$ROOT/tests/lib/poolimg.py" bump-epoch "$CXLCR_POOL" "$NAME-b" >/dev/null ||
	die "cannot take $NAME-b over"
touch "$HOOK/go"
wait "$rpid" || rc=$?
rm -f "$HOOK/pause-at" "$HOOK/go"
[ $rc -ne 0 ] || die "the restore succeeded without the child's arena"
err=$(cat "$POOL_DIR/restore.err")
[ "$(wc -l <"$POOL_DIR/restore.err")" -eq 1 ] || die "not one line: $err"
echo "$err" | grep -q "$NAME-b" || die "the refusal does not name $NAME-b: $err"
ok "refused: $err"
now=$(status_field "$NAME" owner_epoch)
[ "$now" = "$epoch" ] || die "the service's arena was taken by the refused restore: epoch $epoch, now $now"
ok "$NAME's arena was not taken (epoch $now)"
# CRIU's log is in h1's own /var/lib/cxlcr (emulation/hostfs.h).
log=$(echo "$err" | sed -n 's/.*(log \(.*\))$/\1/p')
[ -n "$log" ] && "$CXLCR" pod exec h1 -- cat "$log" >"$POOL_DIR/criu-restore.log" || die "no CRIU log on h1 in: $err"
! grep -q "network lock released" "$POOL_DIR/criu-restore.log" || die "the network lock was released for a refused restore ($log)"
grep -q "refusing to restore" "$POOL_DIR/criu-restore.log" || die "the plugin's refusal is not in $log"
ok "the network lock was never released"
