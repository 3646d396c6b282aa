#!/usr/bin/env bash
# Limits on the TCP endpoint the control protocol shares with the fork API
# (issue 13 point 7, for the control path of issue 15): from one peer (a
# service's network namespace on the pod bridge), a control request that
# trickles in a byte at a time and 40 connections left idle. The daemon
# keeps at most WORKERS_PER_PEER (8, daemon/workers.h) workers for that
# peer and answers the others "busy" at once; it serves a verb from
# another peer meanwhile; it cuts the trickle off at its whole-request
# deadline (RPC_REQUEST_READ_S, daemon/rpc.h), before the request is all
# in; and it closes every idle connection by itself.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server nsenter

new_pool 2G
pod_up 2
pod_redis redis h0 256M
H0_IP=$("$CXLCR" hosts --json | python3 -c '
import json, sys
hs = json.load(sys.stdin)
hs = hs["hosts"] if isinstance(hs, dict) else hs
print([h["address"] for h in hs if h["host"] == "h0"][0])')
[ -n "$H0_IP" ] || die "the host table gives h0 no control address"
DAEMON=$("$CXLCR" pod up --hosts 2 --json | python3 -c '
import json, sys
print([h["daemon_pid"] for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0])')
workers() { cat /proc/"$DAEMON"/task/*/children | wc -w; }
ok "h0 at $H0_IP, its daemon $DAEMON runs $(workers) workers"

# The peer: the service's network namespace (its own address on the bridge).
spid=$(service_pid redis) # this machine's pid of it: nsenter runs here
READY=$POOL_DIR/ready
nsenter -t "$spid" -n "$PYTHON3" - "$H0_IP" "$READY" >"$POOL_DIR/peer.out" 2>&1 <<'PYEOF' &
import os, select, socket, struct, sys, time
ip, ready = sys.argv[1], sys.argv[2]

def closed(s):
    """The daemon has closed s (an answer before the end is read and dropped)."""
    try:
        while select.select([s], [], [], 0)[0]:
            if not s.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False

# A control request that trickles in: the magic, the greeting read, then a
# frame whose length says 200 bytes, sent a byte every 0.5 s.
t = socket.create_connection((ip, 7390), timeout=10)
t.sendall(b"CXC1")
hdr = t.recv(4, socket.MSG_WAITALL)
t.recv(struct.unpack(">I", hdr)[0], socket.MSG_WAITALL)
# 40 connections left idle.
idle = [socket.create_connection((ip, 7390), timeout=10) for _ in range(40)]
deadline = time.monotonic() + 10
busy = []
while time.monotonic() < deadline and len(busy) < 33:   # a bounded wait for the refusals
    busy = [c for c in idle if closed(c)]
    time.sleep(0.05)
print("idle connections answered busy and closed at once: %d of 40" % len(busy))
open(ready, "w").close()
sent = 0
t.sendall(struct.pack(">I", 200))
while sent < 120 and not closed(t):
    try:
        t.send(b"\0")
    except (BrokenPipeError, ConnectionResetError):
        break
    sent += 1
    time.sleep(0.5)   # the behaviour under test: a request that trickles in
print("the trickled request: cut off after %d of 200 bytes" % sent if sent < 120
      else "the trickled request: never cut off (%d bytes)" % sent)
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not all(closed(c) for c in idle):
    time.sleep(0.1)
left = sum(not closed(c) for c in idle)
print("idle connections the daemon left open: %d" % left)
sys.exit(0 if len(busy) >= 32 and sent < 120 and left == 0 else 1)
PYEOF
PEER=$!
for _ in $(seq 1 300); do # bounded: 30 s
	[ -e "$READY" ] && break
	kill -0 "$PEER" 2>/dev/null || break
	sleep 0.1
done
[ -e "$READY" ] || { cat "$POOL_DIR/peer.out" >&2; die "the peer never got its connections up"; }
w=$(workers)
[ "$w" -le 8 ] || die "h0's daemon runs $w workers for one peer's connections (at most 8)"
ok "one peer's 41 connections: h0 runs $w workers"
out=$("$CXLCR" snapshot redis 2>&1) || die "a snapshot from another peer failed meanwhile: $out"
ok "a snapshot from another peer is served meanwhile: $out"
wait "$PEER" || { cat "$POOL_DIR/peer.out" >&2; die "the endpoint's limits do not hold"; }
while read -r line; do ok "$line"; done <"$POOL_DIR/peer.out"
python3 "$KV" wait --host "$addr" --port 6379 >/dev/null || die "redis does not answer"
ok "redis answers at $addr"
