#!/usr/bin/env bash
# A pool path that another user could have prepared is refused, and nothing
# is written through it: root's `cxlcr pool format` and a later open (`cxlcr
# ps`) of a pool behind a symbolic link, a pool file someone else made or
# may use, or a pool under a directory that someone else owns or may write,
# exit 4 with one line naming the path and the problem. The tricks are set
# up as nobody, in a world-writable sticky directory of root's like
# /dev/shm. A pool that cxlcr makes itself is a 0600 file of root's in
# directories of mode 0700, and such a pool, or one right in the sticky
# directory, is used as before.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need setpriv sha256sum stat
[ "$(id -u)" -eq 0 ] || skip "plays root against nobody: run it as root"

# nobody can enter neither $CXLCR_TEST_TMP nor a new_pool directory (both
# 0700, inside 0700): this test's directory is root's, 0755, removed on exit.
POOL_DIR=$(mktemp -d /dev/shm/cxlcr-test-XXXX)
chmod 0755 "$POOL_DIR"
D=$POOL_DIR
OUT=$D/out
ERR=$D/err
S=$D/shm
mkdir "$S"
chmod 1777 "$S"

nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# A file of root's that nobody may read or write, which a pool through a
# link to it would overwrite.
VICTIM=$D/victim
head -c 65536 /dev/urandom >"$VICTIM"
chmod 0600 "$VICTIM"
VICTIM_SUM=$(sha256sum <"$VICTIM")
victim_untouched() {
	[ "$(sha256sum <"$VICTIM")" = "$VICTIM_SUM" ] || die "$1: the victim's contents changed"
	[ "$(stat -c '%s %a %U' "$VICTIM")" = "65536 600 root" ] ||
		die "$1: the victim is now $(stat -c '%s bytes, mode %a, owner %U' "$VICTIM")"
}

# refused POOL REGEX WHAT: `pool format` and then `ps` with CXLCR_POOL=POOL
# each exit 4 with one line on stderr that matches REGEX.
refused() {
	local pool=$1 want=$2 what=$3 cmd rc
	for cmd in "pool format --size 256M" "ps"; do
		rc=0
		# shellcheck disable=SC2086
		CXLCR_POOL=$pool "$CXLCR" $cmd >"$OUT" 2>"$ERR" || rc=$?
		[ $rc -eq 4 ] || die "$what: cxlcr $cmd exited $rc, want 4 (stderr: $(cat "$ERR"))"
		[ "$(wc -l <"$ERR")" -eq 1 ] || die "$what: cxlcr $cmd: want one line on stderr, got: $(cat "$ERR")"
		grep -Eq -- "$want" "$ERR" || die "$what: cxlcr $cmd: stderr does not match '$want': $(cat "$ERR")"
	done
	ok "$what: $(cat "$ERR")"
}

# --- nobody's directory holding a link to root's file -------------------------
nobody mkdir "$S/cxlcr"
nobody ln -s "$VICTIM" "$S/cxlcr/pool"
refused "$S/cxlcr/pool" "^cxlcr: pool $S/cxlcr/pool: directory $S/cxlcr is owned by uid 65534, not root$" \
	"a directory of nobody's with pool -> a root file"
victim_untouched "a directory of nobody's with pool -> a root file"

# --- a link planted right in the sticky directory ---------------------------------
nobody ln -s "$VICTIM" "$S/pool-link"
refused "$S/pool-link" "^cxlcr: pool $S/pool-link: $S/pool-link is a symbolic link" \
	"a link to a root file in the sticky directory"
victim_untouched "a link to a root file in the sticky directory"

# --- a link to a directory above the pool ------------------------------------
mkdir "$D/real"
CXLCR_POOL=$D/real/pool "$CXLCR" pool format --size 256M >/dev/null || die "format of $D/real/pool failed"
nobody ln -s "$D/real" "$S/dir-link"
refused "$S/dir-link/pool" "^cxlcr: pool $S/dir-link/pool: $S/dir-link is a symbolic link" \
	"a link to root's directory on the way"

