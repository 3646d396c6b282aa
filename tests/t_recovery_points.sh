#!/usr/bin/env bash
# Recovery points (issue 16, point 1): a service started with
# --recovery-interval gets one every interval from its host's daemon, each
# an incremental snapshot with its dump; `cxlcr status --json` names the
# newest, its epoch and age. A point taken after a write holds it: a child
# forked from the newest point has every value written before it began.
# The pool stays clean meanwhile (pool check), the points follow the
# service when it migrates, and they stop when it stops. A pod service
# started without --recovery-interval takes one every 1000 ms (its
# daemon's recovery_interval; tests/lib/common.sh turns it off for the
# other tests, this one does not), and --recovery-interval 0 turns it off.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server
unset CXLCR_RECOVERY_INTERVAL_MS

PORT=6379
new_pool 4G
pod_up 2
for d in 1000:dflt "0:none --recovery-interval 0"; do
	read -r want name flag <<<"${d/:/ }"
	SERVICES+=("$name")
	# shellcheck disable=SC2086 # flag: none or two words
	"$CXLCR" run --host h1 --name "$name" --arena 64M $flag --log "$POOL_DIR/$name.log" -- \
		redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
		die "cxlcr run $name failed"
	got=$(status_field "$name" recovery_interval_ms)
	[ "$got" = "$want" ] || die "a pod service started with '${flag:-no flag}' has a recovery interval of $got ms, want $want"
done
"$CXLCR" stop dflt >/dev/null && "$CXLCR" stop none >/dev/null
ok "pod services take a recovery point every 1000 ms by default, none with --recovery-interval 0"
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

# pool check reads the region table and the catalog apart: a point
# published (its predecessor freed) between the two reads looked like a
# leaked snapshot region, 13 times in 600 checks beside points every 50 ms.
SERVICES+=(busy)
"$CXLCR" run --host h0 --name busy --arena 64M --recovery-interval 50 --log "$POOL_DIR/busy.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
	die "cxlcr run busy failed"
python3 "$KV" fill --host "$(status_field busy address)" --port $PORT --count 2000 --size 300 --seed 9 --quiet
b0=$(next_recovery_point busy "") || die "busy took no recovery point"
for i in $(seq 400); do
	"$CXLCR" pool check --json >"$POOL_DIR/check.json" ||
		die "pool check $i of 400, beside points every 50 ms, failed: $(cat "$POOL_DIR/check.json")"
done
b1=$(recovery_point busy)
[ "$b1" != "$b0" ] || die "busy took no recovery point while pool check ran"
"$CXLCR" stop busy >/dev/null
ok "400 pool checks beside points every 50 ms (from $b0 to $b1): none saw a leak"

"$CXLCR" stop rp >/dev/null 2>"$POOL_DIR/stop.err" || die "stop failed: $(cat "$POOL_DIR/stop.err")"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check after stop failed: $(cat "$POOL_DIR/check.json")"
ok "stopped: no more points, pool check passes"
