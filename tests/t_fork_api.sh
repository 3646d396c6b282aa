#!/usr/bin/env bash
# The fork API (include/cxlcr/cxlcr.h) and `cxlcr fork` around it: the
# token over TCP, root only on the Unix socket, strict requests with clear
# refusals, and the command line's usage and exit codes. Whether a fork
# succeeds is tests/t_fork.sh's business: here requests go to host h7,
# which is not up, so that one reaching fork_service() is answered with its
# error line and leaves no child behind, whatever state fork.c is in.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

BUILD=$(dirname "$CXLCR")
API_TEST=$BUILD/tests/api_test
[ -x "$API_TEST" ] || die "$API_TEST is not built"

new_pool 1G
OUT=$POOL_DIR/out
ERR=$POOL_DIR/err

# expect CODE DESCRIPTION -- CMD...: CMD exits with CODE; stdout in $OUT,
# stderr in $ERR.
expect() {
	local want=$1 what=$2 rc=0
	shift 3
	"$@" >"$OUT" 2>"$ERR" || rc=$?
	[ $rc -eq "$want" ] || die "$what: exit $rc, want $want (stdout: $(cat "$OUT"), stderr: $(cat "$ERR"))"
}
has() { grep -Eq -- "$2" "$1" || die "$3: '$2' not in: $(cat "$1")"; }
one_line() { [ "$(wc -l <"$1")" -eq 1 ] || die "$2: want one line, got: $(cat "$1")"; }

# --- the command line ---------------------------------------------------------
expect 0 "fork --help" -- "$CXLCR" fork --help
has "$OUT" "cxlcr fork NAME --to HOST" "fork --help"
expect 0 "cxlcr --help" -- "$CXLCR" --help
has "$OUT" "^  fork " "cxlcr --help lists fork"
expect 2 "fork without arguments" -- "$CXLCR" fork
has "$ERR" "usage: cxlcr fork" "fork without arguments"
expect 2 "fork without --to" -- "$CXLCR" fork web
expect 2 "fork --count 0" -- "$CXLCR" fork web --to h1 --count 0
has "$ERR" "from 1 to 64" "fork --count 0"
expect 2 "fork --count 65" -- "$CXLCR" fork web --to h1 --count 65
expect 2 "fork --count x" -- "$CXLCR" fork web --to h1 --count 2x
expect 2 "fork --to a/b" -- "$CXLCR" fork web --to a/b
expect 2 "fork of two names" -- "$CXLCR" fork web web2 --to h1
expect 3 "fork of a missing service" -- "$CXLCR" fork nosuch --to h1
one_line "$ERR" "fork of a missing service"
has "$ERR" "no service named 'nosuch'" "fork of a missing service"
ok "cxlcr fork: --help, usage errors exit 2, an unknown service exits 3"

# --- the libraries export the API and nothing else --------------------------------
exports=$(nm -D --defined-only "$BUILD/libcxlcr.so" | awk '{print $3}' | sort | tr '\n' ' ')
[ "$exports" = "cxlcr_api_close cxlcr_api_connect cxlcr_api_error cxlcr_api_fork cxlcr_api_fork_mode cxlcr_api_release " ] ||
	die "libcxlcr.so exports: $exports"
exports=$(nm -g --defined-only "$BUILD/libcxlcr.a" | awk 'NF == 3 {print $3}' | sort | tr '\n' ' ')
[ "$exports" = "cxlcr_api_close cxlcr_api_connect cxlcr_api_error cxlcr_api_fork cxlcr_api_fork_mode cxlcr_api_release " ] ||
	die "libcxlcr.a defines: $exports"
ok "libcxlcr.a and libcxlcr.so export cxlcr_api_* only"

# --- the library reads a successful reply (from a stand-in daemon) ----------
# fake_daemon SOCKET REPLY: answers one request on SOCKET with REPLY and
# writes the request it got into $POOL_DIR/request.
FAKE_DAEMON='
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
open(sys.argv[1] + ".ready", "w").close()
c, _ = s.accept()
req = b""
while not req.endswith(b"\n"):
    b = c.recv(4096)
    if not b:
        break
    req += b
