#!/usr/bin/env bash
# Back and forth: 50 migrations h0 -> h1 -> h0 ... of Redis under a light
# load (bench/loadclient: a 50/50 GET/SET mix at 1000 requests/s on one
# connection, every acknowledged SET logged). After every migration it
# records the arena's bytes in use, the image sets in the pool's image store,
# the open fds of both cxlcrd daemons, the service's memory (RssAnon,
# RssFile, RssShmem), CRIU work directories left behind, and the processes
# that map the pool. Then:
#   - none of these grows: the last 10 rounds against the first 10, with a
#     little room for noise (see check_flat below);
#   - the client's connection lasted through all 50 (no error, no
#     reconnect: a request unanswered for the client's 5 s timeout would be
#     one; no stale read, no bad value), the load went on after every
#     migration (the server counts 100 more requests before the next), and
#     every acknowledged write is there (ackcheck.py). Response gaps and
#     freeze times are printed, not judged (bench/continuity.sh measures);
#   - every value of the data set filled at the start is intact.
# SOAK_ROUNDS=N changes the number of migrations (at least 20; 20 under
# $CXLCR_TESTS=short, `make test`).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=tests/lib/loadclient.sh
. "$ROOT/tests/lib/loadclient.sh"
need redis-server gcc

ROUNDS=${SOAK_ROUNDS:-$([ "${CXLCR_TESTS:-long}" = short ] && echo 20 || echo 50)}
[ "$ROUNDS" -ge 20 ] || die "SOAK_ROUNDS must be at least 20"
PORT=6379
COUNT=4000
SIZE=400
TYPES=strings,hashes,lists,sets,zsets
LOAD_KEYS=1000
SERVED=$ROOT/tests/lib/served.py

