#!/usr/bin/env bash
# A failing host hands its services off (issue 16, point 3), with a writer
# that logs every acknowledged write on each service throughout:
#   a. `cxlcr host drain h0` moves Redis and Memcached to h1: nothing is
#      left on h0, no acknowledged write is lost, every value is there;
#   b. the kernel log: records go into h1's log (a FIFO, as /dev/kmsg
#      gives them): a user's record (facility LOG_USER) that looks like an
#      oops, then a kernel one. The user's moves nothing; the kernel's
#      drains h1 to h0, again losing nothing. The daemon's log names the
#      kernel record as the trigger and never the user's.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/loadclient.sh
. "$ROOT/tests/lib/loadclient.sh"
need redis-server memcached gcc

PORT=6379
new_pool 4G
KMSG=$POOL_DIR/kmsg
mkdir "$KMSG"
CXLCR_KMSG_DIR=$KMSG pod_up 2
LOADCLIENT=$(loadclient_path)
SERVED=$ROOT/tests/lib/served.py

pod_redis rd h0 64M
raddr=$addr
python3 "$KV" fill --host "$raddr" --port $PORT --count 2000 --size 300 --seed 3 --quiet
SERVICES+=(mc)
"$CXLCR" run --host h0 --name mc --arena 64M --log "$POOL_DIR/mc.log" -- \
	memcached -U 0 -p 11211 -m 32 -u root >/dev/null || die "cxlcr run mc failed"
maddr=$(status_field mc address)
python3 "$KV" wait --proto memcached --host "$maddr" --port 11211 || die "memcached does not answer"

# Loads on both, each acknowledged SET logged.
LOADS=()
on_exit 'for p in "${LOADS[@]}"; do kill -KILL "$p" 2>/dev/null; done'
start_loads() {
	LOADS=()
	"$LOADCLIENT" --host "$raddr" --port $PORT --proto redis --mode set --keys 1000 --key-prefix ack: \
		--value-size 64 --rate 2000 --ack-log "$POOL_DIR/rd.$1.ack" --json "$POOL_DIR/rd.$1.json" --quiet &
	LOADS+=($!)
	"$LOADCLIENT" --host "$maddr" --port 11211 --proto memcached --mode set --keys 1000 --key-prefix ack: \
		--value-size 64 --rate 2000 --ack-log "$POOL_DIR/mc.$1.ack" --json "$POOL_DIR/mc.$1.json" --quiet &
	LOADS+=($!)
	python3 "$SERVED" --host "$raddr" --port $PORT --proto redis --more 500 || die "the Redis load did not start"
	python3 "$SERVED" --host "$maddr" --port 11211 --proto memcached --more 500 ||
		die "the Memcached load did not start"
}
# stop_loads TAG WHAT: the loads end; every acknowledged write is there.
stop_loads() {
	python3 "$SERVED" --host "$raddr" --port $PORT --proto redis --more 500 || die "$2: the Redis load stopped"
	python3 "$SERVED" --host "$maddr" --port 11211 --proto memcached --more 500 ||
		die "$2: the Memcached load stopped"
	local p
	for p in "${LOADS[@]}"; do
		kill -TERM "$p"
		wait "$p" || die "$2: a load client failed"
	done
	LOADS=()
	python3 "$ROOT/tests/lib/ackcheck.py" --host "$raddr" --port $PORT --proto redis "$POOL_DIR/rd.$1.ack" ||
		die "$2: Redis lost acknowledged writes"
	python3 "$ROOT/tests/lib/ackcheck.py" --host "$maddr" --port 11211 --proto memcached "$POOL_DIR/mc.$1.ack" ||
		die "$2: Memcached lost acknowledged writes"
	python3 "$KV" verify --host "$raddr" --port $PORT --count 2000 --size 300 --seed 3 --quiet ||
		die "$2: Redis lost values"
}
on_host() { [ "$(status_field rd host)" = "$1" ] && [ "$(status_field mc host)" = "$1" ]; }

say "a: cxlcr host drain h0, under load"
start_loads a
"$CXLCR" host drain h0 --json >"$POOL_DIR/drain.json" || die "drain failed: $(cat "$POOL_DIR/drain.json")"
python3 - "$POOL_DIR/drain.json" <<'EOF' || die "drain: $(cat "$POOL_DIR/drain.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["moved"] == 2 and j["failed"] == 0, j
assert all(s["moved"] and s["to"] == "h1" for s in j["services"]), j
EOF
on_host h1 || die "after the drain the services are not on h1"
stop_loads a "drain"
ok "a: drained h0 in $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total_ms"])' "$POOL_DIR/drain.json") ms: both services on h1, no acknowledged write lost"

say "b: a user's oops-like record, then a kernel one, in h1's kernel log"
start_loads b
# LOG_USER (facility 1) at warning: priority 12. Kernel (0) at warning: 4.
printf '12,900,1000,-;BUG: unable to handle page fault (written by a user)\n' >"$KMSG/h1.kmsg"
printf '4,901,1001,-;BUG: kernel NULL pointer dereference, address: 0000000000000008\n' >"$KMSG/h1.kmsg"
for _ in $(seq 300); do # the drain takes a few migrates: bounded wait for its outcome
	on_host h0 && break
	python3 -c 'import time; time.sleep(0.05)'
done
on_host h0 || die "the kernel's BUG record did not drain h1 to h0"
stop_loads b "kernel-log drain"
log=$POOL_DIR/h1.daemon.log
"$CXLCR" pod logs h1 >"$log" || die "cxlcr pod logs h1 failed"
grep -q "$KMSG/h1.kmsg" "$log" || die "the daemon log of h1 does not name its kernel log"
grep -q 'kernel NULL pointer dereference.*draining h1' "$log" || die "h1's log does not name the kernel record: $(tail -n 5 "$log")"
if grep -q 'written by a user' "$log"; then die "the user's record triggered something: $(grep 'written by a user' "$log")"; fi
ok "b: the user's record moved nothing; the kernel's drained h1 to h0 with no acknowledged write lost"
