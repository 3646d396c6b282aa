/*
 * A snapshot split in two: made from a complete snapshot, it keeps in CXL
 * only the pages a caller calls hot and hands every other non-zero page to
 * a sink (the cold tier, tier/), which says where it stored them. The CXL
 * side is an ordinary snapshot whose leaves for those pages are COLD; the
 * CRC-32C of each cold page is kept in its region, so that a reader can
 * tell a cold copy that came back wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "checksum.h"
#include "error.h"
#include "persist.h"
#include "snapshot.h"
#include "snapshot_internal.h"
#include "util.h"

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

uint32_t cxlcr_snapshot_cold_checksum(const struct cxlcr_snapshot_cold *c)
{
	return cxlcr_crc32c(0, c, offsetof(struct cxlcr_snapshot_cold, checksum));
}

static bool bit(const uint64_t *bits, uint64_t n, uint64_t i)
{
	return bits && i < n && (bits[i / 64] >> (i % 64) & 1);
}

/* The leaf table with both tiers' offsets counted from 0 (runs do not
 * change when every offset of a tier moves by the same amount): the
 * number of hot and cold pages. */
static int plan_leaves(const struct cxlcr_snapshot *s, const uint64_t *hot, uint64_t hot_pages, uint64_t *table,
		       uint64_t *hot_n, uint64_t *cold_n)
{
	uint64_t cursor = 0, h = 0, c = 0;
	for (uint64_t i = 0; i < s->header.page_count; i++) {
		uint64_t leaf = cxlcr_snapshot_leaf(s, i, &cursor);
		uint32_t tier = CXLCR_LEAF_TIER(leaf);
		if (tier == CXLCR_TIER_ZERO)
			table[i] = 0;
		else if (tier != CXLCR_TIER_CXL)
			return cxlcr_error("snapshot '%s' has cold pages already", s->region.name);
		else if (bit(hot, hot_pages, i))
			table[i] = CXLCR_LEAF(CXLCR_TIER_CXL, h++ * PAGE);
		else
			table[i] = CXLCR_LEAF(CXLCR_TIER_COLD, c++ * PAGE);
	}
	*hot_n = h;
	*cold_n = c;
	return 0;
}

/* Copies the hot pages into the data area and gives the cold ones to the
 * sink, noting each one's CRC; then makes the leaves absolute. */
static int move_pages(const struct cxlcr_snapshot *s, uint64_t *table, uint8_t *snap, uint64_t snap_offset,
		      const struct layout *l, uint32_t *crcs, const struct cxlcr_snapshot_cold *cold,
		      const struct cxlcr_cold_sink *sink)
{
	uint64_t cursor = 0;
	for (uint64_t i = 0; i < s->header.page_count; i++) {
		uint64_t leaf = table[i];
		uint32_t tier = CXLCR_LEAF_TIER(leaf);
		if (tier == CXLCR_TIER_ZERO)
			continue;
		const uint8_t *copy = cxlcr_snapshot_copy(s, CXLCR_LEAF_OFFSET(cxlcr_snapshot_leaf(s, i, &cursor)));
		if (!copy)
			return cxlcr_error("snapshot '%s': page %llu lies outside its data", s->region.name,
					   (unsigned long long)i);
		cxlcr_refresh(copy, PAGE);
		uint64_t k = CXLCR_LEAF_OFFSET(leaf) / PAGE;
		if (tier == CXLCR_TIER_CXL) {
			snap_copy_to_pool(snap + l->data_offset + k * PAGE, copy, PAGE);
			table[i] = CXLCR_LEAF(CXLCR_TIER_CXL, snap_offset + l->data_offset + k * PAGE);
		} else {
			crcs[k] = cxlcr_crc32c(0, copy, PAGE);
			if (sink->page(sink->ctx, k, copy) < 0)
				return -1;
			table[i] = CXLCR_LEAF(CXLCR_TIER_COLD, cold->extent_offset + k * PAGE);
		}
	}
	cxlcr_fence();
	return sink->end ? sink->end(sink->ctx) : 0;
}

