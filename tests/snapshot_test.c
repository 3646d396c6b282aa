/*
 * Snapshots and the snapshot catalog (common/snapshot.c, common/catalog.c),
 * linked directly, on a pool file in a fresh directory under /dev/shm. No
 * preload: arenas are made with cxlcr_region_alloc(), mapped with
 * cxlcr_pool_map() and given the header a process would write when it
 * attaches.
 *
 *   snapshot_test          runs the tests, then times a 1 GiB snapshot
 *   snapshot_test --quick  the same without the timing
 */
#include <sched.h>
#include <stdlib.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "../common/arena.h"
#include "../common/catalog.h"
#include "../common/checksum.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "../tracking/track.h"
#include "test.h"

#define POOL_SIZE       (8ull << 30)   /* sparse: only what the tests touch is allocated */
#define PAGE            CXLCR_SNAPSHOT_PAGE_SIZE
#define TEST_HEAP       (64 * MiB)     /* CXLCR_HEAP_ALIGN: the smallest arena */
#define BENCH_HEAP      (1ull << 30)
#define BORROWERS       8
#define BORROWS_EACH    100
#define LEASE           (1000ull * 1000000ull) /* a watching reaper's lease, on the times the tests pass it */

static char dir[64];
static char path[128];

/* ---- test arenas ---- */

/* A test arena: its region and its mapping (header, then the heap). */
struct arena_map {
	struct cxlcr_region region;
	uint8_t *base;
	uint8_t *heap;
	uint64_t pages;
};

/* What the preload writes when a process attaches an arena (attach.c). */
static void write_arena_header(struct cxlcr_pool *pool, struct arena_map *a)
{
	uint64_t heap_size = a->region.size - CXLCR_ARENA_HEAP_OFFSET;
	cxlcr_arena_header_init((void *)a->base, pool, &a->region, (uintptr_t)a->heap, heap_size, heap_size,
				getpid());
}

/* An arena with heap_size bytes of heap, mapped like the preload maps it
 * (heap on a CXLCR_HEAP_ALIGN boundary); with_header: as if attached. */
static void make_arena(struct cxlcr_pool *pool, const char *name, uint64_t heap_size, bool with_header,
		       struct arena_map *a)
{
	CHECK(cxlcr_region_alloc(pool, CXLCR_KIND_ARENA, name, heap_size + CXLCR_ARENA_HEAP_OFFSET,
				 &a->region) == 0, "%s", cxlcr_last_error());
	a->base = cxlcr_pool_map(pool, a->region.offset, a->region.size, CXLCR_HEAP_ALIGN,
				 CXLCR_ARENA_HEAP_OFFSET);
	CHECK(a->base, "%s", cxlcr_last_error());
	a->heap = a->base + CXLCR_ARENA_HEAP_OFFSET;
	a->pages = heap_size / PAGE;
	if (with_header)
		write_arena_header(pool, a);
}

static void drop_arena(struct cxlcr_pool *pool, struct arena_map *a)
{
	CHECK(munmap(a->base, a->region.size) == 0);
	CHECK(cxlcr_region_free(pool, a->region.generation) == 0, "%s", cxlcr_last_error());
}

/* ---- page contents ---- */

static uint64_t mix(uint64_t x)   /* splitmix64 */
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* What a page of a test heap holds. Zero pages come two ways: never
 * written (a hole of the pool file, skipped by SEEK_DATA) and written with
 * zeros (data to the file system, found zero by comparing). A page whose
 * only non-zero byte is its last one checks that the compare reads it all. */
enum page_kind { HOLE, WRITTEN_ZERO, PATTERN, LAST_BYTE_ONLY };

/* The heap's last 4 MiB stay unwritten: a pool on a file system with
 * 2 MiB pages (make deps mounts /dev/shm so) keeps holes only that large. */
#define TAIL_HOLE_PAGES ((4 * MiB) / PAGE)

static enum page_kind kind_of(uint64_t seed, uint64_t page)
{
	if (page >= TEST_HEAP / PAGE - TAIL_HOLE_PAGES && page < TEST_HEAP / PAGE)
		return HOLE;
	switch (mix(seed ^ page * 0x100000001b3ull) % 8) {
	case 0: case 1: case 2: return HOLE;
	case 3: return WRITTEN_ZERO;
	case 7: return LAST_BYTE_ONLY;
	default: return PATTERN;
	}
}

/* The contents of page `page` under seed into buf (zero for zero kinds). */
static void expected_page(uint64_t seed, uint64_t page, uint8_t *buf)
{
	memset(buf, 0, PAGE);
	enum page_kind k = kind_of(seed, page);
	if (k == LAST_BYTE_ONLY) {
		buf[PAGE - 1] = (uint8_t)(page | 1);
	} else if (k == PATTERN) {
		uint64_t *w = (uint64_t *)(void *)buf;
		for (size_t i = 0; i < PAGE / 8; i++)
			w[i] = mix(seed + page * 512 + i);
	}
}

/* Writes the test contents into every page but the holes. */
static void fill_heap(struct arena_map *a, uint64_t seed, uint64_t *nonzero, uint64_t *holes)
{
	static uint8_t buf[PAGE];
	*nonzero = *holes = 0;
	for (uint64_t i = 0; i < a->pages; i++) {
		enum page_kind k = kind_of(seed, i);
		if (k == HOLE) {
			(*holes)++;
			continue;
		}
		expected_page(seed, i, buf);
		memcpy(a->heap + i * PAGE, buf, PAGE);
		*nonzero += k == PATTERN || k == LAST_BYTE_ONLY;
	}
}

static bool page_is_zero(const uint8_t *p)
{
	for (size_t i = 0; i < PAGE; i++)
		if (p[i])
			return false;
	return true;
}

/* ---- snapshots ---- */

/* Checks every page of snapshot s against the heap filled with seed. */
static void check_snapshot_pages(struct cxlcr_snapshot *s, uint64_t seed, int pool_fd)
{
	static uint8_t want[PAGE], got[PAGE], on_device[PAGE];
	uint64_t data_lo = s->region.offset + s->header.data_offset;
	uint64_t data_hi = data_lo + s->header.data_size, previous = 0, cxl = 0;
	for (uint64_t i = 0; i < s->header.page_count; i++) {
		uint32_t tier;
		uint64_t offset;
		CHECK(cxlcr_snapshot_page_offset(s, i, &tier, &offset) == 0, "%s", cxlcr_last_error());
		expected_page(seed, i, want);
		CHECK(cxlcr_snapshot_read_page(s, i, got) == 0, "%s", cxlcr_last_error());
		CHECK(memcmp(got, want, PAGE) == 0, "page %llu differs from the source",
		      (unsigned long long)i);
		if (page_is_zero(want)) {
			CHECK(tier == CXLCR_TIER_ZERO && offset == 0, "zero page %llu: tier %u offset %llu",
			      (unsigned long long)i, tier, (unsigned long long)offset);
			continue;
		}
		CHECK(tier == CXLCR_TIER_CXL, "page %llu: tier %u", (unsigned long long)i, tier);
		CHECK(offset >= data_lo && offset < data_hi && offset % PAGE == 0 && offset > previous,
		      "page %llu: copy at pool offset %llu, data area %llu..%llu", (unsigned long long)i,
		      (unsigned long long)offset, (unsigned long long)data_lo, (unsigned long long)data_hi);
		/* The offset is device-relative: the pool file holds the copy there. */
		CHECK(pread(pool_fd, on_device, PAGE, (off_t)offset) == PAGE);
		CHECK(memcmp(on_device, want, PAGE) == 0, "page %llu: pool offset %llu holds something else",
		      (unsigned long long)i, (unsigned long long)offset);
		previous = offset;
		cxl++;
	}
	CHECK_EQ(cxl, s->header.pages_cxl);
}

