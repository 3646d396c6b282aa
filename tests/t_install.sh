#!/usr/bin/env bash
# `make install` puts what a machine of a pod runs under PREFIX (and
# DESTDIR): the command line, the daemon, the preload, the CRIU plugin,
# libcxlcr, cxlcrd's systemd unit and its configuration file; the
# installed binaries find their parts there, not in the build tree;
# cxlcrd reads its configuration file, its flags override the file, and
# under systemd (JOURNAL_STREAM naming its stderr) it logs with <N>
# priority prefixes.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

new_pool 1G
DEST=$POOL_DIR/dest
make -s --no-print-directory -C "$ROOT" O="$(dirname "$CXLCR")" install DESTDIR="$DEST" PREFIX=/usr \
	>"$POOL_DIR/install.out" 2>&1 || { cat "$POOL_DIR/install.out" >&2; die "make install failed"; }
for f in usr/bin/cxlcr usr/bin/cxlcrd usr/bin/cxlcr-memd usr/lib/cxlcr/libcxlcr-preload.so usr/lib/criu/cxlcr_criu.so \
	usr/lib/libcxlcr.so usr/lib/libcxlcr.a usr/include/cxlcr/cxlcr.h \
	usr/lib/systemd/system/cxlcrd.service etc/cxlcr/cxlcrd.conf; do
	[ -f "$DEST/$f" ] || die "make install did not install /$f"
done
[ -x "$DEST/usr/bin/cxlcrd" ] || die "/usr/bin/cxlcrd is not executable"
grep -qx 'ExecStart=/usr/bin/cxlcrd --config /etc/cxlcr/cxlcrd.conf' "$DEST/usr/lib/systemd/system/cxlcrd.service" ||
	die "the unit does not run the installed cxlcrd with the installed configuration"
ok "make install DESTDIR=... PREFIX=/usr installed the binaries, preload, plugin, library, unit and configuration"

# An operator's configuration is kept by a second install.
echo '# mine' >>"$DEST/etc/cxlcr/cxlcrd.conf"
make -s --no-print-directory -C "$ROOT" O="$(dirname "$CXLCR")" install DESTDIR="$DEST" PREFIX=/usr \
	>/dev/null 2>&1 || die "make install failed the second time"
grep -qx '# mine' "$DEST/etc/cxlcr/cxlcrd.conf" || die "make install replaced an existing cxlcrd.conf"

# The installed binaries use the installed parts.
version=$("$DEST/usr/bin/cxlcr" --version)
grep -qx "preload: $DEST/usr/lib/cxlcr/libcxlcr-preload.so" <<<"$version" ||
	die "the installed cxlcr does not use the installed preload: $version"
grep -qx "criu plugin directory: $DEST/usr/lib/criu" <<<"$version" ||
	die "the installed cxlcr does not use the installed CRIU plugin: $version"
grep -qx "daemon: $DEST/usr/bin/cxlcrd" <<<"$version" ||
	die "the installed cxlcr does not use the installed daemon: $version"
ok "the installed cxlcr finds the installed preload, plugin and daemon"

if command -v systemd-analyze >/dev/null 2>&1; then
	# The unit as installed, its ExecStart pointing into the installed
	# tree (verify checks that the command exists); a warning is a failure.
	sed "s|=/usr/bin/cxlcrd |=$DEST/usr/bin/cxlcrd |" "$DEST/usr/lib/systemd/system/cxlcrd.service" \
		>"$POOL_DIR/cxlcrd.service"
	systemd-analyze verify "$POOL_DIR/cxlcrd.service" >"$POOL_DIR/verify" 2>&1 && [ ! -s "$POOL_DIR/verify" ] ||
		{ cat "$POOL_DIR/verify" >&2; die "systemd-analyze verify refused cxlcrd.service"; }
	ok "systemd-analyze verify accepts cxlcrd.service"
else
	say "systemd-analyze is not installed: the unit is not verified"
fi

