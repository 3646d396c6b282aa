/*
 * A full arena: allocation goes on from glibc (a "fallback", counted in the
 * arena header), and once the memory is freed the arena serves again.
 * Runs under libcxlcr-preload.so with CXLCR_ARENA_SIZE=64M (tests/run.sh).
 *
 * The same test is also linked with tcmalloc and with jemalloc (the
 * alloc_exhaust_* builds): a program that brings another allocator along
 * must still have its fallback blocks served by glibc's own functions
 * (tcmalloc defines __libc_malloc & co, jemalloc malloc_usable_size).
 */
#include <malloc.h>

#include "test.h"

#define BLOCK      MiB
#define BLOCKS     200     /* 200 MiB, far past a 64 MiB arena */
#define AGAIN      24      /* what must fit in the arena again afterwards */

static struct arena A;
static unsigned char *blocks[BLOCKS];

static void fill(unsigned char *p, size_t n, int i)
{
	memset(p, (unsigned char)(i * 37 + 1), n);
}

static void verify(const unsigned char *p, size_t n, int i, const char *what)
{
	unsigned char b = (unsigned char)(i * 37 + 1);
	for (size_t k = 0; k < n; k += 4096)
		CHECK(p[k] == b, "%s: block %d corrupt at %zu", what, i, k);
	CHECK(p[n - 1] == b, "%s: block %d corrupt at its end", what, i);
}

int main(void)
{
	printf("alloc_exhaust: a full arena falls back to glibc and recovers\n");
	arena_require(&A);
	arena_print(&A);
	size_t heap = A.end - A.heap_lo;
	CHECK(heap <= 64 * MiB, "the arena's heap is %zu MiB: run with CXLCR_ARENA_SIZE=64M", heap >> 20);
	struct cxlcr_arena_header *h = A.header;
	uint64_t fallbacks_before = __atomic_load_n(&h->fallback_allocs, __ATOMIC_RELAXED);
	uint64_t fallback_bytes_before = __atomic_load_n(&h->fallback_bytes, __ATOMIC_RELAXED);

	SAY("allocate %d blocks of 1 MiB (%zu MiB heap): every one succeeds", BLOCKS, heap >> 20);
	int inside = 0, outside = 0, first_outside = -1;
	for (int i = 0; i < BLOCKS; i++) {
		blocks[i] = malloc(BLOCK);
		CHECK(blocks[i] != NULL, "block %d of 1 MiB: %s", i, strerror(errno));
		fill(blocks[i], BLOCK, i);
		if (in_arena_heap(&A, blocks[i])) {
			inside++;
			CHECK((uintptr_t)blocks[i] + BLOCK <= A.end, "block %d runs past the arena", i);
		} else {
			outside++;
			if (first_outside < 0)
				first_outside = i;
		}
	}
	SAY("%d blocks in the arena, %d from glibc (the first after %d MiB)", inside, outside, first_outside);
	CHECK(inside > 0, "nothing was allocated in the arena");
	CHECK(outside > 0, "%d MiB fit in a %zu MiB arena?", BLOCKS, heap >> 20);
	CHECK((size_t)inside * BLOCK <= heap);
	CHECK(inside >= 32, "only %d MiB of a %zu MiB heap used before falling back", inside, heap >> 20);

	SAY("the arena header counts the fallbacks");
	uint64_t fallbacks = __atomic_load_n(&h->fallback_allocs, __ATOMIC_RELAXED) - fallbacks_before;
	uint64_t fallback_bytes = __atomic_load_n(&h->fallback_bytes, __ATOMIC_RELAXED) - fallback_bytes_before;
	SAY("fallback_allocs +%llu, fallback_bytes +%llu", (unsigned long long)fallbacks,
	    (unsigned long long)fallback_bytes);
	CHECK(fallbacks > 0);
	CHECK(fallbacks >= (uint64_t)outside, "%d blocks from glibc, %llu fallbacks counted", outside,
	      (unsigned long long)fallbacks);
	CHECK(fallback_bytes >= (uint64_t)outside * BLOCK);

	SAY("while full: calloc, posix_memalign and growing realloc also fall back, keeping contents");
	unsigned char *c = calloc(1, BLOCK);
	CHECK(c && !in_arena_heap(&A, c), "calloc while full: %p", (void *)c);
	for (size_t k = 0; k < BLOCK; k += 512)
		CHECK(c[k] == 0);
	free(c);
	void *al = NULL;
	CHECK(posix_memalign(&al, 4096, BLOCK) == 0);
	CHECK(!in_arena_heap(&A, al) && (uintptr_t)al % 4096 == 0, "posix_memalign while full: %p", al);
	free(al);
	int i0 = -1;
	for (int i = 0; i < BLOCKS && i0 < 0; i++)
		if (in_arena_heap(&A, blocks[i]))
			i0 = i;
	unsigned char *grown = realloc(blocks[i0], 16 * MiB);
	CHECK(grown != NULL);
	CHECK(!in_arena_heap(&A, grown), "realloc to 16 MiB while full stayed in the arena");
	verify(grown, BLOCK, i0, "moved out of the full arena");
	CHECK(malloc_usable_size(grown) >= 16 * MiB);
	blocks[i0] = grown;    /* its first MiB still holds block i0's pattern */

	SAY("a fallback block: its usable size, realloc up and down keep it glibc's");
	int o = first_outside;
	CHECK(malloc_usable_size(blocks[o]) >= BLOCK, "usable size of a glibc block: %zu",
	      malloc_usable_size(blocks[o]));
	unsigned char *up = realloc(blocks[o], 3 * BLOCK);
	CHECK(up && !in_arena_heap(&A, up), "realloc of a glibc block while full: %p", (void *)up);
	verify(up, BLOCK, o, "grown glibc block");
	CHECK(malloc_usable_size(up) >= 3 * BLOCK);
	unsigned char *down = realloc(up, BLOCK);
	CHECK(down != NULL);
	/* Each realloc that stays with glibc is a fallback; the shrunk block may
	 * fit in the room block i0 left in the arena. */
	int glibc_reallocs = 1 + !in_arena_heap(&A, down);
	verify(down, BLOCK, o, "shrunk glibc block");
	blocks[o] = down;

	SAY("every block still holds its contents; free them all");
	for (int i = 0; i < BLOCKS; i++) {
		verify(blocks[i], BLOCK, i, "before free");
		free(blocks[i]);
		blocks[i] = NULL;
	}

	SAY("after the frees, new blocks land in the arena again");
	int again = 0;
	for (int i = 0; i < AGAIN; i++) {
		blocks[i] = malloc(BLOCK);
		CHECK(blocks[i] != NULL);
		fill(blocks[i], BLOCK, i);
		again += in_arena_heap(&A, blocks[i]);
	}
	CHECK(again == AGAIN, "only %d of %d new 1 MiB blocks in the arena", again, AGAIN);
	void *small = malloc(64);
	CHECK(in_arena_heap(&A, small), "small block %p outside the arena", small);
	free(small);
	for (int i = 0; i < AGAIN; i++) {
		verify(blocks[i], BLOCK, i, "after refill");
		free(blocks[i]);
	}
	uint64_t after = __atomic_load_n(&h->fallback_allocs, __ATOMIC_RELAXED) - fallbacks_before;
	CHECK(after == fallbacks + 3 + glibc_reallocs, "fallbacks went from %llu to %llu (%d expected while full)",
	      (unsigned long long)fallbacks, (unsigned long long)after, 3 + glibc_reallocs);
	printf("alloc_exhaust: all checks passed\n");
	return 0;
}
