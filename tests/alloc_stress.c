/*
 * Stress of the interposed allocator: random malloc, calloc, realloc,
 * posix_memalign and free of 1 B .. 1 MiB (and a few 8 MiB) blocks, each
 * filled with a pattern of its own and verified before it goes; first on
 * one thread, then on four that also free each other's blocks. Blocks of
 * glibc's own (__libc_malloc) are mixed in and must be handled by address.
 * Runs under libcxlcr-preload.so (see tests/run.sh).
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

#include "test.h"

extern void *__libc_malloc(size_t);

#define SLOTS          256
#define SINGLE_OPS     100000
#define THREADS        4
#define THREAD_OPS     50000
#define SHARED         64
#define BIG            (8 * MiB)
#define HEAD           16   /* blocks of at least MIN_DESCRIBED bytes start */
#define MIN_DESCRIBED  32   /* with their key and size and end with the key */

static struct arena A;

/* A block as the test remembers it. */
struct block {
	unsigned char *p;
	size_t n;
	uint64_t key;
	bool glibc;          /* from __libc_malloc, not moved yet */
};

/* What one thread counts. */
struct counts {
	uint64_t allocs;     /* malloc family calls that should use the arena */
	uint64_t in_arena;
	uint64_t glibc_moved;
	uint64_t shared_freed;
	uint64_t big;
};

static uint64_t next_key(uint64_t *rng)
{
	return rng_next(rng) | 1;
}

static unsigned char key_byte(uint64_t key)
{
	return (unsigned char)((key >> 56) | 1);
}

static void fill(unsigned char *p, size_t n, uint64_t key)
{
	memset(p, key_byte(key), n);
	if (n >= MIN_DESCRIBED) {
		uint64_t size = n;
		memcpy(p, &key, 8);
		memcpy(p + 8, &size, 8);
		memcpy(p + n - 8, &key, 8);
	}
}

/* Are all len bytes at p equal to b? Word-wise, without early exit, so
 * that the compiler vectorises it. */
static bool all_bytes(const unsigned char *p, size_t len, unsigned char b)
{
	uint64_t pat = 0x0101010101010101ull * b, acc = 0;
	size_t i = 0;
	for (; i < len && ((uintptr_t)(p + i) & 7); i++)
		acc |= p[i] ^ b;
	const uint64_t *w = (const uint64_t *)(const void *)(p + i);
	size_t words = (len - i) / 8;
	for (size_t k = 0; k < words; k++)
		acc |= w[k] ^ pat;
	for (i += words * 8; i < len; i++)
		acc |= p[i] ^ b;
	return acc == 0;
}

/* Checks the first limit bytes of a block that fill(p, n, key) wrote. */
static void verify(const unsigned char *p, size_t n, uint64_t key, size_t limit, const char *what)
{
	unsigned char b = key_byte(key);
	if (n < MIN_DESCRIBED) {
		CHECK(all_bytes(p, limit, b), "%s: block %p of %zu bytes corrupt", what, (void *)p, n);
		return;
	}
	unsigned char head[HEAD], tail[8];
	uint64_t size = n;
	memcpy(head, &key, 8);
	memcpy(head + 8, &size, 8);
	memcpy(tail, &key, 8);
	size_t h = limit < HEAD ? limit : HEAD;
	CHECK(!memcmp(p, head, h), "%s: block %p of %zu bytes: head corrupt", what, (void *)p, n);
	size_t mid_end = n - 8 < limit ? n - 8 : limit;
	if (mid_end > HEAD)
		CHECK(all_bytes(p + HEAD, mid_end - HEAD, b), "%s: block %p of %zu bytes: body corrupt",
		      what, (void *)p, n);
	if (limit > n - 8)
		CHECK(!memcmp(p + n - 8, tail, limit - (n - 8)), "%s: block %p of %zu bytes: tail corrupt",
		      what, (void *)p, n);
}

/* A self-describing block (n >= MIN_DESCRIBED): checks it from its head. */
static void verify_described(const unsigned char *p, const char *what)
{
	uint64_t key, size;
	memcpy(&key, p, 8);
	memcpy(&size, p + 8, 8);
	CHECK(size >= MIN_DESCRIBED && size <= BIG + MiB, "%s: block %p has a bad size %llu", what,
	      (void *)p, (unsigned long long)size);
	CHECK(malloc_usable_size((void *)p) >= size);
	verify(p, size, key, size, what);
}

static size_t random_size(uint64_t *rng, struct counts *c)
{
	if (rng_next(rng) % 2000 == 0) {
		c->big++;
		return BIG + rng_next(rng) % (64 * 1024);
	}
	unsigned bits = (unsigned)(rng_next(rng) % 21);     /* log-uniform up to 1 MiB */
	return 1 + rng_next(rng) % ((size_t)1 << bits);
}

