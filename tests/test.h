/*
 * Shared helpers of the cxlcr test programs (header only).
 *
 * Every test prints one line per thing it checks and exits non-zero, with a
 * message naming the file, line and condition, at the first failure. The
 * allocator tests (alloc_*) run under the preload (see tests/run.sh) and
 * find their arena by reading /proc/self/maps; they allocate nothing in
 * these helpers, so that the helpers never disturb what they measure.
 */
#ifndef CXLCR_TEST_H
#define CXLCR_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/pool_format.h"

#define MiB (1ull << 20)

/* Run by a failing check of the process that set it (not of its fork
 * children): removes what the test made, such as a temporary directory. */
static void (*test_cleanup)(void);
static pid_t test_cleanup_pid;

static inline void test_on_failure(void (*fn)(void))
{
	test_cleanup = fn;
	test_cleanup_pid = getpid();
}

/* What is being checked: one line, flushed (a fork must not repeat it). */
#define SAY(...) do { printf("  " __VA_ARGS__); putchar('\n'); fflush(stdout); } while (0)

__attribute__((format(printf, 4, 5), noreturn))
static inline void test_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: %s", file, line, cond);
	/* fmt is " " when CHECK had no message, else " " and the message. */
	if (fmt && fmt[0] && fmt[1]) {
		va_list ap;
		va_start(ap, fmt);
		fputs(":", stderr);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	fflush(stderr);
	if (test_cleanup && test_cleanup_pid == getpid())
		test_cleanup();
	/* Not exit(): a failing fork child must not run the parent's atexit
	 * handlers or flush its stdio buffers a second time. */
	_exit(1);
}

/* CHECK(cond) or CHECK(cond, "format", args...): fails the test unless cond. */
#define CHECK(cond, ...) \
	do { if (!(cond)) test_fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__); } while (0)

#define CHECK_EQ(a, b) do { \
	long long a_ = (long long)(a), b_ = (long long)(b); \
	if (a_ != b_) test_fail(__FILE__, __LINE__, #a " == " #b, " %lld != %lld", a_, b_); \
} while (0)