open(sys.argv[3], "wb").write(req)
c.sendall(sys.argv[2].encode() + b"\n")
c.close()
'
fake_fork() {
	local sock=$POOL_DIR/fake.sock
	rm -f "$sock" "$sock.ready"
	python3 -c "$FAKE_DAEMON" "$sock" "$1" "$POOL_DIR/request" &
	local pid=$! i
	for i in $(seq 100); do [ -e "$sock.ready" ] && break; sleep 0.05; done
	"$API_TEST" fork "$sock" web h1 2 sesame >"$OUT" 2>&1 || true
	wait "$pid" || die "the stand-in daemon failed"
}
fake_fork '{"ok": true, "children": [{"name": "web.1", "host": "h1", "address": "10.79.1.5", "pid": 41, "restore_ms": 40.1, "later": [1]}, {"name": "web.2", "host": "h1", "address": "10.79.1.6", "pid": 42, "restore_ms": 41.0}], "freeze_ms": 12.5, "snapshot_ms": 8, "restore_ms": 41, "total_ms": 95, "image_bytes": 2097152, "snapshot_bytes": 1048576, "future": {"x": null}}'
[ "$(cat "$OUT")" = "$(printf 'ok 2\nweb.1 h1 10.79.1.5 41\nweb.2 h1 10.79.1.6 42')" ] ||
	die "a successful reply was read as: $(cat "$OUT")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r == {"op": "fork", "service": "web", "host": "h1", "count": 2}, r' \
	"$POOL_DIR/request" || die "the library sent: $(cat "$POOL_DIR/request")"
fake_fork '{"ok": false, "error": "fork of web: h1 is out of \"memory\""}'
has "$OUT" '^error: fork of web: h1 is out of "memory"$' "an error reply"
fake_fork '{"ok": true, "children": [{"name": 7}]}'
has "$OUT" "^error: malformed reply from the daemon \(bad value of 'children'\)$|^error: malformed reply" "a bad reply"
fake_fork 'HTTP/1.1 400 Bad Request'
has "$OUT" "^error: malformed reply from the daemon" "a reply that is not JSON"
ok "the library sends the request and reads children, figures and errors; bad replies are one clear line"

# --- a pod, its token, a parent ---------------------------------------------------
# (with a short whole-request deadline for the limits at the end)
CXLCR_API_TIMEOUT_S=2 CXLCR_API_CHILDREN_MAX=2 pod_up 2
pool=$(realpath "$CXLCR_POOL")
POD_DIR=
for d in /run/cxlcr/pod*; do
	[ "$(cat "$d/pool" 2>/dev/null)" = "$pool" ] && POD_DIR=$d
done
[ -n "$POD_DIR" ] || die "no pod directory for $pool"
H0_IP=$("$CXLCR" pod up --hosts 2 --json | python3 -c '
import json, sys
print([h["address"] for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0])')
# h0's Unix socket is in h0's own /run (emulation/hostfs.h): whatever
# uses it runs on h0 (on_h0).
UNIX=$POD_DIR/h0.api
on_h0() { "$CXLCR" pod exec h0 -- "$@"; }
TCP=tcp:$H0_IP:7390
LOG=$POOL_DIR/h0.daemon.log # h0's daemon log, as `cxlcr pod logs h0` shows it now
h0_log() { "$CXLCR" pod logs h0 >"$LOG" || die "cxlcr pod logs h0 failed"; }
on_h0 test -S "$UNIX" || die "no API socket $UNIX on h0"
[ "$(on_h0 stat -c %a "$UNIX")" = 600 ] || die "$UNIX has mode $(on_h0 stat -c %a "$UNIX")"
[ ! -e "$UNIX" ] || die "this machine sees h0's API socket $UNIX"
TOKEN_FILE=$POD_DIR/api-token
[ "$(stat -c '%a %U' "$TOKEN_FILE")" = "600 root" ] || die "$TOKEN_FILE: $(stat -c '%a %U' "$TOKEN_FILE")"
TOKEN=$(cat "$TOKEN_FILE")
[[ $TOKEN =~ ^[0-9a-f]{64}$ ]] || die "the token is not 64 hex digits: $TOKEN"
# The token is the pod's, derived from the pod's key in the pool: each
# host keeps the same in its own /run, as does this machine.
for h in h0 h1; do
	[ "$("$CXLCR" pod exec $h -- cat "$TOKEN_FILE")" = "$TOKEN" ] || die "$h's token is not this machine's"
	[ "$("$CXLCR" pod exec $h -- stat -c '%a %U' "$TOKEN_FILE")" = "600 root" ] || die "$h's $TOKEN_FILE is not root's, 0600"
done
ok "pod up made a 64-hex-digit token, mode 0600, the same as h0's and h1's own; the API listens on $UNIX and $TCP"

SERVICES+=(web)
"$CXLCR" run --host h0 --name web --arena 64M --log "$POOL_DIR/web.log" -- sleep 3600 \
	>/dev/null 2>"$ERR" || die "cxlcr run --host h0 failed: $(cat "$ERR")"

# api FORK-ARGS...: api_test fork ...; its one line of output in $OUT.
# Over the Unix socket, on h0.
api() {
	case $1 in
	tcp:*) "$API_TEST" fork "$@" >"$OUT" 2>"$ERR" || true ;;
	*) on_h0 "$API_TEST" fork "$@" >"$OUT" 2>"$ERR" || true ;;
	esac
}
# reached_fork WHAT: the request got to fork_service(), which refused a
# fork onto h7 with a line of its own (no child of it can exist).
reached_fork() {
	has "$OUT" "^error: " "$1"
	! grep -Eq "not authorised|bad request|no service named|cannot connect|malformed" "$OUT" ||
		die "$1: did not reach fork_service: $(cat "$OUT")"
	one_line "$OUT" "$1"
}

