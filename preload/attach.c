/*
 * Process start: map this service's arena and make it mimalloc's.
 *
 * Runs as a constructor, before main(). Until it is done, and whenever it
 * cannot be, allocations go to glibc. If the arena cannot be opened, mapped
 * or registered the process does not run at all: a service that silently ran
 * without a shared heap could not be migrated later, and nobody would know
 * until then.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "preload.h"

#define DEFAULT_ARENA_SIZE (1ull << 30)
/* Exit status of a service whose arena could not be set up. */
#define PRELOAD_EXIT_NO_ARENA 69

static const uint32_t always_live = 1; /* until the mark page is made (make_live_mark) */
struct preload cx = { .live_mark = &always_live };
TLS mi_heap_t *tls_heap;
static TLS enum thread_state tls_state;
static pthread_key_t thread_exit_key;

/* A thread is exiting: from now on it allocates from glibc, because
 * mimalloc's own exit handler (which runs after ours, see glue.c) is about
 * to delete the thread's arena heap. Its blocks stay valid. */
static void thread_exit(void *unused)
{
	(void)unused;
	tls_heap = NULL;
	tls_state = THREAD_GLIBC;
	stats_thread_exit();
}

/* First allocation of a thread: give it a heap of its own in the arena. */
mi_heap_t *preload_thread_heap_slow(void)
{
	forked_unseen();
	if (!cx.ready || cx.fork_child || tls_state != THREAD_NEW)
		return NULL;
	tls_state = THREAD_GLIBC; /* anything allocated while we set up */
	/* A heap's first allocation takes a whole segment: a full arena
	 * grows for it. */
	mi_heap_t *h = cx.mi.heap_new();
	for (int i = 0; !h && i < 16 && preload_grow(0); i++)
		h = cx.mi.heap_new();
	if (!h) {
		tls_state = THREAD_NO_ROOM;
		return NULL;
	}
	pthread_setspecific(thread_exit_key, (void *)1);
	stats_thread_start();
	tls_heap = h;
	tls_state = THREAD_ARENA;
	return h;
}

bool preload_thread_without_room(void)
{
	return tls_state == THREAD_NO_ROOM;
}

static uint32_t *mark_page;

void preload_arm_live_mark(void)
{
	if (mark_page && madvise(mark_page, (size_t)getpagesize(), MADV_WIPEONFORK) == 0)
		*mark_page = 1;
}

/* The page that tells a child that ran no fork handler (_Fork, raw clone)
 * from its parent: the kernel hands a child of fork a zeroed copy of it.
 * Without MADV_WIPEONFORK (Linux < 4.14) only fork() children are seen. */
static void make_live_mark(void)
{
	void *p = mmap(NULL, (size_t)getpagesize(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	mark_page = p;
	preload_arm_live_mark();
	if (*mark_page)
		cx.live_mark = mark_page;
}

/*
 * In a child of fork() the arena is still mapped MAP_SHARED: it is the
 * parent's live heap, not a copy. The child must neither allocate from it
 * nor free into it, or it would corrupt the parent. It allocates from glibc,
 * and frees of arena blocks become no-ops. (It still sees the arena's live
 * contents as the parent changes them; see README.)
 */
void preload_enter_fork_child(void)
{
	/* Its writes to the heap, if any, are not tracked: snapshots compare
	 * instead while one may have written (see tracking/track.h). */
	if (cx.header)
		__atomic_fetch_add(&cx.header->fork_count, 1, __ATOMIC_ACQ_REL);
	cx.fork_child = true;
	tls_heap = NULL;
	tls_state = THREAD_GLIBC;
	tls_slot = NULL;
}

/* /proc/self/cmdline with its NULs made spaces, for `cxlcr ps`. */
static void read_command_line(char *out, size_t len)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, len - 1) : 0;
	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	out[n] = 0;
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == 0)
			out[i] = i + 1 < n && out[i + 1] == 0 ? 0 : ' ';
	while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == 0))
		out[--n] = 0;
}


/*
 * This process's pid as the pool's other users see it. A pod service is
 * pid 1 of its own PID namespace, but its owner entry holds the pid its
 * host sees (cxlcr run records it): a service that execs must claim its
 * arena again under that pid, or it would find the arena "taken" by
 * itself. /proc is the host's (the mount namespace is shared), so the
 * first NSpid of /proc/self/status is that pid. No malloc: this runs
 * before the allocator is ready.
 */
