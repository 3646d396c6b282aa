/*
 * The pool code of common/ (format, open, regions, the allocation lock),
 * linked directly, on pool files in a fresh directory under /dev/shm.
 *
 *   pool_test                     runs the tests
 *   pool_test --format PATH SIZE  formats PATH as an empty pool (tests/run.sh
 *                                 uses it to make the pools of the other tests)
 *   pool_test --free-time [SIZE [DIR]]  how long freeing a written region of
 *                                 SIZE (default 4G) in a pool under DIR
 *                                 (default /dev/shm) takes, and holds the lock
 */
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "../common/checksum.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "test.h"

#define POOL_SIZE      (8ull << 30)   /* sparse: only what the tests touch is allocated */
#define SMALL_POOL     (256ull << 20)
#define CHILDREN       8
#define PER_CHILD      50
#define TAG_SIZE       4096           /* each concurrent region starts with its name */
#define TEST_LEASE_NS  (200ull * 1000000ull) /* the lease of the stalled-holder tests */

static char dir[64];
static char path[128];

/* Writes len bytes at off of a file. */
static void poke(const char *file, off_t off, const void *data, size_t len)
{
	int fd = open(file, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0, "%s: %s", file, strerror(errno));
	CHECK(pwrite(fd, data, len, off) == (ssize_t)len, "%s: %s", file, strerror(errno));
	close(fd);
}

static void peek(const char *file, off_t off, void *data, size_t len)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "%s: %s", file, strerror(errno));
	CHECK(pread(fd, data, len, off) == (ssize_t)len, "%s: %s", file, strerror(errno));
	close(fd);
}

static void fresh_pool(uint64_t size, struct cxlcr_pool *pool)
{
	CHECK(cxlcr_pool_format(path, size, true, NULL) == 0, "format: %s", cxlcr_last_error());
	CHECK(cxlcr_pool_open(pool, path) == 0, "open: %s", cxlcr_last_error());
}

