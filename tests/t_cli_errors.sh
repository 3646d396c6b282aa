#!/usr/bin/env bash
# What an operator sees when something is wrong: exit codes, one clear line
# on stderr, and nothing left behind (no service process, no arena).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

new_pool 1G
OUT=$POOL_DIR/out
ERR=$POOL_DIR/err

# expect CODE DESCRIPTION -- CMD...: CMD exits with CODE ("nonzero": any
# failure); its stdout is in $OUT, its stderr in $ERR.
expect() {
	local want=$1 what=$2 rc=0
	shift 3
	"$@" >"$OUT" 2>"$ERR" || rc=$?
	if [ "$want" = nonzero ]; then
		[ $rc -ne 0 ] || die "$what: exit 0, want a failure"
	else
		[ $rc -eq "$want" ] || die "$what: exit $rc, want $want (stderr: $(cat "$ERR"))"
	fi
}
# stderr_has REGEX DESCRIPTION
stderr_has() {
	grep -Eq -- "$1" "$ERR" || die "$2: stderr does not match '$1': $(cat "$ERR")"
}
one_line_stderr() {
	[ "$(wc -l <"$ERR")" -eq 1 ] || die "$1: want one line on stderr, got: $(cat "$ERR")"
}
services() {
	"$CXLCR" ps --json | python3 -c 'import json, sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["services"]))'
}
# A command line no other process has: sleep for a unique, long time.
MARK="7$$${RANDOM}.5"
MARK2="8$$${RANDOM}.5"
marked() { pgrep -f -x "sleep $1" || true; }
# Whatever carries a marker was started by this test: kill it on exit.
kill_marked() {
	local p
	for p in $(marked "$MARK") $(marked "$MARK2"); do kill -KILL "$p" 2>/dev/null || true; done
}
on_exit kill_marked

# --- usage and help ---------------------------------------------------------
for verb in "" pool "pool format" "pool info" run ps status stop rm; do
	# shellcheck disable=SC2086
	expect 0 "cxlcr $verb --help" -- "$CXLCR" $verb --help
	[ -s "$OUT" ] || die "cxlcr $verb --help printed nothing on stdout"
done
ok "--help of every verb exits 0"
expect 2 "unknown verb" -- "$CXLCR" frobnicate
one_line_stderr "unknown verb"
expect 2 "run without --name" -- "$CXLCR" run -- sleep "$MARK"
stderr_has "--name" "run without --name"
ok "bad usage exits 2"

# --- no such service -----------------------------------------------------------
expect 3 "status nosuch" -- "$CXLCR" status nosuch
one_line_stderr "status nosuch"
stderr_has "nosuch" "status nosuch"
[ ! -s "$OUT" ] || die "status nosuch printed on stdout: $(cat "$OUT")"
expect 3 "stop nosuch" -- "$CXLCR" stop nosuch
expect 3 "rm nosuch" -- "$CXLCR" rm nosuch
ok "status/stop/rm of an unknown service exit 3 with one line on stderr"

# --- no pool ------------------------------------------------------------------
missing=$POOL_DIR/missing/pool
expect nonzero "run without a pool" -- env CXLCR_POOL="$missing" \
	"$CXLCR" run --name nopool --log "$POOL_DIR/nopool.log" -- sleep "$MARK"
stderr_has 'cxlcr pool format' "run without a pool"
one_line_stderr "run without a pool"
[ -z "$(marked "$MARK")" ] || die "run without a pool started its command"
[ ! -e "$missing" ] || die "run without a pool created $missing"
expect nonzero "ps without a pool" -- env CXLCR_POOL="$missing" "$CXLCR" ps
stderr_has 'cxlcr pool format' "ps without a pool"
ok "a missing pool is reported with 'run cxlcr pool format'"

# --- a character device that is no devdax device (asked of libdaxctl) ------------------
expect nonzero "format of /dev/zero" -- "$CXLCR" pool format --device /dev/zero --size 1G
stderr_has '/dev/zero: character device 1:5 is not a devdax device' "format of /dev/zero"
one_line_stderr "format of /dev/zero"
expect nonzero "ps with /dev/null as pool" -- env CXLCR_POOL=/dev/null "$CXLCR" ps
stderr_has 'is not a devdax device' "ps with /dev/null as pool"
ok "a character device that libdaxctl does not know is refused as a pool"

# --- a command that cannot run -----------------------------------------------------
expect nonzero "run of a missing command" -- "$CXLCR" run --name nocmd --arena 64M \
	--log "$POOL_DIR/nocmd.log" -- "$POOL_DIR/no-such-command" "$MARK"
stderr_has 'nocmd.*(No such file|cannot run)' "run of a missing command"
[ -z "$(services)" ] || die "run of a missing command left arenas: $(services)"
ok "a command that cannot run fails and leaves no arena"

