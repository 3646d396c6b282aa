/*
 * Every function of the malloc family, as the preload interposes it: the
 * results, their alignment, their errors, and that they come from the
 * arena. Runs under libcxlcr-preload.so (see tests/run.sh).
 */
#include <malloc.h>
#include <stdalign.h>
#include <stdint.h>

#include "test.h"

extern void *__libc_malloc(size_t);

static struct arena A;

/* Sizes the compiler cannot see through, so that it keeps every call. */
static volatile size_t vsize[] = { 0, 1, 24, 100, 4096, 5000, 100000 };
#define SIZE(i) (vsize[i])

/* The alignment malloc(n) owes: that of any object of n bytes, at most 16
 * (an object's size is a multiple of its alignment). mimalloc, unlike
 * glibc, gives 8-byte aligned blocks of 8, 24, 40 ... bytes. */
static size_t malloc_align(size_t n)
{
	size_t a = 16;
	while (a > 8 && n % a)
		a >>= 1;
	return a;
}

static void check_block(void *p, size_t n, size_t align, const char *what)
{
	CHECK(p != NULL, "%s: NULL (%s)", what, strerror(errno));
	CHECK(in_arena_heap(&A, p), "%s: %p is not in the arena", what, p);
	CHECK((uintptr_t)p % align == 0, "%s: %p is not aligned to %zu", what, p, align);
	CHECK(malloc_usable_size(p) >= n, "%s: usable size %zu < %zu", what, malloc_usable_size(p), n);
	memset(p, 0x5a, n);
	escape(p);
}

static void test_malloc_calloc(void)
{
	SAY("malloc(0) gives a unique, freeable block in the arena");
	void *p = malloc(SIZE(0)), *q = malloc(SIZE(0));
	check_block(p, 0, 8, "malloc(0)");
	check_block(q, 0, 8, "malloc(0)");
	CHECK(p != q);
	free(p);
	free(q);
	free(NULL);

	SAY("malloc of 1 B .. 100 KB: aligned for any object of that size, in the arena");
	for (size_t n = 1; n < 100000; n += n < 256 ? 1 : n / 3) {
		void *b[4];
		for (int k = 0; k < 4; k++)
			b[k] = malloc(n);
		for (int k = 0; k < 4; k++) {
			check_block(b[k], n, malloc_align(n), "malloc");
			free(b[k]);
		}
	}

	SAY("calloc zeroes, in the arena; a count*size overflow is NULL with ENOMEM");
	unsigned char *c = calloc(SIZE(3), SIZE(4) / 64);
	check_block(c, 0, malloc_align(SIZE(4) / 64), "calloc");
	for (size_t i = 0; i < SIZE(3) * SIZE(4) / 64; i++)
		CHECK(c[i] == 0, "calloc byte %zu is %#x", i, c[i]);
	free(c);
	volatile size_t half = SIZE_MAX / 2;
	errno = 0;
	CHECK(calloc(half, 3) == NULL);
	CHECK_EQ(errno, ENOMEM);
	errno = 0;
	CHECK(calloc(3, half) == NULL);
	CHECK_EQ(errno, ENOMEM);
	p = calloc(SIZE(0), SIZE(0));
	CHECK(p != NULL && in_arena_heap(&A, p), "calloc(0, 0) = %p", p);
	free(p);
}