static void count(struct counts *c, const void *p)
{
	c->allocs++;
	if (in_arena_heap(&A, p))
		c->in_arena++;
}

/* A new block, by one of the ways the malloc family offers. */
static void alloc_block(struct block *b, size_t n, uint64_t *rng, struct counts *c)
{
	b->n = n;
	b->key = next_key(rng);
	b->glibc = false;
	switch (rng_next(rng) % 10) {
	case 0: case 1: case 2: case 3: case 4:
		b->p = malloc(n);
		break;
	case 5: case 6:
		b->p = calloc(1, n);
		CHECK(b->p != NULL);
		CHECK(all_bytes(b->p, n, 0), "calloc(%zu) is not zeroed", n);
		break;
	case 7: {
		void *p = NULL;
		size_t align = (size_t)16 << (rng_next(rng) % 9);   /* 16 .. 4096 */
		CHECK(posix_memalign(&p, align, n) == 0, "posix_memalign(%zu, %zu)", align, n);
		CHECK((uintptr_t)p % align == 0, "posix_memalign(%zu): %p", align, p);
		b->p = p;
		break;
	}
	case 8:
		b->p = realloc(NULL, n);
		break;
	default:
		b->p = __libc_malloc(n);
		CHECK(b->p != NULL);
		CHECK(!in_arena_heap(&A, b->p), "__libc_malloc returned arena memory %p", (void *)b->p);
		CHECK(malloc_usable_size(b->p) >= n, "glibc block: usable %zu < %zu",
		      malloc_usable_size(b->p), n);
		b->glibc = true;
		fill(b->p, n, b->key);
		return;
	}
	CHECK(b->p != NULL, "allocation of %zu bytes failed", n);
	count(c, b->p);
	CHECK(malloc_usable_size(b->p) >= n, "usable %zu < %zu", malloc_usable_size(b->p), n);
	fill(b->p, n, b->key);
}

/* Verifies an existing block, then frees or reallocates it. */
static void touch_block(struct block *b, uint64_t *rng, struct counts *c)
{
	verify(b->p, b->n, b->key, b->n, "before free/realloc");
	if (rng_next(rng) % 5 < 3) {
		free(b->p);
		b->p = NULL;
		return;
	}
	size_t n = random_size(rng, c);
	unsigned char *q = realloc(b->p, n);
	CHECK(q != NULL, "realloc to %zu failed", n);
	count(c, q);
	size_t keep = b->n < n ? b->n : n;
	verify(q, b->n, b->key, keep, b->glibc ? "realloc of a glibc block" : "realloc");
	if (b->glibc) {
		/* glibc -> arena: the block moves in, contents and all. */
		CHECK(in_arena_heap(&A, q), "realloc of a glibc block stayed outside the arena: %p",
		      (void *)q);
		c->glibc_moved++;
	}
	b->p = q;
	b->n = n;
	b->glibc = false;
	fill(q, n, b->key);
}

static void free_all(struct block *blocks, size_t count_)
{
	for (size_t i = 0; i < count_; i++)
		if (blocks[i].p) {
			verify(blocks[i].p, blocks[i].n, blocks[i].key, blocks[i].n, "at the end");
			free(blocks[i].p);
			blocks[i].p = NULL;
		}
}

static void check_counts(const struct counts *c, const char *phase)
{
	SAY("%s: %llu allocations, %llu in the arena, %llu glibc blocks moved in by realloc, %llu of 8 MiB",
	    phase, (unsigned long long)c->allocs, (unsigned long long)c->in_arena,
	    (unsigned long long)c->glibc_moved, (unsigned long long)c->big);
	CHECK(c->allocs > 0 && c->in_arena * 100 >= c->allocs * 99,
	      "%s: only %llu of %llu allocations in the arena", phase,
	      (unsigned long long)c->in_arena, (unsigned long long)c->allocs);
	CHECK(c->glibc_moved > 0, "%s: no glibc block was reallocated", phase);
}

static void single_thread(void)
{
	static struct block blocks[SLOTS];
	struct counts c = { 0 };
	uint64_t rng = 0x1234567 ^ (uint64_t)getpid();

	SAY("one thread: %d random operations on %d slots", SINGLE_OPS, SLOTS);
	/* A few big ones for sure. */
	for (int i = 0; i < 4; i++) {
		alloc_block(&blocks[i], BIG + (size_t)i * 4096, &rng, &c);
		c.big++;
	}
	for (int op = 0; op < SINGLE_OPS; op++) {
		struct block *b = &blocks[rng_next(&rng) % SLOTS];
		if (b->p)
			touch_block(b, &rng, &c);
		else
			alloc_block(b, random_size(&rng, &c), &rng, &c);
	}
	free_all(blocks, SLOTS);
	check_counts(&c, "one thread");
}

