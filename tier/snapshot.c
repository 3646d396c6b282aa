/*
 * Tiered snapshots: a snapshot split (common/snapshot_split.c) whose cold
 * pages go to a memory server. The extent is handed out in the pool's tier
 * table, owned by the new snapshot's region (it is free again as soon as
 * that region is); the pages travel in batches through a registered bounce
 * buffer, one RMA write per batch of consecutive pages.
 */
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../common/util.h"
#include "internal.h"
#include "tier.h"

#define BATCH_PAGES 256u   /* 1 MiB per RMA write */
#define PAGE        4096u

struct sink {
	struct cxlcr_pool *pool;
	struct conn conn;
	bool connected;
	uint64_t first;    /* cold page index of the bounce buffer's first page */
	uint32_t held;     /* pages in the bounce buffer */
	uint64_t extent;   /* its offset on the server */
	uint64_t write_ns;
};

static int sink_begin(void *ctx, uint64_t region, uint64_t pages, struct cxlcr_snapshot_cold *cold)
{
	struct sink *k = ctx;
	struct cxlcr_tier_extent e;
	uint32_t server;
	if (tier_extent_alloc(k->pool, pages * PAGE, region, &server, &e) < 0)
		return -1;
	if (conn_open(k->pool, server, BATCH_PAGES * PAGE, true, &k->conn) < 0)
		return -1;
	k->connected = true;
	k->extent = e.offset;
	cold->server = server;
	cold->server_incarnation = e.server_incarnation;
	cold->extent_offset = e.offset;
	cold->extent_size = e.size;
	return 0;
}

static int flush(struct sink *k)
{
	if (!k->held)
		return 0;
	uint64_t t0 = cxlcr_mono_ns();
	int rc = conn_rma(&k->conn, true, 0, (size_t)k->held * PAGE, k->extent + k->first * PAGE);
	k->write_ns += cxlcr_mono_ns() - t0;
	if (rc < 0)
		cxlcr_error("%s (cold pages %llu to %llu, after %.1f ms of writes)", cxlcr_last_error(),
			    (unsigned long long)k->first, (unsigned long long)(k->first + k->held),
			    (double)k->write_ns / 1e6);
	k->first += k->held;
	k->held = 0;
	return rc;
}

static int sink_page(void *ctx, uint64_t index, const void *page)
{
	struct sink *k = ctx;
	if (index != k->first + k->held || k->held == BATCH_PAGES) {
		if (flush(k) < 0)
			return -1;
		k->first = index;
	}
	memcpy((char *)k->conn.fab.buf + (size_t)k->held * PAGE, page, PAGE);
	k->held++;
	return 0;
}

static int sink_end(void *ctx)
{
	return flush(ctx);
}

int tier_snapshot_make(struct cxlcr_pool *pool, uint64_t source, const uint64_t *hot, uint64_t hot_pages,
		       const char *name, struct tier_result *out)
{
	memset(out, 0, sizeof(*out));
	struct sink k = { .pool = pool };
	struct cxlcr_cold_sink sink = { .ctx = &k, .begin = sink_begin, .page = sink_page, .end = sink_end };
	struct cxlcr_snapshot_info info;
	int rc = cxlcr_snapshot_split(pool, source, hot, hot_pages, name, &sink, &info);
	if (k.connected) {
		cxlcr_copy_field(out->server, sizeof(out->server), k.conn.server.name);
		conn_close(&k.conn);
	}
	if (rc < 0)
		return -1;
	out->generation = info.region_generation;
	out->pages_hot = info.pages_cxl;
	out->pages_zero = info.pages_zero;
	out->pages_cold = info.pages_total - info.pages_cxl - info.pages_zero;
	out->cxl_bytes = info.region_size;
	out->cold_bytes = out->pages_cold * PAGE;
	out->write_ms = (double)k.write_ns / 1e6;
	return 0;
}
