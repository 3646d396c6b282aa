/*
 * snapshot_tool: snapshots of an arena for the tests of remote fork
 * (tests/t_rebase.sh), through the common/ API only.
 *
 *   snapshot_tool create ARENA NAME   snapshot arena ARENA (its region name)
 *                                     as NAME, publish it in the catalog,
 *                                     print its region generation
 *   snapshot_tool drop NAME           tombstone it (freed with its last borrower)
 *
 * The pool is $CXLCR_POOL. The caller freezes the service around create.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/pool.h"
#include "../common/snapshot.h"

int main(int argc, char **argv)
{
	bool create = argc == 4 && !strcmp(argv[1], "create"), drop = argc == 3 && !strcmp(argv[1], "drop");
	if (!create && !drop) {
		fprintf(stderr, "usage: snapshot_tool create ARENA NAME | drop NAME\n");
		return 2;
	}
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		fprintf(stderr, "snapshot_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	int rc = -1;
	if (drop) {
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
