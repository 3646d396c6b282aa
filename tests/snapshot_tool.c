/*
 * snapshot_tool: snapshots of an arena for the tests of remote fork
 * (tests/t_rebase.sh), through the common/ API only.
 *
 *   snapshot_tool create ARENA NAME   snapshot arena ARENA (its region name)
 *                                     as NAME, publish it in the catalog,
 *                                     print its region generation
 *   snapshot_tool drop NAME           tombstone it (freed with its last borrower)
 *   snapshot_tool census              what a fork or a snapshot may leave behind,
 *                                     one line: "entries E borrows B snapshots S
 *                                     children C images I" (catalog entries in
 *                                     use, borrow slots claimed in them, regions
 *                                     of those kinds) - tests/t_fault_*.sh
 *                                     compare it before and after a fault
 *   snapshot_tool points SERVICE      where the pool space of SERVICE's snapshots
 *                                     (its recovery points) goes: one line per
 *                                     snapshot region ("REGION size S own O live
 *                                     L": its region's bytes, the pages copied
 *                                     into it, the pages of the newest point that
 *                                     are there), then "total regions N size S
 *                                     own O live L" (bench/points.py)
 *
 * The pool is $CXLCR_POOL. The caller freezes the service around create.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/pool.h"
#include "../common/snapshot.h"

/* Catalog entries in use and their borrow slots, and the regions a fork
 * or a snapshot makes. */
static int print_census(struct cxlcr_pool *pool)
{
	unsigned entries = 0, borrows = 0, kinds[8] = { 0 };
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		struct cxlcr_catalog_info e;
		if (cxlcr_catalog_entry(pool, i, &e) < 0)
			break; /* no catalog yet */
		if (e.state == CXLCR_CATALOG_FREE)
			continue;
		entries++;
		borrows += e.slots_claimed;
	}
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == CXLCR_REGION_LIVE && r->kind < 8)
			kinds[r->kind]++;
	}
	printf("entries %u borrows %u snapshots %u children %u images %u\n", entries, borrows,
	       kinds[CXLCR_KIND_SNAPSHOT], kinds[CXLCR_KIND_CHILD], kinds[CXLCR_KIND_IMAGES]);
	return 0;
}

/* The snapshot regions of service, and how many pages of its newest
 * point (the catalog's entry of its name, borrowed) lie in each. */
static int print_points(struct cxlcr_pool *pool, const char *service)
{
	static struct cxlcr_region regions[CXLCR_REGION_MAX];
	static uint64_t live[CXLCR_REGION_MAX];
	uint32_t n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && r.kind == CXLCR_KIND_SNAPSHOT && cxlcr_snapshot_named_for(r.name, service))
			regions[n++] = r;
	}
	struct cxlcr_borrow b;
	if (cxlcr_catalog_borrow(pool, service, NULL, &b) == 0) {
		struct cxlcr_snapshot s;
		if (cxlcr_snapshot_open(pool, b.snapshot_generation, &s) == 0) {
			uint64_t cursor = 0;
			for (uint64_t i = 0; i < s.header.page_count; i++) {
				uint64_t leaf = cxlcr_snapshot_leaf(&s, i, &cursor), at = CXLCR_LEAF_OFFSET(leaf);
				if (CXLCR_LEAF_TIER(leaf) != CXLCR_TIER_CXL)
					continue;
				for (uint32_t k = 0; k < n; k++)
					if (at >= regions[k].offset && at < regions[k].offset + regions[k].size) {
						live[k]++;
						break;
					}
			}
			cxlcr_snapshot_close(&s);
		}
		cxlcr_catalog_return(pool, &b);
	}
	uint64_t size = 0, own = 0, pages = 0;
	for (uint32_t k = 0; k < n; k++) {
		/* Its header alone: a retired point has let go of its bases,
		 * and cannot be opened as a snapshot any more (nor can a
		 * draft, which is none yet: 0). */
		uint64_t o = 0;
		const struct cxlcr_snapshot_header *h =
			cxlcr_pool_map(pool, regions[k].offset, sizeof(*h), 0, 0);
		if (h) {
			if (h->magic == CXLCR_SNAPSHOT_MAGIC && h->complete == CXLCR_SNAPSHOT_COMPLETE)
				o = h->pages_own;
			munmap((void *)(uintptr_t)h, sizeof(*h));
		}
		printf("%s size %" PRIu64 " own %" PRIu64 " live %" PRIu64 "\n", regions[k].name, regions[k].size, o,
		       live[k]);
		size += regions[k].size;
		own += o;
		pages += live[k];
	}
	printf("total regions %u size %" PRIu64 " own %" PRIu64 " live %" PRIu64 "\n", n, size, own, pages);
	return 0;
}

int main(int argc, char **argv)
{
	bool create = argc == 4 && !strcmp(argv[1], "create"), drop = argc == 3 && !strcmp(argv[1], "drop");
	bool census = argc == 2 && !strcmp(argv[1], "census"), points = argc == 3 && !strcmp(argv[1], "points");
	if (!create && !drop && !census && !points) {
		fprintf(stderr, "usage: snapshot_tool create ARENA NAME | drop NAME | census | points SERVICE\n");
		return 2;
	}
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		fprintf(stderr, "snapshot_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	int rc = -1;
	if (census) {
		rc = print_census(&pool);
	} else if (points) {
		rc = print_points(&pool, argv[2]);
	} else if (drop) {
		bool freed;
		rc = cxlcr_catalog_tombstone(&pool, argv[2], &freed);
		if (rc == 0)
			printf("%s\n", freed ? "freed" : "tombstoned");
	} else {
		struct cxlcr_region arena;
		struct cxlcr_snapshot_info info;
		if (!cxlcr_region_find(&pool, CXLCR_KIND_ARENA, argv[2], &arena))
			cxlcr_error("no arena called %s", argv[2]);
		else if (cxlcr_snapshot_create(&pool, arena.generation, argv[3], &info) == 0) {
			rc = cxlcr_catalog_publish(&pool, argv[3], info.region_generation, NULL);
			if (rc == 0)
				printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", info.region_generation,
				       info.pages_cxl, info.pages_zero);
		}
	}
	if (rc < 0)
		fprintf(stderr, "snapshot_tool: %s\n", cxlcr_last_error());
	cxlcr_pool_close(&pool);
	return rc < 0 ? 1 : 0;
}