static void test_snapshot_contents(struct cxlcr_pool *pool)
{
	struct arena_map a;
	struct cxlcr_snapshot_info info;
	struct cxlcr_snapshot s;
	uint64_t seed = 0x5eed, nonzero, holes;

	SAY("a %llu MiB arena: holes, pages written with zeros, patterns, pages with only their last byte set",
	    TEST_HEAP >> 20);
	make_arena(pool, "src", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	SAY("%llu pages: %llu non-zero, %llu holes, %llu written zero", (unsigned long long)a.pages,
	    (unsigned long long)nonzero, (unsigned long long)holes,
	    (unsigned long long)(a.pages - nonzero - holes));

	CHECK(cxlcr_snapshot_create(pool, a.region.generation, "snap", &info) == 0, "%s", cxlcr_last_error());
	SAY("snapshot: exactly the non-zero pages are copied (%llu), the rest is ZERO tier",
	    (unsigned long long)info.pages_cxl);
	CHECK_EQ(info.pages_total, a.pages);
	CHECK_EQ(info.pages_cxl, nonzero);
	CHECK_EQ(info.pages_zero, a.pages - nonzero);
	CHECK(info.holes_skipped > 0 && info.holes_skipped <= holes, "%llu holes skipped of %llu",
	      (unsigned long long)info.holes_skipped, (unsigned long long)holes);
	SAY("SEEK_DATA skipped %llu hole pages without reading them", (unsigned long long)info.holes_skipped);
	CHECK_EQ(info.heap_address, (uintptr_t)a.heap);
	CHECK_EQ(info.heap_size, TEST_HEAP);

	CHECK(cxlcr_snapshot_open(pool, info.region_generation, &s) == 0, "%s", cxlcr_last_error());
	SAY("the header records the arena, its epoch, heap address and size, and the page counts");
	const struct cxlcr_snapshot_header *h = &s.header;
	CHECK_EQ(h->arena_generation, a.region.generation);
	CHECK_EQ(h->arena_epoch, a.region.owner_epoch);
	CHECK(!strcmp(h->arena_name, "src") && !strcmp(h->name, "snap"));
	CHECK_EQ(h->heap_address, (uintptr_t)a.heap);
	CHECK_EQ(h->heap_size, TEST_HEAP);
	CHECK_EQ(h->page_count, a.pages);
	CHECK_EQ(h->pages_cxl, nonzero);
	CHECK_EQ(h->pages_zero + h->pages_cxl, a.pages);
	CHECK_EQ(h->pages_cold, 0);
	CHECK(memcmp(h->pool_uuid, pool->sb->uuid, 16) == 0);
	CHECK(h->data_offset % CXLCR_POOL_ALIGN == 0);
	CHECK_EQ(h->arena_header_offset, h->data_offset + h->data_size);
	CHECK_EQ(h->arena_header_size, CXLCR_SNAPSHOT_ARENA_HEADER_SIZE);
	CHECK_EQ(s.region.size, (h->arena_header_offset + h->arena_header_size + CXLCR_POOL_ALIGN - 1) /
				   CXLCR_POOL_ALIGN * CXLCR_POOL_ALIGN);
	SAY("it holds a copy of the arena header as it was (a fork child's header is a view of it)");
	static uint8_t header_then[CXLCR_SNAPSHOT_ARENA_HEADER_SIZE];
	memcpy(header_then, a.base, sizeof(header_then));
	CHECK(!memcmp(s.base + h->arena_header_offset, header_then, sizeof(header_then)));

	SAY("every copied page equals its source, at the pool offset its leaf gives");
	check_snapshot_pages(&s, seed, pool->fd);

	SAY("the arena changes after the snapshot: the snapshot does not");
	uint64_t nz2, holes2;
	fill_heap(&a, seed + 1, &nz2, &holes2);
	memset(a.heap, 0x77, PAGE);                         /* a zero page becomes data */
	memset(a.heap + (a.pages - 1) * PAGE, 0, PAGE);     /* and some data becomes zero */
	check_snapshot_pages(&s, seed, pool->fd);
	struct cxlcr_arena_header *live = (void *)a.base;   /* nor its header copy */
	memset(live->command, 'x', sizeof(live->command) - 1);
	live->shed_request++;
	CHECK(!memcmp(s.base + h->arena_header_offset, header_then, sizeof(header_then)));
	cxlcr_snapshot_close(&s);

	SAY("page_offset and read_page refuse a page beyond the heap");
	CHECK(cxlcr_snapshot_open(pool, info.region_generation, &s) == 0, "%s", cxlcr_last_error());
	uint32_t tier;
	uint64_t offset;
	static uint8_t buf[PAGE];
	CHECK_ERROR(cxlcr_snapshot_page_offset(&s, a.pages, &tier, &offset), "beyond its heap");
	CHECK_ERROR(cxlcr_snapshot_read_page(&s, a.pages, buf), "beyond its heap");
	cxlcr_snapshot_close(&s);

	SAY("an all-zero arena gives a snapshot with no data pages");
	struct arena_map empty;
	struct cxlcr_snapshot_info info0;
	make_arena(pool, "empty", TEST_HEAP, true, &empty);
	CHECK(cxlcr_snapshot_create(pool, empty.region.generation, "snap-empty", &info0) == 0, "%s",
	      cxlcr_last_error());
	CHECK_EQ(info0.pages_cxl, 0);
	CHECK_EQ(info0.holes_skipped, empty.pages);
	CHECK(cxlcr_snapshot_validate(pool, info0.region_generation) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_free(pool, info0.region_generation) == 0);
	drop_arena(pool, &empty);

	CHECK(cxlcr_region_free(pool, info.region_generation) == 0, "%s", cxlcr_last_error());
	drop_arena(pool, &a);
}

/* ---- refusals ---- */

static void reseal_header(struct cxlcr_snapshot_header *h)
{
	h->checksum = cxlcr_crc32c(0, h, offsetof(struct cxlcr_snapshot_header, checksum));
}

/* Which check refuses a damage: opening (a fork's check, of the header and
 * the runs) and so validating too, or only validating (the leaf table). */
enum refused_by { BY_OPEN, BY_VALIDATE };

/* Damages a snapshot in place with `damage`, checks that it is refused
 * with `want`, and puts it back as it was. */
static void check_refused(struct cxlcr_pool *pool, uint64_t generation, uint8_t *m, size_t len,
			  const char *what, void (*damage)(uint8_t *m), const char *want, enum refused_by by)
{
	static uint8_t saved[4 * MiB];
	CHECK(len <= sizeof(saved));
	memcpy(saved, m, len);
	damage(m);
	SAY("refused%s: %s (\"%s\")", by == BY_OPEN ? "" : " by validation", what, want);
	struct cxlcr_snapshot s;
	if (by == BY_OPEN) {
		CHECK_ERROR(cxlcr_snapshot_open(pool, generation, &s), want);
	} else {
		CHECK(cxlcr_snapshot_open(pool, generation, &s) == 0, "%s", cxlcr_last_error());
		cxlcr_snapshot_close(&s);
	}
	CHECK_ERROR(cxlcr_snapshot_validate(pool, generation), want);
	memcpy(m, saved, len);
	CHECK(cxlcr_snapshot_validate(pool, generation) == 0, "after repair: %s", cxlcr_last_error());
}

static struct cxlcr_snapshot_header *hdr(uint8_t *m)
{
	return (struct cxlcr_snapshot_header *)(void *)m;
}

static uint64_t *leaves(uint8_t *m)
{
	return (uint64_t *)(void *)(m + CXLCR_SNAPSHOT_TABLE_OFFSET);
}

static struct cxlcr_snapshot_run *runs(uint8_t *m)
{
	return (struct cxlcr_snapshot_run *)(void *)(m + hdr(m)->run_offset);
}

/* Recomputes the table checksum after a change of the table, so that only
 * the meaning of the change is left to be caught. */
static void reseal_table(uint8_t *m)
{
	hdr(m)->table_crc = cxlcr_crc32c(0, leaves(m), hdr(m)->table_size);
	reseal_header(hdr(m));
}

static void reseal_runs(uint8_t *m)
{
	hdr(m)->run_crc = cxlcr_crc32c(0, runs(m), hdr(m)->run_count * sizeof(struct cxlcr_snapshot_run));
	reseal_header(hdr(m));
}

/* The leaf table changed: its runs made again to match, and both resealed. */
static void rebuild_runs(uint8_t *m)
{
	uint64_t room = (hdr(m)->data_offset - hdr(m)->run_offset) / sizeof(struct cxlcr_snapshot_run);
	hdr(m)->run_count = cxlcr_snapshot_table_runs(leaves(m), hdr(m)->page_count, runs(m), room);
	CHECK(hdr(m)->run_count <= room, "%llu runs do not fit", (unsigned long long)hdr(m)->run_count);
	reseal_runs(m);
	reseal_table(m);
}

/* The first run of a tier, for the damages below. */
static struct cxlcr_snapshot_run *first_run(uint8_t *m, uint32_t tier)
{
	for (uint64_t r = 0; r < hdr(m)->run_count; r++)
		if (CXLCR_LEAF_TIER(runs(m)[r].leaf) == tier)
			return &runs(m)[r];
	test_fail(__FILE__, __LINE__, "first_run", " no run of tier %u", tier);
}

static void flipped_run_byte(uint8_t *m) { ((uint8_t *)runs(m))[13] ^= 0x10; }
static void run_outside(uint8_t *m)
{
	first_run(m, CXLCR_TIER_CXL)->leaf = CXLCR_LEAF(CXLCR_TIER_CXL, 4096ull * 7); /* the superblock */
	reseal_runs(m);
}
static void run_past_data(uint8_t *m) { first_run(m, CXLCR_TIER_CXL)->pages += hdr(m)->pages_cxl; reseal_runs(m); }
static void run_reserved_bits(uint8_t *m) { first_run(m, CXLCR_TIER_CXL)->leaf |= 0x100; reseal_runs(m); }
static void run_unknown_tier(uint8_t *m) { first_run(m, CXLCR_TIER_ZERO)->leaf = 7; reseal_runs(m); }
static void run_gap(uint8_t *m) { runs(m)[1].first_page++; reseal_runs(m); }
static void run_not_maximal(uint8_t *m)
{
	/* Two zero runs in a row: the second's page taken from its neighbour. */
	struct cxlcr_snapshot_run *z = first_run(m, CXLCR_TIER_ZERO), *next = z + 1;
	CHECK(z->pages > 1 && next < runs(m) + hdr(m)->run_count);
	z->pages--;
	next->first_page--;
	next->pages++;
	next->leaf = 0;
	reseal_runs(m);
}
static void runs_too_many(uint8_t *m) { hdr(m)->run_count = hdr(m)->page_count + 1; reseal_header(hdr(m)); }

static void bad_magic(uint8_t *m) { hdr(m)->magic ^= 1; }
static void bad_version(uint8_t *m) { hdr(m)->version = 99; reseal_header(hdr(m)); }
static void flipped_header_byte(uint8_t *m) { hdr(m)->heap_size ^= 0x1000; }
static void incomplete(uint8_t *m) { hdr(m)->complete = 0; }
static void other_pool(uint8_t *m) { hdr(m)->pool_uuid[3] ^= 0xff; reseal_header(hdr(m)); }
static void other_region(uint8_t *m) { hdr(m)->region_generation += 1000; reseal_header(hdr(m)); }
static void bad_counts(uint8_t *m) { hdr(m)->pages_zero += 1; reseal_header(hdr(m)); }
static void flipped_table_byte(uint8_t *m) { m[CXLCR_SNAPSHOT_TABLE_OFFSET + 77] ^= 0x10; }

/* The first leaf of a tier, for the damages below. */
static uint64_t *first_leaf(uint8_t *m, uint32_t tier)
{
	for (uint64_t i = 0; i < hdr(m)->page_count; i++)
		if (CXLCR_LEAF_TIER(leaves(m)[i]) == tier)
			return &leaves(m)[i];
	test_fail(__FILE__, __LINE__, "first_leaf", " no leaf of tier %u", tier);
}

static void leaf_outside(uint8_t *m)
{
	*first_leaf(m, CXLCR_TIER_CXL) = CXLCR_LEAF(CXLCR_TIER_CXL, 4096ull * 7);  /* the superblock */
	reseal_table(m);
}

static void leaf_past_data(uint8_t *m)
{
	uint64_t *leaf = first_leaf(m, CXLCR_TIER_CXL);
	*leaf = CXLCR_LEAF(CXLCR_TIER_CXL, CXLCR_LEAF_OFFSET(*leaf) + hdr(m)->data_size);
	reseal_table(m);
}

static void leaf_reserved_bits(uint8_t *m) { *first_leaf(m, CXLCR_TIER_CXL) |= 0x100; reseal_table(m); }
static void leaf_unknown_tier(uint8_t *m) { *first_leaf(m, CXLCR_TIER_ZERO) = 7; reseal_table(m); }

static void leaf_shared_copy(uint8_t *m)
{
	/* Two pages pointing at one copy: offsets must rise in heap order. */
	uint64_t *a = first_leaf(m, CXLCR_TIER_CXL), *b = a + 1;
	while (CXLCR_LEAF_TIER(*b) != CXLCR_TIER_CXL)
		b++;
	*b = *a;
	reseal_table(m);
}

/* A snapshot in two steps (snapshot.h): the draft, copied while the heap
 * still changes, and the finish, which copies again what changed. */
static void test_draft_and_finish(struct cxlcr_pool *pool)
{
	struct arena_map a;
	struct cxlcr_snapshot_info info;
	struct cxlcr_snapshot s;
	uint64_t seed = 0xd4af7, nonzero, holes, changed = 0;
	static uint8_t got[PAGE];

	SAY("draft and finish: pages rewritten or zeroed after the draft are copied again");
	make_arena(pool, "dsrc", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "dsnap", &info) == 0, "%s", cxlcr_last_error());
	struct cxlcr_region draft;
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, "dsnap", &draft), "the draft has no region");
	uint64_t draft_generation = draft.generation;
	CHECK(cxlcr_snapshot_open(pool, draft_generation, &s) < 0, "a draft opened as a snapshot");
	for (uint64_t i = 0; i < a.pages; i++) {
		if (kind_of(seed, i) != PATTERN || i % 3)
			continue;
		if (i % 2)
			memset(a.heap + i * PAGE, 0, PAGE);
		else
			a.heap[i * PAGE + 17] ^= 0x5a;
		changed++;
	}
	CHECK(cxlcr_snapshot_finish(pool, a.region.generation, "dsnap", NULL, &info) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(info.pages_refreshed, changed);
	CHECK(cxlcr_snapshot_open(pool, draft_generation, &s) == 0, "%s", cxlcr_last_error());
	for (uint64_t i = 0; i < a.pages; i++) {
		CHECK(cxlcr_snapshot_read_page(&s, i, got) == 0, "%s", cxlcr_last_error());
		CHECK(memcmp(got, a.heap + i * PAGE, PAGE) == 0, "page %llu differs from the heap at the finish",
		      (unsigned long long)i);
	}
	cxlcr_snapshot_close(&s);
	SAY("%llu changed pages copied again; the snapshot is the heap at the finish", (unsigned long long)changed);

	SAY("a page that was zero in the draft and holds data at the finish: copied into the draft's room");
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "dsnap2", &info) == 0, "%s", cxlcr_last_error());
	uint64_t hole = 0;
	while (kind_of(seed, hole) != HOLE)
		hole++;
	a.heap[hole * PAGE] = 1;
	CHECK(cxlcr_snapshot_finish(pool, a.region.generation, "dsnap2", NULL, &info) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, info.region_generation, &s) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_read_page(&s, hole, got) == 0 && got[0] == 1, "the page written after the draft is not in it");
	cxlcr_snapshot_close(&s);
	CHECK(cxlcr_region_free(pool, info.region_generation) == 0, "%s", cxlcr_last_error());

	SAY("more such pages than the draft has room for: a fresh snapshot is needed");
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "dsnap3", &info) == 0, "%s", cxlcr_last_error());
	uint64_t filled = 0;
	for (uint64_t i = 0; i < a.pages && filled < a.pages / 4; i++)
		if (kind_of(seed, i) == HOLE && !a.heap[i * PAGE]) {
			a.heap[i * PAGE] = 2;
			filled++;
		}
	CHECK(cxlcr_snapshot_finish(pool, a.region.generation, "dsnap3", NULL, &info) == 1, "finish did not refuse");
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, "dsnap3", &draft), "the refused draft is gone");
	CHECK(cxlcr_region_free(pool, draft.generation) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_free(pool, draft_generation) == 0, "%s", cxlcr_last_error());
	drop_arena(pool, &a);
}

/* What preload/release.c does around a punch of heap page i: counted, and
 * (if log) logged in the arena's punch log first, as the preload does;
 * without, as a preload that logs nothing. */
static void punch_page(struct arena_map *a, uint64_t i, bool log)
{
	struct cxlcr_arena_header *h = (void *)a->base;
	uint64_t n = __atomic_fetch_add(&h->punches_begun, 1, __ATOMIC_SEQ_CST);
	if (log) {
		struct cxlcr_punch_entry *e = &h->punch_log[n % CXLCR_PUNCH_LOG];
		__atomic_store_n(&e->seq, 0, __ATOMIC_SEQ_CST);
		e->lo = i * PAGE;
		e->hi = (i + 1) * PAGE;
		__atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
	}
	CHECK(madvise(a->heap + i * PAGE, PAGE, MADV_REMOVE) == 0, "MADV_REMOVE: %s", strerror(errno));
	__atomic_fetch_add(&h->punches_done, 1, __ATOMIC_SEQ_CST);
}

/* The tracked finish (written ranges given) with pages punched out of the
 * pool after the draft, as the preload does with freed memory: no write
 * reports them, yet the snapshot must read zero there. Logged (at most
 * CXLCR_PUNCH_LOG of them), the finish looks at their pages only; not
 * logged (or too many), it compares every page. */
static void tracked_finish_punches(struct cxlcr_pool *pool, bool log, uint64_t most)
{
	struct arena_map a;
	struct cxlcr_snapshot_info info;
	struct cxlcr_snapshot s;
	uint64_t seed = 0x9a7c4, nonzero, holes, punched = 0;
	static uint8_t got[PAGE];

	SAY("tracked finish: pages punched out after the draft (%s, at most %llu) read zero in the snapshot",
	    log ? "logged" : "not logged", (unsigned long long)most);
	make_arena(pool, "psrc", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "psnap", &info) == 0, "%s", cxlcr_last_error());
	struct cxlcr_region draft;
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, "psnap", &draft), "the draft has no region");
	uint64_t draft_generation = draft.generation;
	for (uint64_t i = 0; i < a.pages && punched < most; i++) {
		if (kind_of(seed, i) != PATTERN || i % 5)
			continue;
		punch_page(&a, i, log);
		punched++;
	}
	CHECK(punched > 0);
	struct cxlcr_written none = { 0 };
	CHECK(cxlcr_snapshot_finish(pool, a.region.generation, "psnap", &none, &info) == 0, "%s", cxlcr_last_error());
	if (log && punched <= CXLCR_PUNCH_LOG)
		CHECK(info.tracked && !info.compared_because && info.punches_logged == punched &&
			      info.pages_written == punched,
		      "%llu logged punches: tracked %d, compared because %s, %u logged, %llu pages looked at",
		      (unsigned long long)punched, info.tracked, info.compared_because ? info.compared_because : "-",
		      info.punches_logged, (unsigned long long)info.pages_written);
	else
		CHECK(!info.tracked && info.compared_because && strstr(info.compared_because, "punch log"),
		      "%llu punches, %s: the finish did not compare every page (%s)", (unsigned long long)punched,
		      log ? "logged" : "not logged", info.compared_because ? info.compared_because : "-");
	CHECK(cxlcr_snapshot_open(pool, draft_generation, &s) == 0, "%s", cxlcr_last_error());
	for (uint64_t i = 0; i < a.pages; i++) {
		CHECK(cxlcr_snapshot_read_page(&s, i, got) == 0, "%s", cxlcr_last_error());
		CHECK(memcmp(got, a.heap + i * PAGE, PAGE) == 0,
		      "page %llu differs from the heap at the finish (punched out after the draft?)",
		      (unsigned long long)i);
	}
	cxlcr_snapshot_close(&s);
	SAY("%llu punched pages read zero in the snapshot", (unsigned long long)punched);
	CHECK(cxlcr_region_free(pool, draft_generation) == 0, "%s", cxlcr_last_error());
	drop_arena(pool, &a);
}