pid_t preload_outer_pid(void)
{
	char buf[2048];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	const char *at = strstr(buf, "\nNSpid:");
	long pid = at ? strtol(at + 8, NULL, 10) : 0;
	return pid > 0 ? (pid_t)pid : getpid();
}

/* Finds the named arena, or creates it with CXLCR_ARENA_SIZE, and makes this
 * process its owner. */
static int find_or_create(struct cxlcr_pool *pool, const char *name, struct cxlcr_region *r)
{
	if (!cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, r)) {
		uint64_t size = DEFAULT_ARENA_SIZE;
		const char *s = getenv("CXLCR_ARENA_SIZE");
		if (s && *s && cxlcr_parse_size(s, &size) < 0)
			return cxlcr_error("CXLCR_ARENA_SIZE=%s is not a size", s);
		if (size < CXLCR_HEAP_ALIGN)
			return cxlcr_error("CXLCR_ARENA_SIZE=%s is below the minimum of %llu MiB", s,
					   (unsigned long long)(CXLCR_HEAP_ALIGN >> 20));
		if (cxlcr_region_alloc(pool, CXLCR_KIND_ARENA, name, size + CXLCR_ARENA_HEAP_OFFSET, r) == 0)
			goto claim;
		/* Someone else may have created it meanwhile. */
		if (!cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, r))
			return -1;
	}
	/* A service that exec'd owned the arena before (CXLCR_ARENA_OWNER, in
	 * its environment across the exec, is its pid): it keeps it as its
	 * entry says, which in a pod names the pod host, not the service's
	 * own UTS name that cxlcr_host_name() sees here. */
	const char *owner = getenv("CXLCR_ARENA_OWNER");
	if (owner && atoi(owner) == getpid() && r->owner_pid == preload_outer_pid())
		return 0;
claim:
	return cxlcr_region_claim(pool, r->generation, preload_outer_pid(), cxlcr_host_name(),
				  program_invocation_short_name, r);
}

/* How far the heap may grow: CXLCR_ARENA_MAX (what `cxlcr run --arena-max`
 * passes), else as far as the pool could ever give; never below its
 * first extent. */
static int heap_limit(const struct cxlcr_pool *pool, uint64_t first, uint64_t *limit)
{
	*limit = pool->sb->size - pool->sb->data_offset;
	const char *s = getenv("CXLCR_ARENA_MAX");
	if (s && *s && cxlcr_parse_size(s, limit) < 0)
		return cxlcr_error("CXLCR_ARENA_MAX=%s is not a size", s);
	*limit = *limit / CXLCR_HEAP_ALIGN * CXLCR_HEAP_ALIGN;
	if (*limit < first)
		*limit = first;
	return 0;
}

/*
 * Maps the arena region with its heap on a mimalloc block boundary, inside
 * a reservation of address space for everything the heap may grow to: the
 * extents are mapped into it later, right after one another, so that the
 * heap stays one range (one compare tells an arena pointer) wherever its
 * pieces lie in the pool.
 */
static char *map_reserved(struct cxlcr_pool *pool, const struct cxlcr_region *r, uint64_t limit)
{
	size_t len = CXLCR_ARENA_HEAP_OFFSET + limit + CXLCR_HEAP_ALIGN;
	char *res = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED) {
		cxlcr_error("cannot reserve %zu bytes of address space for the heap: %s", len, strerror(errno));
		return NULL;
	}
	uintptr_t heap = ((uintptr_t)res + CXLCR_ARENA_HEAP_OFFSET + CXLCR_HEAP_ALIGN - 1) &
			 ~(uintptr_t)(CXLCR_HEAP_ALIGN - 1);
	char *base = (char *)heap - CXLCR_ARENA_HEAP_OFFSET;
	if (mmap(base, r->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, pool->fd, (off_t)r->offset) ==
	    MAP_FAILED) {
		cxlcr_error("pool %s: cannot map arena '%s': %s", pool->path, r->name, strerror(errno));
		munmap(res, len);
		return NULL;
	}
	char *end = (char *)heap + limit;
	if (base > res)
		munmap(res, (size_t)(base - res));
	if (res + len > end)
		munmap(end, (size_t)(res + len - end));
	return base;
}

/* Registered as not committed, so that mimalloc decommits what it frees
 * (release.c gives that back to the pool); its commits are mprotect()s to
 * the protection the mapping already has. */
