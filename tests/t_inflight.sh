#!/usr/bin/env bash
# A client that connects while a service is frozen for a dump: the kernel
# completes its connection, but the service has not accepted it yet, and
# CRIU refused to dump such a socket ("In-flight connection"), failing the
# whole dump. A recovery point taken at the instant a client connected
# failed that way (seen in CI), and so did a snapshot or a migrate.
#   a. a snapshot taken while a connection from inside the service's
#      network namespace waits in its accept queue (held_verb says how):
#      the snapshot succeeds, and once the service runs again it accepts
#      that connection and answers on it;
#   b. the same for a migrate: it succeeds, the service answers on h1 with
#      every value, and the held client is told the connection is gone
#      (its next read ends) rather than waiting for ever.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli nsenter

PORT=6379
new_pool 4G
NAME=inf
pod_up 2
SERVICES+=("$NAME")
"$CXLCR" run --host h0 --name "$NAME" --arena 64M --log "$POOL_DIR/inf.log" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir / >/dev/null ||
	die "cxlcr run failed"
addr=$(status_field "$NAME" address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer"
python3 "$KV" fill --host "$addr" --port $PORT --count 1000 --size 300 --seed 5 --quiet

# held_client OUT: connects to the service from inside its network
# namespace while it is frozen, then sends PING and prints what came back
# (or "closed") into OUT. The connect completes in the kernel at once.
held_client() {
	local pid
	pid=$(service_pid "$NAME") # this machine's pid of it: nsenter runs here
	nsenter -t "$pid" -n python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
open(sys.argv[2] + ".connected", "w").close()
try:
    s.sendall(b"PING\r\n")
    r = s.recv(64)
    print(r.decode().strip() if r else "closed")
except OSError as e:
    print("closed:", e.strerror)
' $PORT "$1" >"$1" 2>&1 &
	CLIENT=$!
	for _ in $(seq 600); do [ -e "$1.connected" ] && return 0; kill -0 $CLIENT 2>/dev/null || break; python3 -c 'import time; time.sleep(0.05)'; done
	die "the client never connected: $(cat "$1")"
}

# held_verb WHAT ARGS...: runs `cxlcr ARGS...` with a connection in the
# service's accept queue: the service is stopped (SIGSTOP) first, so that
# it cannot accept the client connecting meanwhile, and continued
# (wherever it runs then) once the verb has ended. CRIU dumps a stopped
# task as it is, and the connection is in flight for it as it would be
# for a client connecting in the instant of a freeze. The verb's exit
# status and stderr go in $POOL_DIR/WHAT.rc/.err.
held_verb() {
	local what=$1 rc=0
	shift
	kill -STOP "$(service_pid "$NAME")"
	held_client "$POOL_DIR/$what.client"
	"$CXLCR" "$@" >/dev/null 2>"$POOL_DIR/$what.err" || rc=$?
	echo $rc >"$POOL_DIR/$what.rc"
	kill -CONT "$(service_pid "$NAME")"
}

say "a: a snapshot while a client connects"
held_verb snap snapshot "$NAME"
[ "$(cat "$POOL_DIR/snap.rc")" = 0 ] || die "a: the snapshot failed: $(cat "$POOL_DIR/snap.err")"
wait $CLIENT || true
[ "$(cat "$POOL_DIR/snap.client")" = "+PONG" ] || die "a: the held client got '$(cat "$POOL_DIR/snap.client")', not +PONG"
ok "a: the snapshot succeeded, and the client that connected in its freeze was answered"

say "b: a migrate while a client connects"
held_verb mig migrate "$NAME" --to h1
[ "$(cat "$POOL_DIR/mig.rc")" = 0 ] || die "b: the migrate failed: $(cat "$POOL_DIR/mig.err")"
[ "$(status_field "$NAME" host)" = h1 ] || die "b: the service is not on h1"
python3 "$KV" verify --host "$addr" --port $PORT --count 1000 --size 300 --seed 5 --quiet || die "b: values lost"
wait $CLIENT || true
case $(cat "$POOL_DIR/mig.client") in
closed*) ;;
*) die "b: the held client got '$(cat "$POOL_DIR/mig.client")', not the end of its connection" ;;
esac
ok "b: the migrate succeeded, every value on h1; the client that connected in its freeze saw its connection end: $(cat "$POOL_DIR/mig.client")"
