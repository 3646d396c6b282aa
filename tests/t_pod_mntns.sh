#!/usr/bin/env bash
# `cxlcr pod up` run in a mount namespace of its own (a container, a chroot,
# a systemd unit with PrivateTmp) works as in the machine's first one.
#
# Each pod host gets a new mount namespace, which `pod up` pins by binding
# its file. The kernel refuses that bind (EINVAL) when the new namespace's
# id is not above the binder's, and hands ids out in per-CPU batches: a
# namespace made later on one CPU can have a lower id than one made before
# on another. The first run of the README's commands in a fresh Debian tree
# (pivot_root'ed in a namespace of its own) failed so about half the time.
# Here it is made certain: `pod up` runs in a namespace made on the CPU
# whose namespaces get the highest ids, itself kept on the CPU whose get
# the lowest, so every host namespace it made there was refused. The hosts
# must come up, answer, and go down again.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need taskset unshare python3 ip iptables nsenter criu

cpus=$(nproc --all)
[ "$cpus" -ge 2 ] || skip "one CPU: namespace ids come from one batch"

# The id of a new mount namespace made on CPU $1 (NS_GET_MNTNS_ID, 6.8).
ns_id_on() {
	taskset -c "$1" unshare -m python3 -c 'import fcntl, struct
buf = bytearray(8)
try:
    fcntl.ioctl(open("/proc/self/ns/mnt"), 0x8008b705, buf)
except OSError:
    buf = bytearray(8)
print(struct.unpack("Q", buf)[0])'
}
high= low= high_id=0 low_id=
for ((c = 0; c < cpus; c++)); do
	id=$(ns_id_on "$c" 2>/dev/null) || continue
	[ "$id" != 0 ] || skip "the kernel does not give mount namespace ids"
	if [ "$id" -gt "$high_id" ]; then high=$c high_id=$id; fi
	if [ -z "$low_id" ] || [ "$id" -lt "$low_id" ]; then low=$c low_id=$id; fi
done
[ -n "$high" ] && [ -n "$low" ] && [ "$high" != "$low" ] ||
	skip "new mount namespaces got ids in the order they were made on every CPU"
say "new namespaces: id $high_id on CPU $high, $low_id on CPU $low"

new_pool 2G
export CXLCR_HUGE_AFTER_S=0
# In the namespace: pod up, a command on each host, pod down (the pins are
# that namespace's mounts, so everything happens there).
cat >"$POOL_DIR/inside.sh" <<'EOF'
set -u
up=0
"$CXLCR" pod up --hosts 2 >"$POOL_DIR/up.out" 2>"$POOL_DIR/up.err" && up=1
for h in h0 h1; do
	[ $up = 1 ] && "$CXLCR" pod exec "$h" -- cat /etc/cxlcr/cxlcrd.conf >>"$POOL_DIR/conf.out" 2>&1
done
"$CXLCR" pod down >"$POOL_DIR/down.out" 2>&1
echo "up=$up down=$?"
EOF
said=$(CXLCR=$CXLCR POOL_DIR=$POOL_DIR taskset -c "$high" unshare -m --propagation private \
	taskset -c "$low" bash "$POOL_DIR/inside.sh")
[ "$said" = "up=1 down=0" ] ||
	die "pod up in a namespace made on CPU $high, run on CPU $low: $said: $(cat "$POOL_DIR/up.err" "$POOL_DIR/down.out")"
for h in h0 h1; do
	grep -qx "host = $h" "$POOL_DIR/conf.out" || die "$h did not answer from its own file system: $(cat "$POOL_DIR/conf.out")"
done
ok "pod up, pod exec and pod down of 2 hosts from a mount namespace of its own, made on CPU $high, run on CPU $low"