# --- Unix socket: no token needed ---------------------------------------------------
api "$UNIX" web h7 1 -
reached_fork "unix socket, no token"
ok "unix socket without a token reaches fork_service: $(cat "$OUT")"
api "$UNIX" nosuch h1 1 -
has "$OUT" "^error: no service named 'nosuch' in pool" "unknown service over the API"
api "$UNIX" web h1 0 -
has "$OUT" "^error: bad request: count must be an integer from 1 to 64$" "count 0"
api "$UNIX" web h1 65 -
has "$OUT" "^error: bad request: count must be an integer from 1 to 64$" "count 65"
api "$UNIX" 'web/../x' h1 1 -
has "$OUT" "^error: bad request: 'web/../x' is not a service name$" "bad service name"
on_h0 "$API_TEST" twice "$UNIX" web h7 - >"$OUT" 2>&1 || die "one handle, two requests: $(cat "$OUT")"
ok "unknown service, bad count and bad name refused; a handle serves two requests"

# Not root: the socket itself keeps others out, and SO_PEERCRED as well.
on_h0 setpriv --reuid=65534 --regid=65534 --clear-groups "$API_TEST" fork "$UNIX" web h7 1 >"$OUT" 2>&1 || true
has "$OUT" "^error: cannot connect to .*Permission denied" "a user's connect"
on_h0 chmod 0666 "$UNIX"
on_h0 setpriv --reuid=65534 --regid=65534 --clear-groups "$API_TEST" fork "$UNIX" web h7 1 >"$OUT" 2>&1 || true
on_h0 chmod 0600 "$UNIX"
has "$OUT" "^error: not authorised$" "a user's request on an open socket"
h0_log
has "$LOG" "api request \(unix\): refused: request from uid 65534 refused" "the daemon's log"
ok "a user who is not root is refused (socket mode, and SO_PEERCRED)"

# --- TCP: requests sealed under the token's key ----------------------------------
api "$TCP" web h7 1 -
has "$OUT" "^error: not authorised$" "TCP without a token"
api "$TCP" web h7 1 "$(printf '0%.0s' {1..64})"
has "$OUT" "^error: not authorised$" "TCP with a wrong token"
api "$TCP" web h7 1 "${TOKEN:0:63}"
has "$OUT" "^error: not authorised$" "TCP with a token one digit short"
api "$TCP" web h7 1 "${TOKEN}0"
has "$OUT" "^error: not authorised$" "TCP with a token one digit long"
api "$TCP" web h7 0 "${TOKEN:0:63}x"
has "$OUT" "^error: not authorised$" "TCP with a wrong token and a bad count"
h0_log
has "$LOG" "api request \(tcp [0-9.]+\): refused: not authorised \(not sealed\)" "the daemon's log (no token)"
has "$LOG" "api request \(tcp [0-9.]+\): refused: not authorised \(its MAC does not check: a wrong token, or replayed\)" \
	"the daemon's log (wrong token)"
