#!/usr/bin/env bash
# Service continuity across migrations, with Redis (and, for a and b,
# Memcached) on an emulated pod:
#   a. no lost acknowledged write: a SET load (bench/loadclient --ack-log)
#      runs across 5 migrations h0 <-> h1 (Memcached: 3); afterwards every
#      key it wrote holds its last acknowledged version (tests/lib/ackcheck.py);
#   b. connections survive: the same load client's one connection lasts
#      through all of them (no reconnect, no error: a request unanswered
#      for the client's 5 s timeout would be one), and the load goes on
#      after each migration (the server counts 1000 more requests before
#      the next); the response gap of each is printed, not judged (timings
#      are bench/continuity.sh's business);
#   c. exactly one writer: 20 trials of checkpoint, then two restores of
#      it raced on h0 and h1: exactly one succeeds, the other fails with
#      one line saying the checkpoint is taken (being restored, or restored
#      already) and leaves no work directory; the service runs on the
#      winner only (one process maps the pool) with every value intact.
#      Then a restore of an old checkpoint
#      after the service moved on is refused as stale: cxlcr reclaims a
#      checkpoint once it is restored, so the test keeps a copy of its
#      image set and writes it back into the pool (tests/lib/poolimg.py),
#      as a lost-and-found copy would be.
# The load client is built from bench/loadclient.c when the Makefile has not.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/loadclient.sh
. "$ROOT/tests/lib/loadclient.sh"
need redis-server memcached gcc

PORT=6379
COUNT=4000          # kvclient data set (verified after every step)
SIZE=400
TYPES=strings,hashes,lists
ACK_KEYS=2000       # the SET load's key space (its own prefix)
MIGRATIONS=5
MC_MIGRATIONS=3     # the same with memcached
SERVED=$ROOT/tests/lib/served.py
TRIALS=${CONT_TRIALS:-20}