static void test_format_open(void)
{
	struct cxlcr_pool pool;
	SAY("format a %llu GiB pool file and open it", POOL_SIZE >> 30);
	CHECK(cxlcr_pool_format(path, POOL_SIZE, false, NULL) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	struct cxlcr_superblock *sb = pool.sb;
	CHECK(sb->magic == CXLCR_POOL_MAGIC);
	CHECK_EQ(sb->version, CXLCR_POOL_VERSION);
	CHECK_EQ(sb->size, POOL_SIZE);
	CHECK_EQ(pool.device_size, POOL_SIZE);
	CHECK(!pool.devdax);
	static const uint8_t zero[16];
	CHECK(memcmp(sb->uuid, zero, sizeof(zero)) != 0, "uuid is all zero");
	CHECK_EQ(sb->lock.owner, 0);
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		CHECK_EQ(pool.table[i].state, CXLCR_REGION_FREE);
	uint8_t uuid[16];
	memcpy(uuid, sb->uuid, sizeof(uuid));
	cxlcr_pool_close(&pool);

	SAY("a second open sees the same uuid; a re-format of an empty pool makes a new one");
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	CHECK(memcmp(pool.sb->uuid, uuid, sizeof(uuid)) == 0);
	cxlcr_pool_close(&pool);
	CHECK(cxlcr_pool_format(path, POOL_SIZE, false, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(memcmp(pool.sb->uuid, uuid, sizeof(uuid)) != 0, "re-format kept the uuid");
	cxlcr_pool_close(&pool);

	SAY("a size that is not a multiple of 2 MiB is rounded up; below the minimum is refused");
	CHECK(cxlcr_pool_format(path, SMALL_POOL + 1, false, &pool) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(pool.sb->size, SMALL_POOL + CXLCR_POOL_ALIGN);
	cxlcr_pool_close(&pool);
	CHECK_ERROR(cxlcr_pool_format(path, CXLCR_POOL_MIN_SIZE - CXLCR_POOL_ALIGN, false, NULL), "too small");

	SAY("a file formatted as a devdax stand-in keeps a device's rules; a plain file does not");
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	CHECK(!pool.dax_rules);
	CHECK_EQ(cxlcr_pool_may_map_private(&pool), 0);
	cxlcr_pool_close(&pool);
	CHECK(cxlcr_pool_format_as(path, SMALL_POOL, false, CXLCR_POOL_F_AS_DEVDAX, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(pool.dax_rules && !pool.devdax);
	cxlcr_pool_close(&pool);
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	CHECK(pool.dax_rules && !pool.devdax, "the devdax rules did not survive a reopen");
	CHECK_EQ(pool.sb->flags, CXLCR_POOL_F_AS_DEVDAX);
	CHECK_ERROR(cxlcr_pool_may_map_private(&pool), "cannot be mapped privately");
	cxlcr_pool_close(&pool);
	/* A re-format without them is a plain file pool again. */
	CHECK(cxlcr_pool_format(path, SMALL_POOL, false, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(!pool.dax_rules, "a re-format without the rules kept them");
	cxlcr_pool_close(&pool);
}

/* Bytes of the pool file that hold memory. */
static uint64_t held_bytes(const struct cxlcr_pool *pool)
{
	struct stat st;
	CHECK(fstat(pool->fd, &st) == 0, "%s", strerror(errno));
	return (uint64_t)st.st_blocks * 512;
}

/* A region of size full of byte, freed again: its space (the first that
 * fits: on an empty pool, the same each time). */
static struct cxlcr_region write_and_free(struct cxlcr_pool *pool, uint64_t size, uint8_t byte)
{
	struct cxlcr_region r;
	CHECK(cxlcr_region_alloc(pool, CXLCR_KIND_SNAPSHOT, "warm", size, &r) == 0, "%s", cxlcr_last_error());
	uint8_t *m = cxlcr_pool_map(pool, r.offset, r.size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	memset(m, byte, r.size);
	munmap(m, r.size);
	CHECK(cxlcr_region_free(pool, r.generation) == 0, "%s", cxlcr_last_error());
	return r;
}

/* Writes a region full of 0xa5 and frees it; then a region of the same
 * size takes the same space (first fit over an empty pool) and must read
 * zero, whatever the pool did with the memory in between. */
static void write_free_realloc(struct cxlcr_pool *pool, uint64_t size, uint64_t *held_after_free)
{
	struct cxlcr_region r = write_and_free(pool, size, 0xa5), again;
	*held_after_free = held_bytes(pool);
	CHECK(cxlcr_region_alloc(pool, CXLCR_KIND_SNAPSHOT, "warm", size, &again) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(again.offset, r.offset);
	uint8_t *m = cxlcr_pool_map(pool, again.offset, again.size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	for (uint64_t i = 0; i < again.size; i += 8)
		CHECK(*(uint64_t *)(m + i) == 0, "byte %llu of a new region on freed space is not zero",
		      (unsigned long long)i);
	munmap(m, again.size);
	CHECK(cxlcr_region_free(pool, again.generation) == 0, "%s", cxlcr_last_error());
}

static void test_keep_memory(void)
{
	struct cxlcr_pool pool;
	const uint64_t size = 32ull << 20;
	uint64_t held;

	SAY("a plain pool file gives freed memory back; a new region on that space reads zero");
	fresh_pool(SMALL_POOL, &pool);
	CHECK(!pool.keeps_memory);
	uint64_t empty = held_bytes(&pool);
	write_free_realloc(&pool, size, &held);
	CHECK(held < empty + size / 2, "a freed region's memory stayed: %llu bytes held, %llu empty",
	      (unsigned long long)held, (unsigned long long)empty);
	cxlcr_pool_close(&pool);

	SAY("formatted --keep-memory it keeps it (and says so after a reopen); a new region there still reads zero");
	CHECK(cxlcr_pool_format_as(path, SMALL_POOL, true, CXLCR_POOL_F_KEEP_MEMORY, &pool) == 0, "%s",
	      cxlcr_last_error());
	CHECK(pool.keeps_memory && !pool.dax_rules);
	cxlcr_pool_close(&pool);
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	CHECK(pool.keeps_memory, "keeping memory did not survive a reopen");
	empty = held_bytes(&pool);
	write_free_realloc(&pool, size, &held);
	CHECK(held >= empty + size, "a freed region's memory was given back: %llu bytes held, %llu empty",
	      (unsigned long long)held, (unsigned long long)empty);

	SAY("an uncleared region on that space holds what the freed one wrote (a snapshot draft writes it all)");
	struct cxlcr_region r = write_and_free(&pool, size, 0x5a), again;
	CHECK(cxlcr_region_alloc_uncleared(&pool, CXLCR_KIND_SNAPSHOT, "warm", size, &again) == 0, "%s",
	      cxlcr_last_error());
	CHECK_EQ(again.offset, r.offset);
	uint8_t *m = cxlcr_pool_map(&pool, again.offset, again.size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	CHECK(m[0] == 0x5a && m[again.size - 1] == 0x5a, "an uncleared region was cleared");
	munmap(m, again.size);
	CHECK(cxlcr_region_free(&pool, again.generation) == 0, "%s", cxlcr_last_error());
	CHECK_ERROR(cxlcr_pool_format_as(path, SMALL_POOL, true, 0x80, NULL), "unknown format flags");
	cxlcr_pool_close(&pool);
}

static void test_refused(void)
{
	struct cxlcr_pool pool;
	char other[160];

	SAY("open of a missing file fails");
	snprintf(other, sizeof(other), "%s/missing", dir);
	CHECK_ERROR(cxlcr_pool_open(&pool, other), "No such file");
	CHECK(strstr(cxlcr_last_error(), other), "error does not name the file: %s", cxlcr_last_error());

	SAY("a file of random bytes is refused");
	snprintf(other, sizeof(other), "%s/random", dir);
	{
		static uint8_t junk[4 << 20];
		for (size_t off = 0; off < sizeof(junk); off += 256)
			CHECK(getrandom(junk + off, 256, 0) == 256);
		int fd = open(other, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		CHECK(fd >= 0 && write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
		close(fd);
		CHECK_ERROR(cxlcr_pool_open(&pool, other), "not a cxlcr pool");
		unlink(other);
	}

	SAY("a flipped byte anywhere in the checksummed superblock is refused");
	CHECK(cxlcr_pool_format(path, SMALL_POOL, true, NULL) == 0, "%s", cxlcr_last_error());
	size_t from = offsetof(struct cxlcr_superblock, uuid);  /* after magic and version */
	size_t to = offsetof(struct cxlcr_superblock, checksum) + sizeof(uint32_t);
	for (size_t off = from; off < to; off++) {
		uint8_t b;
		peek(path, (off_t)off, &b, 1);
		b ^= 0x10;
		poke(path, (off_t)off, &b, 1);
		CHECK_ERROR(cxlcr_pool_open(&pool, path), "checksum");
		b ^= 0x10;
		poke(path, (off_t)off, &b, 1);
	}
	CHECK(cxlcr_pool_open(&pool, path) == 0, "restored superblock: %s", cxlcr_last_error());
	cxlcr_pool_close(&pool);

	SAY("a flipped byte of the magic is refused as not a pool");
	{
		uint8_t b;
		peek(path, 3, &b, 1);
		b ^= 1;
		poke(path, 3, &b, 1);
		CHECK_ERROR(cxlcr_pool_open(&pool, path), "not a cxlcr pool");
		b ^= 1;
		poke(path, 3, &b, 1);
	}

	SAY("a newer format version (with a valid checksum) is refused, naming the version");
	{
		struct cxlcr_superblock sb;
		peek(path, 0, &sb, sizeof(sb));
		sb.version = CXLCR_POOL_VERSION + 1;
		sb.checksum = cxlcr_crc32c(0, &sb, offsetof(struct cxlcr_superblock, checksum));
		poke(path, 0, &sb, sizeof(sb));
		char want[32];
		snprintf(want, sizeof(want), "version %u", CXLCR_POOL_VERSION + 1);
		CHECK_ERROR(cxlcr_pool_open(&pool, path), want);
	}

	SAY("a truncated pool is refused (short of sb->size, of the metadata, of a superblock)");
	CHECK(cxlcr_pool_format(path, SMALL_POOL, true, NULL) == 0, "%s", cxlcr_last_error());
	static const off_t cuts[] = { SMALL_POOL - CXLCR_POOL_ALIGN, SMALL_POOL - 1, CXLCR_DATA_OFFSET,
				      CXLCR_DATA_OFFSET - 4096, 1000, 0 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		CHECK(truncate(path, cuts[i]) == 0, "%s", strerror(errno));
		CHECK_ERROR(cxlcr_pool_open(&pool, path), "truncated");
	}
	SAY("a device longer than sb->size is fine");
	CHECK(cxlcr_pool_format(path, SMALL_POOL, true, NULL) == 0, "%s", cxlcr_last_error());
	CHECK(truncate(path, SMALL_POOL + CXLCR_POOL_ALIGN) == 0);
	CHECK(cxlcr_pool_open(&pool, path) == 0, "longer device than sb->size: %s", cxlcr_last_error());
	cxlcr_pool_close(&pool);
}

/* The table slot of the region with this generation (-1: none). */
static int slot_of(struct cxlcr_pool *pool, uint64_t generation)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		if (pool->table[i].state != CXLCR_REGION_FREE && pool->table[i].generation == generation)
			return (int)i;
	return -1;
}

static void test_regions(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region r, r2;

	SAY("format refuses a pool that holds a region unless forced");
	fresh_pool(POOL_SIZE, &pool);
	uint8_t uuid[16];
	memcpy(uuid, pool.sb->uuid, sizeof(uuid));
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "busy", 4 * MiB, &r) == 0, "%s", cxlcr_last_error());
	cxlcr_pool_close(&pool);
	CHECK_ERROR(cxlcr_pool_format(path, POOL_SIZE, false, NULL), "holds regions");
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	CHECK(memcmp(pool.sb->uuid, uuid, sizeof(uuid)) == 0, "refused format changed the pool");
	CHECK(cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "busy", NULL), "refused format lost the region");
	cxlcr_pool_close(&pool);
	CHECK(cxlcr_pool_format(path, POOL_SIZE, true, &pool) == 0, "forced: %s", cxlcr_last_error());
	CHECK(!cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "busy", NULL), "forced format kept the region");
	CHECK(memcmp(pool.sb->uuid, uuid, sizeof(uuid)) != 0);

	SAY("region_alloc: size rounded up to 2 MiB, aligned offset in the data area");
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "a", 3 * MiB, &r) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(r.state, CXLCR_REGION_LIVE);
	CHECK_EQ(r.kind, CXLCR_KIND_ARENA);
	CHECK_EQ(r.size, 4 * MiB);
	CHECK(r.offset >= CXLCR_DATA_OFFSET && r.offset % CXLCR_POOL_ALIGN == 0);
	CHECK(r.generation > 0);
	CHECK(!strcmp(r.name, "a"));
	CHECK_EQ(r.owner_pid, 0);
	struct cxlcr_region found;
	CHECK(cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "a", &found) && found.generation == r.generation &&
	      found.offset == r.offset);

	SAY("a duplicate region name fails; an invalid name fails");
	CHECK_ERROR(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "a", 2 * MiB, &r2), "already exists");
	CHECK_ERROR(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "a/b", 2 * MiB, &r2), "invalid name");
	CHECK_ERROR(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "", 2 * MiB, &r2), "invalid name");

	SAY("a region reads as zero: write one, free it, allocate the same space again");
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "z", 8 * MiB, &r2) == 0, "%s", cxlcr_last_error());
	uint8_t *m = cxlcr_pool_map(&pool, r2.offset, r2.size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	for (size_t i = 0; i < r2.size; i++)
		CHECK(m[i] == 0, "new region has %#x at byte %zu", m[i], i);
	memset(m, 0xab, r2.size);
	CHECK(cxlcr_region_free(&pool, r2.generation) == 0, "%s", cxlcr_last_error());
	CHECK(!cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "z", NULL));
	CHECK_ERROR(cxlcr_region_free(&pool, r2.generation), "is gone");

	SAY("what find hands out is a copy: it stays the region found when that is freed and its table slot"
	    " reused by another (callers copied from a pointer into the table before)");
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "x", 8 * MiB, &r2) == 0, "%s", cxlcr_last_error());
	int x_slot = slot_of(&pool, r2.generation);
	struct cxlcr_region x;
	CHECK(cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "x", &x) && x.generation == r2.generation);
	CHECK(cxlcr_region_free(&pool, r2.generation) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_SNAPSHOT, "y", 4 * MiB, &r2) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(slot_of(&pool, r2.generation), x_slot);
	CHECK(!strcmp(x.name, "x") && x.kind == CXLCR_KIND_ARENA && x.size == 8 * MiB && x.generation != r2.generation,
	      "the copy of x became %s", x.name);
	CHECK(!cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "y", NULL) && !cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "x", NULL));
	CHECK(cxlcr_region_free(&pool, r2.generation) == 0, "%s", cxlcr_last_error());
	/* A process that still had the region mapped writes on after the free:
	 * the next allocation of that space must clear it, not rely on the
	 * free having done so. */
	memset(m, 0xcd, r2.size);
	CHECK(munmap(m, r2.size) == 0);
	struct cxlcr_region r3;
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "z2", 8 * MiB, &r3) == 0, "%s", cxlcr_last_error());
	CHECK(r3.offset == r2.offset, "first fit did not reuse the freed space (%llu, was %llu)",
	      (unsigned long long)r3.offset, (unsigned long long)r2.offset);
	CHECK(r3.generation > r2.generation, "generation reused");
	m = cxlcr_pool_map(&pool, r3.offset, r3.size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	for (size_t i = 0; i < r3.size; i++)
		CHECK(m[i] == 0, "re-allocated region has %#x at byte %zu", m[i], i);
	CHECK(munmap(m, r3.size) == 0);

	SAY("pool_map with align places address + head on the alignment");
	m = cxlcr_pool_map(&pool, r3.offset, r3.size, 64 * MiB, 2 * MiB);
	CHECK(m, "%s", cxlcr_last_error());
	CHECK(((uintptr_t)m + 2 * MiB) % (64 * MiB) == 0, "mapped at %p", (void *)m);
	CHECK(munmap(m, r3.size) == 0);
	CHECK(cxlcr_pool_map(&pool, POOL_SIZE - 2 * MiB, 4 * MiB, 0, 0) == NULL);
	CHECK(strstr(cxlcr_last_error(), "beyond the pool"), "%s", cxlcr_last_error());

	SAY("claim: a free region is claimed, another pid is refused naming the owner, the same pid may re-claim");
	pid_t me = getpid();
	const char *host = cxlcr_host_name();
	CHECK(cxlcr_region_claim(&pool, r.generation, me, host, "pool_test", &r2) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(r2.owner_pid, me);
	CHECK(!strcmp(r2.owner_host, host));
	CHECK(!strcmp(r2.command, "pool_test"));
	uint64_t epoch = r2.owner_epoch;
	char want[64];
	snprintf(want, sizeof(want), "belongs to pid %d", (int)me);
	CHECK_ERROR(cxlcr_region_claim(&pool, r.generation, me + 1, host, "other", &r2), want);
	CHECK(strstr(cxlcr_last_error(), host), "error does not name the host: %s", cxlcr_last_error());
	CHECK_ERROR(cxlcr_region_claim(&pool, r.generation, me, "another-host", "other", &r2), want);
	CHECK(cxlcr_region_claim(&pool, r.generation, me, host, "other", &r2) == 0, "%s", cxlcr_last_error());
	CHECK(r2.owner_epoch > epoch, "epoch not bumped by a claim");
	CHECK(!strcmp(r2.command, "pool_test"), "re-claim replaced the command: %s", r2.command);
	SAY("after set_owner(0) another pid may claim; claim of a freed region fails");
	CHECK(cxlcr_region_set_owner(&pool, r.generation, 0, "", NULL) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_claim(&pool, r.generation, me + 1, host, NULL, &r2) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(r2.owner_pid, me + 1);
	CHECK(cxlcr_region_free(&pool, r3.generation) == 0, "%s", cxlcr_last_error());
	CHECK_ERROR(cxlcr_region_claim(&pool, r3.generation, me, host, NULL, &r2), "is gone");

	SAY("out of space: a region bigger than what is left fails");
	CHECK_ERROR(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "huge", POOL_SIZE, &r2), "no free space");
	uint64_t left = POOL_SIZE - CXLCR_DATA_OFFSET - r.size;
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "rest", left, &r2) == 0,
	      "all that is left: %s", cxlcr_last_error());
	CHECK_EQ(r2.offset + r2.size, POOL_SIZE);
	CHECK_ERROR(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "one-more", 1, &r3), "no free space");
	CHECK_EQ(pool.sb->lock.owner, 0);
	cxlcr_pool_close(&pool);
}