ok "TCP: a missing or wrong token is refused ('not authorised', logged)"
api "$TCP" web h7 1 "$TOKEN"
reached_fork "TCP with the token"
ok "TCP with the pod's token reaches fork_service: $(cat "$OUT")"
CXLCR_API_TOKEN=$TOKEN "$API_TEST" fork "$TCP" web h7 1 >"$OUT" 2>&1 || true
reached_fork "TCP with the token from \$CXLCR_API_TOKEN"
api "$TCP" web h1 0 "$TOKEN"
has "$OUT" "^error: bad request: count must be an integer from 1 to 64$" "TCP, count 0"
api "$TCP" nosuch h1 1 "$TOKEN"
has "$OUT" "^error: no service named 'nosuch'" "TCP, unknown service"
ok "TCP with the token: bad count and unknown service refused"

# --- malformed requests, as bytes on the wire ---------------------------------------
# raw ENDPOINT REQUEST: sends REQUEST and a newline as they are, prints
# the reply line (checked: one line, a JSON object with ok false).
RAW_CLIENT='
import json, socket, sys
ep = sys.argv[1]
if ep.startswith("tcp:"):
    _, host, port = ep.split(":")
    s = socket.create_connection((host, int(port)), timeout=20)
else:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(ep)
s.sendall(sys.argv[2].encode() + b"\n")
s.shutdown(socket.SHUT_WR)
reply = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    reply += b
assert reply.endswith(b"\n") and reply.count(b"\n") == 1, reply
r = json.loads(reply)
assert r["ok"] is False and isinstance(r["error"], str), r
print(r["error"])
'
raw() {
	case $1 in
	tcp:*) python3 -c "$RAW_CLIENT" "$1" "$2" ;;
	*) on_h0 python3 -c "$RAW_CLIENT" "$1" "$2" ;;
	esac
}
# refused ENDPOINT REQUEST REGEX: REQUEST (a line) is refused with REGEX.
refused() {
	raw "$1" "$2" >"$OUT" 2>&1 || die "request ${2:0:100}: $(tail -n 1 "$OUT")"
	has "$OUT" "$3" "request ${2:0:100}"
}
GOOD='"service":"web","host":"h7","count":1'
refused "$UNIX" 'not json' "^bad request: malformed JSON at byte [0-9]+: '\\[' or '\\{' expected near 'not'$"
refused "$UNIX" "{\"op\":\"fork\",$GOOD" "^bad request: malformed JSON at byte [0-9]+: '}' expected"
refused "$UNIX" "{\"op\":\"fork\",$GOOD,}" '^bad request: malformed JSON'
refused "$UNIX" "{\"op\":\"fork\",$GOOD} {}" "^bad request: malformed JSON at byte [0-9]+: end of file expected near '\\{'$"
refused "$UNIX" "{\"op\":\"fork\",$GOOD,\"x\":[1,{\"y\":\"\\u00e9\"}]}" "^bad request: unknown field 'x'$"
refused "$UNIX" "{\"op\":\"exec\",$GOOD}" "^bad request: unknown op 'exec' \(known: fork, release\)$"
refused "$UNIX" "{$GOOD}" "^bad request: missing field 'op'$"
refused "$UNIX" '{"op":"fork","service":"web","host":"h7"}' "^bad request: missing field 'count'$"
refused "$UNIX" '{"op":"fork","host":"h7","count":1}' "^bad request: missing field 'service'$"
refused "$UNIX" "{\"op\":\"fork\",$GOOD,\"count\":2}" "^bad request: malformed JSON at byte [0-9]+: duplicate object key near '\"count\"'$"
refused "$UNIX" '{"op":"fork","service":"web","host":"h7","count":1.5}' 'count must be an integer from 1 to 64'
refused "$UNIX" '{"op":"fork","service":"web","host":"h7","count":"2"}' '^bad request: count must be a number$'
refused "$UNIX" '{"op":"fork","service":"web","host":"h7","count":1e9}' 'count must be an integer from 1 to 64'
refused "$UNIX" '{"op":"fork","service":"web","host":"h7","count":01}' '^bad request: malformed JSON'
refused "$UNIX" '{"op":"fork","service":7,"host":"h7","count":1}' '^bad request: service must be a string$'
refused "$UNIX" '{"op":"fork","service":"web","host":"h7","count":1,"mode":"cow"}' '^bad request: mode must be "share" or "copy"$'
refused "$UNIX" '{"op":"fork","service":"web","host":"h7","count":1,"fetch":"soon"}' '^bad request: fetch must be "background", "eager" or "lazy"$'
refused "$UNIX" '{"op":"release","service":"web.1","mode":"copy"}' '^bad request: release takes no host, count, mode or fetch$'
refused "$UNIX" "{\"op\":\"fork\",\"service\":\"$(printf 'w%.0s' {1..80})\",\"host\":\"h7\",\"count\":1}" \
	'^bad request: service is longer than 63 bytes$'