static void test_tracked_finish_punches(struct cxlcr_pool *pool)
{
	tracked_finish_punches(pool, true, 40);
	tracked_finish_punches(pool, false, 40);
	tracked_finish_punches(pool, true, UINT64_MAX);
}

static void test_refusals(struct cxlcr_pool *pool)
{
	struct arena_map a, bare;
	struct cxlcr_snapshot_info info, unused;
	struct cxlcr_snapshot s;
	uint64_t nonzero, holes;

	make_arena(pool, "src2", TEST_HEAP, true, &a);
	fill_heap(&a, 42, &nonzero, &holes);
	SAY("refused: an arena never attached, a region that is not an arena, a bad or taken name");
	make_arena(pool, "bare", TEST_HEAP, false, &bare);
	CHECK_ERROR(cxlcr_snapshot_create(pool, bare.region.generation, "x", &unused), "never attached");
	CHECK(cxlcr_snapshot_create(pool, a.region.generation, "snap2", &info) == 0, "%s", cxlcr_last_error());
	CHECK_ERROR(cxlcr_snapshot_create(pool, info.region_generation, "x", &unused), "is not an arena");
	CHECK_ERROR(cxlcr_snapshot_create(pool, a.region.generation, "a/b", &unused), "invalid snapshot name");
	CHECK_ERROR(cxlcr_snapshot_create(pool, a.region.generation, "snap2", &unused), "already exists");
	CHECK_ERROR(cxlcr_snapshot_create(pool, 999999, "x", &unused), "is gone");
	SAY("refused: opening a region that is not a snapshot, or is gone");
	CHECK_ERROR(cxlcr_snapshot_open(pool, a.region.generation, &s), "is not a snapshot");
	CHECK_ERROR(cxlcr_snapshot_open(pool, 999999, &s), "is gone");

	/* A writable mapping of the snapshot's header and table, to damage them. */
	size_t len = CXLCR_POOL_ALIGN;
	uint8_t *m = cxlcr_pool_map(pool, info.region_offset, len, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	uint64_t g = info.region_generation;
	/* Damage to what a fork reads (the header, the runs) is refused on
	 * open; damage to the leaf table only by validation. */
	static const struct {
		const char *what;
		void (*damage)(uint8_t *m);
		const char *want;
		enum refused_by by;
	} damages[] = {
		{ "bad magic", bad_magic, "no snapshot magic", BY_OPEN },
		{ "unknown version", bad_version, "format version 99", BY_OPEN },
		{ "a flipped header byte", flipped_header_byte, "header checksum mismatch", BY_OPEN },
		{ "no completion marker", incomplete, "incomplete", BY_OPEN },
		{ "another pool's uuid", other_pool, "belongs to another pool", BY_OPEN },
		{ "another region's header", other_region, "is foreign", BY_OPEN },
		{ "page counts that do not add up", bad_counts, "inconsistent page counts", BY_OPEN },
		{ "more runs than pages", runs_too_many, "inconsistent layout", BY_OPEN },
		{ "a flipped run byte", flipped_run_byte, "run table checksum mismatch", BY_OPEN },
		{ "a run pointing outside the snapshot", run_outside, "is out of place", BY_OPEN },
		{ "a run past the data area", run_past_data, "is out of place", BY_OPEN },
		{ "a run with reserved bits", run_reserved_bits, "is out of place", BY_OPEN },
		{ "a run of an unknown tier", run_unknown_tier, "is out of place", BY_OPEN },
		{ "a gap between runs", run_gap, "is out of place", BY_OPEN },
		{ "two zero runs in a row", run_not_maximal, "is out of place", BY_OPEN },
		{ "a flipped table byte", flipped_table_byte, "leaf table checksum mismatch", BY_VALIDATE },
		{ "a leaf pointing outside the snapshot", leaf_outside, "is not what its run says", BY_VALIDATE },
		{ "a leaf past the data area", leaf_past_data, "is not what its run says", BY_VALIDATE },
		{ "a leaf with reserved bits", leaf_reserved_bits, "is not what its run says", BY_VALIDATE },
		{ "a leaf of an unknown tier", leaf_unknown_tier, "is not what its run says", BY_VALIDATE },
		{ "two pages sharing a copy", leaf_shared_copy, "is not what its run says", BY_VALIDATE },
	};
	for (size_t i = 0; i < sizeof(damages) / sizeof(damages[0]); i++)
		check_refused(pool, g, m, len, damages[i].what, damages[i].damage, damages[i].want, damages[i].by);

	SAY("a COLD leaf (nothing makes them yet) validates; page_offset gives it, read_page refuses it");
	static uint8_t saved[2 * MiB], buf[PAGE];
	memcpy(saved, m, len);
	uint64_t *zero_leaf = first_leaf(m, CXLCR_TIER_ZERO), cold_page = (uint64_t)(zero_leaf - leaves(m));
	*zero_leaf = CXLCR_LEAF(CXLCR_TIER_COLD, 0x1234000);
	hdr(m)->pages_zero--;
	hdr(m)->pages_cold++;
	rebuild_runs(m);
	CHECK(cxlcr_snapshot_validate(pool, g) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, g, &s) == 0, "%s", cxlcr_last_error());
	uint32_t tier;
	uint64_t offset;
	CHECK(cxlcr_snapshot_page_offset(&s, cold_page, &tier, &offset) == 0, "%s", cxlcr_last_error());
	CHECK(tier == CXLCR_TIER_COLD && offset == 0x1234000);
	CHECK_ERROR(cxlcr_snapshot_read_page(&s, cold_page, buf), "cold tier");
	cxlcr_snapshot_close(&s);
	memcpy(m, saved, len);
	CHECK(munmap(m, len) == 0);

	SAY("refused: a truncated snapshot (its region entry shrunk to 2 MiB)");
	CHECK(cxlcr_pool_lock(pool) == 0, "%s", cxlcr_last_error());
	struct cxlcr_region *entry = NULL;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		if (pool->table[i].state == CXLCR_REGION_LIVE && pool->table[i].generation == g)
			entry = &pool->table[i];
	CHECK(entry);
	uint64_t size = entry->size;
	entry->size = CXLCR_POOL_ALIGN;
	cxlcr_pool_unlock(pool);
	CHECK_ERROR(cxlcr_snapshot_validate(pool, g), "is truncated");
	CHECK(cxlcr_pool_lock(pool) == 0, "%s", cxlcr_last_error());
	entry->size = size;
	cxlcr_pool_unlock(pool);
	CHECK(cxlcr_snapshot_validate(pool, g) == 0, "%s", cxlcr_last_error());

	SAY("refused: publishing a damaged snapshot in the catalog");
	m = cxlcr_pool_map(pool, info.region_offset, len, 0, 0);
	CHECK(m);
	bad_magic(m);
	CHECK_ERROR(cxlcr_catalog_publish(pool, "damaged", g, NULL), "no snapshot magic");
	bad_magic(m);
	CHECK(munmap(m, len) == 0);

	CHECK(cxlcr_region_free(pool, g) == 0);
	drop_arena(pool, &bare);
	drop_arena(pool, &a);
}

/* ---- the catalog ---- */

/* A small snapshot (of arena a) called name, published under the same name. */
static uint64_t publish_snapshot(struct cxlcr_pool *pool, struct arena_map *a, const char *name,
				 struct cxlcr_catalog_info *info)
{
	struct cxlcr_snapshot_info si;
	CHECK(cxlcr_snapshot_create(pool, a->region.generation, name, &si) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_publish(pool, name, si.region_generation, info) == 0, "%s", cxlcr_last_error());
	return si.region_generation;
}

static bool region_live(struct cxlcr_pool *pool, uint64_t generation)
{
	struct cxlcr_region r;
	return cxlcr_region_get(pool, generation, &r) == 0;
}

static struct cxlcr_catalog_info entry_info(struct cxlcr_pool *pool, uint32_t index)
{
	struct cxlcr_catalog_info info;
	CHECK(cxlcr_catalog_entry(pool, index, &info) == 0, "%s", cxlcr_last_error());
	return info;
}

/* No entry is held or has a claimed slot, and no snapshot region is left
 * but those of published entries. */
static void check_nothing_leaked(struct cxlcr_pool *pool)
{
	uint32_t published = 0, snapshots = 0;
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		struct cxlcr_catalog_info e = entry_info(pool, i);
		CHECK(e.refcount == 0 && e.holders == 0 && e.slots_claimed == 0,
		      "entry %u ('%s'): refcount %u, %u slots claimed", i, e.name, e.refcount, e.slots_claimed);
		CHECK(e.state == CXLCR_CATALOG_FREE || e.state == CXLCR_CATALOG_PUBLISHED,
		      "entry %u ('%s') left in state %u", i, e.name, e.state);
		if (e.state == CXLCR_CATALOG_PUBLISHED) {
			published++;
			CHECK(region_live(pool, e.snapshot_generation), "published '%s' lost its region", e.name);
		}
	}
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		snapshots += pool->table[i].state == CXLCR_REGION_LIVE &&
			     pool->table[i].kind == CXLCR_KIND_SNAPSHOT;
	CHECK_EQ(snapshots, published);
}

/* Adds the page at addr to a written list (as a scan would report it). */
static void written_add(struct cxlcr_written *w, uint64_t addr)
{
	if (w->count && w->ranges[w->count - 1].end == addr) {
		w->ranges[w->count - 1].end += PAGE;
	} else {
		if (w->count == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 64;
			w->ranges = realloc(w->ranges, w->cap * sizeof(*w->ranges));
			CHECK(w->ranges);
		}
		w->ranges[w->count++] = (struct cxlcr_range){ addr, addr + PAGE };
	}
	w->bytes += PAGE;
}

/* Changes about one page in `per` of the heap, as a service would between
 * two snapshots: new contents, zeros (both reported in w), or punched out
 * (freed memory given back: not reported, as the kernel does not). */
static uint64_t churn(struct arena_map *a, uint64_t seed, uint64_t per, struct cxlcr_written *w)
{
	uint64_t changed = 0;
	for (uint64_t i = 0; i < a->pages - TAIL_HOLE_PAGES; i++) {
		uint64_t r = mix(seed ^ (i * 0x9e37ull));
		if (r % per)
			continue;
		uint8_t *p = a->heap + i * PAGE;
		switch ((r / per) % 4) {
		case 0: case 1:
			memset(p, (int)(r >> 40) | 1, PAGE);
			written_add(w, (uintptr_t)p);
			break;
		case 2:
			memset(p, 0, PAGE);
			written_add(w, (uintptr_t)p);
			break;
		case 3:
			punch_page(a, i, true);
			break;
		}
		changed++;
	}
	return changed;
}

static void check_is_heap(struct cxlcr_pool *pool, uint64_t generation, const struct arena_map *a, const char *what)
{
	static uint8_t got[PAGE];
	struct cxlcr_snapshot s;
	CHECK(cxlcr_snapshot_validate(pool, generation) == 0, "%s: %s", what, cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, generation, &s) == 0, "%s: %s", what, cxlcr_last_error());
	for (uint64_t i = 0; i < a->pages; i++) {
		CHECK(cxlcr_snapshot_read_page(&s, i, got) == 0, "%s", cxlcr_last_error());
		CHECK(memcmp(got, a->heap + i * PAGE, PAGE) == 0, "%s: page %llu differs from the heap", what,
		      (unsigned long long)i);
	}
	cxlcr_snapshot_close(&s);
}

/* What the daemon does once a snapshot is published: cxlcr_snapshot_trim()
 * gives back the room its finish left, and its region ends right after the
 * arena header's copy, which follows its copies. 1 if it shrank. The
 * space may be handed out at once (the chain's next draft, or garbage on
 * a pool that keeps its memory): check_is_heap() then reads through it. */
