/*
 * Arming the panic tombstone on a real machine (kernel/cxlcr_tombstone.c).
 *
 * The module writes this host's tombstone into its entry of the host table
 * as the machine panics; it needs to know where that entry is in physical
 * memory, which only the daemon knows once it has registered: the pool
 * device's physical address (libdaxctl), the host table's offset in the
 * pool and the entry's index. The daemon writes them into the module's
 * parameters after each registration and arms it. An emulated pool (a
 * file) has no physical address: there `cxlcr pod crash --panic` writes
 * the same tombstone from user space.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "../common/devdax.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "recovery.h"

#define PARAMS "/sys/module/cxlcr_tombstone/parameters"

static int write_param(const char *dir, const char *name, unsigned long long value)
{
	char path[512], text[32];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int n = snprintf(text, sizeof(text), "%llu", value);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("%s: %s", path, strerror(errno));
	int rc = write(fd, text, (size_t)n) == n ? 0 : cxlcr_error("%s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

/* Whether an oops ends this machine (then the module writes its tombstone
 * on the oops already). */
static bool panic_on_oops(void)
{
	FILE *f = fopen("/proc/sys/kernel/panic_on_oops", "re");
	int v = 0;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v != 0;
}

void tombstone_arm(struct cxlcr_pool *pool, uint32_t entry_index, kmsg_log_fn log)
{
	if (!pool->devdax)
		return;
	const char *dir = getenv("CXLCR_TOMBSTONE_PARAMS");
	dir = dir && *dir ? dir : PARAMS;
	struct stat st;
	struct cxlcr_region table;
	uint64_t phys;
	if (access(dir, F_OK) != 0) {
		log(LOG_WARNING, "panic tombstone: the cxlcr_tombstone module is not loaded (%s): a panic of this "
				 "host is noticed by the others only after its lease (docs/recovery.md)", dir);
		return;
	}
	if (stat(pool->path, &st) < 0 || cxlcr_devdax_phys(st.st_rdev, pool->path, &phys) < 0 ||
	    !cxlcr_region_find(pool, CXLCR_KIND_HOSTS, CXLCR_HOSTS_REGION, &table) ||
	    write_param(dir, "armed", 0) < 0 || write_param(dir, "pool_phys", phys) < 0 ||
	    write_param(dir, "table_offset", table.offset) < 0 || write_param(dir, "entry_index", entry_index) < 0 ||
	    write_param(dir, "oops_is_death", panic_on_oops()) < 0 || write_param(dir, "armed", 1) < 0) {
		log(LOG_ERR, "panic tombstone: cannot arm the module: %s", cxlcr_last_error());
		return;
	}
	log(LOG_INFO, "panic tombstone armed: pool at physical 0x%llx, host table at +0x%llx, entry %u%s",
	    (unsigned long long)phys, (unsigned long long)table.offset, entry_index,
	    panic_on_oops() ? " (an oops counts as death: panic_on_oops)" : "");
}