static void test_realloc(void)
{
	SAY("realloc(NULL, n) allocates in the arena");
	char *p = realloc(NULL, SIZE(3));
	check_block(p, SIZE(3), malloc_align(SIZE(3)), "realloc(NULL)");
	for (size_t i = 0; i < SIZE(3); i++)
		p[i] = (char)i;

	SAY("realloc grows and shrinks in the arena, keeping the contents");
	p = realloc(p, SIZE(6));
	CHECK(p && in_arena_heap(&A, p));
	for (size_t i = 0; i < SIZE(3); i++)
		CHECK(p[i] == (char)i, "byte %zu lost by growing", i);
	p = realloc(p, SIZE(2));
	CHECK(p && in_arena_heap(&A, p));
	for (size_t i = 0; i < SIZE(2); i++)
		CHECK(p[i] == (char)i, "byte %zu lost by shrinking", i);

	SAY("realloc(p, 0) frees p and returns NULL (bytes used back where they were)");
	free(p);
	int64_t before = arena_used(&A);
	p = malloc(SIZE(5));
	escape(p);
	int64_t during = arena_used(&A);
	void *r = realloc(p, SIZE(0));
	int64_t after = arena_used(&A);
	CHECK(r == NULL, "realloc(p, 0) = %p", r);
	CHECK(during >= before + (int64_t)SIZE(5), "used %lld -> %lld for a %zu-byte block",
	      (long long)before, (long long)during, SIZE(5));
	CHECK(after == before, "used %lld before malloc, %lld after realloc(p, 0)",
	      (long long)before, (long long)after);

	SAY("malloc and realloc of more than there is: NULL with ENOMEM, the block left alone");
	volatile size_t too_much = SIZE_MAX / 4;
	errno = 0;
	CHECK(malloc(too_much) == NULL);
	CHECK_EQ(errno, ENOMEM);
	p = malloc(SIZE(3));
	CHECK(p && in_arena_heap(&A, p));
	memset(p, 0x77, SIZE(3));
	errno = 0;
	CHECK(realloc(p, too_much) == NULL);
	CHECK_EQ(errno, ENOMEM);
	for (size_t i = 0; i < SIZE(3); i++)
		CHECK(p[i] == 0x77, "byte %zu changed by a failed realloc", i);
	free(p);

	SAY("reallocarray: overflow is NULL with ENOMEM and leaves the block alone");
	int *a = reallocarray(NULL, SIZE(3), sizeof(int));
	check_block(a, SIZE(3) * sizeof(int), malloc_align(SIZE(3) * sizeof(int)), "reallocarray(NULL)");
	for (size_t i = 0; i < SIZE(3); i++)
		a[i] = (int)i;
	volatile size_t half = SIZE_MAX / 2;
	errno = 0;
	CHECK(reallocarray(a, half, 3) == NULL);
	CHECK_EQ(errno, ENOMEM);
	a = reallocarray(a, SIZE(3) * 2, sizeof(int));
	CHECK(a && in_arena_heap(&A, a));
	for (size_t i = 0; i < SIZE(3); i++)
		CHECK(a[i] == (int)i, "element %zu lost", i);
	free(a);
}

static void test_aligned(void)
{
	SAY("posix_memalign with alignments 8 .. 1 MiB: aligned, in the arena, errno kept");
	for (size_t align = sizeof(void *); align <= MiB; align <<= 1) {
		/* size == align and 2 * align: mimalloc 2.0.9's own fast path
		 * gets 256..1024 wrong (microsoft/mimalloc#700). */
		size_t sizes[] = { 1, 8, 24, align / 2 + 1, align, 2 * align, 3 * align + 5 };
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *p[8];
			for (int i = 0; i < 8; i++) {
				errno = 1234;
				int rc = posix_memalign(&p[i], align, sizes[k]);
				CHECK(rc == 0, "posix_memalign(%zu, %zu) = %d", align, sizes[k], rc);
				CHECK_EQ(errno, 1234);
				check_block(p[i], sizes[k], align, "posix_memalign");
			}
			for (int i = 0; i < 8; i++)
				free(p[i]);
		}
	}
	SAY("alignments beyond mimalloc's (32, 64 MiB) are still honoured (by glibc)");
	for (size_t align = 32 * MiB; align <= 64 * MiB; align <<= 1) {
		void *p = NULL;
		CHECK(posix_memalign(&p, align, 1000) == 0, "posix_memalign(%zu MiB)", align >> 20);
		CHECK(p && (uintptr_t)p % align == 0, "posix_memalign(%zu MiB) gave %p", align >> 20, p);
		memset(p, 1, 1000);
		free(p);
	}
	SAY("posix_memalign refuses alignments that are not a power of two times sizeof(void *)");
	static const size_t bad[] = { 0, 3, 4, 24, 48, 100, 4097 };
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		void *p = (void *)0x1;
		int rc = posix_memalign(&p, bad[k], 16);
		CHECK(rc == EINVAL, "posix_memalign(%zu) = %d", bad[k], rc);
		CHECK(p == (void *)0x1, "posix_memalign(%zu) wrote its result on failure", bad[k]);
	}

	SAY("aligned_alloc: aligned, in the arena; alignment 3 is EINVAL");
	for (size_t align = 1; align <= 64 * 1024; align <<= 1) {
		void *p = aligned_alloc(align, align * 4);
		check_block(p, align * 4, align, "aligned_alloc");
		free(p);
	}
	volatile size_t three = 3;
	errno = 0;
	CHECK(aligned_alloc(three, 16) == NULL);
	CHECK_EQ(errno, EINVAL);

	SAY("memalign: powers of two, and other alignments rounded up to the next one");
	static const struct { size_t align, want; } m[] = {
		{ 1, 1 }, { 8, 8 }, { 32, 32 }, { 3, 4 }, { 24, 32 }, { 48, 64 }, { 100, 128 },
		{ 3000, 4096 }, { 65536, 65536 }, { 300000, 524288 },
	};
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		void *p = memalign(m[k].align, SIZE(3));
		check_block(p, SIZE(3), m[k].want, "memalign");
		free(p);
	}

	SAY("valloc and pvalloc: page aligned; pvalloc rounds the size up to whole pages");
	size_t page = (size_t)getpagesize();
	void *p = valloc(SIZE(3));
	check_block(p, SIZE(3), page, "valloc");
	free(p);
	static const struct { size_t n, rounded; } pv[] = { { 0, 1 }, { 1, 1 }, { 4096, 1 }, { 4097, 2 }, { 100000, 25 } };
	for (size_t k = 0; k < sizeof(pv) / sizeof(pv[0]); k++) {
		p = pvalloc(pv[k].n);
		check_block(p, pv[k].rounded * page, page, "pvalloc");
		free(p);
	}
	errno = 0;
	volatile size_t huge = SIZE_MAX - 10;
	CHECK(pvalloc(huge) == NULL);
	CHECK_EQ(errno, ENOMEM);

	SAY("C++-style over-aligned objects through posix_memalign");
	struct object { alignas(128) int id; char name[40]; };
	struct object *objs = NULL;
	CHECK(posix_memalign((void **)&objs, alignof(struct object), 10 * sizeof(struct object)) == 0);
	check_block(objs, 10 * sizeof(struct object), 128, "posix_memalign(object)");
	for (int i = 0; i < 10; i++) {
		objs[i].id = i;
		snprintf(objs[i].name, sizeof(objs[i].name), "object %d", i);
		CHECK((uintptr_t)&objs[i] % 128 == 0);
	}
	for (int i = 0; i < 10; i++)
		CHECK(objs[i].id == i);
	free(objs);
}

