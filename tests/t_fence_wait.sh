#!/usr/bin/env bash
# A fenced host that comes back while the winner is still recovering its
# services waits for it (issue 16, point 2: fencing):
#   h0 runs Redis with recovery points and is frozen; h1 fences it and
#   begins the recovery, whose CRIU restore is held at pre-restore (the
#   CRIU hook). h0 thaws meanwhile: its daemon kills its old Redis at once,
#   then says it waits for h1 and neither acknowledges its fence, nor
#   frees its quarantined arena, nor restores Redis itself from its point
#   (the service is h1's to recover), nor kills a process of its own that
#   got the old redis's pid and maps the pool. Once h1's restore goes on, Redis
#   answers on h1 with its values, and only then does h0 acknowledge and
#   free its quarantined arena.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
criu_hook fw
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
on_exit '"$CXLCR" pod thaw h0 >/dev/null 2>&1; touch "$HOOK/go"'
point_redis "$NAME" h0
python3 "$KV" fill --host "$addr" --port $PORT --count 2000 --size 300 --seed 7 --quiet
two_new_points "$NAME" ||
	die "no recovery point after the writes"
old=$(status_field "$NAME" pid) # h0's own pid of it
old_m=$(service_pid "$NAME")    # this machine's
quarantined() {
	"$CXLCR" pool check --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["quarantined"])'
}
h0_says() { "$CXLCR" pod logs h0 | grep -q "$1"; }

say "h0 frozen; h1's recovery held at CRIU's pre-restore"
echo pre-restore >"$HOOK/pause-at"
"$CXLCR" pod freeze h0 >/dev/null || die "pod freeze h0 failed"
criu_reached || die "h1's recovery did not reach CRIU's restore"
"$CXLCR" pod thaw h0 >/dev/null || die "pod thaw h0 failed"
wait_exit "$old_m" 10
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ] && ! h0_says "waiting for host entry 1 to finish"; do
	python3 -c 'import time; time.sleep(0.05)'
done
h0_says "waiting for host entry 1 to finish" || die "h0 does not wait for h1: $("$CXLCR" pod logs h0 | tail -n 4)"
if h0_says "acknowledged"; then die "h0 acknowledged its fence while h1 was recovering"; fi
if h0_says "restoring it from its recovery point"; then die "h0 restored its old service itself"; fi
[ "$(quarantined)" -ge 1 ] || die "h0 freed its quarantined arena while h1 was recovering"
ok "h0 killed its old redis ($old) and waits; its arena stays quarantined"

# While it waits, h0's daemon kills, on every beat, what is left of its old
# services: only processes that are still them. A process of h0 that got
# the old redis's pid and maps the pool is not (its start time is not the
# region's owner_start); it used to be killed.
say "a process of h0 that got pid $old and maps the pool lives on while h0 waits"
reuse_pid_on h0 "$old" python3 -c 'import mmap, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 1 << 20, prot=mmap.PROT_READ)
time.sleep(3600)' "$CXLCR_POOL"
h0_beats() { "$CXLCR" hosts --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h.get("host") == "h0"][0]["counter"])'; }
from=$(h0_beats)
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ] && [ "$(h0_beats)" -lt $((from + 10)) ]; do
	python3 -c 'import time; time.sleep(0.05)' # polling a condition, bounded
done
[ "$(h0_beats)" -ge $((from + 10)) ] || die "h0 did not beat 10 times in 20 s while it waited"
kill -0 "$NEWCOMER" 2>/dev/null ||
	die "h0's fenced daemon killed pid $old, no longer its old redis but a process that maps the pool"
h0_says "waiting for host entry 1 to finish" || die "h0 stopped waiting for h1"
ok "pid $old, now another process that maps the pool, lives on through 10 of h0's beats"

say "h1's restore goes on"
touch "$HOOK/go"
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do # the restore, then h0's acknowledgement
	h0_says "acknowledged" && break
	python3 -c 'import time; time.sleep(0.05)'
done
h0_says "acknowledged" || die "h0 did not acknowledge once h1 was done: $("$CXLCR" pod logs h0 | tail -n 4)"
[ "$(status_field "$NAME" host)" = h1 ] && [ "$(status_field "$NAME" state)" = running ] ||
	die "the service is $(status_field "$NAME" state) on $(status_field "$NAME" host), not running on h1"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "the recovered redis does not answer"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 7 --quiet ||
	die "the recovered redis lacks values"
[ "$(quarantined)" = 0 ] || die "h0's quarantined arena was not freed after its acknowledgement"
if h0_says "restoring it from its recovery point"; then die "h0 restored its old service itself"; fi
ok "recovered on h1 with its values; h0 acknowledged only then and freed its arena"
