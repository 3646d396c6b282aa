#!/usr/bin/env bash
# A service whose recovery keeps failing stays down, and says why (issue
# 16, points 2 and 5):
#   a. on its own host: a Redis with recovery points that dies soon after
#      each restore is restored 3 times, then given up on at its 4th death:
#      status says failed, with the reason (one line of `status`, and
#      "recovery_failed" in --json), and nothing restores it again;
#   b. a dead host's service: h0 crashes, and every restore of Redis on h1
#      is killed at CRIU's pre-restore (the CRIU hook): h1 tries 4 times
#      (once, then 3 more), then leaves it down: status says failed, with
#      the reason of the last try, h1's log says so, and no 5th try comes;
#      the service of a. (failed on h0) is not recovered either;
#   c. an operator restores both by hand on h1, a living host (`cxlcr
#      restore NAME --host h1 --recovery-point`): each answers at its
#      address with the values written before its point, status says
#      recovered on h1 from that point, a second restore is refused, and
#      the pool checks clean. (a. also: while h0 lives, the restore of its
#      failed service on h1 is refused.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
new_pool 4G
criu_hook rf
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
h1_says() { "$CXLCR" pod logs h1 | grep -q "$1"; }
run_redis() { # run_redis NAME INTERVAL: on h0, points every INTERVAL ms; sets addr
	SERVICES+=("$1")
	"$CXLCR" run --host h0 --name "$1" --arena 64M --recovery-interval "$2" --log "$POOL_DIR/$1.log" -- \
		redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir "$POOL_DIR" >/dev/null ||
		die "cxlcr run $1 failed"
	addr=$(status_field "$1" address)
	python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "$1 does not answer"
	python3 "$KV" fill --host "$addr" --port $PORT --count 500 --size 200 --seed 3 --quiet
	p=$(next_recovery_point "$1" "$(recovery_point "$1")") && p=$(next_recovery_point "$1" "$p") ||
		die "$1: no recovery point after the writes"
}
# wait_state NAME STATE [HOST]: bounded wait (60 s) until it is.
wait_state() {
	local end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		[ "$(status_field "$1" state)" = "$2" ] && { [ -z "${3:-}" ] || [ "$(status_field "$1" host)" = "$3" ]; } &&
			return 0
		python3 -c 'import time; time.sleep(0.1)'
	done
	return 1
}

say "a: a service that dies soon after each restore"
# Points 2 s apart: each death below comes right after a point, never
# in the middle of one (a point under way holds the restore back).
run_redis loop 2000
for death in 1 2 3 4; do
	pid=$(status_field loop pid)
	kill -KILL "$(service_pid loop)" # (its status pid is its host's own)
	[ $death = 4 ] && break
	end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		[ "$(status_field loop state)" = running ] && [ "$(status_field loop pid)" != "$pid" ] && break
		python3 -c 'import time; time.sleep(0.1)'
	done
	[ "$(status_field loop state)" = running ] && [ "$(status_field loop pid)" != "$pid" ] ||
		die "a: not restored after death $death: $(status_field loop state)"
	# A point of the restored process: its daemon has seen it run again.
	next_recovery_point loop "$(recovery_point loop)" >/dev/null || die "a: no point after restore $death"
done
wait_state loop failed || die "a: not failed after 4 deaths: $(status_field loop state)"
"$CXLCR" status loop --json >"$POOL_DIR/a.json"
python3 - "$POOL_DIR/a.json" <<'PYEOF' || die "a: status: $(cat "$POOL_DIR/a.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["state"] == "failed" and "not restored again on h0" in d["recovery_failed"], d
PYEOF
line=$("$CXLCR" status loop | grep '^failed ') || die "a: status does not say failed: $("$CXLCR" status loop)"
ok "a: given up at its 4th death: $line"
# Its host lives: restored there or nowhere.
if err=$("$CXLCR" restore loop --host h1 --recovery-point 2>&1); then
	die "a: a service of a living host was restored on another: $err"