refused "$UNIX" '{"op":"fork","service":"w\u0000b","host":"h7","count":1}' 'malformed JSON.*u0000'
refused "$UNIX" "{\"op\":\"fork\",$GOOD,\"pad\":\"$(head -c 5000 /dev/zero | tr '\0' x)\"}" \
	'^message longer than 4096 bytes$'
refused "$UNIX" '' "^bad request: malformed JSON at byte 0: '\\[' or '\\{' expected near end of file$"
ok "malformed JSON, unknown op and fields, bad values, oversized requests: refused, one line each"
refused "$TCP" 'not json' '^bad request: malformed JSON at byte [0-9]+: '
refused "$TCP" "{\"op\":\"fork\",$GOOD,\"token\":\"$TOKEN\"}" '^not authorised$'
refused "$TCP" "{\"sealed\":\"{}\",\"mac\":\"$(printf '0%.0s' {1..64})\"}" '^not authorised$'
refused "$TCP" "{\"sealed\":\"{}\",\"mac\":\"00\",\"mac\":\"01\"}" "duplicate object key near '\"mac\"'$"
ok "over TCP: bad JSON refused as such; the pod's token in the clear, a made-up MAC: not authorised; an envelope with two MACs: malformed"

# --- the command line through the API ---------------------------------------------
expect 1 "fork onto a host that is not up" -- "$CXLCR" fork web --to h7 --json
one_line "$ERR" "fork onto a host that is not up"
[ ! -s "$OUT" ] || die "a failed fork printed on stdout: $(cat "$OUT")"
! grep -Eq "not authorised|bad request" "$ERR" || die "cxlcr fork: $(cat "$ERR")"
ok "cxlcr fork reaches fork_service through h0's daemon: $(cat "$ERR")"
expect 3 "fork of a missing service, pod up" -- "$CXLCR" fork nosuch --to h1

# --- the token is the pool's, not a file's; unreachable endpoints -------------------
on_h0 rm "$TOKEN_FILE"
api "$TCP" web h7 1 "$TOKEN"
reached_fork "TCP while h0's token file is gone"
"$API_TEST" connect "$POD_DIR/h9.api" >"$OUT" 2>&1 && die "connect to a missing socket worked"
has "$OUT" "^error: cannot connect to .*h9.api: No such file or directory$" "connect to a missing socket"
"$API_TEST" connect "tcp:$H0_IP" >"$OUT" 2>&1 && die "connect to tcp without a port worked"
has "$OUT" "expected tcp:HOST:PORT" "connect to tcp without a port"
ok "h0's token file gone: TCP still takes the pod's token; unreachable endpoints are one clear line"

