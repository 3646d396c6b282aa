#!/usr/bin/env bash
# The CRIU plugin (build/cxlcr_criu.so) with real CRIU and a real
# redis-server whose heap is in an arena of a pool of this test's own:
#
#   - the plugin's helpers pass their unit test (build/tests/criu_plugin_test);
#   - a dump of the service (its own PID namespace) writes an arena record;
#   - restores that must be refused are: a record with a flipped byte, a
#     truncated one, one of another pool (uuid changed, checksum fixed), the
#     images against a freshly formatted other pool, a record whose mapping
#     address the restored task does not have (refused late, after CRIU has
#     re-created the task), and the images without the plugin;
#     none of them changes the arena's owner;
#   - the real restore brings Redis back with every key (DEBUG DIGEST and
#     DBSIZE as before the dump), and the arena's owner is now the restored
#     pid, its epoch one higher;
#   - a second restore of the same images is refused as stale, and the
#     restored service runs on, untouched;
#   - a `criu dump --leave-running` of it cannot be restored while it runs
#     (two allocators in one arena), nor once it has ended (its heap ran
#     on without the rest of the checkpoint).
#
# Exit status: 0 pass, 77 skipped (no CRIU 4.2+, redis or root), else fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${CXLCR_BUILD:-$ROOT/build}
TEST_NAME=t_criu_plugin
ARENA=svc

say() { printf '%s: %s\n' "$TEST_NAME" "$*"; }
ok() { printf '%s: ok: %s\n' "$TEST_NAME" "$*"; }
die() { printf '%s: FAIL: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
skip() { printf '%s: SKIP: %s\n' "$TEST_NAME" "$*"; exit 77; }

command -v criu >/dev/null 2>&1 || skip "criu is not installed (scripts/install-deps.sh)"
for c in redis-server redis-cli python3 unshare setsid; do
	command -v "$c" >/dev/null 2>&1 || skip "$c is not installed"
done
[ "$(id -u)" = 0 ] || skip "CRIU needs root"
criu_version=$(criu --version | sed -n 's/^Version: *//p')
case $criu_version in
[0-3].* | 4.[01] | 4.[01].*) skip "CRIU $criu_version is too old (4.2 or newer needed)" ;;
esac
for f in cxlcr_criu.so libcxlcr-preload.so cxlcr tests/pool_test tests/criu_plugin_test; do
	[ -e "$BUILD/$f" ] || die "$BUILD/$f is missing: run make first"
done

TMP=
port=
SERVICE_PIDS=()   # every process that may still run a service of ours

# ours PID: PID still is one of this test's processes (not a reused pid).
ours() {
	local cmd
	cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
	[[ -n $port && $cmd == "redis-server 127.0.0.1:$port"* ]] || [[ -n $TMP && $cmd == *"$TMP"* ]]
}