static void test_dead_holder(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region r;
	SAY("a lock left behind by a dead holder is taken over after the lease (%llu s)",
	    CXLCR_POOL_LOCK_LEASE_NS / 1000000000ull);
	fresh_pool(SMALL_POOL, &pool);
	__atomic_store_n(&pool.sb->lock.owner, 0x5eadbeefull << CXLCR_LOCK_RENEWAL_BITS, __ATOMIC_RELEASE);
	uint64_t start = cxlcr_mono_ns();
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "after-death", 2 * MiB, &r) == 0, "%s",
	      cxlcr_last_error());
	uint64_t waited = cxlcr_mono_ns() - start;
	SAY("took the lock over after %.1f s", (double)waited / 1e9);
	CHECK(waited >= CXLCR_POOL_LOCK_LEASE_NS, "the live-looking holder was displaced after %.1f s",
	      (double)waited / 1e9);
	CHECK(waited < 3 * CXLCR_POOL_LOCK_LEASE_NS);
	CHECK_EQ(pool.sb->lock.owner, 0);
	CHECK(cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "after-death", NULL));
	cxlcr_pool_close(&pool);
}

/* One of the concurrent allocators: CHILDREN of these run at once. */
static int child(int index, int go_fd)
{
	char c;
	/* Wait until every child is forked, then all start together. */
	if (read(go_fd, &c, 1) < 0)
		return 2;
	struct cxlcr_pool pool;
	CHECK(cxlcr_pool_open(&pool, path) == 0, "child %d: %s", index, cxlcr_last_error());
	uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ cxlcr_mono_ns();
	uint64_t gen[PER_CHILD];
	for (int i = 0; i < PER_CHILD; i++) {
		char name[CXLCR_NAME_MAX];
		snprintf(name, sizeof(name), "c%d-r%d", index, i);
		uint64_t size = rng_range(&rng, 2 * MiB, 8 * MiB);
		struct cxlcr_region r;
		CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, name, size, &r) == 0,
		      "child %d: %s: %s", index, name, cxlcr_last_error());
		CHECK(r.size >= size && r.size < size + CXLCR_POOL_ALIGN, "child %d: %s: %llu bytes for %llu",
		      index, name, (unsigned long long)r.size, (unsigned long long)size);
		gen[i] = r.generation;
		/* Tag the region: an overlapping one would overwrite the tag. */
		char *m = cxlcr_pool_map(&pool, r.offset, TAG_SIZE, 0, 0);
		CHECK(m, "child %d: %s", index, cxlcr_last_error());
		snprintf(m, TAG_SIZE, "%s", name);
		munmap(m, TAG_SIZE);
	}
	for (int i = 1; i < PER_CHILD; i += 2)
		CHECK(cxlcr_region_free(&pool, gen[i]) == 0, "child %d: %s", index, cxlcr_last_error());
	cxlcr_pool_close(&pool);
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct cxlcr_region *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* A lock word that names its holder's host (CXLCR_LOCK_HOST): the holder
 * keeps the lock for the lock's whole lease, as one that names no host,
 * unless the waiter has judged that host dead (a fence of it): then it
 * loses it at once, and the waiter says from which host. */
static void test_judged_dead_holder(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_host_reg live, dead;
	struct cxlcr_region r;
	SAY("a holder of a host the waiter judged dead loses the lock at once; one of another host keeps it");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_host_join(&pool, "live", "", 0, 75000000, &live) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "dead", "", 0, 75000000, &dead) == 0, "%s", cxlcr_last_error());
	uint64_t word = (0x1234ull | ((uint64_t)(live.index + 1) << (CXLCR_LOCK_HOST_SHIFT - CXLCR_LOCK_RENEWAL_BITS)))
			<< CXLCR_LOCK_RENEWAL_BITS;
	__atomic_store_n(&pool.sb->lock.owner, word, __ATOMIC_RELEASE);
	pool.judged_dead_entry = dead.index + 1;
	uint64_t start = cxlcr_mono_ns();
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "after-live", 2 * MiB, &r) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_mono_ns() - start >= CXLCR_POOL_LOCK_LEASE_NS, "the holder of a host not judged dead was displaced");
	CHECK_EQ(pool.lock_taken_from_host, 0);
	word = (0x5678ull | ((uint64_t)(dead.index + 1) << (CXLCR_LOCK_HOST_SHIFT - CXLCR_LOCK_RENEWAL_BITS)))
	       << CXLCR_LOCK_RENEWAL_BITS;
	__atomic_store_n(&pool.sb->lock.owner, word, __ATOMIC_RELEASE);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "after-dead", 2 * MiB, &r) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(pool.lock_taken_from_host, dead.index + 1);
	pool.judged_dead_entry = 0;
	CHECK_EQ(pool.sb->lock.owner, 0);
	cxlcr_pool_close(&pool);
}

