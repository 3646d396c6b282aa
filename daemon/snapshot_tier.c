/*
 * cxlcr snapshot NAME --tier: the daemon's part of a tiered snapshot
 * (docs/cold-tier.md). The hot set is what the service touches in the hot
 * window: its page tables over the heap are dropped (as before a
 * checkpoint, preload/shed.c), it runs for the window, and the heap pages
 * present in its page tables afterwards are hot. Write tracking's scan
 * would see only written pages, and a service's hot set is mostly read.
 * The snapshot itself is taken in full as usual, then split: hot pages stay
 * in CXL, the rest go to a memory server (tier/), and the full one is
 * freed before anything refers to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/util.h"
#include "../tier/tier.h"
#include "cli.h"
#include "fork.h"

int snapshot_hot_set(struct cxlcr_pool *pool, const struct service *s, uint32_t window_ms, uint64_t **hot,
		     uint64_t *pages, struct snapshot_result *out)
{
	uint64_t t0 = cxlcr_mono_ns();
	/* Before anything is frozen or copied: a server may still go away
	 * later (the split then fails, and the service has lost nothing). */
	if (tier_servers_up(pool) == 0)
		return cxlcr_error("the pod has no memory server up (cxlcr tier up)");
	if (!service_shed_page_tables(pool, s, SERVICE_SHED_ANSWER_MS))
		return cxlcr_error("the service did not drop its page tables (its helper thread does not answer): "
				   "its hot set cannot be found");
	/* The window is the measurement itself, not a wait for anything. */
	struct timespec w = { window_ms / 1000, (long)(window_ms % 1000) * 1000000L };
	while (nanosleep(&w, &w) != 0)
		;
	*pages = s->heap_size / CXLCR_SNAPSHOT_PAGE_SIZE;
	if (tier_present_pages(s->region.owner_pid, s->heap_address, *pages, hot, &out->hot_seen) < 0)
		return -1;
	out->hot_window_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	return 0;
}

/* "SERVICE.sDIGITS0": still a name of the service's snapshots (its strays
 * are found by that pattern), and unique: the digits of a snapshot name
 * are fewer. */
static void tiered_name(const char *full, char *name, size_t len)
{
	snprintf(name, len, "%.*s0", (int)(len - 2), full);
}

int snapshot_tier(struct cxlcr_pool *pool, const uint64_t *hot, uint64_t pages, struct snapshot_result *out)
{
	char name[CXLCR_NAME_MAX];
	struct cxlcr_region full;
	if (cxlcr_region_get(pool, out->generation, &full) < 0)
		return -1;
	tiered_name(out->name, name, sizeof(name));
	struct tier_result r;
	uint64_t t0 = cxlcr_mono_ns();
	if (tier_snapshot_make(pool, out->generation, hot, pages, name, &r) < 0)
		return cxlcr_error("its cold pages could not go to the cold tier: %s", cxlcr_last_error());
	/* Nothing refers to the full snapshot yet: no catalog entry, no images. */
	cxlcr_snapshot_region_free(pool, out->generation);
	out->tier_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	out->tiered = true;
	cxlcr_copy_field(out->name, sizeof(out->name), name);
	out->generation = r.generation;
	out->untiered_bytes = full.size;
	out->cxl_bytes = r.cxl_bytes;
	out->cold_bytes = r.cold_bytes;
	out->pages_hot = out->pages_cxl = out->pages_own = r.pages_hot;
	out->pages_cold = r.pages_cold;
	out->pages_zero = r.pages_zero;
	out->tier_write_ms = r.write_ms;
	cxlcr_copy_field(out->tier_server, sizeof(out->tier_server), r.server);
	return 0;
}