static uint32_t trim_to_contents(struct cxlcr_pool *pool, uint64_t generation, const char *what)
{
	struct cxlcr_snapshot s;
	CHECK(cxlcr_snapshot_open(pool, generation, &s) == 0, "%s: %s", what, cxlcr_last_error());
	uint64_t before = s.region.size;
	const struct cxlcr_snapshot_header *h = &s.header;
	CHECK(h->data_size == h->pages_own * PAGE && h->arena_header_offset == h->data_offset + h->data_size,
	      "%s: %llu own pages in a data area of %llu bytes, arena header's copy at %llu", what,
	      (unsigned long long)h->pages_own, (unsigned long long)h->data_size,
	      (unsigned long long)h->arena_header_offset);
	uint64_t want = (h->arena_header_offset + h->arena_header_size + CXLCR_POOL_ALIGN - 1) / CXLCR_POOL_ALIGN *
			CXLCR_POOL_ALIGN;
	cxlcr_snapshot_close(&s);
	uint64_t freed = 0;
	CHECK(cxlcr_snapshot_trim(pool, generation, &freed) == 0, "%s: %s", what, cxlcr_last_error());
	struct cxlcr_region r;
	cxlcr_region_get(pool, generation, &r);
	CHECK(r.size == want, "%s: trimmed to %llu bytes, not %llu", what, (unsigned long long)r.size,
	      (unsigned long long)want);
	CHECK(cxlcr_snapshot_trim(pool, generation, NULL) == 0, "%s: a second trim: %s", what, cxlcr_last_error());
	cxlcr_region_get(pool, generation, &r);
	CHECK(r.size == want, "%s: a second trim changed it", what);
	return want < before;
}

/*
 * Incremental snapshots: a chain of them, each taken on the one before,
 * copying only what was written since (and what changed while its draft
 * was made, in the finish); each holds the snapshot contents of its
 * instant; the older ones live on, tombstoned, while a newer one uses
 * their pages, and the last tombstone frees the whole chain.
 */
/* Of a chain's older snapshots, exactly those the newest holds (its bases)
 * are still there: a retired one that only newer ones hold lets go of its
 * own bases (it kept the whole chain alive before). */
static void check_only_bases_live(struct cxlcr_pool *pool, const uint64_t *gens, int newest)
{
	struct cxlcr_snapshot s;
	CHECK(cxlcr_snapshot_open(pool, gens[newest], &s) == 0, "%s", cxlcr_last_error());
	for (int k = 0; k < newest; k++) {
		bool used = false;
		for (uint32_t j = 0; j < s.header.base_count; j++)
			used |= s.header.bases[j].region_generation == gens[k];
		CHECK(region_live(pool, gens[k]) == used, "round %d: snapshot %d is %s, the newest %s it", newest, k,
		      used ? "gone" : "still there", used ? "uses" : "does not use");
	}
	cxlcr_snapshot_close(&s);
}

/*
 * Pre-copy (cxlcr_snapshot_draft_refresh()): passes bring a draft up to
 * date with what was written since the last scan while the service runs;
 * the finish then copies only what the last pass did not see. When a pass
 * runs out of room, what it could not copy comes back in `left`, and a
 * finish that takes it as written too holds the heap, or refuses (no room)
 * and a snapshot is made afresh: never one that misses a write.
 */
static void test_precopy(struct cxlcr_pool *pool)
{
	struct arena_map a;
	struct cxlcr_snapshot_info info;
	uint64_t seed = 0x9c0b, nonzero, holes, refreshed;

	SAY("pre-copy: passes between a draft and its finish");
	make_arena(pool, "psrc", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	struct cxlcr_arena_header *h = (void *)a.base;
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "pc1", &info) == 0, "%s", cxlcr_last_error());
	struct cxlcr_written pass = { 0 }, left = { 0 }, during = { 0 };
	uint64_t p0 = h->punches_begun;
	churn(&a, seed + 1, 50, &pass);
	h->scan_count++; /* the pass's scan */
	int rc = cxlcr_snapshot_draft_refresh(pool, a.region.generation, "pc1", &pass, &refreshed, &left);
	CHECK(rc == 0 && left.count == 0, "a pass with room: rc %d, %zu ranges left: %s", rc, left.count,
	      cxlcr_last_error());
	CHECK(refreshed > 0, "the pass brought no page up to date");
	churn(&a, seed + 2, 400, &during);
	h->scan_count++; /* the finish's scan */
	rc = cxlcr_snapshot_finish(pool, a.region.generation, "pc1", &during, &info);
	CHECK(rc == 0, "the finish after a pass: %d: %s", rc, cxlcr_last_error());
	CHECK(h->punches_begun - p0 > CXLCR_PUNCH_LOG || info.tracked, "the finish compared every page");
	/* It looked at what was written after the pass, and at the punched
	 * pages (a page each) from the punch log: not at the pass's writes. */
	uint64_t punched = h->punches_begun - p0;
	CHECK(info.pages_written <= during.bytes / PAGE + punched,
	      "the finish looked at %llu pages; %llu were written after the pass, %llu punched since the draft",
	      (unsigned long long)info.pages_written, (unsigned long long)(during.bytes / PAGE),
	      (unsigned long long)punched);
	check_is_heap(pool, info.region_generation, &a, "after a pass");
	cxlcr_snapshot_region_free(pool, info.region_generation);
	cxlcr_written_free(&pass);
	cxlcr_written_free(&during);

	SAY("pre-copy: a pass whose room runs out hands the rest to the finish");
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "pc2", &info) == 0, "%s", cxlcr_last_error());
	/* Pages that were zero at the draft need room of their own: more of
	 * them than it kept (256 + 1/16 of its copies). */
	uint64_t made = 0;
	for (uint64_t i = 0; i < a.pages - TAIL_HOLE_PAGES && made < 256 + nonzero / 8; i++) {
		uint8_t *p = a.heap + i * PAGE;
		if (!page_is_zero(p))
			continue;
		memset(p, 0x5a, PAGE);
		written_add(&pass, (uintptr_t)p);
		made++;
	}
	h->scan_count++;
	rc = cxlcr_snapshot_draft_refresh(pool, a.region.generation, "pc2", &pass, &refreshed, &left);
	CHECK(rc == 1 && left.count > 0, "a pass without room: rc %d, %zu ranges left", rc, left.count);
	churn(&a, seed + 3, 400, &during);
	for (size_t i = 0; i < left.count; i++)
		cxlcr_written_add(&during, left.ranges[i].start, left.ranges[i].end);
	h->scan_count++;
	rc = cxlcr_snapshot_finish(pool, a.region.generation, "pc2", &during, &info);
	if (rc == 1) { /* no room for them either: afresh, as the plugin does */
		struct cxlcr_region d;
		CHECK(cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, "pc2", &d), "the refused draft is gone");
		cxlcr_snapshot_region_free(pool, d.generation);
		CHECK(cxlcr_snapshot_create(pool, a.region.generation, "pc2", &info) == 0, "%s", cxlcr_last_error());
	} else {
		CHECK(rc == 0, "the finish after a pass without room: %s", cxlcr_last_error());
	}
	check_is_heap(pool, info.region_generation, &a, "after a pass without room");
	SAY("%llu pages made non-zero in the pass, %zu ranges left to the finish, which %s", (unsigned long long)made,
	    left.count, rc == 1 ? "had no room either (afresh)" : "took them");
	cxlcr_snapshot_region_free(pool, info.region_generation);
	cxlcr_written_free(&pass);
	cxlcr_written_free(&left);
	cxlcr_written_free(&during);

	SAY("pre-copy: what is left survives its file (cxlcr_written_save/load), and a damaged one is refused");
	struct cxlcr_written w = { 0 }, back = { 0 };
	written_add(&w, (uintptr_t)a.heap);
	written_add(&w, (uintptr_t)a.heap + 9 * PAGE);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0 && cxlcr_written_save(dfd, "pending.img", &w) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_written_load(dfd, "pending.img", &back) == 0 && back.count == 2 && back.bytes == w.bytes,
	      "loaded %zu ranges", back.count);
	/* Damage: byte 20 flipped (a fixed byte written there was a no-op
	 * whenever the file held that byte already: a heap address's). */
	int f = openat(dfd, "pending.img", O_RDWR);
	unsigned char byte = 0;
	CHECK(f >= 0 && pread(f, &byte, 1, 20) == 1, "read");
	byte ^= 0xff;
	CHECK(pwrite(f, &byte, 1, 20) == 1, "damage");
	close(f);
	cxlcr_written_free(&back);
	CHECK(cxlcr_written_load(dfd, "pending.img", &back) < 0, "a damaged file was taken");
	CHECK(cxlcr_written_load(dfd, "none.img", &back) == 0 && back.count == 0, "no file: nothing");
	unlinkat(dfd, "pending.img", 0);
	close(dfd);
	cxlcr_written_free(&w);
	cxlcr_written_free(&back);
	check_nothing_leaked(pool);
	drop_arena(pool, &a);
}

/*
 * On a pool that keeps its memory, freed space holds what its last region
 * wrote, and a draft's region is not cleared (cxlcr_region_alloc_uncleared):
 * fills the first free stretch of `size` with a pattern no heap page holds,
 * and frees it again, so that the next draft lands on garbage. Returns the
 * stretch's pool offset.
 */
static uint64_t poison_free_space(struct cxlcr_pool *pool, uint64_t size)
{
	struct cxlcr_region r;
	CHECK(cxlcr_region_alloc(pool, CXLCR_KIND_SNAPSHOT, "poison", size, &r) == 0, "%s", cxlcr_last_error());
	uint8_t *m = cxlcr_pool_map(pool, r.offset, r.size, 0, 0);
	CHECK(m, "%s", cxlcr_last_error());
	memset(m, 0xa5, r.size);
	cxlcr_publish(m, r.size);
	CHECK(munmap(m, r.size) == 0);
	CHECK(cxlcr_region_free(pool, r.generation) == 0, "%s", cxlcr_last_error());
	return r.offset;
}

/* The pages listed as changed between two snapshots of a chain: every
 * page that holds data and whose contents differ is there, and nothing
 * cur did not copy (the list of an incremental snapshot is its own
 * copies, not compared again). */
static void check_changed_pages(struct cxlcr_pool *pool, uint64_t prev_gen, uint64_t cur_gen, uint64_t own, int round)
{
	struct cxlcr_snapshot prev, cur;
	CHECK(cxlcr_snapshot_open(pool, prev_gen, &prev) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, cur_gen, &cur) == 0, "%s", cxlcr_last_error());
	uint64_t *pages = NULL, count = 0, at = 0, differ = 0;
	CHECK(cxlcr_snapshot_changed_pages(&prev, &cur, &pages, &count) == 0, "%s", cxlcr_last_error());
	static uint8_t x[PAGE], y[PAGE];
	for (uint64_t i = 0; i < cur.header.page_count; i++) {
		uint32_t tier;
		uint64_t offset;
		CHECK(cxlcr_snapshot_page_offset(&cur, i, &tier, &offset) == 0, "%s", cxlcr_last_error());
		if (tier != CXLCR_TIER_CXL)
			continue; /* zero now: a child gets it on its fault, not listed */
		CHECK(cxlcr_snapshot_read_page(&prev, i, x) == 0 && cxlcr_snapshot_read_page(&cur, i, y) == 0, "%s",
		      cxlcr_last_error());
		while (at < count && pages[at] < i)
			at++;
		if (memcmp(x, y, PAGE) == 0)
			continue;
		differ++;
		CHECK(at < count && pages[at] == i, "round %d: page %llu changed and is not listed", round,
		      (unsigned long long)i);
	}
	CHECK(count <= own, "round %d: %llu pages listed as changed, %llu copied", round, (unsigned long long)count,
	      (unsigned long long)own);
	CHECK(differ > 0, "round %d: no page changed", round);
	free(pages);
	cxlcr_snapshot_close(&prev);
	cxlcr_snapshot_close(&cur);
}

