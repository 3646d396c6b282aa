/*
 * The pager of a copy-mode fork child (pager.h): a keeper process, and
 * under it the pager proper, which takes the child's userfaultfd, installs
 * its pages, lets it run and serves its faults for as long as it lives.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/cpus.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "../daemon/host_files.h"
#include "../tier/tier.h"
#include "ahead.h"
#include "inject.h"
#include "pager.h"

#define PAGE CXLCR_SNAPSHOT_PAGE_SIZE
#define INSTALL_CHUNK (512u * PAGE)  /* one UFFDIO_COPY before the child runs: 2 MiB */
#define BACKGROUND_CHUNK (64u * PAGE) /* while it runs: a fault waits for at most one (~50 us) */
#define BACKGROUND_COLD TIER_READ_RUN /* cold pages per step: one RMA read, which a fault waits for at most */
#define COLD_LANES 2u                 /* threads of the cold fetch (cold_main) */
#define READY_TIMEOUT_MS 60000
#define MSGS_PER_READ 64
#define FORKED_MAX 64         /* userfaultfds of the child's own children at once */
#define FORKED_CHECK_MS 1000  /* how often those of children that ended are closed */
#define COLD_DONE_CHECK_MS 100 /* how often a pager looks whether its cold fetch has ended */
#define END_LINE_MAX 1024     /* the pager's last line on its child (the keeper logs it) */
#define LATER_MAX 256         /* faults put off until an event is read (one per thread at most) */

/*
 * What copy_in() and install_zero() return when the kernel refused the
 * copy with EAGAIN, nothing copied: the memory map of that process is
 * changing, and until the pager reads the event that says how (a fork's
 * UFFD_EVENT_FORK, which the forking thread waits on), every copy into it
 * is refused so. Only the main thread reads events: it puts the copy off
 * and reads first (retrying in place would wait for itself, for ever: a
 * child that forked during its background fetch hung with its pager
 * spinning), and a lane waits for it.
 */
#define INSTALL_LATER 2

/*
 * The service time of the faults the pager serves, by source: from the
 * read of the fault's message to the return of the UFFDIO_COPY or
 * UFFDIO_ZEROPAGE that wakes the faulting thread (so a fault read in a
 * batch also waits for those before it). One clock read per batch of
 * messages and one per fault, and a log-linear histogram of fixed size
 * in nanoseconds: exact below 2 * FAULT_HIST_SUB, then FAULT_HIST_SUB
 * buckets per power of two (within 1/FAULT_HIST_SUB of the value), up to
 * 2^FAULT_HIST_BITS ns (~18 min; longer ones count there). Nothing is
 * allocated per fault, and there is no bound on how many are counted.
 */
enum fault_source { FAULT_CXL, FAULT_COLD, FAULT_ZERO, FAULT_SOURCES };
#define FAULT_HIST_SUB_BITS 5u
#define FAULT_HIST_SUB (1u << FAULT_HIST_SUB_BITS)
#define FAULT_HIST_BITS 40u
#define FAULT_HIST_BUCKETS ((FAULT_HIST_BITS - FAULT_HIST_SUB_BITS + 1u) * FAULT_HIST_SUB)

struct fault_hist {
	uint64_t count;
	uint64_t max_ns;
	uint64_t bucket[FAULT_HIST_BUCKETS];
};

struct pager {
	pid_t pid;
	int uffd;
	/* The userfaultfds of the processes the child forked (Redis's BGSAVE):
	 * their arena is registered too (UFFD_FEATURE_EVENT_FORK), and what
	 * the child had not got yet, they fault on as well. */
	int forked[FORKED_MAX];
	int forked_count;
	/* Faults whose copy was put off (INSTALL_LATER): served again once
	 * the events before them are read. */
	struct { int uffd; uint64_t addr, read_ns; } later[LATER_MAX];
	int later_count;
	const struct cxlcr_snapshot *s;
	uint64_t header_lo, header_copy_hi;  /* the arena header, and its pages the snapshot copied */
	uint64_t heap_lo, heap_hi;
	uint64_t cursor;                     /* of cxlcr_snapshot_leaf() */
	uint64_t faults_copied, faults_zero;
	struct fault_hist fault_time[FAULT_SOURCES]; /* enum fault_source */
	/* The background fetch: the next stored page to install (run, page
	 * of it); done when run == run_count. */
	uint64_t bg_run, bg_page, bg_pages;
	uint64_t bg_t0, bg_ns;
	bool background;
	bool bg_cold_only;                   /* the CXL pages are in already (a tiered snapshot's) */
	/* The cold tier (a tiered snapshot): its reader, and where a cold
	 * page is read to before it is copied in. */
	struct tier_reader *tier;
	uint8_t bounce[PAGE] __attribute__((aligned(PAGE)));
	uint64_t cold_pages;
	/* The cold pages fetched ahead by the fork's restore, while it
	 * lasts (released once the cold fetch is done), and how many faults
	 * it served. */
	struct cold_ahead *ahead;
	uint64_t ahead_faults;
	/* A cold fault's neighbours, read with it (read_around()): asked for
	 * by serve() only, and what came in the same read. */
	bool around_on;
	uint64_t around, around_first, around_n, around_pages; /* around: pages a read takes */
	const uint8_t *around_data;
	/* Where the time before the child ran went (the end line says):
	 * taking its userfaultfd and registering the arena, installing
	 * pages, and waiting for the reader's connection. */
	uint64_t take_ns, install_ns, reader_wait_ns;
	/* The CXL runs installed before the child runs were refreshed and
	 * read into this CPU's caches while it was restored (warm_runs()). */
	bool runs_warm;
};

int pager_fetch_parse(const char *s)
{
	if (!s || !strcmp(s, "background"))
		return PAGER_BACKGROUND;
	if (!strcmp(s, "eager"))
		return PAGER_EAGER;
	if (!strcmp(s, "lazy"))
		return PAGER_LAZY;
	return -1;
}

/* Where a page comes from: a copy from CXL (from points at its source,
 * and `more` bytes after it come from the same place, contiguously), a
 * copy of a cold page (from is the bounce buffer it was read into), or
 * zeros. */
enum page_kind { PAGE_COPY, PAGE_COLD, PAGE_ZERO };

/*
 * A cold page into the bounce buffer. A read that fails (a server that
 * does not answer in time, a broken connection, a copy that does not
 * match its checksum) is tried again with a reader opened anew, which
 * checks the cold extent again (a server that restarted lost it), up to
 * COLD_TRIES times: the faulting thread waits meanwhile, and is killed
 * with its child after the last.
 */
static int read_cold(struct pager *p, uint64_t page)
{
	for (unsigned tries = 1;; tries++) {
		if (p->tier && tier_read_page(p->tier, page, p->bounce) == 0)
			return 0;
		if (tries == COLD_TRIES)
			return cxlcr_error("heap page %" PRIu64 " from the cold tier, %u tries: %s", page, tries,
					   cxlcr_last_error());
		if (p->tier)
			tier_reader_close(p->tier);
		p->tier = NULL;
		if (tier_reader_open(p->s, &p->tier) < 0)
			p->tier = NULL;
	}
}

int pager_fault_around_parse(const char *text)
{
	uint64_t n;
	if (cxlcr_parse_count(text, PAGER_FAULT_AROUND_MAX, &n) < 0 || n < 1 || (n & (n - 1)))
		return cxlcr_error("'%.40s' is not a number of pages from 1 to %u, a power of two", text,
				   PAGER_FAULT_AROUND_MAX);
	return (int)n;
}

int pager_fault_around(void)
{
	const char *v = getenv(PAGER_FAULT_AROUND_ENV);
	if (!v)
		return (int)PAGER_FAULT_AROUND_MAX;
	int n = pager_fault_around_parse(v);
	return n < 0 ? cxlcr_error("%s: %s", PAGER_FAULT_AROUND_ENV, cxlcr_last_error()) : n;
}