cleanup() {
	local rc=$? pid
	trap - EXIT
	set +e
	for pid in "${SERVICE_PIDS[@]}"; do
		ours "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -n "$TMP" ]; then
		local log
		for log in "$TMP"/redis.log "$TMP"/images*/*.log; do
			[ -s "$log" ] || continue
			echo "--- ${log#"$TMP"/}:" >&2
			grep -E 'Error|cxlcr|FAILED|#' "$log" | grep -v rlimit | tail -n 8 >&2
		done
	fi
	[ -n "$TMP" ] && rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TMP=$(mktemp -d /dev/shm/cxlcr-test-XXXX)
POOL=$TMP/pool
OTHER=$TMP/other-pool
IMG=$TMP/images
# Private copies: CRIU checks on restore that mapped files did not change,
# and the plugin directory must hold nothing but plugins (criu --lib loads
# every *.so in it; the preload would take criu down).
PRELOAD=$TMP/libcxlcr-preload.so
PLUGINS=$TMP/plugins
cp "$BUILD/libcxlcr-preload.so" "$PRELOAD"
mkdir -p "$PLUGINS" "$TMP/no-plugins" "$IMG"
cp "$BUILD/cxlcr_criu.so" "$PLUGINS/"
"$BUILD/tests/pool_test" --format "$POOL" 4G
export CXLCR_POOL=$POOL

say "unit test of the plugin's helpers"
"$BUILD/tests/criu_plugin_test" >"$TMP/unit.log" 2>&1 || { cat "$TMP/unit.log" >&2; die "criu_plugin_test failed"; }
ok "criu_plugin_test passed"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rcli() { timeout 10 redis-cli -p "$port" "$@"; }

# field NAME: a field of `cxlcr status svc --json`.
field() {
	"$BUILD/cxlcr" status "$ARENA" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
	local what=$1 tries=$(($2 * 20))
	shift 2
	while ! "$@" >/dev/null 2>&1; do
		tries=$((tries - 1))
		[ $tries -gt 0 ] || die "timed out waiting for $what"
		sleep 0.05
	done
}
answers() { [ "$(rcli ping 2>/dev/null)" = PONG ]; }
silent() { ! rcli ping >/dev/null 2>&1; }
gone() { [ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status"; }

# The service: redis-server under the preload, alone in a new PID namespace
# (pid 1 there, session leader), stdio on a file it never writes (Redis
# logs to its own log file), no inherited fds. Not --kill-child: that sets
# a parent-death signal, which the restored task would get as CRIU exits.
say "redis-server under the preload in its own PID namespace, port $port"
(
	for fd in /proc/$BASHPID/fd/*; do
		n=${fd##*/}
		[ "$n" -gt 2 ] && eval "exec $n>&-"
	done
	exec setsid unshare --pid --fork -- bash -c 'exec >"$1" 2>&1 </dev/null; shift; exec setsid "$@"' \
		_ "$TMP/stdio.log" env CXLCR_ARENA=$ARENA CXLCR_ARENA_SIZE=256M LD_PRELOAD="$PRELOAD" \
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--enable-debug-command local --dir "$TMP" --logfile "$TMP/redis.log"
) >"$TMP/unshare.log" 2>&1 </dev/null &
unshare_pid=$!
SERVICE_PIDS+=("$unshare_pid")
ns_init() { init=$(cat /proc/"$unshare_pid"/task/*/children 2>/dev/null | tr -d ' ') && [ -n "$init" ]; }
wait_for "the PID namespace" 10 ns_init
init=$(cat /proc/"$unshare_pid"/task/*/children | tr -d ' ')
SERVICE_PIDS+=("$init")
wait_for "redis-server to answer" 10 answers
[ "$(awk '/^NSpid:/ {print $NF}' /proc/"$init"/status)" = 1 ] || die "redis-server is not pid 1 of its namespace"

say "fill it"
rcli debug populate 20000 key 200 >/dev/null
for i in $(seq 1 50); do
	printf 'SET str:%d value-%d-%s\nHSET hash:%d f %d\nRPUSH list %d\n' "$i" "$i" "$RANDOM" "$i" "$i" "$i"
done | rcli >/dev/null
digest=$(rcli debug digest)
keys=$(rcli dbsize)
[ "$keys" -eq 20101 ] || die "dbsize $keys after filling, expected 20101"
used=$(field arena_used)
[ "$used" -gt $((4 * 1000 * 1000)) ] || die "only $used bytes in the arena: the heap is not there"
epoch0=$(field owner_epoch)
ok "$keys keys, digest $digest, $used bytes in arena $ARENA (epoch $epoch0)"

say "criu dump -t $init"
timeout -k 5 60 criu dump -t "$init" -D "$IMG" -o dump.log -v4 --lib "$PLUGINS" ||
	die "criu dump failed: $(grep -m1 'Error' "$IMG/dump.log")"
wait_for "the dumped service to be gone" 10 gone "$init"
record=$IMG/cxlcr-arena-1.img
[ -f "$record" ] || die "no arena record $record (images: $(ls "$IMG" | tr '\n' ' '))"
show=$("$BUILD/tests/criu_plugin_test" --show "$record") || die "bad record: $show"
for want in "name=$ARENA" "epoch=$epoch0" "nspid=1" "real_pid=$init" "pool=$POOL"; do
	[[ " $show " == *" $want "* ]] || die "record lacks $want: $show"
done
[ "$(wc -l <<<"$show")" -eq 1 ] || die "expected one record: $show"
ls "$IMG" | grep -q '^pages-.*\.img$' || die "no page images"
image_kb=$(du -sk "$IMG" | cut -f1)
[ "$image_kb" -lt 20000 ] || die "images take $image_kb KiB: the heap was dumped"
ok "record $(basename "$record"): $show"

# restore NAME DIR [VAR=VALUE...]: criu restore of DIR (log DIR/NAME.log,
# restored pid in DIR/NAME.pid) with the plugins of $lib, in the
# environment given.
lib=$PLUGINS
restore() {
	local name=$1 dir=$2
	shift 2
	env "$@" timeout -k 5 60 criu restore -D "$dir" -o "$name.log" -v4 -d --pidfile "$dir/$name.pid" \
		--lib "$lib"
}

# refused WHAT DIR MESSAGE [VAR=VALUE...]: a restore that must fail, saying
# MESSAGE, and leave the arena's owner epoch at $expect_epoch (and, unless
# the service is $running, nothing listening on its port).
running=no
refused() {
	local what=$1 dir=$2 msg=$3
	shift 3
	say "restore $what: refused?"
	if restore refused "$dir" "$@"; then
		[ -f "$dir/refused.pid" ] && SERVICE_PIDS+=("$(cat "$dir/refused.pid")")
		die "restore $what succeeded"
	fi
	grep -qF -- "$msg" "$dir/refused.log" ||
		die "restore $what failed without saying '$msg': $(grep -m2 'Error' "$dir/refused.log" | tr '\n' ' ')"
	[ "$running" = yes ] || silent || die "something answers on port $port after the refused restore $what"
	[ "$(field owner_epoch)" = "$expect_epoch" ] || die "restore $what changed the epoch"
	ok "restore $what refused: $(grep -m1 -F -- "$msg" "$dir/refused.log" | sed 's/^([^)]*) //')"
}

# copy NAME: a copy of the images to spoil.
copy() {
	rm -rf "$TMP/images-$1"
	cp -a "$IMG" "$TMP/images-$1"
	rm -f "$TMP/images-$1"/*.log
	echo "$TMP/images-$1"
}

expect_epoch=$epoch0
dir=$(copy flipped)
"$BUILD/tests/criu_plugin_test" --tamper "$dir/cxlcr-arena-1.img" uuid
refused "with a flipped byte in the record" "$dir" "corrupt arena record (checksum mismatch)"

dir=$(copy truncated)
"$BUILD/tests/criu_plugin_test" --tamper "$dir/cxlcr-arena-1.img" truncate
refused "with a truncated record" "$dir" "truncated"

dir=$(copy uuid)
"$BUILD/tests/criu_plugin_test" --tamper "$dir/cxlcr-arena-1.img" uuid-sealed
refused "with another pool's uuid in the record" "$dir" "record is from another pool"

"$BUILD/tests/pool_test" --format "$OTHER" 4G
dir=$(copy other-pool)
refused "on a freshly formatted other pool" "$dir" "record is from another pool" CXLCR_POOL="$OTHER"

dir=$(copy moved)
"$BUILD/tests/criu_plugin_test" --tamper "$dir/cxlcr-arena-1.img" address
refused "with a mapping address the task does not have" "$dir" "does not map it at"
grep -q 'Restoring FAILED' "$dir/refused.log" || die "CRIU did not fail the restore"

dir=$(copy no-plugin)
lib=$TMP/no-plugins
refused "without the plugin" "$dir" "Missing required plugin: cxlcr"
lib=$PLUGINS

say "criu restore"
restore restore "$IMG" || die "criu restore failed: $(grep 'Error' "$IMG/restore.log" | grep -v rlimit | head -3)"
restored=$(cat "$IMG/restore.pid")
SERVICE_PIDS+=("$restored")
wait_for "the restored redis-server to answer" 10 answers
[ "$(rcli debug digest)" = "$digest" ] || die "digest changed: $(rcli debug digest), was $digest"
[ "$(rcli dbsize)" = "$keys" ] || die "dbsize $(rcli dbsize), was $keys"
[ "$(rcli get str:7 | cut -d- -f1-2)" = value-7 ] || die "str:7 is $(rcli get str:7)"
[ "$(field pid)" = "$restored" ] || die "arena owner pid $(field pid), restored pid $restored"
[ "$(field owner_epoch)" = $((epoch0 + 1)) ] || die "epoch $(field owner_epoch), expected $((epoch0 + 1))"
[ "$(field host)" = "$(uname -n)" ] || die "arena owner host $(field host), expected $(uname -n)"
grep -q "cxlcr: pid $restored and 0 other restored task(s) now own their 1 arena mapping" "$IMG/restore.log" ||
	die "the restore log does not say the plugin took the arena over"
ok "restored as pid $restored: $keys keys, same digest; owner pid $restored, epoch $((epoch0 + 1))"

say "write to the restored service, then restore the same images again"
running=yes
rcli set after-restore yes >/dev/null
digest2=$(rcli debug digest)
dir=$(copy again)
expect_epoch=$((epoch0 + 1))
refused "of the same images a second time" "$dir" \
	"checkpoint is stale: arena $ARENA was taken over (epoch $epoch0, now $expect_epoch)"
answers || die "the restored service stopped answering"
[ "$(rcli debug digest)" = "$digest2" ] || die "the restored service's data changed"
[ "$(field pid)" = "$restored" ] || die "the arena changed owner: $(field pid)"
ok "the restored service runs on with its data"

# A checkpoint taken with the tasks left running: its source goes on
# owning the arena at the recorded epoch, so it is restored only once the
# source has ended.
say "criu dump --leave-running of the restored service"
LIVE=$TMP/images-live
mkdir -p "$LIVE"
timeout -k 5 60 criu dump -t "$restored" -D "$LIVE" -o dump.log -v4 --lib "$PLUGINS" --leave-running ||
	die "criu dump --leave-running failed: $(grep -m1 'Error' "$LIVE/dump.log")"
answers || die "the source stopped answering after a --leave-running dump"
rcli set after-live-dump yes >/dev/null
digest3=$(rcli debug digest)
refused "of a --leave-running checkpoint while its source runs" "$LIVE" \
	"the checkpoint was taken with the tasks left running, and its source still runs (pid $restored)"
[ "$(rcli debug digest)" = "$digest3" ] || die "the source's data changed"
ok "the source runs on, alone in its arena"

say "the source ends: its --leave-running checkpoint still does not restore (the heap ran on)"
rcli shutdown nosave >/dev/null 2>&1 || true
wait_for "the source to exit" 10 gone "$restored"
running=no
refused "of a --leave-running checkpoint after its source ran on" "$LIVE" \
	"its source (pid $restored on $(uname -n)) ran on after it"

SERVICE_PIDS=()
ok "all checks passed"