new_pool 8G
NAME=cont-${POOL_DIR##*-} # unique: its CRIU work directories are recognisable
# The refused restores leave their work directories (CRIU's log, the
# images) in their hosts' own /var/lib/cxlcr, which go with the pod.
LOADCLIENT=$(loadclient_path)
pod_up 2

say "cxlcr run --host h0 redis-server"
pod_redis "$NAME" h0 512M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5 --quiet

verify() {
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
		--seed 5 --quiet || die "values differ after $1"
}

other() { [ "$1" = h0 ] && echo h1 || echo h0; }

# Failures of a and b are reported at the end, after c has run too.
FAILED=()
fail_later() {
	printf '%s: FAIL: %s\n' "$TEST_NAME" "$*" >&2
	FAILED+=("$*")
}

# ---- a + b: a SET load across migrations ---------------------------------------------------
LC_PID=
# shellcheck disable=SC2016 # expanded when the hook runs
on_exit '[ -z "$LC_PID" ] || kill -KILL "$LC_PID" 2>/dev/null'

# set_load_across SERVICE PROTO ADDR PORT N: a SET load at 10,000/s on one
# connection while SERVICE migrates N times between h0 and h1 (it starts on
# h0); then checks a (ackcheck) and b (the load's report).
set_load_across() {
	local name=$1 proto=$2 a=$3 port=$4 n=$5 host=h0 to i tag=$1
	"$LOADCLIENT" --host "$a" --port "$port" --proto "$proto" --mode set --keys $ACK_KEYS \
		--key-prefix ack: --value-size 64 --rate 10000 --ack-log "$POOL_DIR/$tag.ack" \
		--json "$POOL_DIR/$tag.load.json" --quiet &
	LC_PID=$!
	python3 "$SERVED" --host "$a" --port "$port" --proto "$proto" --more 2000 ||
		die "$proto: the load did not start"
	for i in $(seq 1 "$n"); do
		to=$(other "$host")
		kill -USR1 "$LC_PID"
		"$CXLCR" migrate "$name" --to "$to" >/dev/null || die "$proto: migrate $i ($host -> $to) failed"
		kill -USR2 "$LC_PID"
		[ "$(status_field "$name" host)" = "$to" ] || die "$proto: after migrate $i, the service is not on $to"
		host=$to
		# The load goes on at the new host before the next migration.
		python3 "$SERVED" --host "$a" --port "$port" --proto "$proto" --more 1000 ||
			die "$proto: the load did not go on after migrate $i"
	done
	kill -0 "$LC_PID" 2>/dev/null || die "$proto: the load client is gone"
	kill -TERM "$LC_PID"
	wait "$LC_PID" || die "the load client failed"
	LC_PID=
	if python3 "$ROOT/tests/lib/ackcheck.py" --host "$a" --port "$port" --proto "$proto" "$POOL_DIR/$tag.ack"; then
		ok "a: $proto: no acknowledged write lost across $n migrations"
	else
		fail_later "a: $proto: acknowledged writes were lost"
	fi
	if python3 - "$POOL_DIR/$tag.load.json" "$n" "$proto" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
n, proto = int(sys.argv[2]), sys.argv[3]
gaps = [w["gap_ms"] for w in j["windows"]]
print("t_continuity: %s: %d SETs acknowledged, %d errors, %d reconnects; response gap per migration (ms): %s"
      % (proto, j["sets_acked"], j["errors"], j["reconnects"], ", ".join("%.0f" % g for g in gaps)))
fail = []
if len(gaps) != n:
    fail.append("%d migration windows recorded, expected %d" % (len(gaps), n))
if j["errors"] or j["reconnects"] or j["stale_reads"] or j["bad_values"]:
    fail.append("%d errors (%d timeouts, %d connections closed), %d reconnects, %d stale reads, %d bad values"
                % (j["errors"], j["timeouts"], j["closed"], j["reconnects"], j["stale_reads"], j["bad_values"]))
for f in fail:
    print("t_continuity: " + f, file=sys.stderr)
sys.exit(1 if fail or not j["sets_acked"] else 0)
EOF
	then
		ok "b: $proto: one connection through $n migrations: no error, no reconnect"
	else
		fail_later "b: $proto: the load client's connection did not get through the migrations"
	fi
}

set_load_across "$NAME" redis "$addr" $PORT $MIGRATIONS
verify "$MIGRATIONS migrations under load"

say "cxlcr run --host h0 memcached"
MC=mc-${POOL_DIR##*-}
SERVICES+=("$MC")
"$CXLCR" run --host h0 --name "$MC" --arena 256M --log "$POOL_DIR/$MC.log" -- \
	memcached -U 0 -p 11211 -m 64 -t 2 -u root >/dev/null || die "cxlcr run --host h0 memcached failed"
mc_addr=$(status_field "$MC" address)
python3 "$KV" wait --proto memcached --host "$mc_addr" --port 11211 || die "memcached does not answer"
set_load_across "$MC" memcached "$mc_addr" 11211 $MC_MIGRATIONS
stop_service "$MC"

# ---- c: racing restores of one checkpoint ----------------------------------------------------
# The processes that map this test's pool: the service only.
mappers() { pool_mappers; }
say "c: $TRIALS trials of two restores of one checkpoint, raced on h0 and h1"
wins_h0=0 wins_h1=0
reasons=$POOL_DIR/reasons
: >"$reasons"
for t in $(seq 1 "$TRIALS"); do
	"$CXLCR" checkpoint "$NAME" >/dev/null || die "trial $t: checkpoint failed"
	[ "$(status_field "$NAME" state)" = checkpointed ] || die "trial $t: not checkpointed"
	epoch=$(status_field "$NAME" owner_epoch)
	if [ $((t % 2)) -eq 0 ]; then order="h0 h1"; else order="h1 h0"; fi
	pids=()
	for h in $order; do
		(
			rc=0
			"$CXLCR" restore "$NAME" --host "$h" >"$POOL_DIR/r.$h.out" 2>"$POOL_DIR/r.$h.err" || rc=$?
			echo $rc >"$POOL_DIR/r.$h.rc"
		) &
		pids+=($!)
	done
	wait "${pids[@]}"
	rc0=$(cat "$POOL_DIR/r.h0.rc") rc1=$(cat "$POOL_DIR/r.h1.rc")
	if [ "$rc0" = 0 ] && [ "$rc1" != 0 ]; then
		win=h0 lose=h1
	elif [ "$rc1" = 0 ] && [ "$rc0" != 0 ]; then
		win=h1 lose=h0
	else
		die "trial $t: restore on h0 exited $rc0 ($(cat "$POOL_DIR/r.h0.err")), on h1 $rc1 ($(cat "$POOL_DIR/r.h1.err")): not exactly one success"
	fi
	[ ! -s "$POOL_DIR/r.$win.err" ] || die "trial $t: the successful restore complained: $(cat "$POOL_DIR/r.$win.err")"
	[ "$(wc -l <"$POOL_DIR/r.$lose.err")" -eq 1 ] ||
		die "trial $t: the refused restore on $lose did not say one line: $(cat "$POOL_DIR/r.$lose.err")"
	# It stopped at the service's lease (the winner's restore holds it),
	# at the claim (being restored), or found the checkpoint spent already
	# (the winner was done first): never in CRIU.
	grep -Eq "is busy: restore by pid [0-9]+ on $win|is being restored on $win already|was restored already|no checkpoint of" "$POOL_DIR/r.$lose.err" ||
		die "trial $t: unclear refusal on $lose: $(cat "$POOL_DIR/r.$lose.err")"
	left=$(on_hosts find /var/lib/cxlcr -mindepth 2 -maxdepth 2 -name "restore.$NAME.*" 2>/dev/null | wc -l)
	[ "$left" -eq 0 ] || die "trial $t: $left restore work directories left behind"
	sed -E -e 's/ \(log [^)]*\)$//' -e 's/by pid [0-9]+/by pid N/' -e "s/ on $lose / on LOSER /" -e "s/ on $win / on WINNER /" \
		-e "s/$NAME\.[0-9]+/$NAME.N/" "$POOL_DIR/r.$lose.err" >>"$reasons"
	[ "$(status_field "$NAME" host)" = "$win" ] || die "trial $t: $win won, but the service is on $(status_field "$NAME" host)"
	[ "$(status_field "$NAME" state)" = running ] || die "trial $t: the service is not running"
	[ "$(status_field "$NAME" owner_epoch)" -eq $((epoch + 1)) ] ||
		die "trial $t: epoch $(status_field "$NAME" owner_epoch), expected $((epoch + 1))"
	pid=$(status_field "$NAME" pid)
	m=$(mappers)
	[ "$m" = "$win:$pid " ] || die "trial $t: processes mapping the pool: ${m:-none}; expected only the service ($win:$pid)"
	verify "trial $t"
	if [ "$win" = h0 ]; then wins_h0=$((wins_h0 + 1)); else wins_h1=$((wins_h1 + 1)); fi
done
ok "c: $TRIALS races, exactly one restore won each (h0 $wins_h0, h1 $wins_h1); one process maps the arena; every value intact"
say "the losers said:"
sort "$reasons" | uniq -c | sed 's/^/    /'

say "c: a restore of an old checkpoint, after the service moved on"
"$CXLCR" checkpoint "$NAME" >/dev/null || die "checkpoint failed"
old=$(python3 "$ROOT/tests/lib/poolimg.py" keep "$CXLCR_POOL" "$NAME" "$POOL_DIR/kept.img") ||
	die "cannot keep the image set"
"$CXLCR" restore "$NAME" --host h0 >/dev/null || die "restore on h0 failed"
[ "$(python3 "$ROOT/tests/lib/poolimg.py" count "$CXLCR_POOL" "$NAME")" -eq 0 ] ||
	die "the restored checkpoint is still in the pool"
"$CXLCR" migrate "$NAME" --to h1 >/dev/null || die "migrate to h1 failed"
"$CXLCR" migrate "$NAME" --to h0 >/dev/null || die "migrate to h0 failed"
python3 "$ROOT/tests/lib/poolimg.py" put "$CXLCR_POOL" "$POOL_DIR/kept.img" >/dev/null ||
	die "cannot put the old image set back"
pid=$(status_field "$NAME" pid)
for h in h1 h0; do
	if err=$("$CXLCR" restore "$NAME" --host "$h" 2>&1); then
		die "an old checkpoint ($old) was restored on $h after the service moved on"
	fi
	[ "$(echo "$err" | wc -l)" -eq 1 ] || die "not one line: $err"
	echo "$err" | grep -q "stale" || die "unclear refusal: $err"
	ok "refused on $h: ${err% (log *}"
done
if [ "$(status_field "$NAME" pid)" != "$pid" ] || [ "$(status_field "$NAME" host)" != h0 ] ||
	[ "$(status_field "$NAME" state)" != running ]; then
	die "the service did not go on running on h0"
fi
[ "$(mappers)" = "h0:$pid " ] || die "processes mapping the pool: $(mappers); expected only h0:$pid"
verify "refused stale restores"
# The next checkpoint and restore leave no image set behind, the old one included.
"$CXLCR" checkpoint "$NAME" >/dev/null || die "checkpoint after the refusals failed"
"$CXLCR" restore "$NAME" --host h1 >/dev/null || die "restore after the refusals failed"
[ "$(python3 "$ROOT/tests/lib/poolimg.py" count "$CXLCR_POOL")" -eq 0 ] ||
	die "image sets left in the pool: $(python3 "$ROOT/tests/lib/poolimg.py" list "$CXLCR_POOL")"
verify "checkpoint + restore on h1"
ok "c: an old checkpoint is refused as stale; the service and its values are untouched"

stop_service "$NAME"
[ ${#FAILED[@]} -eq 0 ] || die "${#FAILED[@]} check(s) failed: ${FAILED[*]}"
