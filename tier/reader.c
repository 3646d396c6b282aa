/*
 * Reading any page of a snapshot, cold ones by RMA from their memory
 * server: the copy-mode pager's entry point (tier.h). A cold page is
 * checked against the CRC-32C its snapshot keeps for it before anyone
 * sees it, and a page whose extent is no longer handed out under the same
 * server incarnation (the server restarted and lost its memory, or the
 * extent was freed) is refused: never a wrong page, never zeros in place
 * of data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/checksum.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "internal.h"
#include "tier.h"

#define PAGE 4096u

struct tier_reader {
	const struct cxlcr_snapshot *s;
	struct cxlcr_snapshot_cold cold;   /* checked copy */
	const uint32_t *crcs;              /* in the snapshot's mapping */
	struct conn conn;
	bool connected;
	uint64_t max_run;                  /* pages in one tier_read_run() */
	uint64_t rma_ns, check_ns;         /* tier_reader_times() */
};

/* The snapshot's cold part: its checksum, the CRC table inside the region
 * and whole, and the extent still handed out to this region. */
static int check_cold(const struct cxlcr_snapshot *s, struct tier_reader *r)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	const char *name = s->region.name;
	r->cold = ((const struct cxlcr_snapshot_header *)(const void *)s->base)->cold;
	const struct cxlcr_snapshot_cold *c = &r->cold;
	if (c->checksum != cxlcr_snapshot_cold_checksum(c) || c->owner != s->region.generation ||
	    c->extent_size < h->pages_cold * PAGE || c->extent_offset % PAGE)
		return cxlcr_error("snapshot '%s' is corrupt (its cold part does not check)", name);
	uint64_t table = h->pages_cold * sizeof(uint32_t);
	if (c->crc_offset < h->arena_header_offset + h->arena_header_size || c->crc_offset > s->region.size ||
	    table > s->region.size - c->crc_offset)
		return cxlcr_error("snapshot '%s' is corrupt (its cold checksums lie outside its region)", name);
	r->crcs = (const uint32_t *)(const void *)(s->base + c->crc_offset);
	cxlcr_refresh(r->crcs, table);
	if (cxlcr_crc32c(0, r->crcs, table) != c->crc_table_crc)
		return cxlcr_error("snapshot '%s' is corrupt (its cold checksum table does not check)", name);
	struct tier_table t;
	int rc = table_open(s->pool, false, &t);
	if (rc != 0)
		return rc < 0 ? -1 : cxlcr_error("snapshot '%s': its cold extent is missing (no tier table)", name);
	bool held = false;
	for (uint32_t k = 0; k < CXLCR_TIER_EXTENTS && !held; k++) {
		struct cxlcr_tier_extent e = t.extents[k];
		held = e.owner == c->owner && e.server == c->server && e.offset == c->extent_offset &&
		       e.server_incarnation == c->server_incarnation && table_extent_live(&t, &e);
	}
	table_close(&t);
	if (!held)
		return cxlcr_error("snapshot '%s': its cold extent is missing (memory server %u restarted, went "
				   "down, or the extent was freed)",
				   name, c->server);
	return 0;
}

/* bulk: the background fetch's reader, on the server's bulk endpoint
 * (format.h), so that a fault's reads never queue behind its runs. */
static int reader_open(const struct cxlcr_snapshot *s, uint64_t max_run, bool bulk, struct tier_reader **out)
{
	struct tier_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return cxlcr_error("out of memory");
	r->s = s;
	r->max_run = max_run ? max_run : 1;
	if (s->header.pages_cold) {
		if (check_cold(s, r) < 0 || conn_open(s->pool, r->cold.server, r->max_run * PAGE, bulk, &r->conn) < 0) {
			free(r);
			return -1;
		}
		r->connected = true;
		if (r->conn.server.incarnation != r->cold.server_incarnation) {
			tier_reader_close(r);
			return cxlcr_error("snapshot '%s': its cold extent is missing (memory server %s restarted)",
					   s->region.name, r->conn.server.name);
		}
	}
	*out = r;
	return 0;
}

int tier_reader_open_run(const struct cxlcr_snapshot *s, uint64_t max_run, struct tier_reader **out)
{
	return reader_open(s, max_run, true, out);
}

