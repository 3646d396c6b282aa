#!/usr/bin/env bash
# An emulated host shares no more than a machine of a real pod (issue 15
# point 4): each has its own /run/cxlcr, /run/netns, /var/lib/cxlcr,
# /var/log/cxlcr and /etc/cxlcr (emulation/hostfs.h), its daemon runs as systemd runs a
# machine's (`cxlcrd --config /etc/cxlcr/cxlcrd.conf`) and logs there.
#   a. a file one host writes in its own directories is not another's, nor
#      this machine's; `cxlcr pod logs H` shows H's daemon log;
#   b. a service that logs to its host's own /var/log/cxlcr (no --log)
#      migrates there and back: each host has its own log of it, which goes
#      on where the service runs (the restoring host gives CRIU its own file);
#   c. a host's daemon stopped while its service runs: the service goes on,
#      the host is `left`; started again (`pod up`) it is `alive` with a new
#      incarnation, finds its own files, and the service migrates off it.
#   d. each host has a pid namespace of its own (emulation/hostpid.h): from
#      inside h0, no process of h1 (its daemon, its service) is in h0's
#      /proc, and the pid h1's service has (its status pid, h1's own) is no
#      process of it on h0; status, migrate and stop of that service work
#      from this machine and from inside h0 (`pod exec h0 -- cxlcr ...`),
#      through h1's daemon.
#   e. each host has clocks of its own (a time namespace: CLOCK_MONOTONIC
#      and CLOCK_BOOTTIME as if it had booted at its own time): h0's, h1's
#      and this machine's disagree by more than a second, and a service
#      migrated h0 -> h1 -> h0 reads its own clock on as if it had not
#      moved (CRIU gives the restored tree its clock from the dump): never
#      backwards, never ahead of the time that passed here.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

new_pool 2G
pod_up 2
pod=$(basename "$(for d in /run/cxlcr/pod*; do [ "$(cat "$d/pool" 2>/dev/null)" = "$(realpath "$CXLCR_POOL")" ] && echo "$d"; done)")

