#!/usr/bin/env bash
# A drain that runs out of time hands the rest over to the hard-crash path
# (issue 16 point 3): `cxlcr host drain h0 --bound 1` moves what it can in
# a millisecond (nothing, or one service), then writes h0's tombstone
# (reason handoff); h1 judges h0 dead at once, fences it and brings every
# service not moved back from its newest recovery point, with the values
# written before it; h0's daemon kills its old copies, acknowledges, and
# registers again as a new incarnation (alive, not fenced again and again).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
pod_up 2
host_field() { # HOST KEY, from cxlcr hosts --json
	"$CXLCR" hosts --json | python3 -c 'import json, sys
for h in json.load(sys.stdin)["hosts"]:
    if h.get("host") == sys.argv[1]:
        print(h[sys.argv[2]])' "$1" "$2"
}
for n in ra rb; do
	SERVICES+=("$n")
	"$CXLCR" run --host h0 --name "$n" --arena 64M --recovery-interval 200 --log "$POOL_DIR/$n.log" -- \
		redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
		die "cxlcr run $n failed"
	a=$(status_field "$n" address)
	python3 "$KV" wait --host "$a" --port $PORT >/dev/null || die "$n does not answer"
	python3 "$KV" fill --host "$a" --port $PORT --count 2000 --size 200 --seed 5 --quiet
	# The point after the next one began after the writes.
	p=$(next_recovery_point "$n" "$(recovery_point "$n")") || die "no recovery point of $n"
	next_recovery_point "$n" "$p" >/dev/null || die "no recovery point of $n after its writes"
done
inc0=$(host_field h0 incarnation)
old_pids="$(service_pid ra) $(service_pid rb)" # this machine's pids of them

rc=0
"$CXLCR" host drain h0 --bound 1 --json >"$POOL_DIR/drain.json" 2>"$POOL_DIR/drain.err" || rc=$?
[ $rc -eq 1 ] || die "a drain that handed services over exited $rc: $(cat "$POOL_DIR/drain.json" "$POOL_DIR/drain.err")"
read -r moved handed < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(d["moved"], d["handed_over"])' "$POOL_DIR/drain.json")
[ "$handed" -ge 1 ] && [ $((moved + handed)) -eq 2 ] ||
	die "the drain moved $moved and handed over $handed of 2: $(cat "$POOL_DIR/drain.json")"
ok "the drain ran out of its 1 ms: $moved moved, $handed handed over to the hard-crash path"

for n in ra rb; do
	for _ in $(seq 300); do
		[ "$(status_field "$n" host)" = h1 ] && [ "$(status_field "$n" state)" = running ] && break
		python3 -c 'import time; time.sleep(0.1)' # bounded: 30 s
	done
	[ "$(status_field "$n" host)" = h1 ] && [ "$(status_field "$n" state)" = running ] ||
		die "$n is not running on h1: $("$CXLCR" status "$n")"
	a=$(status_field "$n" address)
	python3 "$KV" wait --host "$a" --port $PORT >/dev/null || die "$n does not answer on h1"
	python3 "$KV" verify --host "$a" --port $PORT --count 2000 --size 200 --seed 5 --quiet ||
		die "$n on h1 lacks values written before its recovery point"
done
ok "both services run on h1 with every value written before their points"

for _ in $(seq 300); do
	inc=$(host_field h0 incarnation)
	[ "$inc" -gt "$inc0" ] && [ "$(host_field h0 state)" != dead ] && break
	python3 -c 'import time; time.sleep(0.1)' # bounded: 30 s
done
[ "$(host_field h0 incarnation)" -gt "$inc0" ] && [ "$(host_field h0 tombstone)" = None ] ||
	die "h0 did not come back as a new incarnation: $("$CXLCR" hosts)"
# (Killed, a copy may stay a zombie a moment, until its parent reaps it:
# it runs no more, and maps nothing.)
for pid in $old_pids; do
	[ ! -e "/proc/$pid" ] || [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" = Z ] ||
		die "the old copy $pid on h0 still runs: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
done
ok "h0 killed its old copies ($old_pids) and came back as incarnation $(host_field h0 incarnation), without a tombstone"