int cxlcr_snapshot_split(struct cxlcr_pool *pool, uint64_t source, const uint64_t *hot, uint64_t hot_pages,
			 const char *name, const struct cxlcr_cold_sink *sink, struct cxlcr_snapshot_info *out)
{
	uint64_t t0 = cxlcr_mono_ns();
	struct cxlcr_snapshot s;
	if (!cxlcr_valid_name(name))
		return cxlcr_error("invalid snapshot name '%s'", name);
	if (cxlcr_snapshot_open(pool, source, &s) < 0)
		return -1;
	const struct cxlcr_snapshot_header *sh = &s.header;
	uint64_t pages = sh->page_count, hot_n = 0, cold_n = 0;
	uint64_t *table = calloc(pages, LEAF_SIZE);
	struct cxlcr_region r = { 0 };
	uint8_t *snap = NULL;
	int rc = -1;
	if (!table) {
		cxlcr_error("out of memory for a leaf table of %llu pages", (unsigned long long)pages);
		goto out;
	}
	if (plan_leaves(&s, hot, hot_pages, table, &hot_n, &cold_n) < 0)
		goto out;
	struct layout l;
	snap_plan_layout(pages, hot_n, cxlcr_snapshot_table_runs(table, pages, NULL, 0), &l);
	uint64_t crc_offset = l.arena_header_offset + CXLCR_SNAPSHOT_ARENA_HEADER_SIZE;
	l.region_size = round_up(crc_offset + cold_n * sizeof(uint32_t), CXLCR_POOL_ALIGN);
	if (cxlcr_region_alloc(pool, CXLCR_KIND_SNAPSHOT, name, l.region_size, &r) < 0)
		goto out;
	snap = cxlcr_pool_map(pool, r.offset, r.size, 0, 0);
	if (!snap)
		goto out;
	struct cxlcr_snapshot_cold cold = { 0 };
	if (cold_n) {
		if (sink->begin(sink->ctx, r.generation, cold_n, &cold) < 0)
			goto out;
		cold.owner = r.generation;
		cold.crc_offset = crc_offset;
	}
	uint32_t *crcs = (uint32_t *)(void *)(snap + crc_offset);
	uint64_t m0 = cxlcr_mono_ns();
	if (move_pages(&s, table, snap, r.offset, &l, crcs, &cold, sink) < 0)
		goto out;
	uint64_t m1 = cxlcr_mono_ns();
	if (cold_n) {
		cold.crc_table_crc = cxlcr_crc32c(0, crcs, cold_n * sizeof(uint32_t));
		cxlcr_publish(crcs, cold_n * sizeof(uint32_t));
		cold.checksum = cxlcr_snapshot_cold_checksum(&cold);
	}
	/* The source's arena header copy is of the same freeze as its pages. */
	struct source src = { 0 };
	src.region.generation = sh->arena_generation;
	src.region.owner_epoch = sh->arena_epoch;
	cxlcr_copy_field(src.region.name, sizeof(src.region.name), sh->arena_name);
	src.base = (uint8_t *)(uintptr_t)(s.base + sh->arena_header_offset);
	src.heap_address = sh->heap_address;
	src.heap_size = sh->heap_size;
	src.pages = pages;
	struct publish_extra x = { .own = hot_n, .cold = cold_n ? &cold : NULL };
	if (snap_publish_snapshot(pool, &src, &r, snap, &l, &x, table) < 0)
		goto out;
	if (out) {
		memset(out, 0, sizeof(*out));
		out->region_generation = r.generation;
		out->region_offset = r.offset;
		out->region_size = r.size;
		out->heap_address = sh->heap_address;
		out->heap_size = sh->heap_size;
		out->pages_total = pages;
		out->pages_cxl = out->pages_own = hot_n;
		out->pages_zero = pages - hot_n - cold_n;
		out->copy_ns = m1 - m0;
		out->total_ns = cxlcr_mono_ns() - t0;
	}
	rc = 0;
out:
	if (snap)
		munmap(snap, r.size);
	if (rc < 0 && r.generation) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		cxlcr_region_free(pool, r.generation); /* its cold extent goes with it */
		cxlcr_error("%s", why);
	}
	free(table);
	cxlcr_snapshot_close(&s);
	return rc;
}