new_pool 8G
NAME=soak-${POOL_DIR##*-}   # unique: its CRIU work directories are recognisable
LOADCLIENT=$(loadclient_path)
pod_up 2
read -r -a DAEMONS <<<"$(daemon_pids)"
[ ${#DAEMONS[@]} -eq 2 ] || die "expected two cxlcrd pids, got: ${DAEMONS[*]}"

say "cxlcr run --host h0 redis-server ($NAME)"
pod_redis "$NAME" h0 512M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 9 --quiet

# Every key of the load's key space written once, so that the arena does
# not grow during the rounds just because new keys appear.
"$LOADCLIENT" --host "$addr" --port $PORT --mode set --keys $LOAD_KEYS --key-prefix soak: \
	--rate 50000 --duration 1 --ack-log "$POOL_DIR/ack0.acks" --json "$POOL_DIR/load0.json" --quiet ||
	die "the first load client run failed"

LC_PID=
# shellcheck disable=SC2016 # expanded when the hook runs
on_exit '[ -z "$LC_PID" ] || kill -KILL "$LC_PID" 2>/dev/null'
"$LOADCLIENT" --host "$addr" --port $PORT --mode mix --keys $LOAD_KEYS --key-prefix soak: \
	--rate 1000 --ack-log "$POOL_DIR/ack1.acks" --json "$POOL_DIR/load1.json" --quiet &
LC_PID=$!
python3 "$SERVED" --host "$addr" --port $PORT --more 500 || die "the load did not start"

fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
mappers() { pool_mappers | wc -w; }
workdirs() {
	on_hosts find /var/lib/cxlcr -mindepth 2 -maxdepth 2 -name "*.$NAME.*" 2>/dev/null | wc -l || true
}

CSV=$POOL_DIR/soak.csv
echo "round,host,freeze_ms,total_ms,arena_used,image_sets,fds_h0,fds_h1,rss_anon_kb,rss_file_kb,rss_shmem_kb,workdirs,mappers" >"$CSV"
say "$ROUNDS migrations under a 1000 requests/s GET/SET mix"
host=h0
t0=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
	if [ "$host" = h0 ]; then to=h1; else to=h0; fi
	kill -USR1 "$LC_PID"
	"$CXLCR" migrate "$NAME" --to "$to" --json >"$POOL_DIR/migrate.json" ||
		die "round $r: migrate $host -> $to failed"
	kill -USR2 "$LC_PID"
	host=$to
	"$CXLCR" status "$NAME" --json >"$POOL_DIR/status.json" || die "round $r: no status"
	python3 - "$POOL_DIR/migrate.json" "$POOL_DIR/status.json" "$r" "$to" \
		"$(python3 "$ROOT/tests/lib/poolimg.py" count "$CXLCR_POOL")" \
		"$(fds "${DAEMONS[0]}")" "$(fds "${DAEMONS[1]}")" "$(workdirs)" "$(mappers)" >>"$CSV" <<'EOF' ||
import json, sys
m, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
r, to, images, f0, f1, wd, mp = sys.argv[3:10]
if s["host"] != to or s["state"] != "running":
    sys.exit("round %s: the service is %s on %s, not running on %s" % (r, s["state"], s["host"], to))
print(",".join(str(x) for x in (r, to, m["freeze_ms"], m["total_ms"], s["arena_used"], images, f0, f1,
                                s["rss_anon_kb"], s["rss_file_kb"], s["rss_shmem_kb"], wd, mp)))
EOF
		die "round $r: bad state after the migrate"
	# The load goes on at the new host before the next round.
	python3 "$SERVED" --host "$addr" --port $PORT --more 100 ||
		die "round $r: the load did not go on after the migrate"
done
say "$ROUNDS migrations in $(($(date +%s) - t0)) s"
kill -0 "$LC_PID" 2>/dev/null || die "the load client is gone"
kill -TERM "$LC_PID"
wait "$LC_PID" || die "the load client failed"
LC_PID=

# check_flat: the last 10 rounds against the first 10.
FAILED=0
python3 - "$CSV" "$POOL_DIR/load1.json" <<'EOF' || FAILED=1
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
first, last = rows[:10], rows[-10:]
fail = []
def col(rs, k):
    return [float(x[k]) for x in rs]
# column, allowed growth of the maximum (absolute, and relative to the first 10's maximum)
limits = [
    ("arena_used", 1 << 20, 0.02),      # bytes
    ("image_sets", 0, 0.0),
    ("fds_h0", 2, 0.0),
    ("fds_h1", 2, 0.0),
    ("rss_anon_kb", 4096, 0.10),
    ("rss_file_kb", 4096, 0.10),
    ("rss_shmem_kb", 16384, 0.25),     # arena pages this process touched since its restore
    ("workdirs", 0, 0.0),
]
print("t_soak: %-13s %14s %14s" % ("", "first 10 (max)", "last 10 (max)"))
for k, slack, rel in limits:
    a, b = max(col(first, k)), max(col(last, k))
    print("t_soak: %-13s %14.0f %14.0f" % (k, a, b))
    if b > a + max(slack, rel * a):
        fail.append("%s grew from %.0f to %.0f" % (k, a, b))
if any(int(x["image_sets"]) for x in rows):
    fail.append("image sets were left in the pool after a migrate: rounds %s"
                % [x["round"] for x in rows if int(x["image_sets"])])
if any(int(x["mappers"]) != 1 for x in rows):
    fail.append("rounds where not exactly one process mapped the pool: %s"
                % [x["round"] for x in rows if int(x["mappers"]) != 1])
fz = col(rows, "freeze_ms")
print("t_soak: freeze_ms: median %.0f, max %.0f; first 10 median %.0f, last 10 median %.0f"
      % (statistics.median(fz), max(fz), statistics.median(fz[:10]), statistics.median(fz[-10:])))
j = json.load(open(sys.argv[2]))
gaps = sorted(w["gap_ms"] for w in j["windows"])
print("t_soak: load: %d requests, %d SETs acknowledged, %d errors, %d reconnects; response gap per "
      "migration (ms): median %.0f, max %.0f, %d over 1 s"
      % (j["requests"], j["sets_acked"], j["errors"], j["reconnects"], statistics.median(gaps),
         gaps[-1], sum(g > 1000 for g in gaps)))
if len(gaps) != len(rows):
    fail.append("%d migration windows recorded, expected %d" % (len(gaps), len(rows)))
if j["errors"] or j["reconnects"] or j["stale_reads"] or j["bad_values"]:
    fail.append("the load saw %d errors, %d reconnects, %d stale reads, %d bad values"
                % (j["errors"], j["reconnects"], j["stale_reads"], j["bad_values"]))
for f in fail:
    print("t_soak: FAIL: " + f, file=sys.stderr)
sys.exit(1 if fail else 0)
EOF
[ $FAILED = 1 ] || ok "arena bytes, image store, daemon fds, service memory and work directories stay flat over $ROUNDS migrations; the load saw no error"
python3 "$ROOT/tests/lib/ackcheck.py" --host "$addr" --port $PORT "$POOL_DIR/ack0.acks" "$POOL_DIR/ack1.acks" ||
	die "acknowledged writes were lost"
ok "no acknowledged write lost across $ROUNDS migrations"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 9 --quiet ||
	die "values differ after $ROUNDS migrations"
ok "every value intact after $ROUNDS migrations"
stop_service "$NAME"
[ $FAILED = 0 ] || die "something grew over the rounds, or the load saw errors (see above)"