/* A call of the cxlcr library that must fail with an error containing want. */
#define CHECK_ERROR(call, want) do { \
	int rc_ = (call); \
	const char *e_ = cxlcr_last_error(); \
	if (rc_ >= 0) test_fail(__FILE__, __LINE__, #call, " succeeded, expected an error with \"%s\"", want); \
	if (!strstr(e_, want)) test_fail(__FILE__, __LINE__, #call, " error \"%s\" does not mention \"%s\"", e_, want); \
} while (0)

/* A cheap, seedable generator (xorshift64*): the tests must not depend on
 * rand()'s shared state across threads. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static inline uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi) /* [lo, hi] */
{
	return lo + rng_next(s) % (hi - lo + 1);
}

/* Keeps the compiler from removing an allocation whose result it can see
 * is otherwise unused. */
static inline void escape(void *p)
{
	__asm__ __volatile__("" : : "g"(p) : "memory");
}

/* The same pointer, but the compiler no longer knows where it came from:
 * for the fork tests, whose child "frees" blocks that stay valid. */
static inline void *launder(void *p)
{
	__asm__ __volatile__("" : "+r"(p));
	return p;
}

/*
 * The arena of this process: the mapping of the pool file ($CXLCR_POOL)
 * past its metadata (which the preload keeps mapped, to grow the arena):
 * its header first, the heap at CXLCR_ARENA_HEAP_OFFSET.
 */
struct arena {
	uintptr_t base, end;        /* the whole region */
	uintptr_t heap_lo;          /* base + CXLCR_ARENA_HEAP_OFFSET */
	uint64_t file_offset;       /* of the region in the pool */
	struct cxlcr_arena_header *header;
};

static inline bool in_arena_heap(const struct arena *a, const void *p)
{
	return (uintptr_t)p >= a->heap_lo && (uintptr_t)p < a->end;
}

/* Reads /proc/self/maps without allocating and fills *a from the mappings
 * of the pool file. Returns the number of separate mappings found
 * (adjacent pieces of one mapping count once). */
static inline int arena_find(struct arena *a)
{
	static char maps[1 << 20];
	static char pool[4096];
	memset(a, 0, sizeof(*a));
	const char *env = getenv("CXLCR_POOL");
	if (!env || !*env)
		return 0;
	if (!realpath(env, pool))
		snprintf(pool, sizeof(pool), "%s", env);

	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, maps + len, sizeof(maps) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	maps[len] = 0;

	int found = 0;
	for (char *line = maps; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *p = line;
		uintptr_t lo = strtoull(p, &p, 16);
		uintptr_t hi = strtoull(p + 1, &p, 16);
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')       /* perms */
			p++;
		uint64_t off = strtoull(p, &p, 16);
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')       /* device */
			p++;
		strtoull(p, &p, 10);          /* inode */
		while (*p == ' ')
			p++;
		if (!strcmp(p, pool) && off >= CXLCR_DATA_OFFSET) {
			if (found && lo == a->end && off == a->file_offset + (a->end - a->base)) {
				a->end = hi;  /* another piece of the same mapping */
			} else {
				if (!found) {
					a->base = lo;
					a->end = hi;
					a->file_offset = off;
				}
				found++;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (found) {
		a->heap_lo = a->base + CXLCR_ARENA_HEAP_OFFSET;
		a->header = (struct cxlcr_arena_header *)a->base;
	}
	return found;
}

/* The arena of a test that must run under the preload: fails unless the
 * process has exactly one, valid, arena mapping of its own. */
static inline void arena_require(struct arena *a)
{
	const char *pool = getenv("CXLCR_POOL");
	if (!pool || !getenv("CXLCR_ARENA"))
		test_fail(__FILE__, __LINE__, "under the preload",
			  " CXLCR_POOL and CXLCR_ARENA must be set: run this test with tests/run.sh");
	int n = arena_find(a);
	if (n == 0)
		test_fail(__FILE__, __LINE__, "under the preload",
			  " no mapping of %s in /proc/self/maps: not running under libcxlcr-preload.so", pool);
	CHECK_EQ(n, 1);
	CHECK(a->end - a->base > CXLCR_ARENA_HEAP_OFFSET, "arena mapping of only %zu bytes",
	      (size_t)(a->end - a->base));
	CHECK(a->file_offset % CXLCR_POOL_ALIGN == 0 && a->file_offset >= CXLCR_DATA_OFFSET,
	      "arena at pool offset %llu", (unsigned long long)a->file_offset);
	const struct cxlcr_arena_header *h = a->header;
	CHECK(h->magic == CXLCR_ARENA_MAGIC, "arena header magic %#llx", (unsigned long long)h->magic);
	CHECK_EQ(h->version, CXLCR_ARENA_VERSION);
	CHECK_EQ(h->slot_count, CXLCR_ARENA_STAT_SLOTS);
	CHECK_EQ(h->pid, getpid());
	CHECK(h->heap_address == a->heap_lo, "header says heap at %#llx, mapped heap at %#lx",
	      (unsigned long long)h->heap_address, (unsigned long)a->heap_lo);
	CHECK(h->heap_size == a->end - a->heap_lo, "header says heap of %llu bytes, mapping has %lu",
	      (unsigned long long)h->heap_size, (unsigned long)(a->end - a->heap_lo));
	CHECK(a->heap_lo % CXLCR_HEAP_ALIGN == 0, "heap at %#lx is not aligned to %llu MiB",
	      (unsigned long)a->heap_lo, CXLCR_HEAP_ALIGN >> 20);
}

/* "Bytes used" of the arena as `cxlcr status` computes it. */
static inline int64_t arena_used(const struct arena *a)
{
	const struct cxlcr_arena_header *h = a->header;
	int64_t sum = __atomic_load_n(&h->retired_used, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < CXLCR_ARENA_STAT_SLOTS; i++)
		sum += __atomic_load_n(&h->slots[i].used, __ATOMIC_RELAXED);
	return sum;
}

static inline void arena_print(const struct arena *a)
{
	SAY("running under the preload: arena %#lx-%#lx (heap %llu MiB at %#lx), pool offset %llu MiB",
	    (unsigned long)a->base, (unsigned long)a->end,
	    (unsigned long long)((a->end - a->heap_lo) >> 20), (unsigned long)a->heap_lo,
	    (unsigned long long)(a->file_offset >> 20));
}

#endif