# --- JSON outputs, one service at a time -----------------------------------------------
expect 0 "pool info --json" -- "$CXLCR" pool info --json
is_json <"$OUT" || die "pool info --json is not JSON: $(cat "$OUT")"
expect 0 "ps --json (empty)" -- "$CXLCR" ps --json
is_json <"$OUT" || die "ps --json is not JSON: $(cat "$OUT")"
expect 0 "run --json" -- "$CXLCR" run --name marked --arena 64M --log "$POOL_DIR/marked.log" \
	--json -- sleep "$MARK"
SERVICES+=(marked)
is_json <"$OUT" || die "run --json is not JSON: $(cat "$OUT")"
[ -n "$(marked "$MARK")" ] || die "the service started by run is not running"
for cmd in "ps --json" "status marked --json" "pool info --json"; do
	# shellcheck disable=SC2086
	expect 0 "$cmd" -- "$CXLCR" $cmd
	is_json <"$OUT" || die "$cmd is not JSON: $(cat "$OUT")"
done
ok "--json outputs of run, ps, status, pool info parse"

# --- the same name twice -----------------------------------------------------------
expect nonzero "run of a running name" -- "$CXLCR" run --name marked --arena 64M \
	--log "$POOL_DIR/marked2.log" -- sleep "$MARK2"
stderr_has "already running" "run of a running name"
one_line_stderr "run of a running name"
[ -z "$(marked "$MARK2")" ] || die "the second run of a name started its command"
[ "$(marked "$MARK" | wc -l)" -eq 1 ] || die "the first service is not running alone"
ok "a name already running is refused"

# --- format over live arenas ------------------------------------------------------------
expect nonzero "pool format over an arena" -- "$CXLCR" pool format --size 1G
stderr_has "force" "pool format over an arena"
[ "$(services)" = marked ] || die "pool format without --force changed the pool: $(services)"
[ -n "$(marked "$MARK")" ] || die "the service died when the pool format was refused"
ok "pool format refuses a pool holding arenas without --force"

expect 0 "stop --json" -- "$CXLCR" stop marked --json
SERVICES=()
is_json <"$OUT" || die "stop --json is not JSON: $(cat "$OUT")"
[ -z "$(marked "$MARK")" ] || die "the service still runs after stop"
[ -z "$(services)" ] || die "stop left arenas: $(services)"

# --- an arena left by a service that exited ----------------------------------------------
expect 0 "run true" -- "$CXLCR" run --name quick --arena 64M --log "$POOL_DIR/quick.log" -- true
SERVICES+=(quick)
wait_exit "$(status_field quick pid)"
[ "$(status_field quick state)" = exited ] || die "a service that exited is $(status_field quick state)"
expect nonzero "run over an exited arena" -- "$CXLCR" run --name quick --arena 64M \
	--log "$POOL_DIR/quick.log" -- sleep "$MARK2"
stderr_has "cxlcr rm quick" "run over an exited arena"
[ -z "$(marked "$MARK2")" ] || die "run over an exited arena started its command"
expect 0 "rm --json" -- "$CXLCR" rm quick --json
SERVICES=()
is_json <"$OUT" || die "rm --json is not JSON: $(cat "$OUT")"
[ -z "$(services)" ] || die "rm left arenas: $(services)"
ok "an exited service's arena is reported, and freed by rm"

expect 0 "pool format --json" -- "$CXLCR" pool format --size 1G --json
is_json <"$OUT" || die "pool format --json is not JSON: $(cat "$OUT")"
ok "pool format --json parses"

# --- a corrupt pool --------------------------------------------------------------------------
corrupt_check() { # $1: what was done to the superblock, $2: expected message
	expect nonzero "ps on a pool with $1" -- "$CXLCR" ps
	stderr_has "$2" "ps on a pool with $1"
	one_line_stderr "ps on a pool with $1"
	expect nonzero "run on a pool with $1" -- "$CXLCR" run --name corrupt --arena 64M \
		--log "$POOL_DIR/corrupt.log" -- sleep "$MARK"
	stderr_has "$2" "run on a pool with $1"
	one_line_stderr "run on a pool with $1"
	[ -z "$(marked "$MARK")" ] || die "run on a pool with $1 started its command"
	ok "a pool with $1 is refused by ps and run: $(cat "$ERR")"
}
# The first bytes: the magic number.
printf 'garbage!' | dd of="$CXLCR_POOL" bs=8 count=1 conv=notrunc status=none
corrupt_check "its first bytes overwritten" "not a cxlcr pool"
# A byte further in: the checksum no longer matches.
"$CXLCR" pool format --size 1G --force >/dev/null
printf '\377' | dd of="$CXLCR_POOL" bs=1 seek=40 count=1 conv=notrunc status=none
corrupt_check "a damaged superblock" "corrupt superblock"