int tier_reader_open(const struct cxlcr_snapshot *s, struct tier_reader **out)
{
	return reader_open(s, TIER_READ_RUN, false, out);
}

int tier_read_page(struct tier_reader *r, uint64_t page_index, void *dst)
{
	const struct cxlcr_snapshot *s = r->s;
	uint32_t tier;
	uint64_t offset;
	if (cxlcr_snapshot_page_offset(s, page_index, &tier, &offset) < 0)
		return -1;
	if (tier != CXLCR_TIER_COLD)
		return cxlcr_snapshot_read_page(s, page_index, dst);
	if (!r->connected || offset < r->cold.extent_offset ||
	    (offset - r->cold.extent_offset) / PAGE >= s->header.pages_cold)
		return cxlcr_error("snapshot '%s': page %llu's cold copy lies outside its extent", s->region.name,
				   (unsigned long long)page_index);
	uint64_t k = (offset - r->cold.extent_offset) / PAGE;
	if (conn_rma(&r->conn, false, 0, PAGE, offset) < 0)
		return cxlcr_error("snapshot '%s': page %llu: %s", s->region.name, (unsigned long long)page_index,
				   cxlcr_last_error());
	if (cxlcr_crc32c(0, r->conn.fab.buf, PAGE) != r->crcs[k])
		return cxlcr_error("snapshot '%s': page %llu came back from memory server %s corrupt (checksum "
				   "mismatch); refused",
				   s->region.name, (unsigned long long)page_index, r->conn.server.name);
	memcpy(dst, r->conn.fab.buf, PAGE);
	return 0;
}

int tier_read_run(struct tier_reader *r, uint64_t first_page, uint64_t n, const void **data)
{
	const struct cxlcr_snapshot *s = r->s;
	uint32_t tier;
	uint64_t offset = 0, at;
	if (n == 0 || n > r->max_run)
		return cxlcr_error("snapshot '%s': %llu pages in one read", s->region.name, (unsigned long long)n);
	/* One run: cold pages whose copies lie one after the other on the
	 * server. */
	for (uint64_t i = 0; i < n; i++) {
		if (cxlcr_snapshot_page_offset(s, first_page + i, &tier, &at) < 0)
			return -1;
		if (i == 0)
			offset = at;
		if (tier != CXLCR_TIER_COLD || at != offset + i * PAGE)
			return cxlcr_error("snapshot '%s': pages %llu..%llu are not one cold run", s->region.name,
					   (unsigned long long)first_page, (unsigned long long)(first_page + n - 1));
	}
	if (!r->connected || offset < r->cold.extent_offset ||
	    (offset - r->cold.extent_offset) / PAGE + n > s->header.pages_cold)
		return cxlcr_error("snapshot '%s': page %llu's cold copy lies outside its extent", s->region.name,
				   (unsigned long long)first_page);
	uint64_t k = (offset - r->cold.extent_offset) / PAGE;
	uint64_t t0 = cxlcr_mono_ns();
	if (conn_rma(&r->conn, false, 0, n * PAGE, offset) < 0)
		return cxlcr_error("snapshot '%s': pages %llu..%llu: %s", s->region.name,
				   (unsigned long long)first_page, (unsigned long long)(first_page + n - 1),
				   cxlcr_last_error());
	uint64_t t1 = cxlcr_mono_ns();
	r->rma_ns += t1 - t0;
	const uint8_t *buf = r->conn.fab.buf;
	for (uint64_t i = 0; i < n; i++)
		if (cxlcr_crc32c(0, buf + i * PAGE, PAGE) != r->crcs[k + i])
			return cxlcr_error("snapshot '%s': page %llu came back from memory server %s corrupt "
					   "(checksum mismatch); refused",
					   s->region.name, (unsigned long long)(first_page + i), r->conn.server.name);
	r->check_ns += cxlcr_mono_ns() - t1;
	*data = buf;
	return 0;
}

void tier_reader_times(const struct tier_reader *r, uint64_t *rma_ns, uint64_t *check_ns)
{
	*rma_ns = r ? r->rma_ns : 0;
	*check_ns = r ? r->check_ns : 0;
}

void tier_reader_close(struct tier_reader *r)
{
	if (!r)
		return;
	if (r->connected)
		conn_close(&r->conn);
	free(r);
}