static void test_incremental(struct cxlcr_pool *pool)
{
	struct arena_map a;
	struct cxlcr_snapshot_info info;
	uint64_t seed = 0x1c4e, nonzero, holes;
	enum { ROUNDS = 14 };
	uint64_t gens[ROUNDS];

	SAY("incremental snapshots: a chain of %d, each on the one before", ROUNDS);
	make_arena(pool, "isrc", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	struct cxlcr_arena_header *h = (void *)a.base;
	uint32_t on_poison = 0, shrunk = 0;
	for (int round = 0; round < ROUNDS; round++) {
		char name[32];
		snprintf(name, sizeof(name), "isnap%d", round);
		struct cxlcr_written since = { 0 }, during = { 0 };
		uint64_t changed = 0;
		const uint64_t poison_size = 3 * TEST_HEAP;
		uint64_t poison = pool->keeps_memory && round > 0 ? poison_free_space(pool, poison_size) : 0;
		if (round == 0) {
			CHECK(cxlcr_snapshot_draft(pool, a.region.generation, name, &info) == 0, "%s", cxlcr_last_error());
		} else {
			uint64_t p0 = h->punches_begun;
			changed = churn(&a, seed + (uint64_t)round, 100, &since);
			uint64_t punched = h->punches_begun - p0;
			struct cxlcr_borrow b;
			struct cxlcr_snapshot base;
			CHECK(cxlcr_catalog_borrow(pool, "isvc", NULL, &b) == 0, "%s", cxlcr_last_error());
			CHECK(cxlcr_snapshot_open(pool, b.snapshot_generation, &base) == 0, "%s", cxlcr_last_error());
			/* One round as after a point that failed: the writes since
			 * the base are not known, and every page is compared. */
			bool unknown = round == ROUNDS / 2;
			CHECK(cxlcr_snapshot_draft_on(pool, a.region.generation, name, &base, b.entry, b.generation,
						      unknown ? NULL : &since, 0, &info) == 0,
			      "round %d: %s", round, cxlcr_last_error());
			cxlcr_snapshot_close(&base);
			CHECK(cxlcr_catalog_return(pool, &b) == 0, "%s", cxlcr_last_error());
			on_poison += poison && info.region_offset >= poison &&
				     info.region_offset + info.region_size <= poison + poison_size;
			/* The punches since the base come from the log when it
			 * holds them all: no page is compared. */
			CHECK(unknown ? info.compared_because && strstr(info.compared_because, "not known")
				: punched > CXLCR_PUNCH_LOG ? info.compared_because != NULL
							    : !info.compared_because && info.punches_logged == punched,
			      "round %d: %llu punches since the base, %u from the log, compared because %s", round,
			      (unsigned long long)punched, info.punches_logged,
			      info.compared_because ? info.compared_because : "-");
			/* What changed, and the pages of the least used base if
			 * there were too many bases to keep (at most 1/(MAX+1)). */
			CHECK(info.pages_own <= changed + info.pages_cxl / (CXLCR_SNAPSHOT_BASES_MAX + 1),
			      "round %d: the draft copied %llu pages for %llu changed", round,
			      (unsigned long long)info.pages_own, (unsigned long long)changed);
		}
		/* While the draft is made: more writes, some on pages it shares
		 * with its bases, some on pages that were zero. */
		uint64_t p1 = h->punches_begun;
		changed += churn(&a, seed * 7 + (uint64_t)round, 400, &during);
		uint64_t punched_during = h->punches_begun - p1;
		h->scan_count++; /* the finish's scan */
		CHECK(cxlcr_snapshot_finish(pool, a.region.generation, name, &during, &info) == 0, "round %d: %s", round,
		      cxlcr_last_error());
		CHECK(punched_during > CXLCR_PUNCH_LOG || (info.tracked && info.punches_logged == punched_during),
		      "round %d: %llu punches during the draft, %u from the log, tracked %d", round,
		      (unsigned long long)punched_during, info.punches_logged, info.tracked);
		gens[round] = info.region_generation;
		if (round > 0) { /* while its base is the catalog's newest */
			check_changed_pages(pool, gens[round - 1], gens[round], info.pages_own, round);
			bool freed;
			/* A base the new snapshot uses is held and outlives its
			 * tombstone (the new one opens only with its bases live:
			 * check_is_heap below); one it does not use (its pages
			 * all changed, or it was the least used of too many) goes. */
			CHECK(cxlcr_catalog_tombstone(pool, "isvc", &freed) == 0, "%s", cxlcr_last_error());
			CHECK(!freed || !region_live(pool, gens[round - 1]), "round %d: the base says freed but lives", round);
			CHECK(info.base_count >= 1 && info.base_count <= CXLCR_SNAPSHOT_BASES_MAX, "round %d: %u bases",
			      round, info.base_count);
			CHECK(info.pages_own <= changed + info.pages_cxl / (CXLCR_SNAPSHOT_BASES_MAX + 1),
			      "round %d: %llu pages stored for %llu changed", round,
			      (unsigned long long)info.pages_own, (unsigned long long)changed);
		}
		CHECK(cxlcr_catalog_publish(pool, "isvc", gens[round], NULL) == 0, "%s", cxlcr_last_error());
		shrunk += trim_to_contents(pool, gens[round], name);
		check_is_heap(pool, gens[round], &a, name);
		check_only_bases_live(pool, gens, round);
		SAY("round %d: %llu pages changed, %llu copied, %llu stored in all, %u bases, %u punches from the log",
		    round, (unsigned long long)changed, (unsigned long long)info.pages_own,
		    (unsigned long long)info.pages_cxl, info.base_count, info.punches_logged);
		cxlcr_written_free(&since);
		cxlcr_written_free(&during);
	}
	/* Each one is checked against the heap above, whatever its region
	 * held before: that is only a test of uncleared drafts if some did
	 * land on the pattern. */
	CHECK(!pool->keeps_memory || on_poison > 0, "no draft of the chain landed on freed space full of garbage");
	CHECK(shrunk > 0, "no snapshot of the chain gave room back");
	SAY("%u of %d snapshots gave their unused room back (their regions shrank), each one right", shrunk, ROUNDS);
	if (pool->keeps_memory)
		SAY("%u of %d drafts made on freed space full of garbage, each one right", on_poison, ROUNDS - 1);
	SAY("the last tombstone frees the whole chain");
	bool freed;
	CHECK(cxlcr_catalog_tombstone(pool, "isvc", &freed) == 0 && freed, "the newest snapshot was not freed");
	for (int round = 0; round < ROUNDS; round++)
		CHECK(!region_live(pool, gens[round]), "snapshot %d of the chain is still there", round);
	check_nothing_leaked(pool);

	SAY("a draft freed without its catalog (a verb that died): a reaper returns its holds");
	CHECK(cxlcr_snapshot_create(pool, a.region.generation, "iroot", &info) == 0, "%s", cxlcr_last_error());
	uint64_t root = info.region_generation;
	CHECK(cxlcr_catalog_publish(pool, "isvc", root, NULL) == 0, "%s", cxlcr_last_error());
	/* A full snapshot has no scan noted: mark it as a tracked finish's. */
	struct cxlcr_written one = { 0 };
	churn(&a, seed + 99, 100, &one);
	uint8_t *m = cxlcr_pool_map(pool, info.region_offset, CXLCR_SNAPSHOT_TABLE_OFFSET, 0, 0);
	CHECK(m);
	hdr(m)->track_scans = 1;
	reseal_header(hdr(m));
	CHECK(munmap(m, CXLCR_SNAPSHOT_TABLE_OFFSET) == 0);
	struct cxlcr_borrow b;
	struct cxlcr_snapshot base;
	CHECK(cxlcr_catalog_borrow(pool, "isvc", NULL, &b) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, root, &base) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_draft_on(pool, a.region.generation, "idraft", &base, b.entry, b.generation, &one, 0, &info) == 0,
	      "%s", cxlcr_last_error());
	cxlcr_snapshot_close(&base);
	cxlcr_catalog_return(pool, &b);
	cxlcr_written_free(&one);
	CHECK(cxlcr_catalog_tombstone(pool, "isvc", &freed) == 0 && !freed, "the held base was freed");
	CHECK(cxlcr_region_free(pool, info.region_generation) == 0, "%s", cxlcr_last_error()); /* not through the catalog */
	CHECK(region_live(pool, root), "the base went before its holder was seen gone");
	struct cxlcr_reap_report rep;
	CHECK(cxlcr_catalog_reap(pool, &rep) == 1, "the reaper dropped %u borrows: %s", rep.borrows_dropped,
	      cxlcr_last_error());
	CHECK(rep.snapshots_freed == 1 && !region_live(pool, root), "the reaper did not free the base of a freed draft");
	check_nothing_leaked(pool);
	drop_arena(pool, &a);
}

