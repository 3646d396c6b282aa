#!/usr/bin/env bash
# Recovery points (issue 16, point 1): a service started with
# --recovery-interval gets one every interval from its host's daemon, each
# an incremental snapshot with its dump; `cxlcr status --json` names the
# newest, its epoch and age. A point taken after a write holds it: a child
# forked from the newest point has every value written before it began.
# The pool stays clean meanwhile (pool check), the points follow the
# service when it migrates, and they stop when it stops.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
pod_up 2
SERVICES+=(rp)
"$CXLCR" run --host h0 --name rp --arena 64M --recovery-interval 200 --log "$POOL_DIR/rp.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
	die "cxlcr run --recovery-interval failed"
addr=$(status_field rp address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"
[ "$(status_field rp recovery_interval_ms)" = 200 ] || die "status does not show the interval"


p1=$(next_recovery_point rp "") || die "no recovery point was taken"
"$CXLCR" status rp --json | python3 -c 'import json,sys; p=json.load(sys.stdin)["recovery_point"]; assert p["epoch"] >= 1 and p["age_ms"] >= 0, p' ||
	die "the recovery point has no epoch or age"
ok "a recovery point: $p1"

python3 "$KV" fill --host "$addr" --port $PORT --count 3000 --size 300 --seed 8 --quiet
# The next point may have begun before the writes ended: the one after it cannot have.
p2=$(next_recovery_point rp "$p1") || die "no second recovery point"
p3=$(next_recovery_point rp "$p2") || die "no third recovery point"
out=$("$CXLCR" fork rp --to h1 --json 2>"$POOL_DIR/fork.err") || die "fork from the newest recovery point failed: $(cat "$POOL_DIR/fork.err")"
child=$(echo "$out" | python3 -c 'import json,sys; c=json.load(sys.stdin)["children"][0]; print(c["name"], c["address"])')
read -r cname caddr <<<"$child"
SERVICES+=("$cname")
python3 "$KV" verify --host "$caddr" --port $PORT --count 3000 --size 300 --seed 8 --quiet ||
	die "a child of the newest recovery point lacks values written before it"
"$CXLCR" stop "$cname" >/dev/null
ok "points $p2, $p3 taken after the writes; a child of the newest holds every value"

"$CXLCR" migrate rp --to h1 >/dev/null || die "migrate failed"
p4=$(next_recovery_point rp "$(recovery_point rp)") || die "no recovery point after the migrate"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check failed: $(cat "$POOL_DIR/check.json")"
python3 "$KV" verify --host "$(status_field rp address)" --port $PORT --count 3000 --size 300 --seed 8 --quiet ||
	die "the service lost values"
ok "points go on on h1 after the migrate ($p4); pool check passes"

"$CXLCR" stop rp >/dev/null 2>"$POOL_DIR/stop.err" || die "stop failed: $(cat "$POOL_DIR/stop.err")"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check after stop failed: $(cat "$POOL_DIR/check.json")"
ok "stopped: no more points, pool check passes"
