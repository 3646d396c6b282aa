#!/usr/bin/env bash
# A migrate's source that ends while it is frozen (killed: the OOM killer,
# an operator), and a destination whose restore then fails: the service's
# checkpoint is its only way back, and it must be kept. The old code took
# the arena back for the dead source (its epoch moved past the
# checkpoint's), reclaimed the checkpoint, and said the service went on
# running: nothing could restore it. Now the migrate says the process has
# ended, the service is `checkpointed`, and a restore brings it back with
# every value.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

PORT=6379
verify() { python3 "$KV" verify --host "$addr" --port $PORT --count 4000 --size 300 --seed 13 --quiet; }

new_pool 4G
criu_hook msd
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
pod_redis redis h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count 4000 --size 300 --seed 13 --quiet

# The destination's CRIU waits at pre-restore: the source is frozen, its
# checkpoint published.
echo pre-restore >"$HOOK/pause-at"
"$CXLCR" migrate redis --to h1 >/dev/null 2>"$POOL_DIR/migrate.err" &
cli=$!
criu_reached "$cli" || die "the restore's CRIU never reached pre-restore: $(cat "$POOL_DIR/migrate.err")"
[ "$(cat "$HOOK/criu.host")" = h1 ] || die "the CRIU held is on $(cat "$HOOK/criu.host"), not h1"
on h0 kill -KILL "$(status_field redis pid)" || die "cannot kill the frozen source on h0"
kill -KILL "$(hook_pid criu.pid)"
touch "$HOOK/go"
wait "$cli" && die "the migrate succeeded though its restore's CRIU was killed"
err=$(cat "$POOL_DIR/migrate.err")
[ "$(echo "$err" | wc -l)" -eq 1 ] || die "not one line: $err"
echo "$err" | grep -q "its process has ended" || die "the migrate does not say the source ended: $err"
echo "$err" | grep -q "goes on running" && die "the migrate says a dead source goes on running: $err"
ok "the source killed while frozen, the restore failed: $err"

state=$(status_field redis state)
[ "$state" = checkpointed ] || die "redis is $state after its source died, not checkpointed"
"$CXLCR" restore redis --host h1 >/dev/null 2>"$POOL_DIR/restore.err" ||
	die "the restore from the kept checkpoint failed: $(cat "$POOL_DIR/restore.err")"
verify || die "redis restored on h1 lacks values"
ok "redis is checkpointed, and restored on h1 with every value"