static void test_concurrent(void)
{
	struct cxlcr_pool pool;
	SAY("%d processes allocate %d regions of 2-8 MiB each at once, then free half of them",
	    CHILDREN, PER_CHILD);
	fresh_pool(POOL_SIZE, &pool);
	uint64_t gen_before = pool.sb->generation;

	int go[2];
	CHECK(pipe(go) == 0);
	pid_t pids[CHILDREN];
	fflush(stdout);
	for (int i = 0; i < CHILDREN; i++) {
		pids[i] = fork();
		CHECK(pids[i] >= 0, "fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(go[1]);
			_exit(child(i, go[0]));
		}
	}
	close(go[0]);
	close(go[1]);  /* end of file: every child starts */
	int failed = 0;
	for (int i = 0; i < CHILDREN; i++) {
		int status;
		CHECK(waitpid(pids[i], &status, 0) == pids[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child %d: status %#x\n", i, status);
			failed++;
		}
	}
	CHECK(failed == 0, "%d of the allocating processes failed", failed);

	SAY("no two live regions overlap, all lie in [data offset, size), each expected name once");
	static struct cxlcr_region live[CXLCR_REGION_MAX];
	size_t n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		if (pool.table[i].state == CXLCR_REGION_LIVE)
			live[n++] = pool.table[i];
	CHECK_EQ(n, CHILDREN * PER_CHILD / 2);
	qsort(live, n, sizeof(live[0]), by_offset);
	static int seen[CHILDREN][PER_CHILD];
	for (size_t i = 0; i < n; i++) {
		struct cxlcr_region *r = &live[i];
		CHECK(r->offset >= CXLCR_DATA_OFFSET && r->offset + r->size <= pool.sb->size,
		      "%s at %llu+%llu is outside the data area", r->name,
		      (unsigned long long)r->offset, (unsigned long long)r->size);
		CHECK(r->offset % CXLCR_POOL_ALIGN == 0 && r->size % CXLCR_POOL_ALIGN == 0);
		CHECK(r->size >= 2 * MiB && r->size <= 8 * MiB, "%s: size %llu", r->name,
		      (unsigned long long)r->size);
		if (i > 0)
			CHECK(live[i - 1].offset + live[i - 1].size <= r->offset,
			      "%s (%llu+%llu) overlaps %s (%llu)", live[i - 1].name,
			      (unsigned long long)live[i - 1].offset, (unsigned long long)live[i - 1].size,
			      r->name, (unsigned long long)r->offset);
		int c, k;
		char tail;
		CHECK(sscanf(r->name, "c%d-r%d%c", &c, &k, &tail) == 2 && c >= 0 && c < CHILDREN &&
		      k >= 0 && k < PER_CHILD, "unexpected region %s", r->name);
		CHECK(k % 2 == 0, "region %s was freed but is live", r->name);
		seen[c][k]++;
		CHECK(r->generation > gen_before && r->generation <= gen_before + CHILDREN * PER_CHILD,
		      "%s: generation %llu", r->name, (unsigned long long)r->generation);
		if (i > 0)
			for (size_t j = 0; j < i; j++)
				CHECK(live[j].generation != r->generation, "generation %llu used twice",
				      (unsigned long long)r->generation);
		/* The region's tag is its own name. */
		char tag[CXLCR_NAME_MAX];
		peek(path, (off_t)r->offset, tag, sizeof(tag));
		CHECK(!strncmp(tag, r->name, sizeof(tag)), "region %s holds the tag of %.*s", r->name,
		      (int)sizeof(tag), tag);
	}
	for (int c = 0; c < CHILDREN; c++)
		for (int k = 0; k < PER_CHILD; k += 2)
			CHECK(seen[c][k] == 1, "region c%d-r%d is live %d times", c, k, seen[c][k]);
	SAY("the lock word is free and every allocation got a generation");
	CHECK_EQ(pool.sb->lock.owner, 0);
	CHECK_EQ(pool.sb->lock.takeovers, 0);
	CHECK_EQ(pool.sb->generation, gen_before + CHILDREN * PER_CHILD);
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		CHECK(pool.table[i].state == CXLCR_REGION_FREE || pool.table[i].state == CXLCR_REGION_LIVE,
		      "entry %u left in state %u", i, pool.table[i].state);
	cxlcr_pool_close(&pool);
}

/* --- A holder that stalls past its lease (SIGSTOP, a frozen cgroup, a
 * paused VM) while another process takes its lock over. --------------- */

static pid_t stalled_pid;   /* a stopped holder, killed if the test fails */
static int stall_fd = -1;
static const char *stall_point;

/* The stalling holder's test hook: at its point, once, it tells the parent
 * that it got there and stops itself. */
static void stall_here(struct cxlcr_pool *pool, const char *point)
{
	(void)pool;
	if (!stall_point || strcmp(point, stall_point))
		return;
	stall_point = NULL;
	char c = 's';
	if (write(stall_fd, &c, 1) != 1)
		_exit(5);
	raise(SIGSTOP);
}

/* The stalling holder: 'a' allocates "stale" and stalls right before it
 * publishes it, 'o' rewrites the owner of region generation and stalls
 * right before its commit check, 'u' stalls before it lets go of the lock,
 * 'f' frees region generation and stalls once it has let go of the lock,
 * 'h' stalls in the middle of rewriting the owner (past its commit check).
 * Once resumed, 'a', 'o' and 'u' must fail, saying the lock was taken
 * over; 'f' and 'h' must succeed ('h' had committed). */
static int stalling_holder(char op, const char *point, uint64_t generation, int fd)
{
	struct cxlcr_pool pool;
	CHECK(cxlcr_pool_open(&pool, path) == 0, "holder: %s", cxlcr_last_error());
	stall_fd = fd;
	stall_point = point;
	pool.test_hook = stall_here;
	int rc;
	switch (op) {
	case 'a': rc = cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "stale", 64 * MiB, NULL); break;
	case 'o':
	case 'h': rc = cxlcr_region_set_owner(&pool, generation, 4242, "stale-host", "stale"); break;
	case 'f': rc = cxlcr_region_free(&pool, generation); break;
	default:
		rc = cxlcr_pool_lock(&pool);
		CHECK(rc == 0, "holder: %s", cxlcr_last_error());
		rc = cxlcr_pool_unlock(&pool);
		break;
	}
	CHECK(stall_point == NULL, "holder: never reached %s", point);
	if (op == 'f' || op == 'h') {
		CHECK(rc == 0, "holder: %s", cxlcr_last_error());
	} else {
		CHECK(rc < 0, "the stalled holder's '%c' succeeded after its lock was taken over", op);
		CHECK(strstr(cxlcr_last_error(), "pool lock was taken over while this process held it"),
		      "holder: %s", cxlcr_last_error());
	}
	cxlcr_pool_close(&pool);
	return 0;
}

/* Starts a stalling holder and returns once it is stopped at its point. */
static pid_t start_stalled(char op, const char *point, uint64_t generation)
{
	int p[2];
	CHECK(pipe(p) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		_exit(stalling_holder(op, point, generation, p[1]));
	}
	close(p[1]);
	char c;
	CHECK(read(p[0], &c, 1) == 1, "the holder did not get to %s", point);
	close(p[0]);
	stalled_pid = pid;
	int status;
	CHECK(waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status), "holder: status %#x", status);
	return pid;
}

static void resume(pid_t pid, const char *what)
{
	int status;
	CHECK(kill(pid, SIGCONT) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	stalled_pid = 0;
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the stalled holder ended with status %#x",
	      what, status);
}

/* No two live regions overlap, and no entry is left half allocated or
 * half freed. */
static void check_table(struct cxlcr_pool *pool)
{
	static struct cxlcr_region live[CXLCR_REGION_MAX];
	size_t n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		CHECK(r->state == CXLCR_REGION_FREE || r->state == CXLCR_REGION_LIVE,
		      "entry %u (%s) left in state %u", i, r->name, r->state);
		if (r->state == CXLCR_REGION_LIVE)
			live[n++] = *r;
	}
	qsort(live, n, sizeof(live[0]), by_offset);
	for (size_t i = 1; i < n; i++)
		CHECK(live[i - 1].offset + live[i - 1].size <= live[i].offset, "%s (%llu+%llu) overlaps %s (%llu)",
		      live[i - 1].name, (unsigned long long)live[i - 1].offset,
		      (unsigned long long)live[i - 1].size, live[i].name, (unsigned long long)live[i].offset);
}