/*
 * A cold fault reads the p->around-page block around its page (aligned,
 * within the page's cold run; the daemon's fault_around, 16 pages unless
 * it says otherwise) in the same RMA read, and serve() installs the
 * others once the faulting thread is awake. Why: what a child touches
 * of its cold pages is mostly a service's small objects (Redis's
 * dictionary entries, keys and value headers of the keys that were not
 * hot), many to a page, in allocator pages of 64 KiB; a request on such a
 * key met three or four cold pages in a row, a round trip to the memory
 * server each, and the next request on another such key met their
 * neighbours. An all-remote child's first 10,000 requests faulted 3,540
 * times with single pages and ~640 times with blocks, its p99 140-160 us
 * and 78-93 us (docs/cold-tier.md); a 64 KiB read costs a fault little
 * more than a 4 KiB one. -1 when there is nothing around the page to read
 * or the read fails: the fault then reads its page alone (read_cold(),
 * with its retries).
 */
static int read_around(struct pager *p, uint64_t page, const uint8_t **from)
{
	const struct cxlcr_snapshot_run *r = &p->s->runs[p->cursor]; /* the page's (page_source()) */
	uint64_t lo = page & ~(p->around - 1), hi = lo + p->around;
	if (lo < r->first_page)
		lo = r->first_page;
	if (hi > r->first_page + r->pages)
		hi = r->first_page + r->pages;
	const void *data;
	if (!p->tier || page < lo || page >= hi || hi - lo < 2 || tier_read_run(p->tier, lo, hi - lo, &data) < 0)
		return -1;
	p->around_first = lo;
	p->around_n = hi - lo;
	p->around_data = data;
	*from = (const uint8_t *)data + (page - lo) * PAGE;
	return 0;
}

/*
 * The one place where the source of the page at addr is chosen: the
 * snapshot's copy of the arena header, zeros for the rest of the header
 * area, and for a heap page what its leaf says: a copy in CXL, zero, or a
 * cold page, read from its memory server by RMA into the bounce buffer
 * (tier_read_page() checks its CRC-32C; a page it cannot read right after
 * COLD_TRIES tries is refused, and the child dies rather than read a
 * wrong page).
 */
static int page_source(struct pager *p, uint64_t addr, const uint8_t **from, uint64_t *more)
{
	*more = 0;
	if (addr >= p->header_lo && addr < p->header_copy_hi) {
		*from = p->s->base + p->s->header.arena_header_offset + (addr - p->header_lo);
		*more = p->header_copy_hi - addr - PAGE;
		return PAGE_COPY;
	}
	if (addr >= p->header_copy_hi && addr < p->heap_lo)
		return PAGE_ZERO;
	if (addr < p->heap_lo || addr >= p->heap_hi)
		return cxlcr_error("a fault at %#" PRIx64 ", outside the arena", addr);
	uint64_t page = (addr - p->heap_lo) / PAGE;
	uint64_t leaf = cxlcr_snapshot_leaf(p->s, page, &p->cursor);
	switch (CXLCR_LEAF_TIER(leaf)) {
	case CXLCR_TIER_ZERO:
		return PAGE_ZERO;
	case CXLCR_TIER_CXL:
		*from = cxlcr_snapshot_copy(p->s, CXLCR_LEAF_OFFSET(leaf));
		if (!*from)
			return cxlcr_error("heap page %" PRIu64 " lies outside snapshot %s's data", page,
					   p->s->region.name);
		return PAGE_COPY;
	case CXLCR_TIER_COLD:
		if (!p->s->header.pages_cold)
			return cxlcr_error("heap page %" PRIu64 " is on the cold tier, and snapshot %s has no cold part",
					   page, p->s->region.name);
		if ((*from = ahead_page(p->ahead, page))) {
			p->ahead_faults++;
			return PAGE_COLD;
		}
		p->cold_pages++;
		if (p->around_on && read_around(p, page, from) == 0)
			return PAGE_COLD;
		if (read_cold(p, page) < 0)
			return -1;
		*from = p->bounce;
		return PAGE_COLD;
	default:
		return cxlcr_error("heap page %" PRIu64 " has an unknown tier %u", page, CXLCR_LEAF_TIER(leaf));
	}
}

/* Copies len bytes of the pager's own memory (a cold page read by RMA)
 * into the process of uffd at addr. A page it has already (a racing
 * fault served it) is skipped, the rest still goes in: 0. 1: the process
 * is gone (ending). INSTALL_LATER: what is left did not go in, an event
 * must be read first. */
static int copy_in(int uffd, uint64_t addr, const uint8_t *from, uint64_t len)
{
	while (len) {
		struct uffdio_copy c = { .dst = addr, .src = (uint64_t)(uintptr_t)from, .len = len };
		if (ioctl(uffd, UFFDIO_COPY, &c) == 0)
			return 0;
		if (c.copy > 0) {
			addr += (uint64_t)c.copy;
			from += c.copy;
			len -= (uint64_t)c.copy;
			continue;
		}
		if (errno == EEXIST) {
			/* That page is there already (a fault served it, or the
			 * process wrote it): the rest still goes in. */
			addr += PAGE;
			from += PAGE;
			len -= PAGE < len ? PAGE : len;
			continue;
		}
		if (errno == EAGAIN)
			return INSTALL_LATER;
		if (errno == ESRCH)
			return 1;
		return cxlcr_error("UFFDIO_COPY of %" PRIu64 " bytes at %#" PRIx64 ": %s", len, addr,
				   strerror(errno));
	}
	return 0;
}

/* The same from the pool: the lines are dropped from this CPU's cache
 * first, as every read of another host's data in the pool is. Not for a
 * page read by RMA: flushing what the CRC check just read cost a line
 * flush per 64 bytes of every cold page, and bought nothing. */
static int install(int uffd, uint64_t addr, const uint8_t *from, uint64_t len)
{
	cxlcr_refresh(from, len);
	return copy_in(uffd, addr, from, len);
}

static int install_zero(int uffd, uint64_t addr)
{
	for (;;) {
		struct uffdio_zeropage z = { .range = { .start = addr, .len = PAGE } };
		if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0 || errno == EEXIST)
			return 0;
		if (errno == ESRCH)
			return 1;
		if (errno == EAGAIN)
			return INSTALL_LATER;
		if (errno != EINTR)
			return cxlcr_error("UFFDIO_ZEROPAGE at %#" PRIx64 ": %s", addr, strerror(errno));
	}
}

/* Registers every mapping of the arena's range MISSING: anonymous memory
 * only (rebase made it so), or the child is not a copy-mode child. */
static int register_arena(struct pager *p)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return cxlcr_error("%s: %s", path, strerror(errno));
	int rc = 0, n = 0;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		uint64_t lo, hi, inode;
		int name_at = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %" SCNu64 " %n", &lo, &hi, &inode, &name_at) < 3)
			continue;
		if (hi <= p->header_lo || lo >= p->heap_hi)
			continue;
		if (inode != 0 || (name_at && line[name_at] && line[name_at] != '\n'))
			rc = cxlcr_error("pid %d maps a file in its arena at %#" PRIx64 ": not a copy-mode child",
					 (int)p->pid, lo);
		uint64_t a = lo > p->header_lo ? lo : p->header_lo, b = hi < p->heap_hi ? hi : p->heap_hi;
		struct uffdio_register r = { .range = { .start = a, .len = b - a }, .mode = UFFDIO_REGISTER_MODE_MISSING };
		if (rc == 0 && ioctl(p->uffd, UFFDIO_REGISTER, &r) < 0)
			rc = cxlcr_error("UFFDIO_REGISTER of %#" PRIx64 "-%#" PRIx64 " in pid %d: %s", a, b,
					 (int)p->pid, strerror(errno));
		n++;
	}
	fclose(f);
	if (rc == 0 && n == 0)
		rc = cxlcr_error("pid %d maps nothing at its arena's address %#" PRIx64, (int)p->pid, p->heap_lo);
	return rc;
}

