#!/usr/bin/env bash
# The panic tombstone (issue 16 point 4): a host that dies leaves its last
# word in its entry of the host table, and every reader judges it dead at
# once instead of waiting for its lease.
#   - the kernel module that writes it on a real machine is built (make
#     module) with its parameters;
#   - `cxlcr pod crash h0 --panic` writes exactly the module's tombstone:
#     with a lease of ten minutes, h0 is dead at the first look, its
#     tombstone named; h1, crashed without one, is not;
#   - a tombstone is refused (one line, the host judged by its heartbeat)
#     when its checksum fails or it was made for another entry (written
#     here by tests/lib/poolimg.py with a CRC-32C of its own);
#   - one of an older incarnation means nothing, and a daemon that
#     registers again clears it.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

# Within this test no host can be judged dead by its silence: only a
# tombstone makes it so.
export CXLCR_LEASE_MS=600000
KO=$ROOT/build/kernel/cxlcr_tombstone.ko
if [ -f "$KO" ] && command -v modinfo >/dev/null; then
	for p in pool_phys table_offset entry_index oops_is_death armed; do
		modinfo -F parm "$KO" | grep -q "^$p:" || die "the module has no parameter $p: $(modinfo "$KO")"
	done
	ok "the module is built against $(modinfo -F vermagic "$KO" | cut -d' ' -f1) with its parameters"
else
	say "the module is not built here (make module): its checks are left out"
fi

new_pool 2G
pod_up 2
OUT=$POOL_DIR/hosts.json
ERR=$POOL_DIR/hosts.err
hosts() {
	rc=0
	"$CXLCR" hosts --json >"$OUT" 2>"$ERR" || rc=$?
}
field() { # HOST KEY: from the last `hosts`
	python3 -c 'import json, sys
for h in json.load(open(sys.argv[1]))["hosts"]:
    if h.get("host") == sys.argv[2]:
        print(h[sys.argv[3]])' "$OUT" "$1" "$2"
}
tomb() { python3 "$ROOT/tests/lib/poolimg.py" tombstone "$CXLCR_POOL" "$@"; }
not_dead() { # HOST: judged by its heartbeat (alive, or watching at a first look)
	local s
	s=$(field "$1" state)
	[ "$s" = alive ] || [ "$s" = watching ] || die "$1 is '$s', want alive: $(cat "$OUT") $(cat "$ERR")"
}

hosts
[ $rc -eq 0 ] || die "cxlcr hosts failed: $(cat "$ERR")"
e0=$(field h0 entry)
inc0=$(field h0 incarnation)

tomb "$e0" current 1 bad-crc
hosts
[ $rc -ne 0 ] && [ "$(wc -l <"$ERR")" -eq 1 ] &&
	grep -q "the tombstone of host h0 in pool .* is corrupt (checksum mismatch): refused" "$ERR" ||
	die "a tombstone with a wrong checksum is not refused with one line (rc $rc): $(cat "$ERR")"
not_dead h0
ok "a tombstone whose checksum fails is refused with one line; h0 is judged by its heartbeat"

tomb "$e0" current 1 index=$((e0 + 1))
hosts
[ $rc -ne 0 ] && grep -q "corrupt (written for another entry): refused" "$ERR" ||
	die "a tombstone made for another entry is not refused (rc $rc): $(cat "$ERR")"
not_dead h0
ok "a tombstone made for another entry is refused"

# h0's daemon starts again: incarnation + 1, and the tombstone is gone.
pid0=$("$CXLCR" pod up --hosts 2 --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0]["daemon_pid"])')
tomb "$e0" "$inc0" 1
kill -TERM "$pid0"
tail --pid="$pid0" -f /dev/null
"$CXLCR" pod up --hosts 2 >/dev/null
hosts
[ $rc -eq 0 ] || die "cxlcr hosts failed after h0 registered again: $(cat "$ERR")"
[ "$(field h0 incarnation)" = $((inc0 + 1)) ] || die "h0 did not register again: $(cat "$OUT")"
not_dead h0
[ "$(field h0 tombstone)" = None ] || die "h0's new incarnation has a tombstone: $(cat "$OUT")"
ok "registering again clears the last incarnation's tombstone"
tomb "$e0" "$inc0" 1
hosts
[ $rc -eq 0 ] && [ "$(field h0 tombstone)" = None ] || die "a tombstone of an older incarnation counts: $(cat "$OUT") $(cat "$ERR")"
not_dead h0
ok "a tombstone of an older incarnation means nothing"

"$CXLCR" pod crash h0 --panic >/dev/null
"$CXLCR" pod crash h1 >/dev/null
hosts
[ $rc -eq 0 ] || die "cxlcr hosts failed after the crashes: $(cat "$ERR")"
[ "$(field h0 state)" = dead ] && [ "$(field h0 tombstone)" = panic ] ||
	die "h0 crashed with a panic is not dead by its tombstone at the first look: $(cat "$OUT")"
s1=$(field h1 state)
[ "$s1" != dead ] || die "h1, crashed without a tombstone, is dead within a ten-minute lease: $(cat "$OUT")"
ok "h0's panic tombstone makes it dead at the first look (h1, crashed without one, is '$s1')"