static void test_catalog_basics(struct cxlcr_pool *pool, struct arena_map *a)
{
	struct cxlcr_catalog_info info, found;
	struct cxlcr_borrow b1, b2;
	bool freed;

	SAY("catalog: before any publish, names are not found and reaping does nothing");
	CHECK_ERROR(cxlcr_catalog_find(pool, "s1", &found), "no snapshot named 's1'");
	CHECK_EQ(cxlcr_catalog_reap(pool, NULL), 0);

	SAY("publish s1: created on first use, PUBLISHED, refcount 0");
	uint64_t s1 = publish_snapshot(pool, a, "s1", &info);
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_CATALOG, CXLCR_CATALOG_REGION, NULL));
	CHECK_EQ(info.state, CXLCR_CATALOG_PUBLISHED);
	CHECK(info.generation > 0);
	CHECK_EQ(info.refcount, 0);
	CHECK_EQ(info.snapshot_generation, s1);
	CHECK(cxlcr_catalog_find(pool, "s1", &found) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(found.index, info.index);
	CHECK_EQ(found.generation, info.generation);

	SAY("refused: the same name again, the same snapshot under another name, a missing snapshot");
	CHECK_ERROR(cxlcr_catalog_publish(pool, "s1", s1, NULL), "already");
	CHECK_ERROR(cxlcr_catalog_publish(pool, "s1-again", s1, NULL), "already in the catalog as 's1'");
	CHECK_ERROR(cxlcr_catalog_publish(pool, "nothing", 999999, NULL), "is gone");
	CHECK_ERROR(cxlcr_catalog_publish(pool, "arena", a->region.generation, NULL), "is not a snapshot");
	CHECK_ERROR(cxlcr_catalog_find(pool, "nope", &found), "no snapshot named 'nope'");

	SAY("borrow twice: refcount 2, two slots; return one: refcount 1");
	CHECK(cxlcr_catalog_borrow(pool, "s1", NULL, &b1) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_borrow(pool, "s1", NULL, &b2) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(b1.snapshot_generation, s1);
	CHECK(b1.slot != b2.slot);
	info = entry_info(pool, b1.entry);
	CHECK_EQ(info.refcount, 2);
	CHECK_EQ(info.slots_claimed, 2);
	CHECK(cxlcr_catalog_return(pool, &b2) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(entry_info(pool, b1.entry).refcount, 1);
	CHECK_ERROR(cxlcr_catalog_return(pool, &b2), "not borrowed");
	SAY("the reaper leaves a live borrower alone");
	CHECK_EQ(cxlcr_catalog_reap(pool, NULL), 0);
	CHECK_EQ(entry_info(pool, b1.entry).refcount, 1);

	SAY("tombstone while borrowed: not freed, no longer found or borrowable, the region stays");
	CHECK(cxlcr_catalog_tombstone(pool, "s1", &freed) == 0, "%s", cxlcr_last_error());
	CHECK(!freed);
	CHECK_EQ(entry_info(pool, b1.entry).state, CXLCR_CATALOG_TOMBSTONE);
	CHECK_ERROR(cxlcr_catalog_find(pool, "s1", &found), "no snapshot named 's1'");
	CHECK_ERROR(cxlcr_catalog_borrow(pool, "s1", NULL, &b2), "no snapshot named 's1'");
	CHECK_ERROR(cxlcr_catalog_tombstone(pool, "s1", &freed), "no snapshot named 's1'");
	CHECK(region_live(pool, s1));
	CHECK(cxlcr_snapshot_validate(pool, s1) == 0, "%s", cxlcr_last_error());
	SAY("the last return frees it: region gone, entry FREE");
	CHECK(cxlcr_catalog_return(pool, &b1) == 0, "%s", cxlcr_last_error());
	CHECK(!region_live(pool, s1), "tombstoned snapshot still allocated after the last return");
	info = entry_info(pool, b1.entry);
	CHECK_EQ(info.state, CXLCR_CATALOG_FREE);
	CHECK_EQ(info.refcount, 0);

	SAY("tombstone without borrowers frees at once; the name can be published again");
	uint64_t again = publish_snapshot(pool, a, "s1", &info);
	CHECK(cxlcr_catalog_tombstone(pool, "s1", &freed) == 0, "%s", cxlcr_last_error());
	CHECK(freed);
	CHECK(!region_live(pool, again));
	check_nothing_leaked(pool);
}

static void test_generation_recheck(struct cxlcr_pool *pool, struct arena_map *a)
{
	struct cxlcr_catalog_info info, reused;
	struct cxlcr_borrow ticket, holder;
	bool freed;

	SAY("re-check: look s2 up; meanwhile s2 is tombstoned, freed, and its entry reused for s3");
	uint64_t s2 = publish_snapshot(pool, a, "s2", &info);
	CHECK(cxlcr_catalog_borrow_begin(pool, "s2", &ticket) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(ticket.entry, info.index);
	CHECK_EQ(ticket.generation, info.generation);
	CHECK(cxlcr_catalog_tombstone(pool, "s2", &freed) == 0 && freed, "%s", cxlcr_last_error());
	CHECK(!region_live(pool, s2));
	uint64_t s3 = publish_snapshot(pool, a, "s3", &reused);
	CHECK(reused.index == ticket.entry, "s3 went to entry %u, not the freed %u", reused.index, ticket.entry);
	CHECK(reused.generation > ticket.generation);
	SAY("confirming the stale look-up fails (the entry is s3 now), and leaves no reference behind");
	CHECK_ERROR(cxlcr_catalog_borrow_confirm(pool, NULL, &ticket), "was replaced");
	CHECK_EQ(ticket.token, 0);
	info = entry_info(pool, reused.index);
	CHECK_EQ(info.state, CXLCR_CATALOG_PUBLISHED);
	CHECK(!strcmp(info.name, "s3"));
	CHECK_EQ(info.refcount, 0);
	CHECK_EQ(info.slots_claimed, 0);
	CHECK(region_live(pool, s3));

	SAY("re-check: look s3 up; meanwhile another borrower holds it and it is tombstoned");
	CHECK(cxlcr_catalog_borrow_begin(pool, "s3", &ticket) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_borrow(pool, "s3", NULL, &holder) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_tombstone(pool, "s3", &freed) == 0 && !freed, "%s", cxlcr_last_error());
	CHECK_ERROR(cxlcr_catalog_borrow_confirm(pool, NULL, &ticket), "was tombstoned");
	CHECK_EQ(entry_info(pool, reused.index).refcount, 1);
	CHECK(region_live(pool, s3), "the failed confirm freed a snapshot that is still held");
	SAY("the holder's return is the last: s3 is freed");
	CHECK(cxlcr_catalog_return(pool, &holder) == 0, "%s", cxlcr_last_error());
	CHECK(!region_live(pool, s3));

	check_nothing_leaked(pool);
}

/* What a borrower did, sent to the parent through a pipe. */
struct borrow_tally {
	int borrowed;
	int refused;     /* the name was missing or the entry changed meanwhile */
};

/* Whether the parent closed the stop pipe (non-blocking). */
static bool told_to_stop(int stop_fd)
{
	char c;
	return stop_fd >= 0 && read(stop_fd, &c, 1) == 0;
}

/* Borrows name, checks the snapshot while it holds it (whole, valid, the
 * contents of a heap filled with seed), returns it; count times. A refused
 * borrow ends the loop; with churn (the name is being republished) it is
 * counted and tried again, until the stop pipe closes. Exits 0, or 1 on a
 * failed check. */
static void borrower(const char *name, int go_fd, int stop_fd, int tally_fd, int count, bool churn,
		     uint64_t seed)
{
	char c;
	if (read(go_fd, &c, 1) < 0)
		_exit(2);
	struct cxlcr_pool pool;
	CHECK(cxlcr_pool_open(&pool, path) == 0, "%s", cxlcr_last_error());
	static uint8_t want[PAGE], got[PAGE];
	struct borrow_tally tally = { 0, 0 };
	uint64_t rng = (uint64_t)getpid();
	for (int i = 0; i < count && !told_to_stop(stop_fd); i++) {
		struct cxlcr_borrow b;
		if (cxlcr_catalog_borrow(&pool, name, NULL, &b) < 0) {
			const char *e = cxlcr_last_error();
			CHECK(strstr(e, "no snapshot named") || strstr(e, "tombstoned") || strstr(e, "replaced"),
			      "%s", e);
			tally.refused++;
			if (!churn)
				break;
			sched_yield();
			continue;
		}
		tally.borrowed++;
		struct cxlcr_snapshot s;
		CHECK(cxlcr_snapshot_open(&pool, b.snapshot_generation, &s) == 0, "borrowed: %s",
		      cxlcr_last_error());
		uint64_t page = rng_range(&rng, 0, s.header.page_count - 1);
		CHECK(cxlcr_snapshot_read_page(&s, page, got) == 0, "%s", cxlcr_last_error());
		expected_page(seed, page, want);
		CHECK(memcmp(got, want, PAGE) == 0, "borrowed snapshot page %llu differs", (unsigned long long)page);
		cxlcr_snapshot_close(&s);
		CHECK(cxlcr_catalog_return(&pool, &b) == 0, "%s", cxlcr_last_error());
		if (churn) {   /* leave the republishing process some of the two CPUs */
			struct timespec pause = { 0, 1000 * 1000 };
			nanosleep(&pause, NULL);
		}
	}
	cxlcr_pool_close(&pool);
	CHECK(write(tally_fd, &tally, sizeof(tally)) == sizeof(tally));
	_exit(0);
}

struct borrowers {
	pid_t pids[BORROWERS];
	int go;          /* closing it starts them */
	int stop;        /* closing it stops them (with churn) */
	int tally;       /* their tallies */
};

/* Forks BORROWERS borrowers of name, waiting on a pipe to start. */
static void start_borrowers(struct borrowers *bs, const char *name, int count, bool churn, uint64_t seed)
{
	int go[2], stop[2], tally[2];
	CHECK(pipe(go) == 0 && pipe2(stop, O_NONBLOCK) == 0 && pipe(tally) == 0);
	fflush(stdout);
	for (int i = 0; i < BORROWERS; i++) {
		bs->pids[i] = fork();
		CHECK(bs->pids[i] >= 0, "fork: %s", strerror(errno));
		if (bs->pids[i] == 0) {
			close(go[1]);
			close(stop[1]);
			close(tally[0]);
			borrower(name, go[0], churn ? stop[0] : -1, tally[1], count, churn, seed);
		}
	}
	close(go[0]);
	close(stop[0]);
	close(tally[1]);
	bs->go = go[1];
	bs->stop = stop[1];
	bs->tally = tally[0];
}

/* Waits for every borrower; all must have passed. Their tallies, summed. */
static struct borrow_tally wait_borrowers(struct borrowers *bs)
{
	struct borrow_tally sum = { 0, 0 }, one;
	int failed = 0;
	close(bs->stop);
	for (int i = 0; i < BORROWERS; i++) {
		int status;
		CHECK(waitpid(bs->pids[i], &status, 0) == bs->pids[i]);
		failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	}
	CHECK(failed == 0, "%d of %d borrowers failed", failed, BORROWERS);
	while (read(bs->tally, &one, sizeof(one)) == sizeof(one)) {
		sum.borrowed += one.borrowed;
		sum.refused += one.refused;
	}
	close(bs->tally);
	return sum;
}

/* The catalog's entry index, mapped (for a test that rewinds it). */
static struct cxlcr_catalog_entry *map_entry(struct cxlcr_pool *pool, uint32_t index, void **base, size_t *size)
{
	struct cxlcr_region r;
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_CATALOG, CXLCR_CATALOG_REGION, &r), "no catalog");
	*base = cxlcr_pool_map(pool, r.offset, r.size, 0, 0);
	CHECK(*base, "%s", cxlcr_last_error());
	*size = r.size;
	return (struct cxlcr_catalog_entry *)(void *)((char *)*base + CXLCR_CATALOG_HEADER_SIZE) + index;
}

/*
 * A recovery point replaces the service's previous one. A worker may die
 * at any instant of that, and the service must still have a point: the
 * new one is published before the old one leaves, and a name published
 * twice (a replacer that died between the two) is read as its newest.
 */
static void test_replace(struct cxlcr_pool *pool, struct arena_map *a)
{
	struct cxlcr_catalog_info old, cur, found;
	struct cxlcr_snapshot_info si;
	struct cxlcr_borrow held, b;
	bool freed;

	SAY("replace: p1 published as 'pt', held; p2 replaces it: found as 'pt', p1 tombstoned and kept");
	uint64_t p1 = publish_snapshot(pool, a, "pt", &old);
	CHECK(cxlcr_catalog_borrow(pool, "pt", NULL, &held) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_create(pool, a->region.generation, "pt-2", &si) == 0, "%s", cxlcr_last_error());
	uint64_t p2 = si.region_generation;
	CHECK(cxlcr_catalog_replace(pool, "pt", p2, &cur) == 0, "%s", cxlcr_last_error());
	CHECK(cur.generation > old.generation);
	CHECK(cxlcr_catalog_find(pool, "pt", &found) == 0 && found.snapshot_generation == p2, "found %llu",
	      (unsigned long long)found.snapshot_generation);
	CHECK_EQ(entry_info(pool, old.index).state, CXLCR_CATALOG_TOMBSTONE);
	CHECK(region_live(pool, p1), "the held p1 was freed");
	CHECK_ERROR(cxlcr_catalog_replace(pool, "other", p2, NULL), "already in the catalog as 'pt'");

	SAY("a replacer that died after its publish: p1 published again beside p2; the newest, p2, is found and borrowed");
	void *base;
	size_t size;
	struct cxlcr_catalog_entry *e = map_entry(pool, old.index, &base, &size);
	uint64_t tomb = CXLCR_CATALOG_STATUS(old.generation, CXLCR_CATALOG_TOMBSTONE);
	CHECK(__atomic_compare_exchange_n(&e->status, &tomb, CXLCR_CATALOG_STATUS(old.generation, CXLCR_CATALOG_PUBLISHED),
					  false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST), "p1's entry moved");
	munmap(base, size);
	CHECK(cxlcr_catalog_find(pool, "pt", &found) == 0 && found.snapshot_generation == p2, "found %llu, not p2",
	      (unsigned long long)found.snapshot_generation);
	CHECK(cxlcr_catalog_borrow(pool, "pt", NULL, &b) == 0 && b.snapshot_generation == p2, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_return(pool, &b) == 0, "%s", cxlcr_last_error());

	SAY("the next replace retires both older ones; the last return frees p1");
	CHECK(cxlcr_snapshot_create(pool, a->region.generation, "pt-3", &si) == 0, "%s", cxlcr_last_error());
	uint64_t p3 = si.region_generation;
	CHECK(cxlcr_catalog_replace(pool, "pt", p3, NULL) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_find(pool, "pt", &found) == 0 && found.snapshot_generation == p3);
	CHECK(!region_live(pool, p2), "p2 (unheld) was not freed by the replace");
	CHECK_EQ(entry_info(pool, old.index).state, CXLCR_CATALOG_TOMBSTONE);
	CHECK(cxlcr_catalog_return(pool, &held) == 0, "%s", cxlcr_last_error());
	CHECK(!region_live(pool, p1), "p1 outlived its last borrower");

	SAY("replaces under a reader that looks the name up all the while: it is never missing");
	int ready[2];
	CHECK(pipe(ready) == 0, "%s", strerror(errno));
	pid_t reader = fork();
	CHECK(reader >= 0, "fork: %s", strerror(errno));
	if (reader == 0) {
		close(ready[0]);
		unsigned misses = 0, looks = 0;
		struct cxlcr_catalog_info r;
		CHECK(write(ready[1], "r", 1) == 1);
		for (;;) {
			bool is_there = cxlcr_catalog_find(pool, "pt", &r) == 0;
			looks++;
			if (!is_there && cxlcr_catalog_find(pool, "pt-stop", &r) == 0)
				break;
			misses += !is_there;
		}
		printf("    reader: %u look-ups, %u found nothing\n", looks, misses);
		fflush(stdout);
		_exit(misses ? 1 : 0);
	}
	close(ready[1]);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	for (int i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "pt-r%d", i);
		CHECK(cxlcr_snapshot_create(pool, a->region.generation, name, &si) == 0, "%s", cxlcr_last_error());
		CHECK(cxlcr_catalog_replace(pool, "pt", si.region_generation, NULL) == 0, "%s", cxlcr_last_error());
	}
	uint64_t stop = publish_snapshot(pool, a, "pt-stop", NULL);
	CHECK(cxlcr_catalog_tombstone(pool, "pt", &freed) == 0 && freed, "%s", cxlcr_last_error());
	int status;
	CHECK(waitpid(reader, &status, 0) == reader);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the reader found no 'pt' while it was being replaced");
	CHECK(cxlcr_catalog_tombstone(pool, "pt-stop", &freed) == 0 && freed, "%s", cxlcr_last_error());
	CHECK(!region_live(pool, stop));
	check_nothing_leaked(pool);
}

static void test_concurrent_borrowers(struct cxlcr_pool *pool, struct arena_map *a, uint64_t seed)
{
	struct cxlcr_catalog_info info;
	struct borrowers bs;
	bool freed;

	SAY("%d processes borrow, read and return s5 %d times each, at once", BORROWERS, BORROWS_EACH);
	uint64_t s5 = publish_snapshot(pool, a, "s5", &info);
	start_borrowers(&bs, "s5", BORROWS_EACH, false, seed);
	close(bs.go);
	struct borrow_tally t = wait_borrowers(&bs);
	CHECK_EQ(t.borrowed, BORROWERS * BORROWS_EACH);
	SAY("afterwards: refcount 0, no slot claimed, still published");
	info = entry_info(pool, info.index);
	CHECK_EQ(info.refcount, 0);
	CHECK_EQ(info.slots_claimed, 0);
	CHECK_EQ(info.state, CXLCR_CATALOG_PUBLISHED);
	CHECK(region_live(pool, s5));

	SAY("again, and s5 is tombstoned while they borrow: freed once, after the last return");
	start_borrowers(&bs, "s5", 1000000, false, seed);
	close(bs.go);
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	CHECK(cxlcr_catalog_tombstone(pool, "s5", &freed) == 0, "%s", cxlcr_last_error());
	t = wait_borrowers(&bs);
	SAY("tombstoned after %d borrows (freed by the tombstone itself: %s)", t.borrowed, freed ? "yes" : "no");
	CHECK(!region_live(pool, s5), "s5 not freed after every borrower returned it");
	CHECK_EQ(entry_info(pool, info.index).state, CXLCR_CATALOG_FREE);
	check_nothing_leaked(pool);

	SAY("churn: 'live' is republished from a new snapshot 20 times while %d processes borrow it",
	    BORROWERS);
	struct cxlcr_snapshot_info si;
	CHECK(cxlcr_snapshot_create(pool, a->region.generation, "live-1", &si) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_publish(pool, "live", si.region_generation, NULL) == 0, "%s", cxlcr_last_error());
	start_borrowers(&bs, "live", 1 << 30, true, seed);
	close(bs.go);
	for (int k = 2; k < 22; k++) {
		char region_name[32];
		snprintf(region_name, sizeof(region_name), "live-%d", k);
		CHECK(cxlcr_snapshot_create(pool, a->region.generation, region_name, &si) == 0, "%s",
		      cxlcr_last_error());
		CHECK(cxlcr_catalog_tombstone(pool, "live", &freed) == 0, "%s", cxlcr_last_error());
		CHECK(cxlcr_catalog_publish(pool, "live", si.region_generation, NULL) == 0, "%s",
		      cxlcr_last_error());
	}
	t = wait_borrowers(&bs);
	SAY("%d borrows held a whole snapshot, %d were refused while the name was being replaced",
	    t.borrowed, t.refused);
	CHECK(cxlcr_catalog_tombstone(pool, "live", &freed) == 0 && freed, "%s", cxlcr_last_error());
	check_nothing_leaked(pool);
}

/* A child that borrows name and dies without returning it. */
static void dead_borrower(struct cxlcr_pool *pool, const char *name, bool wait_for_it)
{
	int done[2];
	CHECK(pipe(done) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(done[0]);
		struct cxlcr_borrow b;
		CHECK(cxlcr_catalog_borrow(pool, name, NULL, &b) == 0, "%s", cxlcr_last_error());
		_exit(0);
	}
	close(done[1]);
	char c;
	CHECK(read(done[0], &c, 1) == 0);   /* end of file: the child has exited */
	close(done[0]);
	/* End of file comes while the child is still exiting: wait until it
	 * has, and with wait_for_it reap it, else leave it a zombie. */
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)pid, &si, WEXITED | (wait_for_it ? 0 : WNOWAIT)) == 0, "%s", strerror(errno));
	CHECK(si.si_code == CLD_EXITED && si.si_status == 0, "borrowing child: code %d status %d",
	      si.si_code, si.si_status);
}

