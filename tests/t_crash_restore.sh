#!/usr/bin/env bash
# A crashed service comes back from its newest recovery point (issue 16,
# point 5), on its own host, with its address:
#   a. a Redis with recovery points is killed (SIGKILL) after values were
#      written, a point was taken after them, and more was written: its
#      daemon restores it (`cxlcr restore --recovery-point`, which resets
#      the heap to the point first, whatever it had become since): a new
#      process answers at the same address with every value written before
#      the point, and status says from which point. Twice.
#   b. a point torn by a crash (its worker and CRIU killed mid-way, and the
#      service with them) is never used: the service comes back from the
#      point before it, with every value written before that one;
#   c. a restore from the point while the service runs is refused with one
#      line and changes nothing.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

PORT=6379
new_pool 4G
criu_hook cr
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
SERVICES+=(cr)
"$CXLCR" run --host h0 --name cr --arena 64M --recovery-interval 200 --log "$POOL_DIR/cr.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
	die "cxlcr run failed"
addr=$(status_field cr address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"

# points_after_writes: two new points, so that the newest began after
# whatever was written before this call.
points_after_writes() { local p; p=$(next_recovery_point cr "$(recovery_point cr)") && next_recovery_point cr "$p"; }

python3 "$KV" fill --host "$addr" --port $PORT --count 2000 --size 300 --seed 11 --quiet
p=$(points_after_writes) || die "no recovery point after the writes"

say "c: restoring from the point while the service runs"
if "$CXLCR" restore cr --host h0 --recovery-point >/dev/null 2>"$POOL_DIR/c.err"; then die "a restore over the running service succeeded"; fi
[ "$(wc -l <"$POOL_DIR/c.err")" -eq 1 ] && grep -q "runs" "$POOL_DIR/c.err" || die "not one clear line: $(cat "$POOL_DIR/c.err")"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 11 --quiet || die "c: values changed"
ok "c: refused while it runs: $(cat "$POOL_DIR/c.err")"

say "a: killed after later writes: its daemon restores it from the newest point"
for round in 1 2; do
pid=$(status_field cr pid)
python3 "$KV" fill --host "$addr" --port $PORT --count 500 --size 300 --seed $((20 + round)) --prefix late --quiet
kill -KILL "$(service_pid cr)" # (its status pid is its host's own)
for _ in $(seq 300); do
	s=$("$CXLCR" status cr --json)
	echo "$s" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["state"] == "running" and d["pid"] != int(sys.argv[1]) else 1)' "$pid" && break
	python3 -c 'import time; time.sleep(0.05)'
done
[ "$(status_field cr state)" = running ] && [ "$(status_field cr pid)" != "$pid" ] ||
	die "the daemon did not restore the crashed service"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer after the automatic restore"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 11 --quiet ||
	die "the automatically restored service lacks values"
"$CXLCR" status cr --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["restored_from_point"], d' ||
	die "status does not say it was restored from a point"
[ "$(status_field cr address)" = "$addr" ] || die "the service came back at another address"
ok "a: round $round: restored by its daemon from $(status_field cr restored_from_point), at $addr, every value written before the point there"
p=$(points_after_writes) || die "no recovery point after the restore"
done

say "b: a point torn by a crash, the service killed with it"
python3 "$KV" fill --host "$addr" --port $PORT --count 1000 --size 300 --seed 31 --prefix torn --quiet
good=$(points_after_writes) || die "no recovery point after the writes"
rm -f "$HOOK/go" "$HOOK/criu.pid"
echo pre-dump >"$HOOK/pause-at"
python3 "$KV" fill --host "$addr" --port $PORT --count 1000 --size 300 --seed 32 --prefix after --quiet
for _ in $(seq 300); do [ -s "$HOOK/criu.pid" ] && break; python3 -c 'import time; time.sleep(0.05)'; done
[ -s "$HOOK/criu.pid" ] || die "no recovery point's CRIU reached pre-dump"
criu=$(hook_pid criu.pid)
pid=$(status_field cr pid)
spid=$(service_pid cr)
rm -f "$HOOK/pause-at"
# Points of a service are taken one at a time: while this one is held,
# the newest whole point cannot change.
good=$(recovery_point cr)
kill -KILL "$(criu_worker "$criu")" "$criu" "$spid"
for _ in $(seq 300); do
	"$CXLCR" status cr --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["state"] == "running" and d["pid"] != int(sys.argv[1]) else 1)' "$pid" && break
	python3 -c 'import time; time.sleep(0.05)'
done
[ "$(status_field cr state)" = running ] || die "the service did not come back after the torn point"
from=$(status_field cr restored_from_point)
[ "$from" = "$good" ] || die "restored from '$from', not from the last whole point '$good'"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"
python3 "$KV" verify --host "$addr" --port $PORT --count 1000 --size 300 --seed 31 --prefix torn --quiet ||
	die "values written before the last whole point are missing"
# The torn point's draft goes with the next point (its snapshot drops
# strays first) or with cxlcr gc.
next_recovery_point cr "$good" >/dev/null || die "no recovery point after the torn one"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check failed: $(cat "$POOL_DIR/check.json")"
ok "b: the torn point was never used: back from $good with its values; pool check passes"