int preload_register_extent(void *start, size_t size)
{
	mi_arena_id_t id;
	if (!cx.mi.manage_os_memory_ex(start, size, false, false, true, -1, false, &id))
		return cxlcr_error("mimalloc refused %zu bytes of heap at %p", size, start);
	return 0;
}

int preload_attach_arena(void)
{
	const char *name = getenv("CXLCR_ARENA");
	if (!name || !*name)
		return cxlcr_error("CXLCR_ARENA is not set (name of the arena to use)");

	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return -1;
	struct cxlcr_region r;
	uint64_t limit;
	if (find_or_create(&pool, name, &r) < 0)
		goto fail;
	if (r.size < CXLCR_ARENA_MIN_SIZE) {
		cxlcr_error("arena '%s' is too small (%llu bytes)", name, (unsigned long long)r.size);
		goto fail;
	}
	size_t heap_size = r.size - CXLCR_ARENA_HEAP_OFFSET;
	if (heap_limit(&pool, heap_size, &limit) < 0)
		goto fail;
	char *base = map_reserved(&pool, &r, limit);
	if (!base)
		goto fail;
	void *heap = base + CXLCR_ARENA_HEAP_OFFSET;
	/* mimalloc 2.0 takes arena blocks it never handed out to be zero, so
	 * the heap must be. A new region is; the arena of a process that
	 * exec'd holds the old image's heap and is cleared first, and the
	 * extents that image grew are given back. */
	struct cxlcr_arena_header *h = (void *)base;
	if (h->magic == CXLCR_ARENA_MAGIC &&
	    (cxlcr_pool_zero(&pool, r.offset + CXLCR_ARENA_HEAP_OFFSET, heap_size) < 0 ||
	     cxlcr_arena_free_extents(&pool, r.name) < 0))
		goto fail;
	cxlcr_arena_header_init(h, &pool, &r, (uintptr_t)heap, heap_size, limit, getpid());
	read_command_line(h->command, sizeof(h->command));
	cxlcr_publish(h->command, sizeof(h->command));
	if (preload_register_extent(heap, heap_size) < 0)
		goto fail;
	cxlcr_pool_detach(&pool);
	cx.pool = pool;
	cx.header = h;
	cx.heap_lo = (uintptr_t)heap;
	cx.heap_size = limit;
	cx.grown = heap_size;
	stats_attached();
	return 0;
fail:
	cxlcr_pool_close(&pool);
	return -1;
}

/* Tells `cxlcr run`, through the pipe it passed, whether we made it. */
static void report_ready(const char *error)
{
	const char *fd_s = getenv("CXLCR_READY_FD");
	if (!fd_s)
		return;
	int fd = atoi(fd_s);
	if (error)
		dprintf(fd, "error: %s\n", error);
	else
		dprintf(fd, "ok %d\n", getpid());
	close(fd);
	unsetenv("CXLCR_READY_FD");
}

/* A process the service started inherits our environment, but the arena is
 * the service's alone: descendants run on glibc. */
static bool is_descendant(void)
{
	const char *owner = getenv("CXLCR_ARENA_OWNER");
	return owner && atoi(owner) != getpid();
}

__attribute__((constructor(101))) static void preload_init(void)
{
	if (is_descendant())
		return;
	/* Before mimalloc is loaded: see thread_exit() and glue.c. */
	if (pthread_key_create(&thread_exit_key, thread_exit) != 0 ||
	    pthread_atfork(NULL, NULL, preload_enter_fork_child) != 0) {
		cxlcr_error("cannot register thread and fork handlers");
		goto fail;
	}
	make_live_mark();
	if (preload_load_mimalloc() < 0 || preload_attach_arena() < 0)
		goto fail;
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", getpid());
	setenv("CXLCR_ARENA_OWNER", pid, 1);
	report_ready(NULL);
	__atomic_store_n(&cx.ready, true, __ATOMIC_RELEASE);
	/* Only speed is lost without it (shed.c). */
	if (preload_shed_start() < 0)
		fprintf(stderr, "cxlcr-preload: no page-table shedding thread\n");
	return;
fail:
	fprintf(stderr, "cxlcr-preload: %s\n", cxlcr_last_error());
	report_ready(cxlcr_last_error());
	_exit(PRELOAD_EXIT_NO_ARENA);
}