static _Atomic(unsigned char *) shared[SHARED];
static pthread_barrier_t start;

struct worker {
	pthread_t thread;
	int index;
	struct counts c;
	struct block blocks[SLOTS];
};

/* Hands a self-describing block to whichever thread comes next; frees the
 * block another thread left there. */
static void exchange(unsigned char *p, uint64_t *rng, struct counts *c)
{
	unsigned char *old = atomic_exchange(&shared[rng_next(rng) % SHARED], p);
	if (old) {
		verify_described(old, "handed over by another thread");
		free(old);
		c->shared_freed++;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = 0xabcdef ^ ((uint64_t)w->index << 40) ^ (uint64_t)getpid();
	pthread_barrier_wait(&start);

	/* The thread's first allocation gives it a "bytes used" slot of its own. */
	void *first = malloc(100);
	CHECK(in_arena_heap(&A, first));
	bool have_slot = false;
	for (uint32_t i = 0; i < CXLCR_ARENA_STAT_SLOTS; i++)
		if (__atomic_load_n(&A.header->slots[i].tid, __ATOMIC_RELAXED) == (uint64_t)gettid())
			have_slot = true;
	CHECK(have_slot, "thread %d has no stats slot in the arena header", w->index);
	free(first);

	alloc_block(&w->blocks[0], BIG, &rng, &w->c);
	w->c.big++;
	for (int op = 0; op < THREAD_OPS; op++) {
		if (rng_next(&rng) % 8 == 0) {
			/* A block for another thread to free: from the arena or glibc. */
			struct block b;
			size_t n = random_size(&rng, &w->c);
			alloc_block(&b, n < MIN_DESCRIBED ? MIN_DESCRIBED : n, &rng, &w->c);
			exchange(b.p, &rng, &w->c);
			continue;
		}
		struct block *b = &w->blocks[rng_next(&rng) % SLOTS];
		if (b->p)
			touch_block(b, &rng, &w->c);
		else
			alloc_block(b, random_size(&rng, &w->c), &rng, &w->c);
	}
	/* Half the threads leave their blocks to the main thread, which frees
	 * them after this thread is gone. */
	if (w->index % 2 == 0)
		free_all(w->blocks, SLOTS);
	return NULL;
}

static void threads(void)
{
	static struct worker workers[THREADS];
	int64_t used_before = arena_used(&A);
	SAY("%d threads: %d operations each, blocks handed between threads through %d shared slots",
	    THREADS, THREAD_OPS, SHARED);
	CHECK(pthread_barrier_init(&start, NULL, THREADS) == 0);
	for (int i = 0; i < THREADS; i++) {
		workers[i].index = i;
		CHECK(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(workers[i].thread, NULL) == 0);
	pthread_barrier_destroy(&start);

	SAY("the blocks of exited threads and those left in the shared slots are freed by the main thread");
	struct counts total = { 0 };
	for (int i = 0; i < THREADS; i++) {
		free_all(workers[i].blocks, SLOTS);
		total.allocs += workers[i].c.allocs;
		total.in_arena += workers[i].c.in_arena;
		total.glibc_moved += workers[i].c.glibc_moved;
		total.shared_freed += workers[i].c.shared_freed;
		total.big += workers[i].c.big;
	}
	for (int i = 0; i < SHARED; i++) {
		unsigned char *p = atomic_exchange(&shared[i], NULL);
		if (p) {
			verify_described(p, "left in a shared slot");
			free(p);
		}
	}
	check_counts(&total, "threads");
	SAY("threads: %llu blocks freed by a thread other than their allocator",
	    (unsigned long long)total.shared_freed);
	CHECK(total.shared_freed > 100);

	SAY("no stats slot is held by an exited thread; bytes used are back where they were");
	for (uint32_t i = 0; i < CXLCR_ARENA_STAT_SLOTS; i++) {
		uint64_t tid = __atomic_load_n(&A.header->slots[i].tid, __ATOMIC_RELAXED);
		CHECK(tid == 0 || tid == (uint64_t)gettid(), "slot %u still held by thread %llu", i,
		      (unsigned long long)tid);
	}
	int64_t used_after = arena_used(&A);
	SAY("bytes used: %lld before the threads, %lld after", (long long)used_before, (long long)used_after);
	CHECK(used_after - used_before < 256 * 1024 && used_before - used_after < 256 * 1024,
	      "bytes used %lld before the threads, %lld after they and their blocks are gone",
	      (long long)used_before, (long long)used_after);
}

int main(void)
{
	printf("alloc_stress: random allocation on one and on %d threads under the preload\n", THREADS);
	arena_require(&A);
	arena_print(&A);
	single_thread();
	threads();
	printf("alloc_stress: all checks passed\n");
	return 0;
}