/* The hot pages (heap page indexes, ascending) one by one, those the
 * snapshot stores (a zero page comes on its fault). */
static int install_hot(struct pager *p, const uint64_t *hot, uint64_t count, uint64_t *pages)
{
	for (uint64_t i = 0; i < count; i++) {
		if (hot[i] >= p->s->header.page_count)
			continue;
		uint64_t addr = p->heap_lo + hot[i] * PAGE, more;
		const uint8_t *from;
		int kind = page_source(p, addr, &from, &more);
		if (kind < 0)
			return -1;
		if (kind == PAGE_ZERO)
			continue;
		if ((kind == PAGE_COLD ? copy_in : install)(p->uffd, addr, from, PAGE) != 0)
			return -1;
		(*pages)++;
	}
	return 0;
}

/* Pages [first, first + n) of a cold run: TIER_READ_RUN of them per RMA
 * read, installed from the reader's buffer, or, where such a read fails,
 * one read each with retries (read_cold()), as a fault's. */
static int install_cold(struct pager *p, uint64_t first, uint64_t n)
{
	for (uint64_t done = 0; done < n;) {
		uint64_t k = n - done < TIER_READ_RUN ? n - done : TIER_READ_RUN, at = first + done;
		const void *data;
		int rc;
		if (p->tier && tier_read_run(p->tier, at, k, &data) == 0) {
			if ((rc = copy_in(p->uffd, p->heap_lo + at * PAGE, data, k * PAGE)) < 0 || rc == INSTALL_LATER)
				return rc;
			done += k;
			continue;
		}
		for (uint64_t i = 0; i < k; i++) {
			uint64_t addr = p->heap_lo + (at + i) * PAGE, more;
			const uint8_t *from;
			int kind = page_source(p, addr, &from, &more);
			if (kind < 0)
				return -1;
			if (kind != PAGE_ZERO &&
			    ((rc = (kind == PAGE_COLD ? copy_in : install)(p->uffd, addr, from, PAGE)) < 0 ||
			     rc == INSTALL_LATER))
				return rc;
		}
		done += k;
	}
	return 0;
}

/*
 * The background fetch of cold pages, in COLD_LANES threads (lanes), each
 * with a reader (a connection to the memory server) of its own, claiming
 * the fetch's chunks (ahead.h) in heap order: one lane's RMA read is in
 * flight while the other checks and installs what it read. One lane spent
 * 58 ms on RMA, 16 on CRC and 36 on installs for a tiered child's 25,000
 * cold pages on this project's pod; the fetch is as long with two lanes
 * (116-118 ms against 119-127), but a quarter fewer of the child's first
 * 10,000 requests take over 150 us meanwhile (150-177 against 216-229:
 * docs/cold-tier.md). A chunk the fork's restore fetched ahead (ahead.h)
 * is installed from there, after a wait if it is on its way; a lane reads
 * by RMA only the chunks that fetch could not get. In the pager's one
 * thread, a fault that came while a background RMA read was in flight
 * waited for it (~100-400 us for TIER_READ_RUN pages over tcp;ofi_rxm):
 * that wait was most of a tiered child's p99. Now faults are served by
 * the pager's thread with its reader while the lanes read and install
 * the cold runs; UFFDIO_COPY never overwrites a page that is there (a
 * fault served it first, or the child wrote it), so the two cannot
 * disagree. A read that fails is tried again on a reader opened anew, up
 * to COLD_TRIES times in a row; after that the lane ends and faults
 * fetch what it claimed (with their own tries, and the child's death if those
 * fail: a child never reads a wrong page).
 */
static struct cold_fetch {
	pthread_t thread[COLD_LANES];
	unsigned lanes;         /* threads started */
	bool running;
	struct cold_chunks chunks;
	uint64_t next;          /* atomic: the next chunk a lane may claim */
	struct pager *p;
	int stop;               /* atomic: the child ended */
	uint64_t pages;         /* atomic: pages it installed */
	uint64_t ahead_pages;   /* atomic: of those, pages the fork's restore fetched ahead */
	int ahead_stalled;      /* atomic: the fetch ahead stood still on a chunk: lanes read by RMA */
	unsigned left;          /* atomic: lanes still fetching */
	uint64_t done_ns;       /* atomic: when the last lane ended; 0 while one runs */
	/* Where its time went (final once done_ns is set), summed over the
	 * lanes: waiting for RMA reads (or for the fetch ahead), checking
	 * their CRCs, UFFDIO_COPY. */
	uint64_t rma_ns, check_ns, install_ns;
} cold;
struct cold_lane {
	uint64_t rma_ns, check_ns, install_ns;
};
static struct cold_lane lanes[COLD_LANES];

static bool cold_stopped(void)
{
	return __atomic_load_n(&cold.stop, __ATOMIC_ACQUIRE) != 0;
}

/* Closes a lane's reader, keeping the times it counted. */
static void cold_close(struct cold_lane *l, struct tier_reader **r)
{
	uint64_t rma, check;
	tier_reader_times(*r, &rma, &check);
	l->rma_ns += rma;
	l->check_ns += check;
	tier_reader_close(*r);
	*r = NULL;
}

/* Chunk c into the child: from data (the fetch ahead had it) or read by
 * RMA and installed straight from the reader's registered buffer (no copy
 * in between: 100 MiB of cold pages were 100 MiB of memcpy). 0, or -1
 * when the lane is to end (the child is gone, or the server does not
 * answer). */
static int cold_chunk(struct cold_lane *l, struct tier_reader **r, const struct cold_chunk *c, const void *data)
{
	for (unsigned tries = 1; !data; tries++) {
		if (!*r && tier_reader_open_run(cold.p->s, COLD_RUN, r) < 0)
			*r = NULL;
		if (*r && tier_read_run(*r, c->first_page, c->pages, &data) == 0)
			break;
		if (*r)
			cold_close(l, r);
		if (tries == COLD_TRIES || cold_stopped())
			return -1;
	}
	uint64_t t0 = cxlcr_mono_ns();
	int rc;
	/* Put off by an event (INSTALL_LATER): the main thread reads it, the
	 * lane tries again (what went in is skipped). */
	while ((rc = copy_in(cold.p->uffd, cold.p->heap_lo + c->first_page * PAGE, data,
			     (uint64_t)c->pages * PAGE)) == INSTALL_LATER && !cold_stopped())
		nanosleep(&(struct timespec){ .tv_nsec = 50000 }, NULL);
	if (rc != 0)
		return -1;
	l->install_ns += cxlcr_mono_ns() - t0;
	__atomic_add_fetch(&cold.pages, c->pages, __ATOMIC_RELEASE);
	return 0;
}

/* A lane (or cold_begin() itself) is done: the last one sums the lanes'
 * times and says when the fetch ended. */
