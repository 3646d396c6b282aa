#!/usr/bin/env bash
# A recovery that fails is tried again (issue 16, point 2): h0 runs Redis
# with recovery points and crashes; h1 fences it and restores Redis, but
# its CRIU is killed at pre-restore (the CRIU hook). The failed restore
# undoes itself (the fresh arena freed, h0's arena what it was), h1's log
# says the service was not recovered, and h1 tries again: Redis answers on
# h1 at its address with every value written before its point, status
# says it was recovered, and nothing is left quarantined but h0's arena
# (and a recovery point h0 was taking when it died, torn).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
criu_hook rr
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
point_redis "$NAME" h0
python3 "$KV" fill --host "$addr" --port $PORT --count 2000 --size 300 --seed 9 --quiet
two_new_points "$NAME" ||
	die "no recovery point after the writes"
h1_says() { "$CXLCR" pod logs h1 | grep -q "$1"; }

say "h0 crashes; h1's first restore is killed at CRIU's pre-restore"
echo pre-restore >"$HOOK/kill-at"
"$CXLCR" pod crash h0 >/dev/null || die "pod crash h0 failed"
criu_reached || die "h1's recovery did not reach CRIU's restore"
kill -KILL "$(hook_pid criu.pid)"
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ] && ! h1_says "$NAME not recovered"; do python3 -c 'import time; time.sleep(0.05)'; done
h1_says "$NAME not recovered" || die "h1 does not say the first recovery failed: $("$CXLCR" pod logs h1 | tail -n 3)"
ok "the first recovery failed: $("$CXLCR" pod logs h1 | grep "$NAME not recovered" | head -n1 | cut -c1-150)"

say "h1 tries again"
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do # the next try, a few seconds later: bounded wait
	[ "$(status_field "$NAME" state)" = running ] && [ "$(status_field "$NAME" host)" = h1 ] && break
	python3 -c 'import time; time.sleep(0.1)'
done
[ "$(status_field "$NAME" state)" = running ] && [ "$(status_field "$NAME" host)" = h1 ] ||
	die "not recovered on a second try: $(status_field "$NAME" state) on $(status_field "$NAME" host)"
h1_says "recovering them again (try 1 of" || die "h1's log does not say it tried again"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "the recovered redis does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 9 --quiet ||
	die "the recovered redis lacks values written before its point"
"$CXLCR" status "$NAME" --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["recovered"]; assert r["from_host"] == "h0" and r["on_host"] == "h1", r' ||
	die "status does not say it was recovered from h0 on h1"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check: $(cat "$POOL_DIR/check.json")"
# Quarantined: h0's arena, and the recovery point it was taking if it
# died in one (torn: no catalog entry names it, and nobody else frees it).
python3 - "$POOL_DIR/check.json" "$NAME" <<'PY' || die "quarantined regions: $(cat "$POOL_DIR/check.json") (want h0's arena and its torn point, if any)"
import json, re, sys
c = json.load(open(sys.argv[1]))
name = sys.argv[2]
q = c["quarantined_regions"]
assert f"{name} of h0" in q, q
assert all(r == f"{name} of h0" or re.fullmatch(re.escape(name) + r"\.s[0-9]+ of h0", r) for r in q), q
assert c["quarantined"] == len(q), c
PY
ok "recovered on h1 at the second try, at $addr, with its values; quarantined only h0's: $(python3 -c 'import json,sys; print(", ".join(json.load(open(sys.argv[1]))["quarantined_regions"]))' "$POOL_DIR/check.json")"