/* The slot of entry index whose pid is pid, in a writable mapping of the
 * catalog (to fake what a crash or another host would leave). */
static struct cxlcr_catalog_borrow *slot_of(struct cxlcr_catalog_entry *entries, uint32_t index, int32_t pid)
{
	for (uint32_t i = 0; i < CXLCR_CATALOG_BORROWERS; i++)
		if (entries[index].borrows[i].token && entries[index].borrows[i].pid == pid)
			return &entries[index].borrows[i];
	return NULL;
}

static void test_dead_borrowers(struct cxlcr_pool *pool, struct arena_map *a)
{
	struct cxlcr_catalog_info info;
	struct cxlcr_reap_report rep;
	struct cxlcr_borrow mine, far, far_live;
	bool freed;

	SAY("a dead borrower (a child that _exit()s holding s6, not yet waited for) is reaped");
	uint64_t s6 = publish_snapshot(pool, a, "s6", &info);
	dead_borrower(pool, "s6", false);
	CHECK_EQ(entry_info(pool, info.index).refcount, 1);
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 1);
	CHECK_EQ(rep.references_dropped, 1);
	CHECK_EQ(entry_info(pool, info.index).refcount, 0);
	CHECK_EQ(entry_info(pool, info.index).slots_claimed, 0);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;

	SAY("a dead borrower of a tombstoned snapshot: the reaper frees the snapshot");
	dead_borrower(pool, "s6", true);
	CHECK(cxlcr_catalog_tombstone(pool, "s6", &freed) == 0 && !freed, "%s", cxlcr_last_error());
	CHECK(region_live(pool, s6));
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 1);
	CHECK_EQ(rep.snapshots_freed, 1);
	CHECK(!region_live(pool, s6));
	CHECK_EQ(entry_info(pool, info.index).state, CXLCR_CATALOG_FREE);

	SAY("borrows from other hosts: never reaped by a reaper that keeps no watch");
	uint64_t s7 = publish_snapshot(pool, a, "s7", &info);
	struct cxlcr_host_reg beat;
	CHECK(cxlcr_host_join(pool, "other-host", "", 0, LEASE / 4, &beat) == 0, "%s", cxlcr_last_error());
	struct cxlcr_borrower elsewhere = { .pid = 4242, .host = "other-host" };
	struct cxlcr_borrower no_daemon = { .pid = 4243, .host = "host-without-daemon" };
	CHECK(cxlcr_catalog_borrow(pool, "s7", &elsewhere, &far) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_borrow(pool, "s7", &no_daemon, &far_live) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 0);

	/* Times are our monotonic clock as the watching reaper passes it:
	 * a lease is LEASE, and the borrows were made "long ago" by any
	 * wall clock (nothing in them is a time the reaper reads). */
	SAY("a watching reaper: other-host's borrow stays while its heartbeat advances, however long");
	struct cxlcr_hosts_watch watch;
	cxlcr_hosts_watch_init(&watch, LEASE);
	uint64_t t = 1000 * LEASE;
	for (int i = 0; i < 8; i++, t += LEASE) {
		CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t, &rep), 0);
		CHECK(cxlcr_host_beat(pool, &beat) == 0, "%s", cxlcr_last_error());
	}
	CHECK_EQ(entry_info(pool, info.index).refcount, 2);
	SAY("... and after it stood still for less than a lease");
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t, &rep), 0);
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + LEASE - 1, &rep), 0);
	SAY("a daemon started again (new incarnation, same slot): still alive");
	CHECK(cxlcr_host_join(pool, "other-host", "", 0, LEASE / 4, &beat) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + LEASE + 1, &rep), 0);
	t += LEASE + 1;
	SAY("once its heartbeat stood still for a whole lease, as this reaper saw it: reaped");
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + LEASE, &rep), 1);
	CHECK_EQ(rep.references_dropped, 1);
	CHECK_ERROR(cxlcr_catalog_return(pool, &far), "was taken back");
	SAY("a borrow from a host where no daemon runs is never reaped by age");
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + 100 * LEASE, &rep), 0);
	CHECK_EQ(entry_info(pool, info.index).refcount, 1);
	SAY("a host whose daemon left in order: its borrows are not reaped by age either");
	CHECK(cxlcr_host_join(pool, "other-host", "", 0, LEASE / 4, &beat) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_borrow(pool, "s7", &elsewhere, &far) == 0, "%s", cxlcr_last_error());
	cxlcr_host_leave(pool, &beat);
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + 200 * LEASE, &rep), 0);
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + 400 * LEASE, &rep), 0);
	CHECK(cxlcr_catalog_return(pool, &far) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_return(pool, &far_live) == 0, "%s", cxlcr_last_error());

	SAY("refused: a borrow for a pid of this host that does not exist");
	struct cxlcr_borrower ghost = { .pid = 0x3ffffff0 };
	CHECK_ERROR(cxlcr_catalog_borrow(pool, "s7", &ghost, &far), "no such process");

	/* What a crash or a reused pid leaves, faked in the catalog itself. */
	struct cxlcr_region crr, *cr = &crr;
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_CATALOG, CXLCR_CATALOG_REGION, cr));
	uint8_t *cm = cxlcr_pool_map(pool, cr->offset, cr->size, 0, 0);
	CHECK(cm, "%s", cxlcr_last_error());
	struct cxlcr_catalog_entry *entries = (void *)(cm + CXLCR_CATALOG_HEADER_SIZE);

	SAY("a late returner whose slot was reaped and taken by a newcomer leaves the newcomer alone");
	CHECK(cxlcr_catalog_borrow(pool, "s7", NULL, &mine) == 0, "%s", cxlcr_last_error());
	struct cxlcr_catalog_borrow *taken = &entries[info.index].borrows[mine.slot];
	uint32_t taken_slot = mine.slot;
	uint64_t newcomer = taken->token ^ 0x40;   /* what a reap and a new claim leave */
	__atomic_store_n(&taken->token, newcomer, __ATOMIC_SEQ_CST);
	CHECK_ERROR(cxlcr_catalog_return(pool, &mine), "was taken back");
	CHECK_EQ(taken->token, newcomer);
	CHECK_EQ(taken->pid, getpid());
	CHECK(entries[info.index].holders & (1ull << taken_slot), "the newcomer's reference was dropped");
	mine.token = newcomer;
	mine.slot = taken_slot;
	CHECK(cxlcr_catalog_return(pool, &mine) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(entry_info(pool, info.index).refcount, 0);

	SAY("our own pid with another start time (the pid was reused): reaped");
	CHECK(cxlcr_catalog_borrow(pool, "s7", NULL, &mine) == 0, "%s", cxlcr_last_error());
	struct cxlcr_catalog_borrow *slot = slot_of(entries, info.index, getpid());
	CHECK(slot);
	slot->pid_start += 1;
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 1);
	CHECK_EQ(rep.references_dropped, 1);
	CHECK_EQ(entry_info(pool, info.index).refcount, 0);

	SAY("a slot claimed but never filled in: reaped once a watching reaper saw it so for a lease");
	struct cxlcr_catalog_borrow *raw = &entries[info.index].borrows[CXLCR_CATALOG_BORROWERS - 1];
	raw->token = 0x100;
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 0);
	t += 1000 * LEASE;
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t, &rep), 0);
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + LEASE - 1, &rep), 0);
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 0);
	CHECK_EQ(cxlcr_catalog_reap_watched(pool, &watch, t + LEASE, &rep), 1);
	CHECK_EQ(rep.references_dropped, 0);
	CHECK_EQ(raw->token, 0);

	SAY("a tombstone whose last returner died before freeing it: the reaper frees it");
	CHECK(cxlcr_catalog_tombstone(pool, "s7", &freed) == 0 && freed, "%s", cxlcr_last_error());
	CHECK(!region_live(pool, s7));
	uint64_t s8 = publish_snapshot(pool, a, "s8", &info);
	uint64_t status = entries[info.index].status;
	entries[info.index].status = CXLCR_CATALOG_STATUS(CXLCR_CATALOG_STATUS_GENERATION(status),
							 CXLCR_CATALOG_TOMBSTONE);
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 0);
	CHECK_EQ(rep.snapshots_freed, 1);
	CHECK(!region_live(pool, s8));

	SAY("a publish or a free left half done by a dead process: the reaper finishes it");
	uint64_t s9 = publish_snapshot(pool, a, "s9", &info);
	status = entries[info.index].status;
	entries[info.index].status = CXLCR_CATALOG_STATUS(CXLCR_CATALOG_STATUS_GENERATION(status),
							 CXLCR_CATALOG_FREEING);
	uint64_t s10 = publish_snapshot(pool, a, "s10", &info);
	status = entries[info.index].status;
	entries[info.index].status = CXLCR_CATALOG_STATUS(CXLCR_CATALOG_STATUS_GENERATION(status),
							 CXLCR_CATALOG_WRITING);
	CHECK_EQ(cxlcr_catalog_reap(pool, &rep), 0);
	CHECK_EQ(rep.entries_repaired, 2);
	CHECK(!region_live(pool, s9));
	CHECK(region_live(pool, s10), "an abandoned publish must not free the snapshot it named");
	CHECK_EQ(cxlcr_region_free(pool, s10), 0);   /* the caller of the failed publish owns it */
	CHECK(munmap(cm, cr->size) == 0);
	check_nothing_leaked(pool);
}

/* ---- timing ---- */

/* A heap of BENCH_HEAP bytes, half of its pages data, in runs of 1-64
 * pages. With all_touched, the zero pages are written too (no holes: every
 * page must be compared); else a quarter of them are. */
static uint64_t fill_bench_heap(struct arena_map *a, bool all_touched)
{
	uint64_t rng = 7, nonzero = 0;
	bool data = false;
	for (uint64_t i = 0; i < a->pages;) {
		uint64_t run = rng_range(&rng, 1, 64);
		bool touched = data || all_touched || rng_range(&rng, 0, 3) == 0;
		for (uint64_t k = 0; k < run && i < a->pages; k++, i++) {
			uint8_t *p = a->heap + i * PAGE;
			if (data) {
				memset(p, (int)(i % 251) + 1, PAGE);
				nonzero++;
			} else if (touched) {
				memset(p, 0, PAGE);
			}
		}
		data = !data;
	}
	return nonzero;
}

/* Times snapshots of a 1 GiB arena (three of each, the machine is shared). */
static void time_snapshots(struct cxlcr_pool *pool, bool all_touched)
{
	struct arena_map a;
	struct cxlcr_snapshot_info info;
	struct cxlcr_snapshot s;
	make_arena(pool, "bench", BENCH_HEAP, true, &a);
	uint64_t nonzero = fill_bench_heap(&a, all_touched);
	SAY("1 GiB arena, %llu of %llu pages non-zero, %s:", (unsigned long long)nonzero,
	    (unsigned long long)a.pages,
	    all_touched ? "every zero page written (no holes)" : "3/4 of the zero pages holes");
	for (int run = 0; run < 3; run++) {
		CHECK(cxlcr_snapshot_create(pool, a.region.generation, "bench-snap", &info) == 0, "%s",
		      cxlcr_last_error());
		CHECK_EQ(info.pages_cxl, nonzero);
		uint64_t t0 = cxlcr_mono_ns();
		CHECK(cxlcr_snapshot_open(pool, info.region_generation, &s) == 0, "%s", cxlcr_last_error());
		uint64_t open_ns = cxlcr_mono_ns() - t0;
		cxlcr_snapshot_close(&s);
		t0 = cxlcr_mono_ns();
		CHECK(cxlcr_snapshot_validate(pool, info.region_generation) == 0, "%s", cxlcr_last_error());
		uint64_t validate_ns = cxlcr_mono_ns() - t0;
		SAY("  snapshot in %.0f ms: finding the non-zero pages %.0f ms (%llu hole pages skipped), "
		    "copying %.0f ms (%.2f GiB/s); open (a fork's check) %.2f ms, validate %.2f ms",
		    (double)info.total_ns / 1e6, (double)info.scan_ns / 1e6,
		    (unsigned long long)info.holes_skipped, (double)info.copy_ns / 1e6,
		    (double)(info.pages_cxl * PAGE) / (1 << 30) / ((double)info.copy_ns / 1e9),
		    (double)open_ns / 1e6, (double)validate_ns / 1e6);
		CHECK(cxlcr_region_free(pool, info.region_generation) == 0);
	}
	drop_arena(pool, &a);
}

/* ---- main ---- */

/* On a failure too: what a test left in the directory goes with it (a
 * check that failed mid-way left pending.img, and the directory, behind). */
static void remove_dir(void)
{
	char left[sizeof(dir) + 16];
	unlink(path);
	snprintf(left, sizeof(left), "%s/pending.img", dir);
	unlink(left);
	rmdir(dir);
}

/* Grows arena a by one extent region of size bytes, mapped right after
 * its heap, as the preload does (grow.c); returns where it maps. */