# --- replies over TCP are sealed for their request --------------------------------
# A man in the middle (on this machine, in front of h0's port) serves one
# connection per mode: "pass" forwards the daemon's greeting, the request
# and the reply (it keeps both), "replay" greets with a challenge of its own
# and answers the next request with the kept reply without forwarding it,
# "again" plays the kept request to the daemon on a new connection of its
# own (another challenge) and forwards what the daemon answers, "flip"
# forwards and changes one digit of the reply's MAC.
MITM='
import json, os, socket, sys
target, port_file, modes = (sys.argv[1], 7390), sys.argv[2], sys.argv[3].split(",")
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
kept = None
with open(port_file + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
import os; os.rename(port_file + ".tmp", port_file)
def line(c):
    b = b""
    while not b.endswith(b"\n"):
        got = c.recv(65536)
        if not got:
            break
        b += got
    return b
kept_req = None
def greet(c):
    c.sendall(b"{\"challenge\":\"%s\"}\n" % os.urandom(32).hex().encode())
for i, mode in enumerate(modes):
    c, _ = s.accept()
    hello = line(c)
    assert hello == b"{\"op\":\"hello\"}\n", hello
    if mode == "replay":
        greet(c)
        req = line(c)
        rep = kept
    else:
        d = socket.create_connection(target, timeout=60)
        d.sendall(hello)
        greeting = line(d)
        if mode == "again":
            greet(c)
        else:
            c.sendall(greeting)
        req = line(c)
        d.sendall(req if mode != "again" else kept_req)
        rep = line(d)
        d.close()
        if mode == "pass":
            kept, kept_req = rep, req
        elif mode == "flip":
            r = json.loads(rep)
            mac = r["mac"]
            r["mac"] = ("1" if mac[0] == "0" else "0") + mac[1:]
            rep = (json.dumps(r) + "\n").encode()
    open("%s.request%d" % (port_file, i), "wb").write(req)
    c.sendall(rep)
    c.close()
'
MITM_PORT_FILE=$POOL_DIR/mitm.port
rm -f "$MITM_PORT_FILE"
"$PYTHON3" -c "$MITM" "$H0_IP" "$MITM_PORT_FILE" pass,replay,again,flip &
MITM_PID=$!
on_exit "kill $MITM_PID 2>/dev/null || true"
for _ in $(seq 200); do [ -e "$MITM_PORT_FILE" ] && break; sleep 0.05; done
[ -e "$MITM_PORT_FILE" ] || die "the man in the middle did not start"
MITM_EP=tcp:127.0.0.1:$(cat "$MITM_PORT_FILE")

# --- release, and the pod's quota of live children (2 here) ---------------------
api "$MITM_EP" web h1 1 "$TOKEN"
has "$OUT" "^ok 1$" "a real fork through the API (its sealed reply passed on)"
child=$(sed -n 2p "$OUT" | cut -d' ' -f1)
SERVICES+=("$child")
[ "$(status_field "$child" state)" = running ] || die "$child is not running"
python3 - "$MITM_PORT_FILE.request0" "$TOKEN" <<'PYEOF' || die "the library's request over TCP: $(cat "$MITM_PORT_FILE.request0")"
import json, re, sys
e = json.load(open(sys.argv[1]))
assert sorted(e) == ["mac", "sealed"] and re.fullmatch("[0-9a-f]{64}", e["mac"]), e
r = json.loads(e["sealed"])
assert re.fullmatch("[0-9a-f]{64}", r["nonce"]) and "token" not in r, r
assert sys.argv[2] not in open(sys.argv[1]).read(), "the token travelled"
PYEOF
ok "over TCP the library seals its request (the token does not travel) with a fresh nonce, and takes the daemon's sealed reply: $(head -n 1 "$OUT")"
api "$MITM_EP" web h1 1 "$TOKEN"
has "$OUT" "^error: reply not authenticated \(no MAC under the pod's token for this request: forged or replayed\)$" \
	"the fork's reply replayed to another request"
one_line "$OUT" "a replayed reply"
cmp -s "$MITM_PORT_FILE.request0" "$MITM_PORT_FILE.request1" && die "two requests alike: no fresh nonce"
api "$MITM_EP" web h1 1 "$TOKEN"
has "$OUT" "^error: not authorised$" "the fork's request played again to the daemon"
one_line "$OUT" "a replayed request"
h0_log
has "$LOG" "api request \(tcp [0-9.]+\): refused: not authorised \(its MAC does not check: a wrong token, or replayed\)" \
	"the daemon's log (a replayed request)"
api "$MITM_EP" web h7 1 "$TOKEN"
has "$OUT" "^error: reply not authenticated \(no MAC under the pod's token for this request: forged or replayed\)$" \
	"a reply with one digit of its MAC changed"
one_line "$OUT" "a reply with a wrong tag"
wait "$MITM_PID" || die "the man in the middle failed"
ok "a reply replayed to another request, a request played again on another connection, and a reply with a wrong tag: refused in one line, nothing of it taken (one child still, below)"
api "$TCP" web h1 2 "$TOKEN"
has "$OUT" "^error: quota: 1 children live, 2 more would pass the pod's 2" "a fork past the quota"
"$API_TEST" release "$TCP" web "$TOKEN" >"$OUT" 2>&1 && die "the API released a service"
has "$OUT" "^error: 'web' is a service, not a child" "release of a service"
"$API_TEST" release "$TCP" nosuch.1 "$TOKEN" >"$OUT" 2>&1 && die "the API released a child that does not exist"
has "$OUT" "^error: no child named 'nosuch.1'" "release of a missing child"
"$API_TEST" release "$TCP" "$child" - >"$OUT" 2>&1 && die "a release without the token worked"
has "$OUT" "^error: not authorised" "release without the token"
"$API_TEST" release "$TCP" "$child" "$TOKEN" >"$OUT" 2>&1 || die "release failed: $(cat "$OUT")"
expect 3 "status of the released child" -- "$CXLCR" status "$child"
api "$TCP" web h1 2 "$TOKEN"
has "$OUT" "^ok 2$" "two forks once the first child is released"
for c in $(sed -n '2,$p' "$OUT" | cut -d' ' -f1); do
	SERVICES+=("$c")
	"$API_TEST" release "$TCP" "$c" "$TOKEN" >/dev/null || die "release of $c failed"
done
ok "the API releases its children (not services, not without the token), within a quota of live children"

# --- limits: idle connections, a request that trickles in ----------------------
# 100 connections opened and left idle: the daemon serves at most
# WORKERS_PER_PEER (daemon/workers.h) of one peer at once, and answers the
# others "busy" at once; its workers stay bounded.
DAEMON=$("$CXLCR" pod up --hosts 2 --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0]["daemon_pid"])')
[ -n "$DAEMON" ] || die "cannot find h0's daemon"
python3 - "$H0_IP" "$DAEMON" <<'PYEOF' || die "the API's limits do not hold"
import os, socket, sys, time
ip, daemon = sys.argv[1], int(sys.argv[2])
def workers():
    kids = 0
    for t in os.listdir("/proc/%d/task" % daemon):
        kids += len(open("/proc/%d/task/%s/children" % (daemon, t)).read().split())
    return kids
