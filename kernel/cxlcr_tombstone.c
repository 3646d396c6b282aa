// SPDX-License-Identifier: GPL-2.0
/*
 * cxlcr_tombstone: a dying host's last word in the pod's host table.
 *
 * When this machine panics, nothing of cxlcr can run any more: panic()
 * stops the other CPUs and runs with interrupts off. What it can still do
 * is a few stores. This module writes a tombstone {host, incarnation,
 * reason, time} into this host's entry of the host table in the CXL pool
 * (common/pool_format.h, struct cxlcr_tombstone: the one definition, shared
 * with the daemons), writes the line back with clflush and fences it, so
 * that the other hosts' daemons see it at their next look at the table and
 * recover this host's services at once instead of waiting for its lease.
 *
 * Parameters (cxlcrd sets them through /sys/module/cxlcr_tombstone/
 * parameters/ when it registers: docs/recovery.md):
 *   pool_phys     physical address of the pool device's first byte
 *                 (libdaxctl's resource of the devdax device)
 *   table_offset  offset of the host table's region in the pool
 *   entry_index   this host's entry in the table
 *   oops_is_death 1 if an oops ends this machine (panic_on_oops=1): the die
 *                 notifier then writes the tombstone already, in case the
 *                 panic that follows never gets as far as its notifiers
 *   armed         1 maps the entry with the parameters above (done at load
 *                 when pool_phys and table_offset are given), 0 unmaps it
 *
 * The notifiers allocate nothing, take no lock and do not sleep; the
 * mapping is made when the module is armed, in process context.
 */
#include <linux/crc32.h>
#include <linux/io.h>
#include <linux/kdebug.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/panic_notifier.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <asm/cacheflush.h>

#include "pool_format.h"   /* common/: the Kbuild file puts it on the path */

static unsigned long pool_phys;
module_param(pool_phys, ulong, 0600);
MODULE_PARM_DESC(pool_phys, "physical address of the pool device");

static unsigned long table_offset;
module_param(table_offset, ulong, 0600);
MODULE_PARM_DESC(table_offset, "offset of the host table's region in the pool");

static uint entry_index;
module_param(entry_index, uint, 0600);
MODULE_PARM_DESC(entry_index, "this host's entry in the host table");

static bool oops_is_death;
module_param(oops_is_death, bool, 0600);
MODULE_PARM_DESC(oops_is_death, "write the tombstone on an oops too (the machine runs with panic_on_oops)");

static struct cxlcr_host_entry *entry;   /* mapped while armed */
static u32 armed_index;
static DEFINE_MUTEX(arm_lock);
static atomic_t written = ATOMIC_INIT(0);

/* The standard CRC-32C, as common/checksum.c computes it. */
static u32 tombstone_crc(const void *p, size_t len)
{
	return ~__crc32c_le(~0u, p, len);
}

/* Stores the tombstone, once; called with the other CPUs stopped (panic)
 * or from the die path: stores and cache-line write-backs only. The
 * incarnation is the entry's own at this instant: the daemon that
 * registered last is the one whose services die with this machine. */
static void write_tombstone(u32 reason)
{
	struct cxlcr_host_entry *e = READ_ONCE(entry);
	struct cxlcr_tombstone t;

	if (!e || atomic_xchg(&written, 1))
		return;
	memset(&t, 0, sizeof(t));
	t.magic = CXLCR_TOMBSTONE_MAGIC;
	t.incarnation = READ_ONCE(e->id.incarnation);
	t.time_ns = ktime_get_real_fast_ns();
	t.reason = reason;
	t.host_index = READ_ONCE(armed_index);
	t.checksum = tombstone_crc(&t, CXLCR_TOMBSTONE_CHECKED);
	memcpy(&e->tombstone, &t, sizeof(t));
	clflush_cache_range(&e->tombstone, sizeof(t));
	wmb();
}

static int on_panic(struct notifier_block *nb, unsigned long action, void *data)
{
	write_tombstone(CXLCR_TOMBSTONE_PANIC);
	return NOTIFY_DONE;
}

/* An oops is not always the end: without panic_on_oops the machine goes
 * on, and cxlcrd's kernel-log watcher hands its services off with nothing
 * lost. Only when the operator says an oops is death does it count. */
static int on_die(struct notifier_block *nb, unsigned long action, void *data)
{
	if (action == DIE_OOPS && READ_ONCE(oops_is_death))
		write_tombstone(CXLCR_TOMBSTONE_OOPS);
	return NOTIFY_DONE;
}

static struct notifier_block panic_nb = { .notifier_call = on_panic, .priority = INT_MAX };
static struct notifier_block die_nb = { .notifier_call = on_die, .priority = INT_MAX };

/* Maps this host's entry (or unmaps it): a write-back mapping of the
 * device's memory, as the daemons' own mapping of the pool is. */
static int arm(bool on)
{
	struct cxlcr_host_entry *old, *e = NULL;
	resource_size_t at;

	if (on) {
		if (!pool_phys || entry_index >= CXLCR_HOSTS_MAX)
			return -EINVAL;
		at = pool_phys + table_offset + CXLCR_HOSTS_HEADER_SIZE +
		     (resource_size_t)entry_index * sizeof(struct cxlcr_host_entry);
		e = memremap(at, sizeof(*e), MEMREMAP_WB);
		if (!e)
			return -ENOMEM;
		if (READ_ONCE(e->state) != CXLCR_HOST_RUNNING) {
			memunmap(e);
			return -ENOENT;   /* no daemon registered there */
		}
	}
	mutex_lock(&arm_lock);
	WRITE_ONCE(armed_index, entry_index);
	old = entry;
	WRITE_ONCE(entry, e);
	atomic_set(&written, 0);
	mutex_unlock(&arm_lock);
	if (old)
		memunmap(old);
	return 0;
}

static int armed_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int rc = kstrtobool(val, &on);

	return rc ? rc : arm(on);
}

static int armed_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(entry) ? 1 : 0);
}

static const struct kernel_param_ops armed_ops = { .set = armed_set, .get = armed_get };
module_param_cb(armed, &armed_ops, NULL, 0600);
MODULE_PARM_DESC(armed, "1: map this host's entry and write the tombstone on death; 0: do nothing");

static int __init tombstone_init(void)
{
	int rc;

	if (pool_phys) {
		rc = arm(true);
		if (rc)
			return rc;
	}
	atomic_notifier_chain_register(&panic_notifier_list, &panic_nb);
	rc = register_die_notifier(&die_nb);
	if (rc) {
		atomic_notifier_chain_unregister(&panic_notifier_list, &panic_nb);
		arm(false);
	}
	return rc;
}

static void __exit tombstone_exit(void)
{
	unregister_die_notifier(&die_nb);
	atomic_notifier_chain_unregister(&panic_notifier_list, &panic_nb);
	arm(false);
}

module_init(tombstone_init);
module_exit(tombstone_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("cxlcr: a panicking host's tombstone in the CXL pool's host table");