fi
case "$err" in *"which is not declared dead: restore it there"*) ;; *) die "a: refused, but not for its host: $err" ;; esac
[ "$(status_field loop state)" = failed ] || die "a: the refused restore changed it: $(status_field loop state)"
ok "a: refused on another host while h0 lives: $err"

say "b: every restore of a dead host's service fails"
run_redis "$NAME" 200
for try in 1 2 3 4; do
	rm -f "$HOOK/criu.pid"
	echo pre-restore >"$HOOK/kill-at"
	[ $try = 1 ] && { "$CXLCR" pod crash h0 >/dev/null || die "pod crash h0 failed"; }
	end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ] && [ ! -s "$HOOK/criu.pid" ]; do python3 -c 'import time; time.sleep(0.05)'; done
	[ -s "$HOOK/criu.pid" ] || die "b: try $try of h1's recovery did not reach CRIU's restore: $("$CXLCR" pod logs h1 | tail -n 3)"
	kill -KILL "$(hook_pid criu.pid)"
done
wait_state "$NAME" failed ||
	die "b: not failed after 4 tries: $(status_field "$NAME" state); h1: $("$CXLCR" pod logs h1 | grep -E "recover|try|left down")"
"$CXLCR" status "$NAME" --json >"$POOL_DIR/b.json"
python3 - "$POOL_DIR/b.json" <<'PYEOF' || die "b: status: $(cat "$POOL_DIR/b.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["state"] == "failed" and d["recovery_failed"].startswith("recovery on h1 failed: "), d
PYEOF
h1_says "$NAME (of host h0) is left down: its recovery failed 4 times" || die "b: h1's log does not say it gave up"
[ "$("$CXLCR" pod logs h1 | grep -c "recovering them again (try")" = 3 ] ||
	die "b: not 3 tries after the first: $("$CXLCR" pod logs h1 | grep "recovering them again")"
[ "$(status_field loop state)" = failed ] || die "b: the service given up on h0 was touched: $(status_field loop state)"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "b: pool check: $(cat "$POOL_DIR/check.json")"
ok "b: left down after 4 tries: $("$CXLCR" status "$NAME" | grep '^failed ')"

say "c: an operator restores them on h1, a living host"
rm -f "$HOOK/kill-at" "$HOOK/criu.pid"
for svc in "$NAME" loop; do
	addr=$(status_field "$svc" address)
	"$CXLCR" restore "$svc" --host h1 --recovery-point --json >"$POOL_DIR/c-$svc.json" ||
		die "c: restore of $svc on h1 failed: $(cat "$POOL_DIR/c-$svc.json")"
	python3 - "$POOL_DIR/c-$svc.json" <<'PYEOF' || die "c: $svc: restore said: $(cat "$POOL_DIR/c-$svc.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["host"] == "h1" and d["from_host"] == "h0" and d["recovery_point"] and d["pid"] > 0, d
PYEOF
	python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "c: $svc does not answer at $addr"
	python3 "$KV" verify --host "$addr" --port $PORT --count 500 --size 200 --seed 3 --quiet ||
		die "c: $svc lacks values written before its point"
	"$CXLCR" status "$svc" --json >"$POOL_DIR/c-$svc-status.json"
	python3 - "$POOL_DIR/c-$svc-status.json" "$POOL_DIR/c-$svc.json" "$addr" <<'PYEOF' ||
import json, sys
d = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
assert d["state"] == "running" and d["host"] == "h1" and d["address"] == sys.argv[3], d
assert d["recovered"]["from_host"] == "h0" and d["recovered"]["on_host"] == "h1", d
assert d["recovered"]["point"] == r["recovery_point"], (d, r)
assert not d.get("recovery_failed"), d
PYEOF
		die "c: $svc: status: $(cat "$POOL_DIR/c-$svc-status.json")"
	if err=$("$CXLCR" restore "$svc" --host h1 --recovery-point 2>&1); then
		die "c: a second restore of $svc over the running one succeeded: $err"
	fi
	ok "c: $svc restored by hand on h1 at $addr; a second restore refused: $err"
done
"$CXLCR" pool check --json >"$POOL_DIR/check-c.json" || die "c: pool check: $(cat "$POOL_DIR/check-c.json")"
ok "c: the pool checks clean"
