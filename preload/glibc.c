/*
 * glibc's own allocator, whatever else the program links.
 *
 * Blocks outside the arena (made before it was ready, in a fork child, or
 * when the pool is full) belong to glibc and must go back to glibc's own
 * functions. Linking against __libc_malloc & co does not promise that: the
 * dynamic linker binds a name to the first object in the global scope that
 * defines it, and a program linked with another allocator brings its
 * definitions along: libtcmalloc defines __libc_malloc and friends, and
 * jemalloc (Debian's redis-server) defines malloc_usable_size, which
 * dlsym(RTLD_NEXT) used to find and which crashed on glibc's blocks.
 *
 * So the functions are looked up in libc.so.6 itself: dlsym on its handle
 * searches only that object and its dependencies. The look-up happens on
 * the first call that needs glibc, which can come from another library's
 * constructor before ours. dlopen and dlsym may allocate while they work;
 * such allocations (from the looking-up thread) are served from a small
 * static buffer and never freed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

#define LIBC_SONAME     "libc.so.6"
#define BOOTSTRAP_SIZE  (64u << 10)

enum { UNRESOLVED, RESOLVING, RESOLVED };

/* glibc's functions, or (while they are looked up) the bootstrap's. */
struct glibc_api {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void  (*free)(void *);
	void *(*memalign)(size_t, size_t);
	size_t (*usable_size)(void *);
};

static struct glibc_api glibc_api;
static int state; /* UNRESOLVED, RESOLVING, RESOLVED (atomic) */
static TLS bool resolving_here;

/* The bootstrap buffer: each block has its size in front of it. */
static _Alignas(64) unsigned char bootstrap[BOOTSTRAP_SIZE];
static size_t bootstrap_used; /* only the resolving thread moves it */

static bool bootstrap_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)bootstrap < sizeof(bootstrap);
}

static void *bootstrap_memalign(size_t align, size_t n)
{
	if (align < 16)
		align = 16;
	size_t at = (bootstrap_used + sizeof(size_t) + align - 1) & ~(align - 1);
	if (n > sizeof(bootstrap) || at + n > sizeof(bootstrap)) {
		errno = ENOMEM;
		return NULL;
	}
	bootstrap_used = at + n;
	memcpy(bootstrap + at - sizeof(size_t), &n, sizeof(n));
	return bootstrap + at; /* zero: the buffer is never reused */
}

static size_t bootstrap_usable_size(void *p)
{
	size_t n;
	memcpy(&n, (unsigned char *)p - sizeof(size_t), sizeof(n));
	return n;
}

static void *bootstrap_malloc(size_t n)
{
	return bootstrap_memalign(16, n);
}

static void *bootstrap_calloc(size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return bootstrap_malloc(n);
}

static void *bootstrap_realloc(void *p, size_t n)
{
	void *q = bootstrap_malloc(n);
	if (q && p) {
		size_t old = bootstrap_usable_size(p);
		memcpy(q, p, old < n ? old : n);
	}
	return q;
}

static void bootstrap_free(void *p)
{
	(void)p;
}

static const struct glibc_api bootstrap_api = {
	.malloc = bootstrap_malloc,
	.calloc = bootstrap_calloc,
	.realloc = bootstrap_realloc,
	.free = bootstrap_free,
	.memalign = bootstrap_memalign,
	.usable_size = bootstrap_usable_size,
};

/* A preload that cannot reach glibc's allocator cannot run the program. */
static void die(const char *what)
{
	static const char msg[] = "cxlcr-preload: cannot find glibc's ";
	ssize_t ignored = write(2, msg, sizeof(msg) - 1);
	ignored = write(2, what, strlen(what));
	ignored = write(2, " in " LIBC_SONAME "\n", sizeof(" in " LIBC_SONAME "\n") - 1);
	(void)ignored;
	_exit(69);
}

static void *must(void *libc, const char *name)
{
	void *f = dlsym(libc, name);
	if (!f)
		die(name);
	return f;
}

static __attribute__((noinline)) const struct glibc_api *resolve(void)
{
	if (resolving_here)
		return &bootstrap_api;
	int expected = UNRESOLVED;
	if (!__atomic_compare_exchange_n(&state, &expected, RESOLVING, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* Another thread looks them up: a moment at process start. */
		while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != RESOLVED)
			sched_yield();
		return &glibc_api;
	}
	resolving_here = true;
	void *libc = dlopen(LIBC_SONAME, RTLD_NOW | RTLD_NOLOAD);
	if (!libc)
		die("handle");
	struct glibc_api api = {
		.malloc = must(libc, "__libc_malloc"),
		.calloc = must(libc, "__libc_calloc"),
		.realloc = must(libc, "__libc_realloc"),
		.free = must(libc, "__libc_free"),
		.memalign = must(libc, "__libc_memalign"),
		.usable_size = must(libc, "malloc_usable_size"),
	};
	glibc_api = api;
	resolving_here = false;
	__atomic_store_n(&state, RESOLVED, __ATOMIC_RELEASE);
	return &glibc_api;
}

static inline const struct glibc_api *glibc(void)
{
	if (likely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) == RESOLVED))
		return &glibc_api;
	return resolve();
}

void *glibc_malloc(size_t n)
{
	return glibc()->malloc(n);
}

void *glibc_calloc(size_t count, size_t size)
{
	return glibc()->calloc(count, size);
}

void *glibc_memalign(size_t align, size_t n)
{
	return glibc()->memalign(align, n);
}

size_t glibc_usable_size(void *p)
{
	if (unlikely(bootstrap_owns(p)))
		return bootstrap_usable_size(p);
	return glibc()->usable_size(p);
}

void glibc_free(void *p)
{
	if (unlikely(bootstrap_owns(p)))
		return;
	glibc()->free(p);
}

/* A bootstrap block is moved to glibc (or to more bootstrap) on realloc. */
void *glibc_realloc(void *p, size_t n)
{
	if (likely(!bootstrap_owns(p)))
		return glibc()->realloc(p, n);
	void *q = glibc()->malloc(n);
	if (q) {
		size_t old = bootstrap_usable_size(p);
		memcpy(q, p, old < n ? old : n);
	}
	return q;
}
