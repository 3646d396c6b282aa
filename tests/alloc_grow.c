/*
 * An arena grows instead of filling up: with a 64 MiB first extent and room
 * to grow (CXLCR_ARENA_SIZE=64M CXLCR_ARENA_MAX=4G, tests/run.sh), four
 * times that, a block larger than any extent, and 64 threads that each
 * take a heap all land in the arena, in extents that the header lists and
 * that this process maps from the pool where the header says; nothing
 * falls back to glibc.
 */
#include <pthread.h>

#include "test.h"

#define BLOCK      MiB
#define BLOCKS     256     /* 4 x the 64 MiB first extent */
#define HUGE_BLOCK ((size_t)(300 * MiB))
#define THREADS    64
#define PER_THREAD 64

static struct arena A;
static unsigned char *blocks[BLOCKS];
static pthread_barrier_t all_allocated;

static bool in_heap(const void *p)
{
	const struct cxlcr_arena_header *h = A.header;
	uint64_t size = __atomic_load_n(&h->heap_size, __ATOMIC_ACQUIRE);
	return (uintptr_t)p >= A.heap_lo && (uintptr_t)p < A.heap_lo + size;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k += 512)
		p[k] = (unsigned char)(seed * 31 + k / 512);
}

static void verify(const unsigned char *p, size_t n, unsigned seed, const char *what)
{
	for (size_t k = 0; k < n; k += 512)
		CHECK(p[k] == (unsigned char)(seed * 31 + k / 512), "%s %u: corrupt at %zu", what, seed, k);
}

/* Every extent the header lists is mapped here, from the pool offset the
 * header gives, at the heap offset it gives. */
static void check_extents_mapped(void)
{
	const struct cxlcr_arena_header *h = A.header;
	for (uint32_t i = 0; i < h->extent_count; i++) {
		const struct cxlcr_arena_extent *e = &h->extents[i];
		uintptr_t at = A.heap_lo + e->heap_offset;
		char line[512];
		bool found = false;
		FILE *f = fopen("/proc/self/maps", "re");
		CHECK(f != NULL);
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo, hi, off;
			if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off) != 3 || at < lo || at >= hi)
				continue;
			found = true;
			CHECK(strstr(line, getenv("CXLCR_POOL")) != NULL, "extent %u at %#lx is not the pool: %s", i,
			      (unsigned long)at, line);
			CHECK(off + (at - lo) == e->offset, "extent %u at %#lx maps pool offset %lu, header says %llu",
			      i, (unsigned long)at, off + (at - lo), (unsigned long long)e->offset);
			CHECK(at + e->size <= hi || i + 1 < h->extent_count, "extent %u is mapped short", i);
		}
		fclose(f);
		CHECK(found, "extent %u at %#lx is not mapped", i, (unsigned long)at);
	}
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	unsigned char *mine[PER_THREAD];
	for (int i = 0; i < PER_THREAD; i++) {
		mine[i] = malloc(64 + (size_t)i * 16);
		CHECK(mine[i] != NULL);
		CHECK(in_heap(mine[i]), "thread %u: block %d at %p outside the arena", id, i, (void *)mine[i]);
		memset(mine[i], (int)(id + 1), 64);
	}
	/* All threads hold their heaps at once. */
	pthread_barrier_wait(&all_allocated);
	for (int i = 0; i < PER_THREAD; i++) {
		for (int k = 0; k < 64; k++)
			CHECK(mine[i][k] == (unsigned char)(id + 1), "thread %u: block %d corrupt", id, i);
		free(mine[i]);
	}
	return NULL;
}

int main(void)
{
	printf("alloc_grow: a full arena grows in extents\n");
	arena_require(&A);
	arena_print(&A);
	struct cxlcr_arena_header *h = A.header;
	CHECK(h->heap_size == 64 * MiB, "first extent of %llu MiB: run with CXLCR_ARENA_SIZE=64M",
	      (unsigned long long)h->heap_size >> 20);
	CHECK(h->heap_reserved >= 2048 * MiB, "limit of %llu MiB: run with CXLCR_ARENA_MAX=4G",
	      (unsigned long long)h->heap_reserved >> 20);
	CHECK_EQ(h->extent_count, 1u);
	uint64_t fallbacks = __atomic_load_n(&h->fallback_allocs, __ATOMIC_RELAXED);

	SAY("allocate %d blocks of 1 MiB, 4x the first extent: all in the arena", BLOCKS);
	for (int i = 0; i < BLOCKS; i++) {
		blocks[i] = malloc(BLOCK);
		CHECK(blocks[i] != NULL);
		CHECK(in_heap(blocks[i]), "block %d at %p outside the heap", i, (void *)blocks[i]);
		fill(blocks[i], BLOCK, (unsigned)i);
	}
	SAY("heap now %llu MiB in %u extents", (unsigned long long)h->heap_size >> 20, h->extent_count);
	CHECK(h->extent_count > 1);
	CHECK(h->heap_size >= BLOCKS * BLOCK);

	SAY("a %zu MiB block, larger than the heap so far, and realloc across extents", HUGE_BLOCK >> 20);
	unsigned char *huge = malloc(HUGE_BLOCK);
	CHECK(huge && in_heap(huge), "huge block at %p", (void *)huge);
	fill(huge, HUGE_BLOCK, 999);
	unsigned char *moved = realloc(blocks[0], 200 * MiB);
	CHECK(moved && in_heap(moved), "realloc to 200 MiB at %p", (void *)moved);
	verify(moved, BLOCK, 0, "moved block");
	blocks[0] = moved;

	SAY("%d threads, each with its own heap, all at once", THREADS);
	pthread_t t[THREADS];
	CHECK(pthread_barrier_init(&all_allocated, NULL, THREADS) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);

	SAY("heap %llu MiB in %u extents (limit %llu MiB)", (unsigned long long)h->heap_size >> 20,
	    h->extent_count, (unsigned long long)h->heap_reserved >> 20);
	check_extents_mapped();
	uint64_t after = __atomic_load_n(&h->fallback_allocs, __ATOMIC_RELAXED);
	CHECK(after == fallbacks, "%llu allocations fell back to glibc", (unsigned long long)(after - fallbacks));

	SAY("every block still holds its contents");
	verify(huge, HUGE_BLOCK, 999, "huge block");
	free(huge);
	for (int i = 0; i < BLOCKS; i++) {
		verify(blocks[i], BLOCK, (unsigned)i, "block");
		free(blocks[i]);
	}
	printf("alloc_grow: all checks passed\n");
	return 0;
}
