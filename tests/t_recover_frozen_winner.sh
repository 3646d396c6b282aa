#!/usr/bin/env bash
# A winner only frozen in the middle of a recovery, whose work another host
# took over, changes nothing when it wakes: not the region table, and not
# the recovery marks in the old arena's header that the one that took over
# reads (whether the old arena was replaced, or is still to be recovered).
#
# Three hosts; Redis on h0 with recovery points, filled; h0 crashes. The
# host that fences it stops its recovery once the fresh arena is filled
# (step `copied`, before its commit), and its daemon is stopped too
# (SIGSTOP: its heartbeat stands still, as a host's that stalls past its
# lease). The third host takes the recovery over and brings Redis back.
# Then the stalled recovery worker goes on before its daemon does (which
# would kill it as soon as it sees its host fenced): its commit is refused
# as fenced, and so must be its undo, which marks the old arena as still to
# be recovered. The old code wrote that mark into the old arena's header
# unguarded, and `pool check --json` then said the old arena was replaced
# by nothing while Redis ran from its replacement.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
export CXLCR_LEASE_MS=300
need redis-server

PORT=6379
logs() { "$CXLCR" pod logs "$1"; }
# The quarantined arena of rd of h0 in `pool check --json`, as one line.
old_arena() {
	"$CXLCR" pool check --json | python3 -c 'import json, sys
a = [a for a in json.load(sys.stdin)["quarantined_arenas"] if a["region"] == "rd of h0"]
print(json.dumps(a[0], sort_keys=True) if len(a) == 1 else "none: %s" % a)'
}
worker_ended() { # no such process on the winner any more, or a zombie
	local st
	st=$(on "$winner" cat "/proc/$worker/stat" 2>/dev/null) || return 0
	[ "$(echo "$st" | sed 's/^.*) //' | cut -d' ' -f1)" = Z ]
}
on_other() { [ "$(status_field rd state)" = running ] && [ "$(status_field rd host)" = "$other" ]; }

step_pod rd 3 29
step_crash copied
read -r worker _ <"$STEP_DIR/stopped"
h0_winner
dpid=$(daemon_of "$winner")
kill -STOP "$dpid"
until_true 60 on_other ||
	die "rd was not recovered on $other: $(status_field rd state) on $(status_field rd host); $other: $(logs "$other" | tail -n 5)"
logs "$other" | grep -q "host h0: the recovery of its services by host entry .* this host takes it over" ||
	die "$other's log does not say it took h0's recovery over: $(logs "$other" | tail -n 5)"
before=$(old_arena)
case $before in *'"recovered_into": null'* | none*) die "h0's old arena does not say it was replaced: $before" ;; esac
ok "$winner's recovery stopped at copied and its daemon stalled; $other took over: rd runs there, h0's old arena says it was replaced"

on "$winner" kill -CONT "$worker" || die "cannot let $winner's recovery worker (pid $worker) go on"
until_true 60 worker_ended || die "$winner's recovery worker (pid $worker) did not end once it went on"
after=$(old_arena)
kill -CONT "$dpid"
[ "$after" = "$before" ] || die "the woken winner changed h0's old arena's marks: $before -> $after"
on_other || die "rd is $(status_field rd state) on $(status_field rd host) after $winner woke, not running on $other"
[ "$(status_field rd address)" = "$addr" ] || die "rd is at $(status_field rd address), not $addr"
python3 "$KV" verify --host "$addr" --port $PORT --count 2000 --size 300 --seed 29 --quiet ||
	die "rd lacks values written before its point"
[ "$(redis_copies)" = 1 ] || die "$(redis_copies) redis-server processes map the pool, not 1"
"$CXLCR" pool check --json >"$POOL_DIR/check.json" || die "pool check: $(cat "$POOL_DIR/check.json")"
ok "$winner's worker went on before its daemon: refused; h0's old arena's marks unchanged, rd on $other with its values, one copy"
