#!/usr/bin/env bash
# A dead host's services come back elsewhere (issue 16, point 2), with a
# writer that logs every acknowledged write:
#   a. three hosts; Redis on h0 with recovery points every 200 ms, under a
#      load; h0 is crashed (`pod crash`: its daemon and services killed at
#      once). Its heartbeat stops; h1 and h2 both see it dead after the
#      lease (300 ms) and race to fence it: exactly one wins (one daemon
#      log says it fenced h0, the other says nothing of it), and restores
#      Redis there, into a fresh arena, at its address. Its data is
#      exactly a prefix of the writes that reaches past every write
#      acknowledged before a point known to be older than the crash (the
#      newest point, and nothing after it); status says it was recovered,
#      from which point, on which host; h0's old arena is quarantined, not
#      freed;
#   b. a service of h0 without recovery points is marked lost (one line in
#      status), never restored;
#   c. the host Redis was recovered on crashes with a panic tombstone
#      (`pod crash --panic`): the last host judges it dead for its
#      tombstone (its log says so), fences it and recovers Redis again,
#      from a point taken on that host, with the values written before it.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# The default lease (300 ms): the hard-crash path as a pod runs it.
export CXLCR_LEASE_MS=300
# shellcheck source=tests/lib/loadclient.sh
. "$ROOT/tests/lib/loadclient.sh"
need redis-server gcc

PORT=6379
new_pool 4G
pod_up 3
LOADCLIENT=$(loadclient_path)
new_log() { "$CXLCR" pod logs "$1"; }

point_redis rd h0
pod_redis plain h0 64M
paddr=$addr
addr=$(status_field rd address)
old_gen=$("$CXLCR" status rd --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["arena_offset"])')

say "a: h0 crashes under load"
"$LOADCLIENT" --host "$addr" --port $PORT --proto redis --mode set --keys 1000 --key-prefix ack: \
	--value-size 64 --rate 1000 --ack-log "$POOL_DIR/rd.ack" --json "$POOL_DIR/rd.json" --quiet &
load=$!
on_exit "kill -KILL $load 2>/dev/null"
python3 "$ROOT/tests/lib/served.py" --host "$addr" --port $PORT --proto redis --more 500 || die "the load did not start"
# Every write acknowledged before this mark is in every point that begins
# after it: two new points, then the crash.
marked=$(wc -l <"$POOL_DIR/rd.ack")
two_new_points rd ||
	die "no recovery points under the load"
"$CXLCR" pod crash h0 >/dev/null || die "pod crash h0 failed"
kill -TERM $load
wait $load || true
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do # the lease, then the restore: bounded wait for the outcome
	[ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" != h0 ] && break
	python3 -c 'import time; time.sleep(0.05)'
done
host=$(status_field rd host)
[ "$(status_field rd state)" = running ] && [ "$host" != h0 ] ||
	die "rd was not recovered: $(status_field rd state) on $host; h1: $(new_log h1 | tail -n 3); h2: $(new_log h2 | tail -n 3)"
[ "$(status_field rd address)" = "$addr" ] || die "rd came back at $(status_field rd address), not $addr"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "the recovered redis does not answer at $addr"
other=h1
[ "$host" = h1 ] && other=h2
new_log "$host" | grep -q "host h0 .* is dead .*fenced by this host" || die "$host's log does not say it fenced h0"
if new_log "$other" | grep -q "fenced by this host"; then die "both $host and $other fenced h0"; fi
python3 "$ROOT/tests/lib/prefixcheck.py" --host "$addr" --port $PORT --at-least "$marked" "$POOL_DIR/rd.ack" ||
	die "the recovered data is not the newest point's"
"$CXLCR" status rd --json >"$POOL_DIR/rd.status"
python3 - "$POOL_DIR/rd.status" "$host" "$old_gen" <<'PYEOF' || die "status: $(cat "$POOL_DIR/rd.status")"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["recovered"]
assert r and r["from_host"] == "h0" and r["on_host"] == sys.argv[2] and r["point"], d
assert str(d["arena_offset"]) != sys.argv[3], "the recovered service uses h0's old arena"
PYEOF
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check: $(cat "$POOL_DIR/check.json")"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["quarantined"])' "$POOL_DIR/check.json")" -ge 1 ] ||
	die "h0's old arena is not quarantined: $(cat "$POOL_DIR/check.json")"
ok "a: rd answers on $host at $addr from $(status_field rd restored_from_point): exactly the writes up to its point; $other did not fence; h0's arena quarantined"

say "b: a service without recovery points"
[ "$(status_field plain state)" = lost ] || die "plain is $(status_field plain state), not lost"
"$CXLCR" status plain | grep -q "^lost" || die "status plain does not say it is lost"
ok "b: plain: $("$CXLCR" status plain | grep '^lost')"

say "c: the host rd was recovered on panics (its tombstone): the last host recovers it again"
python3 "$KV" fill --host "$addr" --port $PORT --count 1000 --size 200 --seed 5 --quiet
two_new_points rd ||
	die "c: no recovery points on $host"
"$CXLCR" pod crash "$host" --panic >/dev/null || die "pod crash $host --panic failed"
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do # the next look at the table, then the restore: bounded wait
	[ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" = "$other" ] && break
	python3 -c 'import time; time.sleep(0.05)'
done
[ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" = "$other" ] ||
	die "c: rd was not recovered on $other: $(status_field rd state) on $(status_field rd host)"
new_log "$other" | grep -q "host $host .* is dead (its tombstone says panic): fenced by this host" ||
	die "c: $other's log does not say it fenced $host for its tombstone: $(new_log "$other" | grep 'is dead')"
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "c: rd does not answer at $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 1000 --size 200 --seed 5 --quiet ||
	die "c: rd lacks values written before its point on $host"
"$CXLCR" status rd --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["recovered"]
assert r["from_host"] == sys.argv[1] and r["on_host"] == sys.argv[2], r' "$host" "$other" ||
	die "c: status does not say rd was recovered from $host on $other"
ok "c: rd recovered again on $other after $host panicked, with the values written before its point there"
