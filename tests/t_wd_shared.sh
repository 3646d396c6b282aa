#!/usr/bin/env bash
# A service runs in /run/cxlcr/wd/NAME (daemon/host_files.h). Two pools of
# one machine may each have a service of that name: they share the
# directory, and the one that stops must not take it from the other,
# whose next dump would then fail (CRIU's parasite works in it). The last
# one's stop removes it.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

name=wdtwin$$
wd=/run/cxlcr/wd/$name
new_pool 1G
run_service "$name" 64M redis-server --port 6391 --bind 127.0.0.1 --save '' --appendonly no
pid_a=$(status_field "$name" pid)
[ "$(readlink "/proc/$pid_a/cwd")" = "$wd" ] || die "pool A's service runs in $(readlink "/proc/$pid_a/cwd")"

other=$(mktemp -d /dev/shm/cxlcr-test-XXXX)
on_exit 'CXLCR_POOL='"$other"'/pool "$CXLCR" stop '"$name"' >/dev/null 2>&1; rm -rf '"$other"
CXLCR_POOL=$other/pool "$CXLCR" pool format --size 1G >/dev/null || die "cannot format the second pool"
CXLCR_POOL=$other/pool "$CXLCR" run --name "$name" --arena 64M --log "$other/b.log" -- \
	redis-server --port 6392 --bind 127.0.0.1 --save '' --appendonly no >/dev/null ||
	die "cxlcr run in the second pool failed"
pid_b=$(CXLCR_POOL=$other/pool "$CXLCR" status "$name" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
[ "$(readlink "/proc/$pid_b/cwd")" = "$wd" ] || die "pool B's service runs in $(readlink "/proc/$pid_b/cwd")"

CXLCR_POOL=$other/pool "$CXLCR" stop "$name" >/dev/null || die "stop in the second pool failed"
[ -d "$wd" ] || die "the stop of pool B's $name took pool A's working directory"
[ "$(readlink "/proc/$pid_a/cwd")" = "$wd" ] || die "pool A's service now runs in $(readlink "/proc/$pid_a/cwd")"
ok "two pools' services of one name share $wd; one's stop leaves it to the other"

"$CXLCR" stop "$name" >/dev/null || die "stop in the first pool failed"
SERVICES=()
[ ! -e "$wd" ] || die "$wd outlived the last service in it"
ok "the last one's stop removed it"