static uint8_t *grow_arena(struct cxlcr_pool *pool, struct arena_map *a, uint64_t size,
			   struct cxlcr_region *ext)
{
	struct cxlcr_arena_header *h = (void *)a->base;
	uint32_t n = h->extent_count;
	char name[CXLCR_NAME_MAX];
	CHECK(cxlcr_extent_name(name, sizeof(name), a->region.name, n) == 0);
	CHECK(cxlcr_region_alloc(pool, CXLCR_KIND_EXTENT, name, size, ext) == 0, "%s", cxlcr_last_error());
	uint8_t *at = (uint8_t *)(uintptr_t)(h->heap_address + h->heap_size);
	CHECK(mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, pool->fd,
		   (off_t)ext->offset) == at, "cannot map extent %s after the heap", name);
	h->extents[n] = (struct cxlcr_arena_extent){ ext->generation, ext->offset, size, h->heap_size };
	h->extent_count = n + 1;
	h->heap_size += size;
	return at;
}

/* An arena that grew: its heap is contiguous where its owner maps it, in
 * pieces of the pool; a snapshot holds it all, a draft taken before the
 * growth is refused at the finish (the table is too short), and freeing
 * the service frees the extents. */
/* A cold sink that keeps nothing: the pages' CRCs are all the test needs. */
static int sink_begin(void *ctx, uint64_t generation, uint64_t pages, struct cxlcr_snapshot_cold *cold)
{
	(void)ctx;
	(void)generation;
	cold->server = 1;
	cold->server_incarnation = 1;
	cold->extent_offset = 0;
	cold->extent_size = pages * PAGE;
	return 0;
}

static int sink_page(void *ctx, uint64_t k, const void *page)
{
	(void)ctx;
	(void)k;
	(void)page;
	return 0;
}

/* The first page of a kind under seed from page `from` on. */
static uint64_t page_of(uint64_t seed, enum page_kind k, uint64_t from)
{
	for (uint64_t i = from; i < TEST_HEAP / PAGE; i++)
		if (kind_of(seed, i) == k)
			return i;
	test_fail(__FILE__, __LINE__, "page_of", " no page of kind %d", (int)k);
	return 0;
}

/* The pages listed as changed since a tiered snapshot: those it holds in
 * CXL that changed, and those that were zero and hold data now; not those
 * it keeps on the cold tier, which cannot be compared (a child would get
 * every one of them copied in before it ran). */
static void test_changed_since_tiered(struct cxlcr_pool *pool)
{
	SAY("the pages changed since a tiered snapshot: its CXL pages compared, its cold ones not listed");
	struct arena_map a;
	struct cxlcr_snapshot_info full, tiered, next;
	struct cxlcr_snapshot t, n;
	uint64_t seed = 0xc01d, nonzero, holes;
	make_arena(pool, "chg", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	uint64_t hot_same = page_of(seed, PATTERN, 0), hot_changed = page_of(seed, PATTERN, hot_same + 1);
	uint64_t cold_same = page_of(seed, PATTERN, hot_changed + 1), cold_changed = page_of(seed, PATTERN, cold_same + 1);
	uint64_t was_zero = page_of(seed, HOLE, 0);
	static uint64_t hot[TEST_HEAP / PAGE / 64];
	memset(hot, 0, sizeof(hot));
	hot[hot_same / 64] |= 1ull << (hot_same % 64);
	hot[hot_changed / 64] |= 1ull << (hot_changed % 64);
	CHECK(cxlcr_snapshot_create(pool, a.region.generation, "chg.full", &full) == 0, "%s", cxlcr_last_error());
	struct cxlcr_cold_sink sink = { .begin = sink_begin, .page = sink_page };
	CHECK(cxlcr_snapshot_split(pool, full.region_generation, hot, TEST_HEAP / PAGE, "chg.tiered", &sink,
				   &tiered) == 0, "%s", cxlcr_last_error());
	a.heap[hot_changed * PAGE + 5] ^= 0x5a;
	a.heap[cold_changed * PAGE + 5] ^= 0x5a;
	a.heap[was_zero * PAGE + 7] = 1;
	CHECK(cxlcr_snapshot_create(pool, a.region.generation, "chg.next", &next) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, tiered.region_generation, &t) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_open(pool, next.region_generation, &n) == 0, "%s", cxlcr_last_error());
	CHECK(t.header.pages_cold > 0, "the split made no cold page");
	uint64_t *pages = NULL, count = 0;
	CHECK(cxlcr_snapshot_changed_pages(&t, &n, &pages, &count) == 0, "%s", cxlcr_last_error());
	uint64_t want[2] = { hot_changed < was_zero ? hot_changed : was_zero,
			     hot_changed < was_zero ? was_zero : hot_changed };
	CHECK(count == 2 && pages[0] == want[0] && pages[1] == want[1],
	      "%llu pages listed (want pages %llu and %llu; %llu cold in the tiered snapshot)", (unsigned long long)count,
	      (unsigned long long)want[0], (unsigned long long)want[1], (unsigned long long)t.header.pages_cold);
	free(pages);
	SAY("listed: page %llu (hot, changed) and page %llu (zero, written); not the cold page changed (%llu)",
	    (unsigned long long)hot_changed, (unsigned long long)was_zero, (unsigned long long)cold_changed);
	cxlcr_snapshot_close(&t);
	cxlcr_snapshot_close(&n);
	CHECK(cxlcr_region_free(pool, next.region_generation) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_free(pool, tiered.region_generation) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_free(pool, full.region_generation) == 0, "%s", cxlcr_last_error());
	drop_arena(pool, &a);
}

static void test_extents(struct cxlcr_pool *pool)
{
	SAY("an arena of three extents: snapshot, draft outgrown, freed with its extents");
	struct arena_map a;
	struct cxlcr_region e1, e2;
	struct cxlcr_snapshot_info info;
	struct cxlcr_snapshot s;
	static uint8_t got[PAGE];
	/* Room after the heap for the extents, as the preload reserves it. */
	make_arena(pool, "grown", TEST_HEAP, true, &a);
	CHECK(munmap(a.base, a.region.size) == 0);
	uint8_t *res = mmap(NULL, a.region.size + 3 * TEST_HEAP, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(res != MAP_FAILED);
	CHECK(munmap(res, a.region.size + 3 * TEST_HEAP) == 0);
	a.base = mmap(res, a.region.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, pool->fd,
		      (off_t)a.region.offset);
	CHECK(a.base == res);
	a.heap = a.base + CXLCR_ARENA_HEAP_OFFSET;
	write_arena_header(pool, &a);
	struct cxlcr_arena_header *h = (void *)a.base;
	h->heap_reserved = 4 * TEST_HEAP;
	grow_arena(pool, &a, TEST_HEAP, &e1);
	CHECK(cxlcr_snapshot_draft(pool, a.region.generation, "gdraft", &info) == 0, "%s", cxlcr_last_error());
	grow_arena(pool, &a, 2 * TEST_HEAP, &e2);
	a.pages = h->heap_size / PAGE;
	uint64_t nonzero, holes;
	fill_heap(&a, 0x9e, &nonzero, &holes);
	CHECK(cxlcr_snapshot_finish(pool, a.region.generation, "gdraft", NULL, &info) == 1,
	      "a draft of a smaller heap was finished");
	struct cxlcr_region draft;
	CHECK(cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, "gdraft", &draft) && cxlcr_region_free(pool, draft.generation) == 0);

	CHECK(cxlcr_snapshot_create(pool, a.region.generation, "gsnap", &info) == 0, "%s", cxlcr_last_error());
	CHECK_EQ(info.heap_size, 4 * TEST_HEAP);
	CHECK_EQ(info.pages_cxl, nonzero);
	CHECK(cxlcr_snapshot_open(pool, info.region_generation, &s) == 0, "%s", cxlcr_last_error());
	check_snapshot_pages(&s, 0x9e, pool->fd);
	for (uint64_t i = 0; i < a.pages; i += 97) {
		CHECK(cxlcr_snapshot_read_page(&s, i, got) == 0, "%s", cxlcr_last_error());
		CHECK(memcmp(got, a.heap + i * PAGE, PAGE) == 0, "page %llu", (unsigned long long)i);
	}
	cxlcr_snapshot_close(&s);
	CHECK(cxlcr_region_free(pool, info.region_generation) == 0);

	SAY("a header whose extent names a region of another kind is refused");
	h->extents[1].generation = info.region_generation; /* freed: gone */
	CHECK_ERROR(cxlcr_snapshot_create(pool, a.region.generation, "gbad", &info), "is gone");
	h->extents[1].generation = e1.generation;
	h->extents[2].offset += CXLCR_POOL_ALIGN;
	CHECK_ERROR(cxlcr_snapshot_create(pool, a.region.generation, "gbad", &info), "its region is");
	h->extents[2].offset -= CXLCR_POOL_ALIGN;

	CHECK(munmap(a.base, a.region.size + 3 * TEST_HEAP) == 0);
	CHECK_EQ(cxlcr_service_free(pool, &a.region), 0);
	struct cxlcr_region gone;
	CHECK(cxlcr_region_get(pool, e1.generation, &gone) < 0 && cxlcr_region_get(pool, e2.generation, &gone) < 0,
	      "the extents outlived their arena");
}

/* A daemon's worker whose host is fenced while it works (common/pool.h,
 * CXLCR_HOST_GUARD_ENV): what it did before the fence stands, and from
 * the fence on it neither publishes its snapshot nor changes the region
 * table, so the winner recovers from exactly what the pool held. */
static void test_host_guard(struct cxlcr_pool *pool, struct arena_map *a)
{
	struct cxlcr_host_reg h0, h1;
	struct cxlcr_pool worker, bad;
	struct cxlcr_snapshot_info g1, g2;
	struct cxlcr_catalog_info found;
	uint64_t f0 = 1, f;
	char env[48];
	SAY("a worker of a host fenced meanwhile publishes nothing more");
	CHECK(cxlcr_host_join(pool, "h0", "", 0, 75000000, &h0) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(pool, "h1", "", 0, 75000000, &h1) == 0, "%s", cxlcr_last_error());
	CHECK(!cxlcr_host_fenced(pool, h0.index, &f0, NULL), "a host just joined is fenced");
	snprintf(env, sizeof(env), "%u:%llu", h0.index, (unsigned long long)f0);
	setenv(CXLCR_HOST_GUARD_ENV, env, 1);
	CHECK(cxlcr_pool_open(&worker, path) == 0, "%s", cxlcr_last_error());
	setenv(CXLCR_HOST_GUARD_ENV, "3", 1);
	CHECK_ERROR(cxlcr_pool_open(&bad, path), "not INDEX:FENCE");
	unsetenv(CXLCR_HOST_GUARD_ENV);
	CHECK(cxlcr_snapshot_create(&worker, a->region.generation, "g1", &g1) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_snapshot_create(&worker, a->region.generation, "g2", &g2) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_catalog_publish(&worker, "g1", g1.region_generation, NULL) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_fence(pool, h0.index, h0.incarnation, h1.index, &f) == 1, "the fence was not won");
	CHECK_ERROR(cxlcr_catalog_publish(&worker, "g2", g2.region_generation, NULL), "declared dead and fenced");
	CHECK_ERROR(cxlcr_region_free(&worker, g2.region_generation), "declared dead and fenced");
	CHECK_ERROR(cxlcr_catalog_find(pool, "g2", &found), "no snapshot named 'g2'");
	CHECK(cxlcr_catalog_find(pool, "g1", &found) == 0, "%s", cxlcr_last_error());
	/* The daemon's own clean-up, once the fence is done, runs unguarded. */
	cxlcr_pool_host_unguard(&worker);
	CHECK(cxlcr_region_free(&worker, g2.region_generation) == 0, "%s", cxlcr_last_error());
	cxlcr_pool_close(&worker);
}

int main(int argc, char **argv)
{
	/* --keep-memory: the same on a pool that clears by writing zeros and
	 * never punches (as a device does), where a region on freed space
	 * holds data to SEEK_DATA until written again. */
	bool quick = false, keep = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--keep-memory"))
			keep = true;
		else {
			fprintf(stderr, "usage: snapshot_test [--quick] [--keep-memory]\n");
			return 2;
		}
	}
	printf("snapshot_test: snapshots and the snapshot catalog of common/\n");
	snprintf(dir, sizeof(dir), "/dev/shm/cxlcr-snapshot-test.XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/pool", dir);
	test_on_failure(remove_dir);
	SAY("pool file %s", path);
	struct cxlcr_pool pool;
	CHECK(cxlcr_pool_format_as(path, POOL_SIZE, false, keep ? CXLCR_POOL_F_KEEP_MEMORY : 0, &pool) == 0, "%s",
	      cxlcr_last_error());
	CHECK(pool.keeps_memory == keep);

	test_snapshot_contents(&pool);
	test_draft_and_finish(&pool);
	test_tracked_finish_punches(&pool);
	test_incremental(&pool);
	test_precopy(&pool);
	test_extents(&pool);
	test_changed_since_tiered(&pool);
	test_refusals(&pool);

	struct arena_map a;
	uint64_t nonzero, holes, seed = 99;
	make_arena(&pool, "svc", TEST_HEAP, true, &a);
	fill_heap(&a, seed, &nonzero, &holes);
	test_catalog_basics(&pool, &a);
	test_generation_recheck(&pool, &a);
	test_replace(&pool, &a);
	test_concurrent_borrowers(&pool, &a, seed);
	test_dead_borrowers(&pool, &a);
	test_host_guard(&pool, &a);
	drop_arena(&pool, &a);

	if (!quick) {
		time_snapshots(&pool, false);
		time_snapshots(&pool, true);
	}
	cxlcr_pool_close(&pool);
	CHECK(unlink(path) == 0, "%s", strerror(errno));
	CHECK(rmdir(dir) == 0, "%s: %s", dir, strerror(errno));
	printf("snapshot_test: all checks passed\n");
	return 0;
}