say "a: each host's own directories"
for d in /run/cxlcr /run/netns /var/lib/cxlcr /var/log/cxlcr /etc/cxlcr; do
	mark=$d/mark-$TEST_NAME-${POOL_DIR##*-}
	on h0 sh -c "echo h0 >$mark" || die "cannot write $mark on h0"
	[ "$(on h0 cat "$mark")" = h0 ] || die "h0 does not read back its own $mark"
	! on h1 test -e "$mark" || die "h1 sees h0's $mark"
	[ ! -e "$mark" ] || die "this machine sees h0's $mark"
done
on h0 test -S "/run/cxlcr/$pod/h0.sock" || die "h0 has no socket of its own"
[ ! -e "/run/cxlcr/$pod/h0.sock" ] || die "this machine sees h0's socket"
! on h1 test -e "/run/cxlcr/$pod/h0.sock" || die "h1 sees h0's socket"
on h1 grep -qx "host = h1" /etc/cxlcr/cxlcrd.conf || die "h1's cxlcrd.conf: $(on h1 cat /etc/cxlcr/cxlcrd.conf)"
pid1=$("$CXLCR" pod up --hosts 2 --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h1"][0]["daemon_pid"])')
[ "$(tr '\0' ' ' <"/proc/$pid1/cmdline")" = "cxlcrd --config /etc/cxlcr/cxlcrd.conf --ready-fd 3 " ] ||
	die "h1's daemon runs as: $(tr '\0' ' ' <"/proc/$pid1/cmdline")"
"$CXLCR" pod logs h1 >"$POOL_DIR/h1.daemon.log" || die "cxlcr pod logs h1 failed"
grep -q "host h1 (emulated) listening on" "$POOL_DIR/h1.daemon.log" ||
	die "cxlcr pod logs h1 does not show h1's daemon starting: $(cat "$POOL_DIR/h1.daemon.log")"
"$CXLCR" pod logs h7 >/dev/null 2>"$POOL_DIR/logs.err" && die "cxlcr pod logs h7 succeeded"
[ "$(wc -l <"$POOL_DIR/logs.err")" = 1 ] || die "pod logs h7: not one line: $(cat "$POOL_DIR/logs.err")"
ok "a: /run/cxlcr (the daemon's socket), /run/netns, /var/lib/cxlcr, /var/log/cxlcr, /etc/cxlcr are each host's own; pod logs h1 shows h1's daemon"

say "b: a service logging to its host's own /var/log/cxlcr migrates there and back"
NAME=ticker
SERVICES+=("$NAME")
TICKS="i=0; while :; do i=\$((i+1)); echo tick \$i; sleep 0.05; done"
"$CXLCR" run --host h0 --name $NAME --arena 64M -- sh -c "$TICKS" >/dev/null || die "cxlcr run failed"
LOG=/var/log/cxlcr/$pod/$NAME.log
[ ! -e "$LOG" ] || die "this machine has the service's log $LOG"
# ticks HOST: the last tick in HOST's log of the service (0 if none).
ticks() {
	local t
	t=$(on "$1" tail -n 1 "$LOG" 2>/dev/null | awk '{print $2 + 0}')
	echo "${t:-0}"
}
# advance HOST AFTER: waits (bounded) until HOST's log has a tick past AFTER.
advance() {
	local _
	for _ in $(seq 200); do
		[ "$(ticks "$1")" -gt "$2" ] && return 0
		python3 -c 'import time; time.sleep(0.05)'
	done
	die "the service's log on $1 stays at tick $(ticks "$1") (after $2)"
}
advance h0 2
"$CXLCR" migrate $NAME --to h1 >/dev/null 2>"$POOL_DIR/m1.err" || die "migrate to h1 failed: $(cat "$POOL_DIR/m1.err")"
at0=$(ticks h0)
advance h1 "$at0"
"$CXLCR" migrate $NAME --to h0 >/dev/null 2>"$POOL_DIR/m2.err" || die "migrate back failed: $(cat "$POOL_DIR/m2.err")"
at1=$(ticks h1)
advance h0 "$at1"
ok "b: the log went on in h1's own file (ticks past $at0) and back in h0's (past $at1)"

say "c: h1's daemon stopped and started again while its service runs"
"$CXLCR" migrate $NAME --to h1 >/dev/null 2>"$POOL_DIR/m3.err" || die "migrate to h1 failed: $(cat "$POOL_DIR/m3.err")"
svc=$(status_field $NAME pid)
on h1 sh -c 'echo kept >/var/lib/cxlcr/kept' || die "cannot write on h1"
field() { # HOST KEY: of `cxlcr hosts --json`
	"$CXLCR" hosts --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == sys.argv[1]][0][sys.argv[2]])' "$1" "$2"
}
inc=$(field h1 incarnation)
kill -TERM "$pid1"
wait_exit "$pid1"
[ "$(field h1 state)" = left ] || die "h1 is $(field h1 state) with its daemon stopped, want left"
at=$(ticks h1)
advance h1 "$at"
on h1 kill -0 "$svc" || die "the service died with its host's daemon"
ok "h1's daemon stopped: h1 left; the service runs on (tick $(ticks h1))"
"$CXLCR" pod up --hosts 2 >/dev/null || die "pod up did not start h1 again"
[ "$(field h1 state)" = alive ] || die "h1 is $(field h1 state) after its daemon started again"
[ "$(field h1 incarnation)" = $((inc + 1)) ] || die "h1's incarnation is $(field h1 incarnation), want $((inc + 1))"
[ "$(on h1 cat /var/lib/cxlcr/kept)" = kept ] || die "h1 lost its own files with its daemon"
"$CXLCR" migrate $NAME --to h0 >/dev/null 2>"$POOL_DIR/m4.err" || die "migrate off the restarted h1 failed: $(cat "$POOL_DIR/m4.err")"
at=$(ticks h0)
advance h0 "$at"
ok "c: h1 alive again, incarnation $((inc + 1)), with its files; the service migrated off it to h0"

