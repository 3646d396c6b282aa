#!/usr/bin/env bash
# Two verbs on one service at the same time (issue 13 point 3): every pair
# of {migrate, checkpoint+restore, snapshot, fork, stop}, the same verb
# twice included, started together through a FIFO barrier on a Redis in an
# emulated pod. The daemons run with the CRIU hook (tests/lib/criu-kill-hook.sh),
# which holds the first CRIU that starts (a dump, or a fork's restore) until
# the test says go, and the test says so only once one of the two verbs has
# ended: so the two truly overlap, whichever wins. Exactly one proceeds;
# the other is refused with one line ("service X is busy: VERB by pid N on
# H", or, once stop won, that there is no such service) and changes
# nothing. Then the service answers at its address with every value and
# exactly one process maps the pool (fork children are stopped first), or,
# when stop won, nothing maps it and the service is started again.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

COUNT=300
SIZE=200
PORT=6379
VERBS=(migrate ckrestore snapshot fork stop)

new_pool 8G
criu_hook race
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2

# The daemons run from / (what CRIU leaves behind, and what services
# write where they stand, must not land in a shared directory).
daemons=0
for p in $(pgrep -x cxlcrd); do
	tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "CXLCR_POOL=$CXLCR_POOL" || continue
	[ "$(readlink "/proc/$p/cwd")" = / ] || die "cxlcrd $p runs in $(readlink "/proc/$p/cwd"), not /"
	daemons=$((daemons + 1))
done
[ $daemons -eq 2 ] || die "$daemons daemons of this pod found, not 2"
ok "both daemons run from /"

start() {
	pod_redis "$NAME" h0 256M
	python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 21 --quiet
}
start

mappers() { pool_mappers; }

# verb KIND HOST OTHER: one verb of the race.
verb() {
	case $1 in
	migrate) "$CXLCR" migrate "$NAME" --to "$3" ;;
	ckrestore) "$CXLCR" checkpoint "$NAME" && "$CXLCR" restore "$NAME" --host "$2" ;;
	snapshot) "$CXLCR" snapshot "$NAME" ;;
	fork) "$CXLCR" fork "$NAME" --to "$3" ;;
	stop) "$CXLCR" stop "$NAME" ;;
	esac
}

pairs=0
declare -A wins=()
for ((i = 0; i < ${#VERBS[@]}; i++)); do
	for ((j = i; j < ${#VERBS[@]}; j++)); do
		a=${VERBS[$i]} b=${VERBS[$j]} what="${VERBS[$i]} + ${VERBS[$j]}"
		host=$(status_field "$NAME" host)
		other=$([ "$host" = h0 ] && echo h1 || echo h0)
		rm -f "$HOOK/go" "$HOOK/criu.pid" "$POOL_DIR/barrier"
		echo "pre-dump pre-restore" >"$HOOK/pause-at"
		mkfifo "$POOL_DIR/barrier"
		( exec 3<"$POOL_DIR/barrier"; verb "$a" "$host" "$other" >/dev/null 2>"$POOL_DIR/a.err" ) &
		pa=$!
		( exec 3<"$POOL_DIR/barrier"; verb "$b" "$host" "$other" >/dev/null 2>"$POOL_DIR/b.err" ) &
		pb=$!
		exec 4>"$POOL_DIR/barrier" # both start now
		# The first to end lets the held CRIU go on.
		rca=-1 rcb=-1 rc=0
		wait -n -p first "$pa" "$pb" || rc=$?
		if [ "$first" = "$pa" ]; then rca=$rc; else rcb=$rc; fi
		touch "$HOOK/go"
		rc=0
		if [ "$first" = "$pa" ]; then wait "$pb" || rc=$?; rcb=$rc; else wait "$pa" || rc=$?; rca=$rc; fi
		exec 4>&-
		rm -f "$HOOK/pause-at"
		if [ "$rca" = 0 ] && [ "$rcb" != 0 ]; then
			win=$a lose_err=$POOL_DIR/b.err
		elif [ "$rcb" = 0 ] && [ "$rca" != 0 ]; then
			win=$b lose_err=$POOL_DIR/a.err
		else
			cat "$POOL_DIR/a.err" "$POOL_DIR/b.err" >&2
			die "$what: exit statuses $rca and $rcb: not exactly one success"
		fi
		[ "$(wc -l <"$lose_err")" -eq 1 ] || die "$what: the refusal is not one line: $(cat "$lose_err")"
		if [ "$win" = stop ]; then
			# (a loser that comes after the stop ended the process,
			# before it freed the arena, finds it exited; one that
			# found the arena just before it was freed finds no
			# lease slot for it: gone)
			grep -Eq "is busy: stop by pid [0-9]+ on |no service named '$NAME'|service '$NAME' is not running \(exited\)|service $NAME is gone" \
				"$lose_err" ||
				die "$what: unclear refusal: $(cat "$lose_err")"
		else
			grep -Eq "service $NAME is busy: (migrate|checkpoint|snapshot|fork|restore) by pid [0-9]+ on h[01]" \
				"$lose_err" || die "$what: unclear refusal: $(cat "$lose_err")"
		fi
		stop_others "$NAME"
		if [ "$win" = stop ]; then
			"$CXLCR" status "$NAME" >/dev/null 2>&1 && die "$what: stop won, but the service is still there"
			[ -z "$(mappers)" ] || die "$what: stop won, but processes map the pool: $(mappers)"
			SERVICES=()
			start
		else
			want=$host
			[ "$win" = migrate ] && want=$other
			[ "$(status_field "$NAME" host)" = "$want" ] ||
				die "$what: $win won; the service is on $(status_field "$NAME" host), not $want"
			[ "$(status_field "$NAME" state)" = running ] ||
				die "$what: the service is $(status_field "$NAME" state)"
			pid=$(status_field "$NAME" pid)
			[ "$(mappers)" = "$want:$pid " ] ||
				die "$what: processes mapping the pool: $(mappers); expected only $want:$pid"
			python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 21 --quiet ||
				die "$what: values differ"
		fi
		pairs=$((pairs + 1))
		wins[$win]=$((${wins[$win]:-0} + 1))
		ok "$what: $win went on, the other said: $(sed -E 's/ by pid [0-9]+/ by pid N/' "$lose_err")"
	done
done
ok "$pairs pairs raced: exactly one verb went on each time (wins: $(for k in "${!wins[@]}"; do printf '%s %s ' "$k" "${wins[$k]}"; done))"

# A checkpointed service removed, and a new one of the same name (issue 13
# point 6): its epochs start again, so its first checkpoint has the name
# the old one's had, which must have gone with the old service.
"$CXLCR" stop "$NAME" >/dev/null || die "stop failed"
SERVICES=()
start
"$CXLCR" checkpoint "$NAME" >/dev/null || die "checkpoint failed"
"$CXLCR" rm "$NAME" >/dev/null || die "rm of the checkpointed service failed"
SERVICES=()
start
"$CXLCR" checkpoint "$NAME" >/dev/null 2>"$POOL_DIR/ck.err" ||
	die "the checkpoint of a new service of the same name failed: $(cat "$POOL_DIR/ck.err")"
"$CXLCR" restore "$NAME" --host h0 >/dev/null || die "its restore failed"
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --seed 21 --quiet ||
	die "values differ after the restore of the new service"
ok "a service removed with its checkpoint; a new one of the same name checkpoints and restores"
stop_service "$NAME"