static void test_stalled_holder(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region a, b;
	fresh_pool(SMALL_POOL, &pool);
	pool.lock_lease_ns = TEST_LEASE_NS;

	SAY("a holder stopped right before publishing a region loses the lock after the lease (%llu ms);"
	    " the new holder allocates, and the old one's publish fails", TEST_LEASE_NS / 1000000);
	pid_t pid = start_stalled('a', "alloc:publish", 0);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "fresh", 64 * MiB, &a) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(pool.sb->lock.takeovers, 1);
	resume(pid, "alloc");
	CHECK(!cxlcr_region_find(&pool, CXLCR_KIND_ARENA, "stale", NULL), "the stalled holder's region is live");
	check_table(&pool);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "after", 64 * MiB, &b) == 0, "%s", cxlcr_last_error());
	check_table(&pool);

	SAY("a holder stopped right before rewriting an owner: its write fails once resumed");
	pid = start_stalled('o', "commit", a.generation);
	CHECK(cxlcr_region_set_owner(&pool, a.generation, 1234, "new-holder", "fresh") == 0, "%s",
	      cxlcr_last_error());
	resume(pid, "set_owner");
	CHECK(cxlcr_region_get(&pool, a.generation, &b) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(b.owner_pid, 1234);
	CHECK(!strcmp(b.owner_host, "new-holder"), "owner host %s", b.owner_host);
	CHECK_EQ(pool.sb->lock.takeovers, 2);

	SAY("a holder stopped in the middle of rewriting an entry: a reader without the lock does not copy"
	    " the half-written entry while the rewrite may still go on; it copies once it took the lock over");
	uint64_t takeovers = pool.sb->lock.takeovers;
	pid = start_stalled('h', "change", a.generation);
	CHECK(cxlcr_region_get(&pool, a.generation, &b) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(pool.sb->lock.takeovers, takeovers + 1);
	CHECK(b.seq % 2 == 0 && pool.table[slot_of(&pool, a.generation)].seq % 2 == 0, "seq left odd: %u", b.seq);
	resume(pid, "half rewrite");
	CHECK(cxlcr_region_get(&pool, a.generation, &b) == 0 && b.seq % 2 == 0, "seq %u", b.seq);
	CHECK(!strcmp(b.owner_host, "stale-host") && b.owner_pid == 4242, "%d on %s", b.owner_pid, b.owner_host);
	CHECK(cxlcr_region_set_owner(&pool, a.generation, 1234, "new-holder", "fresh") == 0, "%s",
	      cxlcr_last_error());
	takeovers = pool.sb->lock.takeovers;

	SAY("a holder stopped before letting go: its release fails and says so");
	pid = start_stalled('u', "unlocking", 0);
	CHECK(cxlcr_pool_lock(&pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_pool_unlock(&pool) == 0, "%s", cxlcr_last_error());
	resume(pid, "unlock");
	CHECK_EQ(pool.sb->lock.owner, 0);
	CHECK_EQ(pool.sb->lock.takeovers, takeovers + 1);
	check_table(&pool);

	SAY("a free gives the memory back without the lock: stopped there, its space stays taken, "
	    "and others allocate without waiting for a lease");
	pid = start_stalled('f', "free:unlocked", a.generation);
	CHECK(cxlcr_region_get(&pool, a.generation, &b) < 0, "the region being freed is still live");
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "meanwhile", 64 * MiB, &b) == 0, "%s",
	      cxlcr_last_error());
	CHECK(b.offset + b.size <= a.offset || b.offset >= a.offset + a.size,
	      "allocated %llu+%llu inside the region being freed (%llu+%llu)", (unsigned long long)b.offset,
	      (unsigned long long)b.size, (unsigned long long)a.offset, (unsigned long long)a.size);
	CHECK_EQ(pool.sb->lock.takeovers, takeovers + 1);
	resume(pid, "free");
	check_table(&pool);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "reuse", 64 * MiB, &b) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(b.offset, a.offset);
	CHECK_EQ(pool.sb->lock.owner, 0);
	cxlcr_pool_close(&pool);
}

/* After a failure: leave nothing behind in /dev/shm, and no stopped holder. */
static void remove_dir(void)
{
	if (stalled_pid > 0)
		kill(stalled_pid, SIGKILL);
	static const char *const names[] = { "pool", "random", "missing" };
	char f[160];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(f, sizeof(f), "%s/%s", dir, names[i]);
		unlink(f);
	}
	rmdir(dir);
}

static int format_only(const char *file, const char *size_s)
{
	uint64_t size;
	if (cxlcr_parse_size(size_s, &size) < 0) {
		fprintf(stderr, "pool_test: %s is not a size\n", size_s);
		return 2;
	}
	if (cxlcr_pool_format(file, size, false, NULL) < 0) {
		fprintf(stderr, "pool_test: %s\n", cxlcr_last_error());
		return 1;
	}
	return 0;
}

/* --free-time: the longest the lock is held between "locked" and
 * "unlocking" (the test hook), on this process's clock. */
static uint64_t held_since, held_max;

static void time_lock(struct cxlcr_pool *pool, const char *point)
{
	(void)pool;
	uint64_t now = cxlcr_mono_ns();
	if (!strcmp(point, "locked")) {
		held_since = now;
	} else if (!strcmp(point, "unlocking") && held_since) {
		if (now - held_since > held_max)
			held_max = now - held_since;
		held_since = 0;
	}
}

/* Writes every 4 KiB page of region r, so that its memory is there to give back. */
static void fill(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	char *m = cxlcr_pool_map(pool, r->offset, r->size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	for (uint64_t off = 0; off < r->size; off += 4096)
		m[off] = 1;
	CHECK(munmap(m, r->size) == 0);
}

/* How long freeing a written region takes, and how long the pool lock is
 * held meanwhile: as a free that clears the memory under the lock (lock,
 * punch, unlock: what cxlcr_region_free did before), and as
 * cxlcr_region_free() does it now. */
static int free_time(const char *size_s, const char *under)
{
	uint64_t size;
	if (cxlcr_parse_size(size_s, &size) < 0) {
		fprintf(stderr, "pool_test: %s is not a size\n", size_s);
		return 2;
	}
	CHECK((size_t)snprintf(dir, sizeof(dir), "%s/cxlcr-pool-test.XXXXXX", under) < sizeof(dir));
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/pool", dir);
	test_on_failure(remove_dir);
	struct cxlcr_pool pool;
	struct cxlcr_region r;
	fresh_pool(size + CXLCR_DATA_OFFSET + CXLCR_POOL_MIN_SIZE, &pool);
	pool.test_hook = time_lock;
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "big", size, &r) == 0, "%s", cxlcr_last_error());
	char sz[32];
	cxlcr_format_size(r.size, sz, sizeof(sz));

	fill(&pool, &r);
	held_max = 0;
	uint64_t t = cxlcr_mono_ns();
	CHECK(cxlcr_pool_lock(&pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_pool_zero(&pool, r.offset, r.size) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_pool_unlock(&pool) == 0, "%s", cxlcr_last_error());
	double old_all = (double)(cxlcr_mono_ns() - t) / 1e6, old_held = (double)held_max / 1e6;

	fill(&pool, &r);
	held_max = 0;
	t = cxlcr_mono_ns();
	CHECK(cxlcr_region_free(&pool, r.generation) == 0, "%s", cxlcr_last_error());
	double new_all = (double)(cxlcr_mono_ns() - t) / 1e6, new_held = (double)held_max / 1e6;

	printf("free of a written %s region, memory cleared under the lock: %.3f ms, lock held %.3f ms\n",
	       sz, old_all, old_held);
	printf("free of a written %s region, cxlcr_region_free():           %.3f ms, lock held %.3f ms at most\n",
	       sz, new_all, new_held);
	cxlcr_pool_close(&pool);
	CHECK(unlink(path) == 0, "%s", strerror(errno));
	CHECK(rmdir(dir) == 0, "%s: %s", dir, strerror(errno));
	return 0;
}

/* A restore of a tree takes all its arenas at once or none: one whose
 * epoch moved makes the whole claim fail and leaves the others as they
 * were (the plugin once took them one at a time, and a refusal of a later
 * one left the earlier ones with a tree about to be killed). */
static void test_claim_all_or_none(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region a, b, now[2];
	SAY("claiming the arenas of a tree: all or none");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "parent", 4 * MiB, &a) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "child", 4 * MiB, &b) == 0, "%s", cxlcr_last_error());
	uint64_t gens[2] = { a.generation, b.generation };
	uint64_t from[2] = { a.owner_epoch, b.owner_epoch + 1 }; /* the child's moved on */
	int32_t pids[2] = { 1234, 1235 };
	CHECK_ERROR(cxlcr_region_claim_epochs(&pool, 2, gens, from, pids, "h9", now), "changed owner");
	CHECK(cxlcr_region_get(&pool, a.generation, &now[0]) == 0 && now[0].owner_epoch == a.owner_epoch &&
	      now[0].owner_pid == a.owner_pid, "a refused claim took the parent's arena (epoch %llu)",
	      (unsigned long long)now[0].owner_epoch);
	from[1] = b.owner_epoch;
	CHECK(cxlcr_region_claim_epochs(&pool, 2, gens, from, pids, "h9", now) == 0, "%s", cxlcr_last_error());
	CHECK(now[0].owner_epoch == a.owner_epoch + 1 && now[1].owner_epoch == b.owner_epoch + 1 &&
	      now[0].owner_pid == 1234 && now[1].owner_pid == 1235 && !strcmp(now[1].owner_host, "h9"));
	CHECK(cxlcr_region_free(&pool, a.generation) == 0 && cxlcr_region_free(&pool, b.generation) == 0);
	cxlcr_pool_close(&pool);
}