# start_daemon LOG ARGS...: the installed cxlcrd, as a machine runs it (no
# emulated pod), its stderr in LOG; waits for it to say it is ready
# (through a FIFO); daemon_pid is its pid.
FIFO=$POOL_DIR/ready
mkfifo "$FIFO"
daemon_pid=
stop_daemon() {
	[ -n "$daemon_pid" ] || return 0
	kill -TERM "$daemon_pid" 2>/dev/null || true
	wait "$daemon_pid" 2>/dev/null || true
	daemon_pid=
}
on_exit stop_daemon
start_daemon() {
	local log=$1 line
	shift
	env -u CXLCR_POOL -u CXLCR_POD "$DEST/usr/bin/cxlcrd" --ready-fd 3 "$@" 3>"$FIFO" 2>"$log" &
	daemon_pid=$!
	read -r line <"$FIFO" || true
	[[ $line == ok* ]] || die "cxlcrd did not start: $line $(cat "$log")"
}
listens_on() {
	ss -Hltn "sport = :$2" | grep -q " $1:$2 "
}

PORT1=$(free_port)
PORT2=$(free_port)
[ "$PORT1" != "$PORT2" ] || PORT2=$((PORT1 + 1))
cat >"$POOL_DIR/cxlcrd.conf" <<CONF
# a test's configuration
host = cfg-host   # a comment after a value
pool = $CXLCR_POOL
address = 127.0.0.1
port = $PORT1
CONF

start_daemon "$POOL_DIR/d1.log" --config "$POOL_DIR/cxlcrd.conf"
# Its kernel-log watcher (recovery/kmsg.c) holds nothing of the daemon's:
# holding the ready pipe, it made the next start's reader see an end of
# file from the daemon before (cxlcrd "did not start").
watcher=$(pgrep -P "$daemon_pid" -x cxlcrd-kmsg || true)
[ -n "$watcher" ] || die "cxlcrd runs no kernel-log watcher"
for fd in /proc/"$watcher"/fd/*; do
	[ "$(readlink "$fd")" != "$FIFO" ] || die "the kernel-log watcher holds the ready pipe (fd ${fd##*/})"
done
grep -q "host cfg-host (machine) listening on .*/cfg-host.sock, pool $CXLCR_POOL; .* tcp 127.0.0.1:$PORT1" \
	"$POOL_DIR/d1.log" || die "cxlcrd did not take its host, pool and address from the file: $(cat "$POOL_DIR/d1.log")"
listens_on 127.0.0.1 "$PORT1" || die "cxlcrd does not listen on 127.0.0.1:$PORT1 (the file's address and port)"
stop_daemon
ok "cxlcrd --config FILE runs as the file's host, on its pool, at its address and port"

start_daemon "$POOL_DIR/d2.log" --config "$POOL_DIR/cxlcrd.conf" --host flag-host --port "$PORT2"
grep -q "host flag-host (machine) listening on .*/flag-host.sock, pool $CXLCR_POOL; .* tcp 127.0.0.1:$PORT2" \
	"$POOL_DIR/d2.log" || die "the flags did not override the file: $(cat "$POOL_DIR/d2.log")"
listens_on 127.0.0.1 "$PORT2" || die "cxlcrd does not listen on 127.0.0.1:$PORT2 (the flag's port)"
! listens_on 127.0.0.1 "$PORT1" || die "cxlcrd still listens on the file's port $PORT1"
stop_daemon
ok "--host and --port override the file"

# Run by systemd: stderr is the journal's stream, named by JOURNAL_STREAM.
exec 4>"$POOL_DIR/d3.log"
stream=$(stat -c '%d:%i' "$POOL_DIR/d3.log")
exec 4>&-
JOURNAL_STREAM=$stream start_daemon "$POOL_DIR/d3.log" --config "$POOL_DIR/cxlcrd.conf"
stop_daemon
grep -q '^<6>host cfg-host (machine) listening on ' "$POOL_DIR/d3.log" ||
	die "under the journal, lines do not start with a priority prefix: $(cat "$POOL_DIR/d3.log")"
! grep -qv '^<[0-7]>' "$POOL_DIR/d3.log" || die "a line without a priority prefix: $(cat "$POOL_DIR/d3.log")"
ok "under systemd's journal every line has a <N> priority prefix and no time of its own"