static void cold_count_out(void)
{
	if (__atomic_sub_fetch(&cold.left, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (unsigned k = 0; k < cold.lanes; k++) {
		cold.rma_ns += lanes[k].rma_ns;
		cold.check_ns += lanes[k].check_ns;
		cold.install_ns += lanes[k].install_ns;
	}
	__atomic_store_n(&cold.done_ns, cxlcr_mono_ns(), __ATOMIC_RELEASE);
}

/* The fetch runs at SCHED_IDLE: it takes only the CPU time that the child
 * and the pager's faults leave. On a kernel that does not preempt, a
 * request the child is to answer on the same CPU still waits for the end
 * of the fetch's system call under way (a 256 KiB receive, a 64-page
 * UFFDIO_COPY): pager_cpus keeps the pagers off the services' CPUs
 * (docs/cold-tier.md). (Two lanes took as long as one, ~150 ms for
 * 25,000 pages, while the memory server slept between requests; with it
 * spinning while busy, tier/memd.c, two lanes cut the child's slow
 * requests, above.) A chunk on its way from the fetch ahead is waited for
 * 20 ms at a time, so that a child that ends stops the lane. */
static void *cold_main(void *arg)
{
	struct cold_lane *l = arg;
	struct sched_param idle = { .sched_priority = 0 };
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
	struct tier_reader *r = NULL;
	const uint64_t stall_ns = (uint64_t)COLD_TRIES * (uint64_t)tier_timeout_ms() * 1000000ull;
	for (;;) {
		uint64_t i = __atomic_fetch_add(&cold.next, 1, __ATOMIC_RELAXED);
		if (i >= cold.chunks.count || cold_stopped())
			break;
		const uint8_t *data = NULL;
		uint64_t t0 = cxlcr_mono_ns();
		int got = -1;
		/* A fetcher that lives but stands still (stopped, or its host
		 * frozen) is given up on after as long as its own tries of
		 * one read could take: from then on every lane reads its
		 * chunks itself, or they would wait as long as the child
		 * lives, and the fetch ahead's memory with them. */
		while (!__atomic_load_n(&cold.ahead_stalled, __ATOMIC_ACQUIRE) &&
		       (got = ahead_chunk(cold.p->ahead, i, 20, &data)) == 0 && !cold_stopped())
			if (cxlcr_mono_ns() - t0 >= stall_ns)
				__atomic_store_n(&cold.ahead_stalled, 1, __ATOMIC_RELEASE);
		if (got == 0 && !cold_stopped())
			got = -1;
		l->rma_ns += cxlcr_mono_ns() - t0;
		if (got == 0)
			break;
		if (cold_chunk(l, &r, &cold.chunks.c[i], got == 1 ? data : NULL) < 0)
			break;
		if (got == 1)
			__atomic_add_fetch(&cold.ahead_pages, cold.chunks.c[i].pages, __ATOMIC_RELAXED);
	}
	if (r)
		cold_close(l, &r);
	cold_count_out();
	return NULL;
}

/* Starts the cold fetch's thread, if the snapshot has cold pages and the
 * child is fetched in the background; without a thread, background_step()
 * reads them between faults, as before. A fetch ahead whose chunks are not
 * the pager's own (it cannot be: both cut the same snapshot) is not used. */
static void cold_begin(struct pager *p)
{
	if (!p->background || !p->s->header.pages_cold || cold_chunks_make(p->s, &cold.chunks) < 0)
		return;
	if (p->ahead && (p->ahead->chunks.count != cold.chunks.count || p->ahead->chunks.pages != cold.chunks.pages)) {
		ahead_release(p->ahead);
		p->ahead = NULL;
	}
	cold.p = p;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* Each lane counts itself out as it ends, and so does this function
	 * once every lane it could start has (a lane that ends before the
	 * next one starts does not end the fetch). A lane that cannot start
	 * never counts in; the others claim its chunks. */
	cold.left = 1;
	for (unsigned k = 0; k < COLD_LANES; k++) {
		__atomic_add_fetch(&cold.left, 1, __ATOMIC_ACQ_REL);
		if (pthread_create(&cold.thread[k], NULL, cold_main, &lanes[cold.lanes]) != 0) {
			__atomic_sub_fetch(&cold.left, 1, __ATOMIC_ACQ_REL);
			break;
		}
		cold.lanes++;
	}
	cold.running = cold.lanes > 0;
	cold_count_out();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Tests (t_fork_copy_fork): while the file this names exists, each step
 * of the background fetch installs every stored page of the snapshot
 * again (each is there already: skipped) and the fetch goes no further,
 * so that a fork of the child lands in an install, almost always. */
#define BG_HOLD_TEST_ENV "CXLCR_TEST_BG_HOLD"
static const char *bg_hold;

static int background_hold(struct pager *p)
{
	for (uint64_t i = 0; i < p->s->run_count; i++) {
		const struct cxlcr_snapshot_run *r = &p->s->runs[i];
		const uint8_t *from = cxlcr_snapshot_copy(p->s, CXLCR_LEAF_OFFSET(r->leaf));
		if (CXLCR_LEAF_TIER(r->leaf) != CXLCR_TIER_CXL || !from)
			continue;
		int rc = copy_in(p->uffd, p->heap_lo + r->first_page * PAGE, from, r->pages * PAGE);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
	}
	return 0;
}

/* One chunk of the background fetch (at most BACKGROUND_CHUNK of one run
 * of stored pages, or BACKGROUND_COLD cold ones): pages the child has by
 * now are skipped by install(). Cold pages come in heap order, like the
 * rest. Sets p->background false when every run is done. */
static int background_step(struct pager *p)
{
	if (bg_hold && access(bg_hold, F_OK) == 0)
		return background_hold(p);
	while (p->bg_run < p->s->run_count) {
		const struct cxlcr_snapshot_run *r = &p->s->runs[p->bg_run];
		uint32_t tier = CXLCR_LEAF_TIER(r->leaf);
		if (tier == CXLCR_TIER_ZERO || p->bg_page >= r->pages || (tier == CXLCR_TIER_CXL && p->bg_cold_only)) {
			p->bg_run++;
			p->bg_page = 0;
			continue;
		}
		if (tier == CXLCR_TIER_COLD && cold.running) { /* the cold fetch's */
			p->bg_run++;
			p->bg_page = 0;
			continue;
		}
		if (tier == CXLCR_TIER_COLD) {
			uint64_t n = r->pages - p->bg_page < BACKGROUND_COLD ? r->pages - p->bg_page : BACKGROUND_COLD;
			int rc = install_cold(p, r->first_page + p->bg_page, n);
			if (rc < 0)
				return -1;
			if (rc == INSTALL_LATER)
				return 0; /* the same chunk again, once the event is read */
			p->bg_page += n;
			p->bg_pages += n;
			return 0;
		}
		uint64_t n = r->pages - p->bg_page < BACKGROUND_CHUNK / PAGE ? r->pages - p->bg_page
									       : BACKGROUND_CHUNK / PAGE;
		const uint8_t *from = cxlcr_snapshot_copy(p->s, CXLCR_LEAF_OFFSET(r->leaf) + p->bg_page * PAGE);
		if (!from)
			return cxlcr_error("run %" PRIu64 " lies outside snapshot %s's data", p->bg_run,
					   p->s->region.name);
		int rc = install(p->uffd, p->heap_lo + (r->first_page + p->bg_page) * PAGE, from, n * PAGE);
		if (rc < 0)
			return -1;
		if (rc == INSTALL_LATER)
			return 0; /* the same chunk again (what went in is skipped) */
		p->bg_page += n;
		p->bg_pages += n;
		return 0;
	}
	p->background = false;
	p->bg_ns = cxlcr_mono_ns() - p->bg_t0;
	return 0;
}

/*
 * While its child is restored (a pager started before it): the CXL runs
 * that go in before it runs, refreshed (their lines dropped from this
 * CPU's cache, as before every read of the pool) and read once, so that
 * installing them later copies from the cache, not from the pool. The
 * restore runs on the children's CPUs meanwhile, and a tiered child's hot
 * pages are on its path to its first answer: 2.2-2.4 ms for ~2,600 pages
 * instead of 2.8-3.0 (docs/cold-tier.md). Safe because a published
 * snapshot's pages never change: what is read now is what the install
 * would read. Only where every CXL run goes in before the child runs (a
 * tiered snapshot, fetched in the background).
 */
static void warm_runs(struct pager *p, const struct pager_child *c)
{
	if (c->fetch != PAGER_BACKGROUND || !p->s->header.pages_cold)
		return;
	volatile uint8_t sink = 0;
	for (uint64_t i = 0; i < p->s->run_count; i++) {
		const struct cxlcr_snapshot_run *r = &p->s->runs[i];
		if (CXLCR_LEAF_TIER(r->leaf) != CXLCR_TIER_CXL)
			continue;
		const uint8_t *from = cxlcr_snapshot_copy(p->s, CXLCR_LEAF_OFFSET(r->leaf));
		if (!from || !cxlcr_snapshot_copy(p->s, CXLCR_LEAF_OFFSET(r->leaf) + (r->pages - 1) * PAGE))
			return; /* install_all() says why */
		cxlcr_refresh(from, r->pages * PAGE);
		for (uint64_t at = 0; at < r->pages * PAGE; at += CXLCR_CACHELINE)
			sink ^= from[at];
	}
	(void)sink;
	p->runs_warm = true;
}

/* Step 3, before the child runs: the header's copy, then (eager) every
 * stored page of the heap, a run at a time, or (background) the hot
 * pages, the rest to come once it runs. */
static int install_all(struct pager *p, const struct pager_child *c, uint64_t *pages)
{
	*pages = 0;
	uint64_t len = p->header_copy_hi - p->header_lo;
	if (install(p->uffd, p->header_lo, p->s->base + p->s->header.arena_header_offset, len) != 0)
		return cxlcr_error("pid %d: cannot install its arena header: %s", (int)p->pid, cxlcr_last_error());
	*pages += len / PAGE;
	if (c->fetch == PAGER_LAZY)
		return 0;
	/* A tiered snapshot's CXL pages are its hot set (the pages the
	 * service touched in its hot window): all of them first, and only
	 * its cold pages in the background. Else the hot set is the pages
	 * the parent changed between its last two snapshots. */
	bool tiered = p->s->header.pages_cold > 0;
	if (c->fetch == PAGER_BACKGROUND) {
		p->background = true;
		p->bg_cold_only = tiered;
		if (!tiered)
			return install_hot(p, c->hot, c->hot_count, pages);
	}
	for (uint64_t i = 0; i < p->s->run_count; i++) {
		const struct cxlcr_snapshot_run *r = &p->s->runs[i];
		if (CXLCR_LEAF_TIER(r->leaf) == CXLCR_TIER_COLD) {
			if (p->bg_cold_only)
				continue;
			int rc = install_cold(p, r->first_page, r->pages);
			if (rc == INSTALL_LATER)
				return cxlcr_error("pid %d changed its memory map before it ran", (int)p->pid);
			if (rc < 0)
				return -1;
			*pages += r->pages;
			continue;
		}
		if (CXLCR_LEAF_TIER(r->leaf) != CXLCR_TIER_CXL)
			continue;
		/* A run's copies are contiguous in one data area (checked on
		 * open); installed in chunks. */
		for (uint64_t at = 0; at < r->pages; at += INSTALL_CHUNK / PAGE) {
			uint64_t n = r->pages - at < INSTALL_CHUNK / PAGE ? r->pages - at : INSTALL_CHUNK / PAGE;
			const uint8_t *from = cxlcr_snapshot_copy(p->s, CXLCR_LEAF_OFFSET(r->leaf) + at * PAGE);
			if (!from)
				return cxlcr_error("run %" PRIu64 " lies outside snapshot %s's data", i,
						   p->s->region.name);
			if ((p->runs_warm ? copy_in : install)(p->uffd, p->heap_lo + (r->first_page + at) * PAGE,
							       from, n * PAGE) < 0)
				return -1;
			*pages += n;
		}
	}
	return 0;
}

/* The histogram's bucket of ns: the value itself below 2 * SUB, else
 * the power of two it lies in and its next FAULT_HIST_SUB_BITS bits. */
static unsigned fault_bucket(uint64_t ns)
{
	if (ns < 2u * FAULT_HIST_SUB)
		return (unsigned)ns;
	if (ns >> FAULT_HIST_BITS)
		return FAULT_HIST_BUCKETS - 1;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns), shift = e - FAULT_HIST_SUB_BITS;
	return shift * FAULT_HIST_SUB + (unsigned)(ns >> shift);
}

/* The middle of bucket b, in ns: what a percentile falling in it reads. */
static double fault_bucket_ns(unsigned b)
{
	if (b < 2u * FAULT_HIST_SUB)
		return b;
	unsigned shift = b / FAULT_HIST_SUB - 1u;
	uint64_t lo = (uint64_t)(b % FAULT_HIST_SUB + FAULT_HIST_SUB) << shift;
	return (double)lo + (double)(1ull << shift) / 2.0;
}

static void fault_timed(struct fault_hist *h, uint64_t ns)
{
	h->count++;
	h->bucket[fault_bucket(ns)]++;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

/* The pct-th percentile of h (nearest rank), in microseconds: the middle
 * of its bucket, or the largest time seen if that is less (the last
 * bucket holds everything longer). */
static double fault_percentile_us(const struct fault_hist *h, unsigned pct)
{
	uint64_t rank = (h->count * pct + 99u) / 100u, seen = 0;
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < FAULT_HIST_BUCKETS; b++) {
		if ((seen += h->bucket[b]) < rank)
			continue;
		double ns = fault_bucket_ns(b);
		return (b == FAULT_HIST_BUCKETS - 1 || ns > (double)h->max_ns ? (double)h->max_ns : ns) / 1e3;
	}
	return (double)h->max_ns / 1e3;
}

/* The end-of-child log line's part on fault service times, one word per
 * source, for a benchmark to parse: "cxl n=N p50=X p99=Y max=Z" (us),
 * "n=0" alone for a source that served none. */
static void fault_times_text(const struct pager *p, char *out, size_t size)
{
	static const char *const names[FAULT_SOURCES] = { "cxl", "cold", "zero" };
	size_t at = (size_t)snprintf(out, size, "fault service us (message read to wake):");
	for (unsigned k = 0; k < FAULT_SOURCES && at < size; k++) {
		const struct fault_hist *h = &p->fault_time[k];
		if (!h->count)
			at += (size_t)snprintf(out + at, size - at, "%s %s n=0", k ? "," : "", names[k]);
		else
			at += (size_t)snprintf(out + at, size - at, "%s %s n=%" PRIu64 " p50=%.1f p99=%.1f max=%.1f",
					       k ? "," : "", names[k], h->count, fault_percentile_us(h, 50),
					       fault_percentile_us(h, 99), (double)h->max_ns / 1e3);
	}
}

/* serve()'s second half: the pages read around a cold fault's, after it;
 * those the process has already (faulted, fetched, written) are skipped
 * by copy_in(). 0, 1 (the process is gone), or -1. */
static int install_around(struct pager *p, int uffd, uint64_t addr)
{
	uint64_t at = (addr - p->heap_lo) / PAGE - p->around_first, n = p->around_n;
	int rc = 0;
	p->around_n = 0;
	p->around_pages += n - 1;
	if (at > 0)
		rc = copy_in(uffd, p->heap_lo + p->around_first * PAGE, p->around_data, at * PAGE);
	if (rc == 0 && at + 1 < n)
		rc = copy_in(uffd, addr + PAGE, p->around_data + (at + 1) * PAGE, (n - at - 1) * PAGE);
	/* Neighbours put off by an event are left to their own faults. */
	return rc == INSTALL_LATER ? 0 : rc;
}

/* One fault of the process of uffd: the page at addr from its source,
 * timed from read_ns (when its message was read) to its wake. 0, 1
 * (that process is gone), INSTALL_LATER (not served: an event first), or
 * -1. */
static int serve(struct pager *p, int uffd, uint64_t addr, uint64_t read_ns)
{
	addr &= ~(uint64_t)(PAGE - 1);
	const uint8_t *from = NULL;
	uint64_t more;
	p->around_on = true;
	p->around_n = 0;
	int kind = page_source(p, addr, &from, &more), rc;
	p->around_on = false;
	if (kind < 0)
		return -1;
	rc = kind == PAGE_ZERO ? install_zero(uffd, addr) : (kind == PAGE_COLD ? copy_in : install)(uffd, addr, from, PAGE);
	if (rc == INSTALL_LATER) {
		p->around_n = 0;
		return rc;
	}
	if (kind == PAGE_ZERO)
		p->faults_zero++;
	else
		p->faults_copied++;
	if (rc == 0)
		fault_timed(&p->fault_time[kind == PAGE_ZERO ? FAULT_ZERO : kind == PAGE_COLD ? FAULT_COLD : FAULT_CXL],
			    cxlcr_mono_ns() - read_ns);
	if (rc == 0 && p->around_n)
		rc = install_around(p, uffd, addr);
	return rc;
}

/* Serves what waits on uffd (the child's, or one of its children's): page
 * faults, and the userfaultfds of new children. 0, 1 (the process of
 * uffd is gone), or -1 (fatal). */
static int serve_waiting(struct pager *p, int uffd)
{
	struct uffd_msg msgs[MSGS_PER_READ];
	for (;;) {
		ssize_t n = read(uffd, msgs, sizeof(msgs));
		uint64_t read_ns = cxlcr_mono_ns();
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : cxlcr_error("read of a userfaultfd: %s",
									     strerror(errno));
		for (size_t i = 0; i < (size_t)n / sizeof(msgs[0]); i++) {
			const struct uffd_msg *m = &msgs[i];
			if (m->event == UFFD_EVENT_FORK) {
				if (p->forked_count == FORKED_MAX)
					return cxlcr_error("pid %d and its children fork more than %d processes at once",
							   (int)p->pid, FORKED_MAX);
				p->forked[p->forked_count++] = (int)m->arg.fork.ufd;
				continue;
			}
			if (m->event != UFFD_EVENT_PAGEFAULT)
				continue;
			int rc = serve(p, uffd, m->arg.pagefault.address, read_ns);
			if (rc == INSTALL_LATER) {
				/* Its thread sleeps until the page is in:
				 * the event is read (below, or by the next
				 * read), then serve_later() tries again. */
				if (p->later_count == LATER_MAX)
					return cxlcr_error("pid %d and its children have more than %d faults put off at once",
							   (int)p->pid, LATER_MAX);
				p->later[p->later_count].uffd = uffd;
				p->later[p->later_count].addr = m->arg.pagefault.address;
				p->later[p->later_count++].read_ns = read_ns;
				continue;
			}
			if (rc != 0)
				return rc;
		}
	}
}

/* The faults put off (serve_waiting()), once more: those served, or whose
 * process has gone, leave the list. 0 or -1 (fatal). */
static int serve_later(struct pager *p)
{
	for (int i = 0; i < p->later_count; i++) {
		int rc = serve(p, p->later[i].uffd, p->later[i].addr, p->later[i].read_ns);
		if (rc < 0)
			return -1;
		if (rc != INSTALL_LATER)
			p->later[i--] = p->later[--p->later_count];
	}
	return 0;
}

/* Closes the userfaultfds of the child's children that have ended: an
 * ioctl on a userfaultfd whose memory is gone says ESRCH (the page below
 * the arena is never registered: a live one says ENOENT). */
static void close_ended(struct pager *p)
{
	for (int i = 0; i < p->forked_count; i++) {
		struct uffdio_zeropage z = { .range = { .start = p->header_lo - PAGE, .len = PAGE } };
		if (ioctl(p->forked[i], UFFDIO_ZEROPAGE, &z) == 0 || errno != ESRCH)
			continue;
		for (int k = 0; k < p->later_count; k++) /* its faults went with it */
			if (p->later[k].uffd == p->forked[i])
				p->later[k--] = p->later[--p->later_count];
		close(p->forked[i]);
		p->forked[i--] = p->forked[--p->forked_count];
	}
}

/* A line to whoever waits on fd (the fork's answer, or the keeper). */
static void tell(int fd, const char *line)
{
	if (fd >= 0 && write(fd, line, strlen(line)) < 0)
		(void)0;
}

/* The cold tier's reader, opened in a thread of its own while the
 * child's userfaultfd is taken and its CXL pages installed (none of that
 * needs it): checking the cold part is quick, connecting to the server
 * takes tens of ms. Joined before anything reads a cold page, and before
 * the child runs: a child never runs without its reader, nor from a
 * snapshot whose cold part does not check. The thread also reads one
 * cold page, because ofi_rxm connects to the server on a connection's
 * first operation: that read was the child's first cold fault, ~10-45 ms
 * in the pager log. If it fails, the reader is dropped and the first
 * fault opens one anew, with its tries (read_cold()). */
struct reader_start {
	pthread_t thread;
	bool running;
	const struct cxlcr_snapshot *s;
	struct tier_reader *r;
	int rc;
	char why[CXLCR_ERROR_MAX];
	uint8_t scratch[PAGE];
};

static void *reader_main(void *arg)
{
	struct reader_start *rs = arg;
	if ((rs->rc = tier_reader_open(rs->s, &rs->r)) < 0) {
		snprintf(rs->why, sizeof(rs->why), "%s", cxlcr_last_error());
		return NULL;
	}
	for (uint64_t i = 0; i < rs->s->run_count; i++)
		if (CXLCR_LEAF_TIER(rs->s->runs[i].leaf) == CXLCR_TIER_COLD) {
			if (tier_read_page(rs->r, rs->s->runs[i].first_page, rs->scratch) < 0) {
				tier_reader_close(rs->r);
				rs->r = NULL;
			}
			break;
		}
	return NULL;
}

/* Starts opening the reader; opens it here if no thread can. */
static int reader_begin(struct reader_start *rs, struct pager *p)
{
	rs->s = p->s;
	if (pthread_create(&rs->thread, NULL, reader_main, rs) == 0) {
		rs->running = true;
		return 0;
	}
	return tier_reader_open(p->s, &p->tier);
}

static int reader_end(struct reader_start *rs, struct pager *p)
{
	if (!rs->running)
		return 0;
	uint64_t t0 = cxlcr_mono_ns();
	pthread_join(rs->thread, NULL);
	p->reader_wait_ns += cxlcr_mono_ns() - t0;
	rs->running = false;
	if (rs->rc < 0)
		return cxlcr_error("%s", rs->why);
	p->tier = rs->r;
	return 0;
}

/* The child's pid, from the pipe of a pager started before its child was
 * restored (pager_give_pid()): 0 when the pipe ends without one (the
 * restore failed, or the fork gave up). */
static pid_t read_pid(int fd)
{
	pid_t pid = 0;
	size_t have = 0;
	while (have < sizeof(pid)) {
		ssize_t n = read(fd, (char *)&pid + have, sizeof(pid) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		have += (size_t)n;
	}
	return pid > 0 ? pid : 0;
}

static void log_line(const char *name, pid_t pid, const char *what);

/*
 * The pager proper: steps 1 to 4, then faults until the child ends.
 * Exits 0 when the child has ended, 1 with one line on why_fd (and on
 * ready_fd while the fork waits) when it cannot page it: the child then
 * dies with it (PTRACE_O_EXITKILL). pid_in >= 0: started before its
 * child, whose pid comes there (read_pid()).
 */
_Noreturn static void pager_main(const struct pager_child *c, int ready_fd, int why_fd, int pid_in)
{
	prctl(PR_SET_NAME, "cxlcr-pager");
	/* Its threads (the reader's, the cold fetch's) inherit it. The
	 * daemon checked the list as it started; a CPU taken offline since
	 * leaves the pager where it was rather than its child without pages. */
	const char *cpus = getenv(PAGER_CPUS_ENV);
	if (cpus)
		(void)cxlcr_pin_cpus(cpus, false);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	const struct cxlcr_snapshot_header *h = &c->snapshot->header;
	struct pager p = { .pid = c->pid, .s = c->snapshot, .heap_lo = h->heap_address,
			   .heap_hi = h->heap_address + h->heap_size };
	p.header_lo = h->heap_address - CXLCR_ARENA_HEAP_OFFSET;
	p.header_copy_hi = p.header_lo + h->arena_header_size;
	p.ahead = ahead_on(c->ahead) ? c->ahead : NULL;
	int around = pager_fault_around(); /* the daemon checked it as it started */
	p.around = around > 0 ? (uint64_t)around : 1;
	uint64_t pages = 0, t0 = cxlcr_mono_ns();
	int sfd = -1;
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_EVENT_FORK };
	/* A tiered snapshot's cold part is checked and its server reached
	 * before the child runs (reader_start). */
	struct reader_start rs = { 0 };
	if (h->pages_cold && reader_begin(&rs, &p) < 0)
		goto fail;
	/* Started before its child was restored: the connection is made
	 * meanwhile; the child's pid comes once it is there. */
	struct pager_child own = *c;
	if (pid_in >= 0) {
		warm_runs(&p, c);
		if (!(own.pid = read_pid(pid_in)))
			_exit(0);
		close(pid_in);
		c = &own;
		p.pid = own.pid;
		t0 = cxlcr_mono_ns();
	}
	bg_hold = getenv(BG_HOLD_TEST_ENV);
	if ((p.uffd = inject_take_uffd(c->pid)) < 0)
		goto fail;
	if (ioctl(p.uffd, UFFDIO_API, &api) < 0) {
		cxlcr_error("UFFDIO_API: %s", strerror(errno));
		goto fail;
	}
	if (register_arena(&p) < 0)
		goto fail;
	uint64_t t_in = cxlcr_mono_ns();
	p.take_ns = t_in - t0;
	/* Eager: the cold pages go in before the child runs too. */
	if ((c->fetch == PAGER_EAGER && reader_end(&rs, &p) < 0) || install_all(&p, c, &pages) < 0)
		goto fail;
	p.install_ns = cxlcr_mono_ns() - t_in - p.reader_wait_ns;
	if (reader_end(&rs, &p) < 0)
		goto fail;
	if ((sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		cxlcr_error("signalfd: %s", strerror(errno));
		goto fail;
	}
	double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (inject_resume(c->pid, c->stay_stopped) < 0)
		goto fail;
	char ok[96];
	snprintf(ok, sizeof(ok), "ok %" PRIu64 " %.3f\n", pages, ms);
	tell(ready_fd, ok);
	close(ready_fd);
	ready_fd = -1;
	uint64_t checked = cxlcr_mono_ns();
	p.bg_t0 = checked;
	cold_begin(&p);
	bool bg_said = false;
	for (;;) {
		struct pollfd fds[2 + FORKED_MAX] = { { .fd = p.uffd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		int nfds = 2 + p.forked_count;
		for (int i = 0; i < p.forked_count; i++)
			fds[2 + i] = (struct pollfd){ .fd = p.forked[i], .events = POLLIN };
		/* Faults first; the background fetch goes on when none waits.
		 * Faults put off wait for an event that comes at once. */
		int timeout = p.background || p.later_count ? 0 : p.forked_count ? FORKED_CHECK_MS : -1;
		/* The cold lanes end on their own: their end is looked for
		 * now and then, to be logged (bg_said). */
		if (timeout < 0 && !bg_said && cold.running)
			timeout = COLD_DONE_CHECK_MS;
		if (poll(fds, (nfds_t)nfds, timeout) < 0) {
			if (errno == EINTR)
				continue;
			cxlcr_error("poll: %s", strerror(errno));
			goto fail;
		}
		if ((fds[0].revents & POLLIN) && serve_waiting(&p, p.uffd) < 0)
			goto fail;
		for (int i = 2; i < nfds; i++)
			if ((fds[i].revents & POLLIN) && serve_waiting(&p, fds[i].fd) < 0)
				goto fail;
		if (p.later_count && serve_later(&p) < 0)
			goto fail;
		if (p.forked_count && cxlcr_mono_ns() - checked >= FORKED_CHECK_MS * 1000000ull) {
			close_ended(&p);
			checked = cxlcr_mono_ns();
		}
		if (p.background && background_step(&p) < 0)
			goto fail;
		/* Its end is logged as it happens (the child's end line says
		 * it again): a test waits for it before it ends the child. */
		uint64_t cold_end = cold.running ? __atomic_load_n(&cold.done_ns, __ATOMIC_ACQUIRE) : 0;
		if (!bg_said && c->fetch == PAGER_BACKGROUND && !p.background && (!cold.running || cold_end)) {
			char done[128];
			uint64_t end = p.bg_t0 + p.bg_ns > cold_end ? p.bg_t0 + p.bg_ns : cold_end;
			snprintf(done, sizeof(done), "background fetch done: %" PRIu64 " pages in %.1f ms",
				 p.bg_pages + __atomic_load_n(&cold.pages, __ATOMIC_ACQUIRE),
				 (double)(end - p.bg_t0) / 1e6);
			log_line(c->name, c->pid, done);
			bg_said = true;
		}
		/* The fetch ahead's memory goes once every cold page is in. */
		if (p.ahead && cold.running && __atomic_load_n(&cold.done_ns, __ATOMIC_ACQUIRE)) {
			ahead_release(p.ahead);
			p.ahead = NULL;
		}
		if (fds[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				;
			int status, alive = inject_pass_signals(c->pid, &status);
			if (alive == 0) {
				char end[END_LINE_MAX], times[256];
				__atomic_store_n(&cold.stop, 1, __ATOMIC_RELEASE);
				fault_times_text(&p, times, sizeof(times));
				uint64_t cold_done = cold.running ? __atomic_load_n(&cold.done_ns, __ATOMIC_ACQUIRE) : 0;
				bool bg_on = p.background || (cold.running && !cold_done);
				uint64_t bg_end = !bg_on ? (cold_done > p.bg_t0 + p.bg_ns ? cold_done : p.bg_t0 + p.bg_ns)
							 : cxlcr_mono_ns();
				char split[128] = "", before[128];
				snprintf(before, sizeof(before),
					 "its userfaultfd %.1f ms, pages %.1f ms, waiting for its reader %.1f ms",
					 (double)p.take_ns / 1e6, (double)p.install_ns / 1e6,
					 (double)p.reader_wait_ns / 1e6);
				if (cold_done) /* the thread's counters are final */
					snprintf(split, sizeof(split), "; cold fetch: RMA %.1f ms, CRC %.1f ms, install %.1f ms",
						 (double)cold.rma_ns / 1e6, (double)cold.check_ns / 1e6,
						 (double)cold.install_ns / 1e6);
				snprintf(end, sizeof(end), "ended (%s %d) after %" PRIu64 " faults served by copy, %"
					 PRIu64 " by a zero page; %" PRIu64 " pages installed before it ran (%s), %" PRIu64
					 " in the background (%s %.1f ms%s); %" PRIu64 " read from the cold tier, %" PRIu64
					 " fetched ahead (%" PRIu64 " of them on a fault), %" PRIu64 " around cold faults; %s\n",
					 WIFSIGNALED(status) ? "signal" : "exit status",
					 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
					 p.faults_copied, p.faults_zero, pages, before,
					 p.bg_pages + __atomic_load_n(&cold.pages, __ATOMIC_ACQUIRE),
					 bg_on ? "unfinished after" : "done in", (double)(bg_end - p.bg_t0) / 1e6, split,
					 p.cold_pages, __atomic_load_n(&cold.ahead_pages, __ATOMIC_RELAXED) + p.ahead_faults,
					 p.ahead_faults, p.around_pages, times);
				tell(why_fd, end);
				_exit(0);
			}
			if (alive < 0)
				goto fail;
		}
	}
fail: {
	char line[CXLCR_ERROR_MAX + 2];
	snprintf(line, sizeof(line), "%s\n", cxlcr_last_error());
	tell(ready_fd, line);
	tell(why_fd, line);
	_exit(1);
}
}

/* Appends a line to the pager log of this host. */
static void log_line(const char *name, pid_t pid, const char *what)
{
	host_log_line("pager.log", "%s (pid %d): %s", name, (int)pid, what);
}

/*
 * The keeper: starts the pager and outlives it. When the pager ends
 * before its child did (killed, or it could not page the child), the
 * child is dead already (PTRACE_O_EXITKILL) or killed here, and the
 * child's region says why in its command (what `cxlcr status` shows),
 * the full line in the pager log. Started before its child (pid_in >= 0),
 * it reads the child's pid there and passes it on to the pager; without
 * one, both end.
 */
_Noreturn static void keeper_main(const struct pager_child *c, int ready_fd, int pid_in)
{
	prctl(PR_SET_NAME, "cxlcr-pagerkeep");
	setsid();
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	int why[2], to_pager[2] = { -1, -1 };
	if (pipe2(why, O_CLOEXEC) < 0 || (pid_in >= 0 && pipe2(to_pager, O_CLOEXEC) < 0))
		_exit(1);
	pid_t pager = fork();
	if (pager < 0)
		_exit(1);
	if (pager == 0) {
		close(why[0]);
		if (pid_in >= 0) {
			close(pid_in);
			close(to_pager[1]);
		}
		pager_main(c, ready_fd, why[1], to_pager[0]);
	}
	if (c->ahead)
		ahead_release(c->ahead); /* the pager has it */
	close(ready_fd);
	close(why[1]);
	/* Started before its child: the pid is passed on to the pager; none
	 * (the restore failed) ends both, with nothing to say. */
	struct pager_child own = *c;
	if (pid_in >= 0) {
		close(to_pager[0]);
		own.pid = read_pid(pid_in);
		close(pid_in);
		if (own.pid > 0 && write(to_pager[1], &own.pid, sizeof(own.pid)) != (ssize_t)sizeof(own.pid))
			own.pid = 0;
		close(to_pager[1]);
		if (!own.pid) {
			while (waitpid(pager, NULL, 0) < 0 && errno == EINTR)
				;
			_exit(0);
		}
		c = &own;
	}
	int pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	char line[END_LINE_MAX + 2] = "";
	size_t have = 0;
	ssize_t n;
	while (have + 1 < sizeof(line) && (n = read(why[0], line + have, sizeof(line) - 1 - have)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		have += (size_t)n;
	}
	line[have] = 0;
	line[strcspn(line, "\n")] = 0;
	int st = 0;
	while (waitpid(pager, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		log_line(c->name, c->pid, line); /* the child ended */
		_exit(0);
	}
	if (pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	char command[CXLCR_COMMAND_MAX], full[CXLCR_ERROR_MAX + 96];
	if (WIFSIGNALED(st)) {
		snprintf(command, sizeof(command), "killed: its pager died (signal %d)", WTERMSIG(st));
		snprintf(full, sizeof(full), "killed: its pager (pid %d) died of signal %d", (int)pager,
			 WTERMSIG(st));
	} else {
		snprintf(command, sizeof(command), "killed: pager: %s", line);
		snprintf(full, sizeof(full), "killed: its pager (pid %d) failed: %s", (int)pager, line);
	}
	log_line(c->name, c->pid, full);
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) == 0) {
		cxlcr_region_set_owner(&pool, c->region_generation, c->pid, c->host, command);
		cxlcr_pool_close(&pool);
	}
	_exit(0);
}

int pager_spawn(const struct pager_child *c, struct pager_handle *h)
{
	h->ready_fd = -1;
	h->keeper = -1;
	h->pid_fd = -1;
	int ready[2], pid_pipe[2] = { -1, -1 };
	if (pipe2(ready, O_CLOEXEC) < 0)
		return cxlcr_error("pipe: %s", strerror(errno));
	if (c->pid == 0 && pipe2(pid_pipe, O_CLOEXEC) < 0) {
		close(ready[0]);
		close(ready[1]);
		return cxlcr_error("pipe: %s", strerror(errno));
	}
	pid_t keeper = fork();
	if (keeper < 0) {
		close(ready[0]);
		close(ready[1]);
		if (pid_pipe[0] >= 0) {
			close(pid_pipe[0]);
			close(pid_pipe[1]);
		}
		return cxlcr_error("fork: %s", strerror(errno));
	}
	if (keeper == 0) {
		close(ready[0]);
		if (pid_pipe[1] >= 0)
			close(pid_pipe[1]);
		/* Nothing of the request's (its socket, the client's output,
		 * the other pagers' pipes) stays open: the snapshot is mapped
		 * already; the pool stays open (the cold tier's reader maps its
		 * tier table). */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; fd < 3; fd++)
			dup2(null, fd);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != ready[1] && fd != pid_pipe[0] && fd != c->snapshot->pool->fd &&
			    !(c->ahead && fd == c->ahead->pidfd))
				close(fd);
		keeper_main(c, ready[1], pid_pipe[0]);
	}
	close(ready[1]);
	if (pid_pipe[0] >= 0)
		close(pid_pipe[0]);
	h->ready_fd = ready[0];
	h->keeper = keeper;
	h->pid_fd = pid_pipe[1];
	return 0;
}

void pager_give_pid(struct pager_handle *h, pid_t pid)
{
	if (h->pid_fd < 0)
		return;
	if (pid > 0 && write(h->pid_fd, &pid, sizeof(pid)) != (ssize_t)sizeof(pid))
		pid = 0;
	close(h->pid_fd);
	h->pid_fd = -1;
	if (pid > 0)
		return;
	/* None: the keeper and the pager end at once (the pager reads no pid
	 * and exits, whatever its connection is doing). */
	if (h->ready_fd >= 0)
		close(h->ready_fd);
	h->ready_fd = -1;
	while (h->keeper > 0 && waitpid(h->keeper, NULL, 0) < 0 && errno == EINTR)
		;
	h->keeper = -1;
}

int pager_wait(const struct pager_child *c, struct pager_handle *h, struct pager_stats *stats)
{
	memset(stats, 0, sizeof(*stats));
	char line[CXLCR_ERROR_MAX + 2] = "";
	size_t have = 0;
	uint64_t deadline = cxlcr_mono_ns() + READY_TIMEOUT_MS * 1000000ull;
	while (h->ready_fd >= 0 && have + 1 < sizeof(line) && !memchr(line, '\n', have)) {
		uint64_t now = cxlcr_mono_ns();
		struct pollfd pf = { .fd = h->ready_fd, .events = POLLIN };
		if (now >= deadline || poll(&pf, 1, (int)((deadline - now) / 1000000u) + 1) == 0)
			break;
		ssize_t n = read(h->ready_fd, line + have, sizeof(line) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		line[have] = 0;
	}
	if (h->ready_fd >= 0)
		close(h->ready_fd);
	h->ready_fd = -1;
	line[strcspn(line, "\n")] = 0;
	if (h->keeper > 0)
		waitpid(h->keeper, NULL, WNOHANG);
	if (sscanf(line, "ok %" SCNu64 " %lf", &stats->pages_installed, &stats->install_ms) == 2)
		return 0;
	if (!line[0])
		return cxlcr_error("the pager of %s ended before the child ran", c->name);
	return cxlcr_error("pager of %s: %s", c->name, line);
}
