#!/usr/bin/env bash
# The pool is the pod's membership (issue 15 point 2): every daemon
# registers in the host table (name, control address, an incarnation that
# grows on every start) and renews its heartbeat; `cxlcr hosts` judges each
# host on the reader's own clock:
#   - both hosts of a pod come up alive, incarnation 1, at their addresses;
#   - a frozen host (pod freeze) turns suspect, then dead, as the reader
#     watches its counter stand still; thawed, it is alive again;
#   - a daemon stopped cleanly shows `left`; started again, it is alive with
#     incarnation 2;
#   - a corrupt entry is refused with one line; the others are listed;
#   - a host table of another format version is refused with one line.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

# A short lease: heartbeats every 500 ms, suspect after 1 s of silence,
# dead after 2 s, on the reader's clock (long enough for a busy machine).
export CXLCR_LEASE_MS=2000
new_pool 2G
pod_up 2
OUT=$POOL_DIR/hosts.json
ERR=$POOL_DIR/hosts.err

# hosts: `cxlcr hosts --json` into $OUT (stderr into $ERR); rc its status.
hosts() {
	rc=0
	"$CXLCR" hosts --json >"$OUT" 2>"$ERR" || rc=$?
}
# field HOST KEY: from the last `hosts`.
field() {
	python3 -c 'import json, sys
for h in json.load(open(sys.argv[1]))["hosts"]:
    if h.get("host") == sys.argv[2]:
        print(h[sys.argv[3]])' "$OUT" "$1" "$2"
}
expect_host() { # HOST STATE INCARNATION
	local state inc
	state=$(field "$1" state)
	inc=$(field "$1" incarnation)
	[ "$state" = "$2" ] || die "$1 is '$state', want '$2': $(cat "$OUT")"
	[ "$inc" = "$3" ] || die "$1 has incarnation '$inc', want $3: $(cat "$OUT")"
}

hosts
[ $rc -eq 0 ] || die "cxlcr hosts failed: $(cat "$ERR")"
expect_host h0 alive 1
expect_host h1 alive 1
addr0=$(field h0 address)
[[ $addr0 == 10.*.0.10 ]] && [ "$(field h0 port)" -gt 0 ] ||
	die "h0's control address is '$addr0:$(field h0 port)', want its pod address and API port"
ok "both daemons registered: alive, incarnation 1, h0 at $addr0:$(field h0 port)"

"$CXLCR" pod freeze h1 >/dev/null
hosts
expect_host h0 alive 1
state=$(field h1 state)
[ "$state" = suspect ] || [ "$state" = dead ] || die "frozen h1 is '$state', want suspect or dead: $(cat "$OUT")"
ok "frozen h1 is $state to the reader, h0 stays alive"
# Each look adds to what this host's readers have seen of h1's silence,
# until it stood still for a whole lease.
for _ in $(seq 100); do
	hosts
	state=$(field h1 state)
	[ "$state" = suspect ] || break
done
[ "$state" = dead ] || die "frozen h1 is '$state' after 100 looks, want dead: $(cat "$OUT")"
expect_host h0 alive 1
ok "frozen h1 is dead once the reader saw its counter stand still for a lease"
"$CXLCR" pod thaw h1 >/dev/null
hosts
expect_host h1 alive 1
ok "thawed h1 is alive again, same incarnation"

pid1=$("$CXLCR" pod up --hosts 2 --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h1"][0]["daemon_pid"])')
kill -TERM "$pid1"
tail --pid="$pid1" -f /dev/null
hosts
expect_host h1 left 1
expect_host h0 alive 1
ok "h1's daemon stopped cleanly: left"
"$CXLCR" pod up --hosts 2 >/dev/null
hosts
expect_host h1 alive 2
ok "h1's daemon started again: alive, incarnation 2"

# Entry 1 is h1's (the second to register). Its identity is covered by a
# checksum: one byte of its address changed, it is refused.
read -r off < <(python3 "$ROOT/tests/lib/poolimg.py" list "$CXLCR_POOL" | awk '$6 == "hosts" { print $4 }')
[ -n "$off" ] || die "no host table region in the pool"
pid1=$("$CXLCR" pod up --hosts 2 --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h1"][0]["daemon_pid"])')
kill -TERM "$pid1"
tail --pid="$pid1" -f /dev/null
python3 - "$CXLCR_POOL" $((off + 256 + 256 + 64 + 64 + 1)) <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x20]))
PY
hosts
[ $rc -ne 0 ] || die "cxlcr hosts succeeded with a corrupt entry"
[ "$(wc -l <"$ERR")" -eq 1 ] && grep -q "host table entry 1 of pool .* is corrupt (checksum mismatch): refused" "$ERR" ||
	die "a corrupt entry is not refused with one line: $(cat "$ERR")"
expect_host h0 alive 1
[ -z "$(field h1 state)" ] || die "the corrupt entry is still listed as h1: $(cat "$OUT")"
ok "a corrupt entry is refused with one line; h0 is still listed"

# A table of another format version (the header's version word).
python3 - "$CXLCR_POOL" $((off + 8)) <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    f.write(struct.pack("<I", 9))
PY
hosts
[ $rc -ne 0 ] && [ "$(wc -l <"$ERR")" -eq 1 ] && grep -q "host table of pool .*: format version 9, this cxlcr reads version 1" "$ERR" ||
	die "a host table of another version is not refused with one line: $(cat "$ERR")"
ok "a host table of another format version is refused with one line"