/* A region's owner is its pid and that pid's start time: a pid that now
 * runs another process (one started at another time) is not the owner,
 * and an owner on another host is never judged from here. */
static void test_owner_start(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_region a, now;
	const char *here = cxlcr_host_name();
	SAY("a region's owner: its pid and that pid's start time");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_IMAGES, "owned.1", 1 * MiB, &a) == 0, "%s", cxlcr_last_error());
	pid_t child = fork();
	CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(cxlcr_region_claim_epoch(&pool, a.generation, a.owner_epoch, child, here, &now) == 0, "%s",
	      cxlcr_last_error());
	uint64_t start;
	CHECK(cxlcr_process_start(child, &start) && now.owner_start == ((uint32_t)start ? (uint32_t)start : 1),
	      "owner_start %u, the child started at %llu", now.owner_start, (unsigned long long)start);
	CHECK(!cxlcr_region_owner_gone(&now, here), "a running owner was taken for gone");
	struct cxlcr_region reused = now;
	reused.owner_start++;
	CHECK(cxlcr_region_owner_gone(&reused, here), "pid %d, started at another time, was taken for the owner",
	      (int)child);
	CHECK(!cxlcr_region_owner_gone(&reused, "elsewhere"), "another host's owner was judged from here");
	kill(child, SIGKILL);
	CHECK(waitpid(child, NULL, 0) == child);
	CHECK(cxlcr_region_owner_gone(&now, here), "a dead owner was taken for running");
	/* Another host's pid cannot be looked at here: its start is not known. */
	CHECK(cxlcr_region_claim_epoch(&pool, a.generation, now.owner_epoch, getpid(), "elsewhere", &now) == 0,
	      "%s", cxlcr_last_error());
	CHECK(now.owner_start == 0, "another host's owner got start %u", now.owner_start);
	CHECK(cxlcr_region_free(&pool, a.generation) == 0);
	cxlcr_pool_close(&pool);
}

/* A maker killed right after it allocated (a recovery's winner making a
 * fresh arena, a fork worker its child's region): a region allocated owned
 * is its host's from the instant it is live, so that host's clean-up finds
 * it; one allocated and then given an owner is nobody's in between. */
static void test_born_owned(void)
{
	struct cxlcr_pool pool;
	const char *here = cxlcr_host_name();
	SAY("a region allocated owned has its owner from its first instant");
	fresh_pool(POOL_SIZE, &pool);
	for (int owned = 0; owned <= 1; owned++) {
		pid_t maker = fork();
		CHECK(maker >= 0, "fork: %s", strerror(errno));
		if (maker == 0) {
			struct cxlcr_pool mine;
			if (cxlcr_pool_open(&mine, path) < 0)
				_exit(3);
			int rc = owned ? cxlcr_region_alloc_owned(&mine, CXLCR_KIND_QUARANTINE, "born", 1 * MiB, getpid(),
								  here, "maker", NULL)
				       : cxlcr_region_alloc(&mine, CXLCR_KIND_QUARANTINE, "born", 1 * MiB, NULL);
			if (rc < 0)
				_exit(4);
			raise(SIGKILL); /* before any set_owner */
			_exit(5);
		}
		int status;
		CHECK(waitpid(maker, &status, 0) == maker);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the maker ended with status %d", status);
		struct cxlcr_region r;
		CHECK(cxlcr_region_find(&pool, CXLCR_KIND_QUARANTINE, "born", &r), "the made region is not live");
		if (owned) {
			CHECK(!strcmp(r.owner_host, here) && r.owner_pid == maker && !strcmp(r.command, "maker") &&
				      r.owner_epoch == 1 && r.owner_start != 0,
			      "born owned, the region's owner is pid %d of '%s' ('%s', epoch %llu, start %u)", r.owner_pid,
			      r.owner_host, r.command, (unsigned long long)r.owner_epoch, r.owner_start);
			CHECK(cxlcr_region_owner_gone(&r, here), "the dead maker was taken for running");
		} else {
			CHECK(!r.owner_host[0] && r.owner_pid == 0, "a plain allocation had an owner");
		}
		CHECK(cxlcr_region_free(&pool, r.generation) == 0, "%s", cxlcr_last_error());
	}
	cxlcr_pool_close(&pool);
}

/* A fresh arena's regions being made (recovery/fresh_arena.c): they may
 * share a live arena's name, nobody may claim them, and their commit makes
 * them of their kind, owned by nobody, with the epoch they were born with
 * (what tells a made arena that no restore took over, ended_runs.c), and
 * never a second live arena of one name. */
static unsigned also_calls; /* what a commit wrote with it (recovery/marks.c's marks) */
static void also(void *arg)
{
	(void)arg;
	also_calls++;
}

static int commit1(struct cxlcr_pool *pool, uint64_t generation)
{
	uint32_t to = CXLCR_KIND_ARENA;
	return cxlcr_region_commit_made_and(pool, 1, &generation, &to, also, NULL);
}

static void test_commit_made(void)
{
	struct cxlcr_pool pool;
	const char *here = cxlcr_host_name();
	SAY("a region being made is nobody's to claim, and its commit lets its maker go");
	fresh_pool(POOL_SIZE, &pool);
	struct cxlcr_region live, made, again, now;
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "svc", 1 * MiB, &live) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc_owned(&pool, CXLCR_KIND_MAKING, "svc", 1 * MiB, getpid(), here, "redis", &made) == 0,
	      "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc_owned(&pool, CXLCR_KIND_MAKING, "svc", 1 * MiB, getpid(), here, "redis", &again) == 0,
	      "two regions being made of one name: %s", cxlcr_last_error());
	CHECK(made.owner_pid == getpid() && made.owner_start != 0 && made.owner_epoch == CXLCR_EPOCH_BORN,
	      "the maker is not the made region's owner (pid %d, start %u)", made.owner_pid, made.owner_start);
	CHECK_ERROR(cxlcr_region_claim_epoch(&pool, made.generation, made.owner_epoch, 4242, here, &now),
		    "still being made");
	CHECK_ERROR(commit1(&pool, made.generation), "already exists");
	CHECK_ERROR(commit1(&pool, live.generation), "not 11");
	CHECK(also_calls == 0, "what a refused commit writes with it was written");
	CHECK(cxlcr_region_free(&pool, live.generation) == 0, "%s", cxlcr_last_error());
	CHECK(commit1(&pool, made.generation) == 0, "%s", cxlcr_last_error());
	CHECK(also_calls == 1, "what a commit writes with it was written %u times", also_calls);
	CHECK(cxlcr_region_get(&pool, made.generation, &now) == 0, "%s", cxlcr_last_error());
	CHECK(now.kind == CXLCR_KIND_ARENA && now.owner_pid == 0 && now.owner_start == 0 &&
		      now.owner_epoch == CXLCR_EPOCH_BORN && !strcmp(now.owner_host, here),
	      "committed: kind %u, pid %d, start %u, epoch %llu, host '%s'", now.kind, now.owner_pid, now.owner_start,
	      (unsigned long long)now.owner_epoch, now.owner_host);
	CHECK_ERROR(commit1(&pool, again.generation), "already exists");
	CHECK(cxlcr_region_claim_epoch(&pool, made.generation, CXLCR_EPOCH_BORN, getpid(), here, &now) == 0 &&
		      now.owner_epoch == CXLCR_EPOCH_BORN + 1,
	      "a committed arena could not be claimed: %s", cxlcr_last_error());
	/* All or none: an extent and an arena whose name is taken. */
	struct cxlcr_region ext;
	CHECK(cxlcr_region_alloc_owned(&pool, CXLCR_KIND_MAKING, "svc.ext1", 1 * MiB, getpid(), here, "redis", &ext) == 0,
	      "%s", cxlcr_last_error());
	uint64_t both[2] = { again.generation, ext.generation };
	uint32_t kinds[2] = { CXLCR_KIND_ARENA, CXLCR_KIND_EXTENT };
	CHECK_ERROR(cxlcr_region_commit_made(&pool, 2, both, kinds), "already exists");
	CHECK(cxlcr_region_get(&pool, ext.generation, &now) == 0 && now.kind == CXLCR_KIND_MAKING &&
		      now.owner_pid == getpid(),
	      "a commit that failed made one of its regions (kind %u)", now.kind);
	cxlcr_pool_close(&pool);
}

/* A recovery whose winner died is taken over (recovery/takeover.c): the
 * old winner's process, guarded by its fence word, changes nothing in the
 * region table once the word moved on; a quarantined region is never
 * claimed, and no change of kind makes two live arenas of one name. */