conns = [socket.create_connection((ip, 7390), timeout=5) for _ in range(100)]
busy = 0
for c in conns:
    c.setblocking(False)
deadline = time.monotonic() + 5
while time.monotonic() < deadline and busy < 92:   # a bounded wait for the refusals
    busy = 0
    for c in conns:
        try:
            data = c.recv(256, socket.MSG_PEEK)
            busy += b"busy" in data
        except BlockingIOError:
            pass
    time.sleep(0.05)
w = workers()
print("100 idle connections: %d workers, %d answered busy" % (w, busy))
if w < 1 or w > 8 or busy < 92:
    sys.exit(1)
for c in conns:
    c.close()
PYEOF
ok "100 idle connections from one peer: at most 8 workers, the rest answered busy"

# A client that sends its request one byte at a time, slower than the
# daemon's whole-request deadline allows (CXLCR_API_TIMEOUT_S, 2 s here),
# is cut off before it has sent it all.
python3 - "$H0_IP" <<'PYEOF' || die "a trickling request kept its worker"
import socket, sys, time
s = socket.create_connection((sys.argv[1], 7390), timeout=30)
req = b'{"op":"fork","service":"web","host":"h7","count":1,"token":"' + b"0" * 64 + b'"}\n'
for i, b in enumerate(req):
    try:
        s.send(bytes([b]))
    except (BrokenPipeError, ConnectionResetError):
        print("cut off after %d of %d bytes" % (i, len(req)))
        sys.exit(0)
    time.sleep(0.2)   # the behaviour under test: a request that trickles in
sys.exit("the whole trickled request was taken (%d bytes over %.0f s)" % (len(req), len(req) * 0.2))
PYEOF
ok "a request that trickles in is cut off at the daemon's deadline"
