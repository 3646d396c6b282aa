#!/usr/bin/env bash
# A service that holds a file of its own /proc moves, forks and comes back
# with it. It sees its host's /proc, so /proc/self/stat is open as
# /proc/<its pid on that host>/stat, and CRIU dumps that path; restored
# elsewhere under another pid, the restore failed ("Can't open file
# proc/6/stat on restore") or would have opened another process's file.
# Redis opens /proc/self/stat every cron tick: a migrate whose freeze fell
# in that moment failed so (seen in t_soak). Here the file is held for good
# (fd 7, opened by the shell that execs Redis), so every dump carries it:
#  - migrate h0 -> h1 -> h0: each time fd 7 is the restored process's own
#    stat (its pid, as its host sees it), and every value is there;
#  - a remote fork: the child's fd 7 is the child's own stat.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
COUNT=2000

new_pool 4G
pod_up 2
SERVICES+=(ps)
"$CXLCR" run --host h0 --name ps --arena 64M --log "$POOL_DIR/ps.log" -- sh -c \
	"exec 7</proc/self/stat; exec redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir /" \
	>/dev/null || die "cxlcr run failed"
addr=$(status_field ps address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer at $addr"
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 3 --quiet || die "fill failed"

# own_stat NAME: fd 7 of service NAME is /proc/<its pid>/stat on its host,
# and reads as its own (the stat's first field is that pid).
own_stat() {
	local host pid link first
	host=$(status_field "$1" host)
	pid=$(status_field "$1" pid)
	link=$(on "$host" readlink "/proc/$pid/fd/7") || die "$1 (pid $pid on $host) has no fd 7"
	[ "$link" = "/proc/$pid/stat" ] || die "$1 (pid $pid on $host) holds $link, not its own /proc/$pid/stat"
	first=$(on "$host" cut -d' ' -f1 "/proc/$pid/fd/7")
	[ "$first" = "$pid" ] || die "$1's fd 7 reads the stat of pid $first, not $pid"
	echo "$pid on $host"
}

was=$(own_stat ps)
ok "ps holds its own stat as fd 7 ($was)"
for to in h1 h0; do
	out=$("$CXLCR" migrate ps --to $to 2>&1) || die "migrate to $to failed: $out"
	now=$(own_stat ps)
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 3 --quiet ||
		die "values lost in the migrate to $to"
	ok "migrated to $to: fd 7 is its own stat ($now, was $was), every value there"
	was=$now
done

out=$("$CXLCR" fork ps --to h1 --json) || die "cxlcr fork failed: $out"
read -r kid kaddr < <(echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["children"][0]
print(c["name"], c["address"])')
SERVICES+=("$kid")
now=$(own_stat "$kid")
python3 "$KV" verify --host "$kaddr" --port $PORT --count $COUNT --size 1000 --seed 3 --quiet ||
	die "the child $kid does not hold its parent's values"
ok "fork: the child $kid holds its own stat as fd 7 ($now), and every value"