/* A live region gives its tail back (what a published snapshot's trim
 * does): the space is free for the next allocation at once, the region
 * keeps its head and its generation, and it never grows or takes a size
 * the table cannot hold. */
static void test_shrink(void)
{
	struct cxlcr_pool pool;
	SAY("a region shrinks: its tail is free space, its head stays");
	fresh_pool(POOL_SIZE, &pool);
	struct cxlcr_region a, b, c;
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_QUARANTINE, "head", 8 * MiB, &a) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_QUARANTINE, "after", 2 * MiB, &b) == 0, "%s", cxlcr_last_error());
	CHECK(b.offset == a.offset + a.size, "the pool is not filled from its start");
	uint8_t *m = cxlcr_pool_map(&pool, a.offset, 2 * MiB, 0, 0);
	CHECK(m);
	memset(m, 0x5a, 2 * MiB);
	CHECK(cxlcr_region_shrink(&pool, a.generation, 3 * MiB) < 0, "shrank to a size that is not aligned");
	CHECK(cxlcr_region_shrink(&pool, a.generation, 16 * MiB) < 0, "grew");
	CHECK(cxlcr_region_shrink(&pool, a.generation, 0) < 0, "shrank to nothing");
	CHECK(cxlcr_region_shrink(&pool, a.generation, 2 * MiB) == 0, "%s", cxlcr_last_error());
	struct cxlcr_region now;
	CHECK(cxlcr_region_get(&pool, a.generation, &now) == 0 && now.size == 2 * MiB && now.offset == a.offset,
	      "after the shrink: %llu bytes at %llu", (unsigned long long)now.size, (unsigned long long)now.offset);
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_QUARANTINE, "tail", 6 * MiB, &c) == 0, "%s", cxlcr_last_error());
	CHECK(c.offset == a.offset + 2 * MiB, "the freed tail was not handed out (at %llu, tail at %llu)",
	      (unsigned long long)c.offset, (unsigned long long)(a.offset + 2 * MiB));
	for (size_t i = 0; i < 2 * MiB; i++)
		CHECK(m[i] == 0x5a, "the head changed at byte %zu", i);
	munmap(m, 2 * MiB);
	CHECK(cxlcr_region_shrink(&pool, 12345, 2 * MiB) < 0, "a region that does not exist shrank");
	CHECK(cxlcr_region_free(&pool, a.generation) == 0 && cxlcr_region_free(&pool, b.generation) == 0 &&
		      cxlcr_region_free(&pool, c.generation) == 0,
	      "%s", cxlcr_last_error());
	cxlcr_pool_close(&pool);
}

static void test_fence_guard(void)
{
	struct cxlcr_pool pool, old;
	struct cxlcr_host_reg dead, w, s;
	struct cxlcr_hosts_map m;
	struct cxlcr_region q, q2, a, now;
	uint64_t f, f2;
	SAY("a recovery taken over: the old winner's guarded changes stop");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_host_join(&pool, "dead", "", 0, 75000000, &dead) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "winner", "", 0, 75000000, &w) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "survivor", "", 0, 75000000, &s) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence(&pool, dead.index, dead.incarnation, w.index, &f) == 1, "the fence was not won");
	CHECK(cxlcr_pool_open(&old, path) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence_guard(&old, dead.index, f, &m) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&old, CXLCR_KIND_QUARANTINE, "svc", 4 * MiB, &q) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&old, CXLCR_KIND_QUARANTINE, "svc", 4 * MiB, &q2) == 0,
	      "two quarantined regions may share a name: %s", cxlcr_last_error());
	CHECK(cxlcr_host_fence_take_over(&pool, dead.index, f, (uint32_t)(f & 0xff) - 1, s.index, &f2) == 1, "the take-over was not won");
	CHECK(f2 != f && (f2 & 0xff) == s.index + 1, "fence %llu after the take-over", (unsigned long long)f2);
	CHECK(cxlcr_host_fence_take_over(&pool, dead.index, f, (uint32_t)(f & 0xff) - 1, w.index, &f) == 0, "a second take-over of one fence won");
	CHECK_ERROR(cxlcr_region_set_kind(&old, q.generation, CXLCR_KIND_QUARANTINE, CXLCR_KIND_ARENA), "fenced");
	CHECK_ERROR(cxlcr_region_alloc(&old, CXLCR_KIND_ARENA, "svc2", 4 * MiB, &a), "fenced");
	CHECK_ERROR(cxlcr_region_free(&old, q.generation), "fenced");
	CHECK(cxlcr_region_get(&pool, q.generation, &now) == 0 && now.kind == CXLCR_KIND_QUARANTINE,
	      "the old winner's region changed after the take-over");
	cxlcr_host_fence_unguard(&old, &m);
	cxlcr_pool_close(&old);
	/* The new winner commits one; the other stays quarantined. */
	CHECK(cxlcr_region_set_kind(&pool, q2.generation, CXLCR_KIND_QUARANTINE, CXLCR_KIND_ARENA) == 0, "%s",
	      cxlcr_last_error());
	CHECK_ERROR(cxlcr_region_set_kind(&pool, q.generation, CXLCR_KIND_QUARANTINE, CXLCR_KIND_ARENA),
		    "already exists");
	int32_t pid = 4321;
	CHECK_ERROR(cxlcr_region_claim_epochs(&pool, 1, &q.generation, &q.owner_epoch, &pid, "h9", &now), "quarantined");
	/* Done: nothing more to take over. */
	cxlcr_host_fence_done(&pool, dead.index, f2);
	CHECK(cxlcr_host_fence_take_over(&pool, dead.index, f2, (uint32_t)(f2 & 0xff) - 1, w.index, &f) == 0, "a finished recovery was taken over");
	CHECK(cxlcr_region_free(&pool, q.generation) == 0 && cxlcr_region_free(&pool, q2.generation) == 0, "%s",
	      cxlcr_last_error());
	cxlcr_pool_close(&pool);
}

/* A done recovery reopened (a retry, an operator's restore of a service it
 * left down): the fenced host, come back, neither frees its quarantined
 * regions nor acknowledges until the recovery is done again. */
static void test_fence_reopen(void)
{
	struct cxlcr_pool pool, back;
	struct cxlcr_host_reg dead, w;
	struct cxlcr_hosts_map m;
	struct cxlcr_region q, now;
	uint64_t f, word;
	bool done;
	SAY("a recovery reopened: the fenced host waits for it again");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_host_join(&pool, "dead", "", 0, 75000000, &dead) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "winner", "", 0, 75000000, &w) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence(&pool, dead.index, dead.incarnation, w.index, &f) == 1, "the fence was not won");
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_QUARANTINE, "svc", 4 * MiB, &q) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, 0) == 0, "a recovery not done yet was reopened");
	CHECK(cxlcr_host_fence_ack(&pool, dead.index, f) == 0, "acknowledged before the recovery was done");
	cxlcr_host_fence_done(&pool, dead.index, f);
	/* The host back: its frees run under the done guard. */
	CHECK(cxlcr_pool_open(&back, path) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_done_guard(&back, dead.index, f, &m) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, 0) == 1, "a done recovery was not reopened");
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, 0) == 0, "reopened twice");
	CHECK(cxlcr_host_fenced(&pool, dead.index, &word, &done) && word == f && !done, "reopened, yet done");
	CHECK_ERROR(cxlcr_region_free(&back, q.generation), "fenced");
	CHECK(cxlcr_region_get(&pool, q.generation, &now) == 0 && now.kind == CXLCR_KIND_QUARANTINE,
	      "a quarantined region was freed while its recovery was reopened");
	CHECK(cxlcr_host_fence_ack(&back, dead.index, f) == 0, "acknowledged while the recovery was reopened");
	cxlcr_host_fence_done(&pool, dead.index, f);
	CHECK(cxlcr_region_free(&back, q.generation) == 0, "%s", cxlcr_last_error());
	cxlcr_host_fence_unguard(&back, &m);
	CHECK(cxlcr_host_fence_ack(&back, dead.index, f) == 1, "not acknowledged once done again");
	CHECK(!cxlcr_host_fenced(&pool, dead.index, NULL, NULL), "still fenced after the acknowledgement");
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, 0) == 0, "an acknowledged fence was reopened");
	cxlcr_pool_close(&back);
	cxlcr_pool_close(&pool);
}

/* A recovery reopened by an operator's restore: it reads as not done, and
 * as reopened by hand (the winner leaves it alone); the restore's host
 * marks it done again in the restore's name only (a dead restore), and
 * nothing marks a newer fence word done in that name: a take-over clears
 * the reopening. */
