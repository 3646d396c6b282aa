#!/usr/bin/env bash
# Children of a service that an operator stopped (SIGSTOP) come back
# stopped, whichever way they get their pages: a share-mode child as CRIU
# restores a stopped process on its own, a copy-mode child (fork --mode
# copy, the only mode on a devdax pool) by its pager, which resumes the
# child's main thread into a SIGSTOP instead of continuing it (it used to
# continue every child alike). A child left stopped answers nothing; once
# continued (SIGCONT), it answers with every value of its parent.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli timeout

COUNT=3000
SIZE=300
PORT=6379

# state HOST PID: the state letter of process PID of HOST (R, S, T, t...).
state() { on "$1" cat "/proc/$2/stat" | sed 's/^.*) //' | cut -d' ' -f1; }
# stopped HOST PID: stopped by a signal ('T'), or so under its pager's
# ptrace ('t', a group stop it listens to).
stopped() { [[ "$(state "$1" "$2")" == [Tt] ]]; }
# threads_running HOST PID: how many threads of process PID of HOST are
# not stopped.
threads_running() {
	# shellcheck disable=SC2016 # expanded on the host
	on "$1" sh -c 'for t in /proc/$1/task/*/stat; do sed "s/^.*) //" "$t" | cut -d" " -f1; done' sh "$2" |
		grep -vc '^[Tt]$' || true
}
verify() { python3 "$KV" verify --host "$1" --port $PORT --count $COUNT --size $SIZE --seed 23 --quiet; }

new_pool 4G
pod_up 2
pod_redis redis h0 256M
parent=$addr
python3 "$KV" fill --host "$parent" --port $PORT --count $COUNT --size $SIZE --seed 23 --quiet
ppid=$(status_field redis pid)
on h0 kill -STOP "$ppid" || die "cannot stop redis on h0"
until_true 10 stopped h0 "$ppid" || die "redis on h0 is not stopped"
"$CXLCR" snapshot redis >/dev/null || die "the snapshot of the stopped redis failed"
stopped h0 "$ppid" || die "the snapshot continued the stopped redis (state $(state h0 "$ppid"))"

for mode in share copy; do
	out=$("$CXLCR" fork redis --to h1 --mode $mode --json) || die "fork --mode $mode of the stopped redis failed"
	read -r kid addr pid < <(echo "$out" | kids_of)
	SERVICES+=("$kid")
	stopped h1 "$pid" || die "$mode mode: the child of a stopped redis runs (state $(state h1 "$pid"))"
	[ "$(threads_running h1 "$pid")" = 0 ] || die "$mode mode: threads of the stopped child run"
	rc=0
	timeout 2 redis-cli -h "$addr" -p $PORT ping >/dev/null 2>&1 || rc=$?
	[ $rc = 124 ] || die "$mode mode: the stopped child did not keep a ping waiting (redis-cli: $rc)"
	on h1 kill -CONT "$pid" || die "cannot continue $kid"
	verify "$addr" || die "$mode mode: $kid lacks values once continued"
	ok "$mode mode: the child of the stopped redis is stopped, and once continued answers with every value"
done

stopped h0 "$ppid" || die "forking continued the stopped parent (state $(state h0 "$ppid"))"
on h0 kill -CONT "$ppid"
verify "$parent" || die "the parent lacks values once continued"
ok "the parent stayed stopped through both forks, and once continued answers with every value"
