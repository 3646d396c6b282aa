/*
 * The cold tier's table in the pool (tier/table.c, tier/format.h), on a
 * pool file of its own under /dev/shm: memory servers register (a new
 * incarnation each time), extents are handed out first fit and belong to
 * the region that owns them (free once it is), a server that is down or
 * full hands out nothing, and a corrupt entry is refused, never used.
 */
#include <sys/mman.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../tier/internal.h"
#include "../tier/tier.h"
#include "test.h"

#define KiB 1024ull

static char dir[64], path[96];

static void remove_dir(void)
{
	unlink(path);
	rmdir(dir);
}

static uint64_t region(struct cxlcr_pool *pool, const char *name)
{
	struct cxlcr_region r;
	CHECK(cxlcr_region_alloc(pool, CXLCR_KIND_TIER, name, 1, &r) == 0, "%s", cxlcr_last_error());
	return r.generation;
}

static uint32_t register_server(struct cxlcr_pool *pool, const char *name, uint64_t size)
{
	struct cxlcr_tier_server s = { .size = size, .addr_len = 16 };
	snprintf(s.name, sizeof(s.name), "%s", name);
	snprintf(s.provider, sizeof(s.provider), "tcp;ofi_rxm");
	int i = tier_server_register(pool, &s);
	CHECK(i >= 0, "%s", cxlcr_last_error());
	return (uint32_t)i;
}

static struct tier_server_info info(struct cxlcr_pool *pool, uint32_t i)
{
	struct tier_server_info s;
	CHECK(tier_server_get(pool, i, &s) == 0, "%s", cxlcr_last_error());
	return s;
}

static uint64_t alloc(struct cxlcr_pool *pool, uint64_t size, uint64_t owner)
{
	struct cxlcr_tier_extent e;
	uint32_t server;
	CHECK(tier_extent_alloc(pool, size, owner, &server, &e) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(e.size, size);
	return e.offset;
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/cxlcr-tier-table-XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/pool", dir);
	test_on_failure(remove_dir);
	struct cxlcr_pool pool;
	CHECK(cxlcr_pool_format(path, 512 * MiB, true, NULL) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());

	SAY("no table: no memory server to hand out anything");
	struct cxlcr_tier_extent e;
	uint32_t server;
	CHECK(tier_extent_alloc(&pool, 4 * KiB, 1, &server, &e) < 0);
	CHECK(strstr(cxlcr_last_error(), "no memory server"), "%s", cxlcr_last_error());

	SAY("registering: an entry per name, a new incarnation on every start");
	uint32_t m0 = register_server(&pool, "m0", 1 * MiB);
	CHECK_EQ(info(&pool, m0).incarnation, 1);
	CHECK_EQ(register_server(&pool, "m0", 1 * MiB), m0);
	CHECK_EQ(info(&pool, m0).incarnation, 2);

	SAY("first fit; an extent is free once its owner's region is");
	uint64_t r1 = region(&pool, "t.1"), r2 = region(&pool, "t.2"), r3 = region(&pool, "t.3");
	CHECK_EQ(alloc(&pool, 256 * KiB, r1), 0);
	CHECK_EQ(alloc(&pool, 256 * KiB, r2), 256 * KiB);
	CHECK_EQ(alloc(&pool, 256 * KiB, r3), 512 * KiB);
	CHECK_EQ(info(&pool, m0).used, 768 * KiB);
	CHECK(cxlcr_region_free(&pool, r2) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(info(&pool, m0).used, 512 * KiB);
	uint64_t r4 = region(&pool, "t.4");
	CHECK(tier_extent_alloc(&pool, 300 * KiB, r4, &server, &e) < 0, "300 KiB fit in no gap of 256 KiB");
	CHECK(strstr(cxlcr_last_error(), "free"), "%s", cxlcr_last_error());
	CHECK_EQ(alloc(&pool, 200 * KiB, r4), 256 * KiB);
	CHECK_EQ(info(&pool, m0).extents, 3);

	SAY("a restarted server (new incarnation) has lost every extent");
	register_server(&pool, "m0", 1 * MiB);
	CHECK_EQ(info(&pool, m0).used, 0);
	CHECK_EQ(alloc(&pool, 1 * MiB, r1), 0);

	SAY("a server that is down hands out nothing; a second one does");
	struct tier_server_info s = info(&pool, m0);
	CHECK(tier_server_unregister(&pool, m0, s.incarnation) == 0, "%s", cxlcr_last_error());
	CHECK(!info(&pool, m0).up);
	CHECK(tier_extent_alloc(&pool, 4 * KiB, r3, &server, &e) < 0);
	CHECK(strstr(cxlcr_last_error(), "no memory server up"), "%s", cxlcr_last_error());
	uint32_t m1 = register_server(&pool, "m1", 64 * KiB);
	CHECK(m1 != m0);
	CHECK(tier_extent_alloc(&pool, 4 * KiB, r3, &server, &e) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(server, m1);

	SAY("a corrupt server entry is refused with one line and never used");
	struct tier_table t;
	CHECK(table_open(&pool, false, &t) == 0, "%s", cxlcr_last_error());
	t.servers[m1].name[0] ^= 1;
	struct tier_server_info bad;
	CHECK(tier_server_get(&pool, m1, &bad) < 0);
	CHECK(strstr(cxlcr_last_error(), "corrupt") && !strchr(cxlcr_last_error(), '\n'), "%s", cxlcr_last_error());
	CHECK(tier_extent_alloc(&pool, 4 * KiB, r3, &server, &e) < 0, "the corrupt server was used");
	t.servers[m1].name[0] ^= 1;
	table_close(&t);
	CHECK_EQ(info(&pool, m1).used, 4 * KiB);

	cxlcr_pool_close(&pool);
	remove_dir();
	printf("tier_table_test: all checks passed\n");
	return 0;
}