# A wrong file: one line that says where, and no daemon.
printf 'host = a\nlisten = 1.2.3.4\n' >"$POOL_DIR/bad.conf"
rc=0
env -u CXLCR_POD "$DEST/usr/bin/cxlcrd" --config "$POOL_DIR/bad.conf" 2>"$POOL_DIR/bad.err" || rc=$?
[ $rc -ne 0 ] || die "cxlcrd ran with an unknown key in its configuration"
[ "$(wc -l <"$POOL_DIR/bad.err")" -eq 1 ] && grep -q "bad.conf:2: unknown key 'listen'" "$POOL_DIR/bad.err" ||
	die "a bad configuration line is not one clear line: $(cat "$POOL_DIR/bad.err")"
# The same under the journal: an error's priority, for `journalctl -p err`.
stream=$(stat -c '%d:%i' "$POOL_DIR/bad.err")
rc=0
env -u CXLCR_POD JOURNAL_STREAM="$stream" "$DEST/usr/bin/cxlcrd" --config "$POOL_DIR/bad.conf" 2>>"$POOL_DIR/bad.err" || rc=$?
[ $rc -ne 0 ] && grep -q "^<3>cxlcrd: .*bad.conf:2: unknown key 'listen'" "$POOL_DIR/bad.err" ||
	die "under the journal, the refusal has no error priority: $(cat "$POOL_DIR/bad.err")"
ok "a wrong configuration line is refused with FILE:LINE (under the journal, at priority <3>)"

# refused CONF WANT [VAR=VALUE...]: cxlcrd with the configuration CONF
# (printf'd, the pool's path its argument) and those variables set stops
# with one line that has WANT in it.
refused() {
	local conf=$1 want=$2 rc=0
	shift 2
	# shellcheck disable=SC2059 # CONF is the format
	printf "$conf" "$CXLCR_POOL" >"$POOL_DIR/bad.conf"
	env -u CXLCR_POD "$@" "$DEST/usr/bin/cxlcrd" --config "$POOL_DIR/bad.conf" 2>"$POOL_DIR/bad.err" || rc=$?
	[ $rc -ne 0 ] && [ "$(wc -l <"$POOL_DIR/bad.err")" -eq 1 ] && grep -q -- "$want" "$POOL_DIR/bad.err" ||
		die "not refused with one line saying \"$want\": $(cat "$POOL_DIR/bad.err")"
}
# pager_cpus: a CPU list, naming a CPU the daemon may run on.
refused 'pager_cpus = 0-\n' "bad.conf:1: pager_cpus '0-' is not a CPU list"
refused 'pool = %s\npager_cpus = 1023\n' "pager_cpus: CPU list '1023' names no CPU that is online"
ok "pager_cpus that is no CPU list, or names no online CPU, is refused with one line"
# cold_ahead_mb: a number of MiB, in the file or in the environment.
refused 'pool = %s\ncold_ahead_mb = lots\n' "bad.conf:2: cold_ahead_mb 'lots' is not a number of MiB"
refused 'pool = %s\n' "CXLCR_COLD_AHEAD_MB: '-1' is not a number of MiB" CXLCR_COLD_AHEAD_MB=-1
ok "cold_ahead_mb (or \$CXLCR_COLD_AHEAD_MB) that is not a number of MiB is refused with one line"
# fault_around: pages, a power of two from 1 to 16.
refused 'pool = %s\nfault_around = 3\n' "bad.conf:2: fault_around '3' is not a number of pages from 1 to 16"
refused 'pool = %s\n' "CXLCR_FAULT_AROUND: '0' is not a number of pages" CXLCR_FAULT_AROUND=0
ok "fault_around (or \$CXLCR_FAULT_AROUND) that is not a power of two from 1 to 16 is refused with one line"
# huge_after_s: seconds from 0 to 86400.
refused 'pool = %s\nhuge_after_s = soon\n' "bad.conf:2: huge_after_s 'soon' is not a number of seconds"
refused 'pool = %s\n' "CXLCR_HUGE_AFTER_S: '-3' is not a number of seconds" CXLCR_HUGE_AFTER_S=-3
ok "huge_after_s (or \$CXLCR_HUGE_AFTER_S) that is not a number of seconds is refused with one line"
