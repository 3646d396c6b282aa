#!/usr/bin/env bash
# A recovery point never copies the whole heap while its service is frozen
# (issue 16, point 8): its draft is made while Redis runs, then CRIU is
# held at pre-dump (the CRIU hook) while the heap grows by 160 MiB of new
# values, so the draft can no longer be brought up to date in the freeze.
# The point is not taken (one line: why) rather than made by a copy of
# the whole heap in the freeze; Redis answers with every value, its newest
# point is still the one before, and the next point is taken. A plain
# snapshot in the same case still copies the heap in its freeze (its JSON
# says why), and succeeds.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
criu_hook pf
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 1
SERVICES+=("$NAME")
# Points 10 minutes apart: the daemon takes the first at once, the rest
# here are taken by hand.
"$CXLCR" run --host h0 --name "$NAME" --arena 64M --recovery-interval 600000 --log "$POOL_DIR/pf.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir "$POOL_DIR" >/dev/null ||
	die "cxlcr run failed"
addr=$(status_field "$NAME" address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"
python3 "$KV" fill --host "$addr" --port $PORT --count 2000 --size 300 --seed 4 --quiet
first=$(next_recovery_point "$NAME" "") || die "no first recovery point"

# held_snapshot ARGS...: a snapshot whose CRIU is held at pre-dump while
# 160 MiB of values are written; its JSON in $POOL_DIR/held.json, its
# error in held.err; its status in $held_rc.
held_snapshot() {
	rm -f "$HOOK/criu.pid" "$HOOK/go"
	echo pre-dump >"$HOOK/pause-at"
	"$CXLCR" snapshot "$NAME" "$@" --json >"$POOL_DIR/held.json" 2>"$POOL_DIR/held.err" &
	local snap=$!
	criu_reached $snap || die "the snapshot's CRIU did not reach pre-dump"
	python3 "$KV" fill --host "$addr" --port $PORT --count 40000 --size 4096 --seed 8 --prefix grow --quiet
	touch "$HOOK/go"
	held_rc=0
	wait $snap || held_rc=$?
}

say "a recovery point whose heap grew after its draft"
held_snapshot --recovery-point
[ $held_rc != 0 ] || die "the point was taken: $(cat "$POOL_DIR/held.json")"
[ "$(wc -l <"$POOL_DIR/held.err")" = 1 ] || die "not one line: $(cat "$POOL_DIR/held.err")"
# The plugin's own reason: it takes the snapshot beside CRIU's dump, which
# ends well without it, and leaves the daemon that line.
grep -q "not taken: its draft could not be brought up to date in the freeze" "$POOL_DIR/held.err" ||
	die "the error does not say why the point was not taken: $(cat "$POOL_DIR/held.err")"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 4 --quiet ||
	die "redis lost values after the point that was not taken"
python3 "$KV" verify --host "$addr" --port $PORT --count 40000 --size 4096 --seed 8 --prefix grow --quiet ||
	die "redis lost the values written while CRIU was held"
[ "$(recovery_point "$NAME")" = "$first" ] || die "the newest point is $(recovery_point "$NAME"), not $first"
"$CXLCR" snapshot "$NAME" --recovery-point --json >"$POOL_DIR/next.json" || die "the next point failed"
[ "$(recovery_point "$NAME")" != "$first" ] || die "the next point is not the newest"
# A point lists no changed pages: the list only helps a fork's children,
# and making it took a third of the CPU of each point.
python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert d["pages_changed"] is None, d' \
	"$POOL_DIR/next.json" || die "the point listed its changed pages: $(cat "$POOL_DIR/next.json")"
# Its snapshot ran beside CRIU's dump, and the resume waited for no more
# of it than it took.
python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))["snapshot_parts"]
assert p["beside_criu_ms"] > 0 and 0 <= p["waited_ms"] <= p["beside_criu_ms"], p' "$POOL_DIR/next.json" ||
	die "the point does not say how its snapshot ran beside CRIU: $(cat "$POOL_DIR/next.json")"
ok "not taken: $(cat "$POOL_DIR/held.err"); the next one was"

say "a plain snapshot in the same case"
held_snapshot
[ $held_rc = 0 ] || die "the snapshot failed: $(cat "$POOL_DIR/held.err")"
python3 - "$POOL_DIR/held.json" <<'PYEOF' || die "the snapshot did not copy the heap in its freeze: $(cat "$POOL_DIR/held.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["compared_because"], d
PYEOF
ok "a plain snapshot copies the heap in its freeze instead: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["compared_because"])' "$POOL_DIR/held.json")"