say "d: each host's own processes"
SERVICES+=(iso)
MARK=$((900000 + RANDOM))
"$CXLCR" run --host h1 --name iso --arena 64M -- sleep "$MARK" >/dev/null || die "cxlcr run on h1 failed"
spid=$(status_field iso pid)
# cmdline_on HOST PID: the command line of process PID of HOST's /proc.
cmdline_on() { on "$1" cat "/proc/$2/cmdline" 2>/dev/null | tr '\0' ' '; }
[ "$(cmdline_on h1 "$spid")" = "sleep $MARK " ] || die "h1 does not see its service as pid $spid: $(cmdline_on h1 "$spid")"
# The pid namespaces (by this machine's view): h1's (its daemon's, as
# started again in c) and the service's own, nested in it.
pid1=$("$CXLCR" pod up --hosts 2 --json | python3 -c 'import json, sys
print([h for h in json.load(sys.stdin)["hosts"] if h["host"] == "h1"][0]["daemon_pid"])')
h1ns=$(readlink "/proc/$pid1/ns/pid")
sns=$(readlink "/proc/$(machine_pid h1 "$spid")/ns/pid")
[ "$h1ns" != "$(readlink /proc/self/ns/pid)" ] || die "h1's daemon runs in this machine's pid namespace"
# namespaces HOST: the pid namespace of every process in HOST's /proc.
namespaces() { on "$1" sh -c 'for p in /proc/[0-9]*; do readlink "$p/ns/pid"; done' 2>/dev/null | sort -u; }
seen1=$(namespaces h1)
seen0=$(namespaces h0)
grep -qFx "$h1ns" <<<"$seen1" || die "h1's /proc does not show its own processes"
grep -qFx "$sns" <<<"$seen1" || die "h1's /proc does not show its service"
! grep -qFx -e "$h1ns" -e "$sns" <<<"$seen0" || die "h0's /proc shows processes of h1"
[ -z "$(on h0 pgrep -f "^sleep $MARK")" ] || die "h0 sees h1's service: $(on h0 pgrep -a -f "^sleep $MARK")"
[ "$(cmdline_on h0 "$spid")" != "sleep $MARK " ] || die "pid $spid is h1's service on h0 too"
ok "d: h0's /proc shows nothing of h1 (pid namespace $h1ns) nor of its service ($sns); pid $spid is not it there"
[ "$(on h0 "$CXLCR" status iso --json | json pid)" = "$spid" ] || die "status from h0 does not give the pid h1 gives"
[ "$(on h0 "$CXLCR" status iso --json | json state)" = running ] || die "status from h0: $(on h0 "$CXLCR" status iso)"
on h0 "$CXLCR" migrate iso --to h0 >/dev/null 2>"$POOL_DIR/d1.err" || die "migrate from inside h0 failed: $(cat "$POOL_DIR/d1.err")"
[ "$(status_field iso host)" = h0 ] && [ "$(status_field iso state)" = running ] ||
	die "after the migrate from inside h0 the service is $(status_field iso state) on $(status_field iso host)"
[ "$(cmdline_on h0 "$(status_field iso pid)")" = "sleep $MARK " ] || die "h0 does not see the service it took"
"$CXLCR" migrate iso --to h1 >/dev/null 2>"$POOL_DIR/d2.err" || die "migrate back to h1 failed: $(cat "$POOL_DIR/d2.err")"
on h0 "$CXLCR" stop iso >/dev/null 2>"$POOL_DIR/d3.err" || die "stop from inside h0 failed: $(cat "$POOL_DIR/d3.err")"
SERVICES=("$NAME")
! "$CXLCR" status iso >/dev/null 2>&1 || die "the service is still there after its stop from inside h0"
[ -z "$(pgrep -f "^sleep $MARK")" ] || die "the service's process runs on after its stop"
ok "d: status, migrate and stop of h1's service from inside h0 and from this machine"

say "e: each host's own clock"
# uptime_of: the first field of /proc/uptime (CLOCK_BOOTTIME, in the
# reader's time namespace), read by the command given.
uptime_of() { "$@" cut -d' ' -f1 /proc/uptime; }
u0=$(uptime_of on h0) u1=$(uptime_of on h1) um=$(uptime_of)
python3 -c 'import sys; a = [float(x) for x in sys.argv[1:]]
sys.exit(0 if min(abs(a[0] - a[1]), abs(a[0] - a[2]), abs(a[1] - a[2])) > 1 else 1)' "$u0" "$u1" "$um" ||
	die "the hosts' clocks agree: h0 $u0 s, h1 $u1 s, this machine $um s since boot"
SERVICES+=(clk)
"$CXLCR" run --host h0 --name clk --arena 64M -- sleep "$MARK" >/dev/null || die "cxlcr run clk on h0 failed"
# service_clock: the service's own CLOCK_BOOTTIME, read in its time namespace.
service_clock() { uptime_of nsenter --target "$(service_pid clk)" --time; }
m0=$(uptime_of) c0=$(service_clock)
"$CXLCR" migrate clk --to h1 >/dev/null 2>"$POOL_DIR/e1.err" || die "migrate clk to h1 failed: $(cat "$POOL_DIR/e1.err")"
c1=$(service_clock)
"$CXLCR" migrate clk --to h0 >/dev/null 2>"$POOL_DIR/e2.err" || die "migrate clk back to h0 failed: $(cat "$POOL_DIR/e2.err")"
c2=$(service_clock) m1=$(uptime_of)
# /proc/uptime has centiseconds: a hundredth of slack each way.
python3 -c 'import sys; m0, c0, c1, c2, m1 = [float(x) for x in sys.argv[1:]]
sys.exit(0 if c0 - 0.01 <= c1 <= c2 + 0.01 and c2 - c0 <= m1 - m0 + 0.02 else 1)' "$m0" "$c0" "$c1" "$c2" "$m1" ||
	die "the service's clock did not go on across its migrates: $c0 -> $c1 (on h1) -> $c2 s, while $(python3 -c "print(round($m1 - $m0, 2))") s passed here"
ok "e: clocks since boot h0 $u0 s, h1 $u1 s, this machine $um s; the service's read $c0 -> $c1 -> $c2 s across h0 -> h1 -> h0"
stop_service clk
stop_service $NAME