# --- a pool file that nobody made, 0666 -------------------------------------------
nobody touch "$S/pool-0666"
nobody chmod 0666 "$S/pool-0666"
refused "$S/pool-0666" "^cxlcr: pool $S/pool-0666: owned by uid 65534, not root$" \
	"an empty 0666 pool file of nobody's"
[ "$(stat -c '%s %a %U' "$S/pool-0666")" = "0 666 nobody" ] ||
	die "nobody's pool file was changed: $(stat -c '%s bytes, mode %a, owner %U' "$S/pool-0666")"

# --- a pool file of root's that others may use ----------------------------------------
mkdir "$D/open"
install -m 0666 /dev/null "$D/open/pool"
refused "$D/open/pool" "^cxlcr: pool $D/open/pool: mode 0666, others than its owner may use it \(want 0600\)$" \
	"an empty 0666 pool file of root's"
chmod 0644 "$D/real/pool"
rc=0
CXLCR_POOL=$D/real/pool "$CXLCR" ps >"$OUT" 2>"$ERR" || rc=$?
[ $rc -eq 4 ] && grep -q "mode 0644" "$ERR" || die "ps on a formatted pool made 0644: exit $rc: $(cat "$ERR")"
chmod 0600 "$D/real/pool"
ok "a formatted pool made 0644 is refused by ps: $(cat "$ERR")"

# --- a directory of nobody's further up -------------------------------------------------
nobody mkdir "$S/nobodys"
mkdir "$S/nobodys/sub"
refused "$S/nobodys/sub/pool" "^cxlcr: pool $S/nobodys/sub/pool: directory $S/nobodys is owned by uid 65534, not root$" \
	"root's directory inside one of nobody's"

# --- directories of root's that group or others may write ----------------------------------
mkdir "$D/world" "$D/group"
chmod 0777 "$D/world"
chmod 0775 "$D/group"
refused "$D/world/pool" "^cxlcr: pool $D/world/pool: directory $D/world is writable by group or others \(mode 0777\)$" \
	"a directory of mode 0777"
refused "$D/group/pool" "^cxlcr: pool $D/group/pool: directory $D/group is writable by group or others \(mode 0775\)$" \
	"a directory of mode 0775"

# --- what cxlcr makes itself ------------------------------------------------------------------
CXLCR_POOL=$D/fresh/a/pool "$CXLCR" pool format --size 256M >"$OUT" 2>"$ERR" ||
	die "format of a new pool in new directories failed: $(cat "$ERR")"
[ "$(stat -c '%a %U' "$D/fresh/a/pool")" = "600 root" ] ||
	die "the new pool is $(stat -c 'mode %a, owner %U' "$D/fresh/a/pool")"
for d in "$D/fresh" "$D/fresh/a"; do
	[ "$(stat -c '%a %U' "$d")" = "700 root" ] || die "$d is $(stat -c 'mode %a, owner %U' "$d")"
done
CXLCR_POOL=$D/fresh/a/pool "$CXLCR" ps >"$OUT" 2>"$ERR" || die "ps on the new pool failed: $(cat "$ERR")"
CXLCR_POOL=$D/fresh/a/pool "$CXLCR" pool format --size 256M >"$OUT" 2>"$ERR" ||
	die "a second format of the new pool failed: $(cat "$ERR")"
ok "a new pool is a 0600 file of root's in new 0700 directories, and is used as before"
CXLCR_POOL=$S/mine "$CXLCR" pool format --size 256M >"$OUT" 2>"$ERR" ||
	die "format of a pool right in the sticky directory failed: $(cat "$ERR")"
CXLCR_POOL=$S/mine "$CXLCR" ps >"$OUT" 2>"$ERR" || die "ps of a pool in the sticky directory failed: $(cat "$ERR")"
ok "a root-owned sticky directory (like /dev/shm) is a trusted parent"
victim_untouched "the end"