static void test_fence_by_hand(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_host_reg dead, w, h;
	uint64_t f, f2, word;
	bool done;
	SAY("a recovery reopened by hand: marked done again in that restore's name only");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_host_join(&pool, "dead", "", 0, 75000000, &dead) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "winner", "", 0, 75000000, &w) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "hand", "", 0, 75000000, &h) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence(&pool, dead.index, dead.incarnation, w.index, &f) == 1, "the fence was not won");
	cxlcr_host_fence_done(&pool, dead.index, f);
	CHECK(!cxlcr_fence_reopened_by_hand(&pool, dead.index, NULL), "a done recovery reads as reopened by hand");
	/* The restore: a process of this host that lives until told. */
	int go[2];
	CHECK(pipe(go) == 0, "pipe: %s", strerror(errno));
	pid_t restore = fork();
	CHECK(restore >= 0, "fork: %s", strerror(errno));
	if (restore == 0) {
		char c;
		close(go[1]);
		_exit(read(go[0], &c, 1) < 0);
	}
	close(go[0]);
	uint64_t start = 0, mine = 0;
	CHECK(cxlcr_process_start(restore, &start) && cxlcr_process_start(getpid(), &mine), "no start time");
	uint64_t by = cxlcr_fence_by_hand(h.index, restore, start);
	uint64_t reused = cxlcr_fence_by_hand(h.index, getpid(), mine + 1); /* its pid, another process's */
	CHECK(by != f && reused != by && (by & CXLCR_FENCE_BY_HAND), "a by-hand word is a fence word, or two share one");
	CHECK(cxlcr_fence_worker(f, by) == h.index && cxlcr_fence_worker(f, f) == w.index,
	      "the work of a reopened recovery is not its restore host's");
	/* A word whose pid runs another process now: that restore ended. */
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, reused) == 1, "not reopened by hand");
	CHECK(cxlcr_host_fence_close_by_hand(&pool, h.index, NULL, 0) == 1, "a reused pid was taken for the restore");
	CHECK(cxlcr_host_fenced(&pool, dead.index, &word, &done) && word == f && done, "not done again");
	/* The restore lives: nothing closes its reopening; another host's
	 * daemon never does. */
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, by) == 1, "not reopened by hand");
	CHECK(cxlcr_host_fenced(&pool, dead.index, &word, &done) && word == f && !done, "reopened by hand, yet done");
	uint32_t whose = 99;
	CHECK(cxlcr_fence_reopened_by_hand(&pool, dead.index, &whose) && whose == h.index,
	      "not read as reopened by hand on host entry %u (%u)", h.index, whose);
	CHECK(cxlcr_host_fence_close_by_hand(&pool, h.index, NULL, 0) == 0, "done again while its restore runs");
	CHECK(cxlcr_host_fence_close_by_hand(&pool, w.index, NULL, 0) == 0, "done again by another host");
	CHECK(cxlcr_host_fenced(&pool, dead.index, NULL, &done) && !done, "done while its restore runs");
	/* What works under the restore's reopening (its CRIU) changes the
	 * pool while the reopening is its own. */
	struct cxlcr_pool old;
	struct cxlcr_hosts_map m;
	struct cxlcr_region a;
	CHECK(cxlcr_pool_open(&old, path) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence_guard_by_hand(&old, dead.index, f, by, &m) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&old, CXLCR_KIND_QUARANTINE, "svc", 4 * MiB, &a) == 0, "%s", cxlcr_last_error());
	/* The restore ends without marking it done. */
	close(go[1]);
	int status;
	CHECK(waitpid(restore, &status, 0) == restore, "waitpid: %s", strerror(errno));
	CHECK(cxlcr_host_fence_close_by_hand(&pool, h.index, NULL, 0) == 1, "not done again once its restore ended");
	CHECK(cxlcr_host_fenced(&pool, dead.index, &word, &done) && word == f && done, "not done again");
	/* Its CRIU, still there, changes nothing from now on: not even once a
	 * later restore by hand has reopened the recovery (the fence word is
	 * the same). */
	CHECK_ERROR(cxlcr_region_free(&old, a.generation), "fenced");
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, reused) == 1, "not reopened by a later restore");
	CHECK_ERROR(cxlcr_region_free(&old, a.generation), "fenced");
	cxlcr_host_fence_unguard(&old, &m);
	cxlcr_pool_close(&old);
	CHECK(cxlcr_host_fence_close_by_hand(&pool, h.index, NULL, 0) == 1, "the later reopening (a reused pid) not closed");
	CHECK(cxlcr_region_free(&pool, a.generation) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence_close_by_hand(&pool, h.index, NULL, 0) == 0, "done again twice");
	/* Reopened by hand, then its host judged gone: taken over; the new
	 * winner's recovery is not marked done in the old restore's name. */
	CHECK(cxlcr_host_fence_reopen(&pool, dead.index, f, by) == 1, "not reopened by hand again");
	CHECK(cxlcr_host_fence_take_over(&pool, dead.index, f, w.index, w.index, &f2) == 0,
	      "a recovery reopened by hand was taken over on its winner's death: it is the restore's host's work");
	CHECK(cxlcr_host_fence_take_over(&pool, dead.index, f, h.index, w.index, &f2) == 1,
	      "a recovery reopened by hand not taken over once its restore's host was judged gone");
	CHECK(!cxlcr_fence_reopened_by_hand(&pool, dead.index, NULL), "a take-over kept the by-hand reopening");
	CHECK(cxlcr_host_fence_close_by_hand(&pool, h.index, NULL, 0) == 0, "a newer fence word was done in an old restore's name");
	CHECK(cxlcr_host_fenced(&pool, dead.index, &word, &done) && word == f2 && !done, "the new recovery reads done");
	cxlcr_pool_close(&pool);
}

/* A winner whose recovery was taken over, and finished by the new winner,
 * marks its old fence word done late (it checked the word was its own,
 * then stalled): the recovery stays done under the new word. */
static void test_fence_done_late(void)
{
	struct cxlcr_pool pool;
	struct cxlcr_host_reg dead, a, b;
	uint64_t f1, f2, word;
	bool done;
	SAY("a recovery taken over and done: the old winner's late done changes nothing");
	fresh_pool(POOL_SIZE, &pool);
	CHECK(cxlcr_host_join(&pool, "dead", "", 0, 75000000, &dead) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "a", "", 0, 75000000, &a) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, "b", "", 0, 75000000, &b) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence(&pool, dead.index, dead.incarnation, a.index, &f1) == 1, "the fence was not won");
	CHECK(cxlcr_host_fence_take_over(&pool, dead.index, f1, (uint32_t)(f1 & 0xff) - 1, b.index, &f2) == 1, "the take-over was not won");
	CHECK(f2 != f1, "the take-over kept the fence word");
	CHECK(cxlcr_host_fence_done(&pool, dead.index, f2) == 1, "the new winner's recovery was not marked done");
	CHECK(cxlcr_host_fence_done(&pool, dead.index, f1) == 0, "the old winner marked its old word done");
	CHECK(cxlcr_host_fenced(&pool, dead.index, &word, &done) && word == f2 && done,
	      "after the old winner's late done the recovery reads %s under word %llu (new %llu)",
	      done ? "done" : "not done", (unsigned long long)word, (unsigned long long)f2);
	CHECK(cxlcr_host_fence_ack(&pool, dead.index, f2) == 1, "the host could not acknowledge the done recovery");
	cxlcr_pool_close(&pool);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--format"))
		return format_only(argv[2], argv[3]);
	if (argc >= 2 && argc <= 4 && !strcmp(argv[1], "--free-time"))
		return free_time(argc >= 3 ? argv[2] : "4G", argc == 4 ? argv[3] : "/dev/shm");
	if (argc != 1) {
		fprintf(stderr, "usage: pool_test [--format PATH SIZE | --free-time [SIZE [DIR]]]\n");
		return 2;
	}
	printf("pool_test: the pool code of common/\n");
	snprintf(dir, sizeof(dir), "/dev/shm/cxlcr-pool-test.XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/pool", dir);
	test_on_failure(remove_dir);
	SAY("pool file %s", path);

	test_format_open();
	test_refused();
	test_keep_memory();
	test_regions();
	test_claim_all_or_none();
	test_owner_start();
	test_born_owned();
	test_commit_made();
	test_shrink();
	test_fence_guard();
	test_fence_reopen();
	test_fence_by_hand();
	test_fence_done_late();
	test_dead_holder();
	test_judged_dead_holder();
	test_stalled_holder();
	test_concurrent();

	CHECK(unlink(path) == 0, "%s", strerror(errno));
	CHECK(rmdir(dir) == 0, "%s: %s", dir, strerror(errno));
	printf("pool_test: all checks passed\n");
	return 0;
}