static void test_usable_size_and_glibc(void)
{
	SAY("malloc_usable_size >= the request, for arena and glibc blocks; 0 for NULL");
	CHECK_EQ(malloc_usable_size(NULL), 0);
	for (size_t i = 1; i < sizeof(vsize) / sizeof(vsize[0]); i++) {
		void *p = malloc(SIZE(i));
		CHECK(in_arena_heap(&A, p));
		CHECK(malloc_usable_size(p) >= SIZE(i));
		free(p);
		char *g = __libc_malloc(SIZE(i));
		CHECK(g && !in_arena_heap(&A, g), "__libc_malloc gave %p", (void *)g);
		size_t u = malloc_usable_size(g);
		CHECK(u >= SIZE(i) && u < SIZE(i) + 4096, "glibc block of %zu: usable %zu", SIZE(i), u);
		memset(g, 0x33, u);
		free(g);
	}

	SAY("a glibc block moves into the arena on realloc, contents kept; realloc(glibc, 0) frees it");
	char *g = __libc_malloc(SIZE(4));
	for (size_t i = 0; i < SIZE(4); i++)
		g[i] = (char)(i * 7);
	char *p = realloc(g, SIZE(5));
	CHECK(p && in_arena_heap(&A, p), "realloc of a glibc block gave %p", (void *)p);
	for (size_t i = 0; i < SIZE(4); i++)
		CHECK(p[i] == (char)(i * 7), "byte %zu lost", i);
	free(p);
	g = __libc_malloc(SIZE(3));
	CHECK(realloc(g, SIZE(0)) == NULL);

	SAY("strdup, strndup, asprintf, getline and open_memstream (glibc allocating inside) use the arena");
	char *s = strdup("cxlcr arena");
	CHECK(s && in_arena_heap(&A, s) && !strcmp(s, "cxlcr arena"));
	free(s);
	s = strndup("cxlcr arena", 5);
	CHECK(s && in_arena_heap(&A, s) && !strcmp(s, "cxlcr"));
	free(s);
	CHECK(asprintf(&s, "%s-%d", "pid", 42) > 0);
	CHECK(in_arena_heap(&A, s) && !strcmp(s, "pid-42"));
	free(s);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = fopen("/proc/self/cmdline", "r");
	CHECK(f != NULL);
	CHECK(getdelim(&buf, &len, 0, f) > 0);
	CHECK(in_arena_heap(&A, buf), "getdelim buffer %p", (void *)buf);
	fclose(f);
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	for (int i = 0; i < 10000; i++)
		fprintf(f, "line %d\n", i);
	fclose(f);
	CHECK(buf && in_arena_heap(&A, buf) && len > 10000 && !strncmp(buf, "line 0\n", 7));
	free(buf);
}

int main(void)
{
	printf("alloc_api: the malloc family under the preload\n");
	arena_require(&A);
	arena_print(&A);
	test_malloc_calloc();
	test_realloc();
	test_aligned();
	test_usable_size_and_glibc();
	printf("alloc_api: all checks passed\n");
	return 0;
}
