/*
 * The prefetch of a fork child, after it resumes (fork.h).
 *
 * The pages its parent changed between its last two snapshots are likely
 * to be written by the child too (the CXLfork observation): each is made
 * the child's own up front, rather than by one copy-on-write fault at a
 * time while it serves.
 *
 * The child runs meanwhile: its threads are stopped under ptrace for one
 * short batch of pages at a time (PTRACE_INTERRUPT, which, unlike SIGSTOP,
 * neither the service nor its system calls notice), and a page it has
 * written since it resumed (an anonymous page now, as /proc/PID/pagemap
 * says) is left alone: the others still hold what the snapshot holds, and
 * are written from it, one copy-on-write fault per page; no write of the
 * child's can land between that check and the write.
 *
 * A batch stops the requests the child is serving, so the prefetch gives
 * way: it starts once the fork request is answered and the child has run
 * on its own for as long as its restore took (the requests that waited
 * for the child come first: a 2 GiB child's first answer came ~1 ms later
 * when the prefetch started at once), the child runs at least as long as
 * a batch stopped it before the next, and a batch starts only on a CPU
 * nobody else wants.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "fork.h"

#define TRACEES_MAX 1024
#define BATCH_PAGES 256   /* ~1 ms of copy-on-write faults: the child's longest stop */
#define IOV_MAX_RUNS 256

/* The threads of the child, seized. */
struct tracees {
	pid_t pid;
	pid_t tid[TRACEES_MAX];
	int n;
};

static bool traced(const struct tracees *t, pid_t tid)
{
	for (int i = 0; i < t->n; i++)
		if (t->tid[i] == tid)
			return true;
	return false;
}

/* Waits for tid's PTRACE_INTERRUPT trap, passing on the signals it gets
 * meanwhile. false: the thread is gone. */
static bool wait_trap(pid_t tid)
{
	for (int tries = 0; tries < 64; tries++) {
		int st;
		if (waitpid(tid, &st, __WALL) < 0)
			return errno == EINTR;
		if (!WIFSTOPPED(st))
			return false;
		if (st >> 16 == PTRACE_EVENT_STOP)
			return true;
		/* A signal for the child: it gets it, then the trap is reported. */
		ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(st));
	}
	return false;
}

/* Stops every thread of the child: those seized already, and any the list
 * of its tasks shows besides (none can appear once all are stopped). */
static int stop_all(struct tracees *t)
{
	for (int i = 0; i < t->n; i++)
		ptrace(PTRACE_INTERRUPT, t->tid[i], 0, 0);
	for (int i = 0; i < t->n; i++)
		if (!wait_trap(t->tid[i]))
			t->tid[i--] = t->tid[--t->n];
	for (bool more = true; more;) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", (int)t->pid);
		DIR *d = opendir(path);
		if (!d)
			return cxlcr_error("pid %d is gone", (int)t->pid);
		more = false;
		struct dirent *e;
		while ((e = readdir(d))) {
			pid_t tid = (pid_t)atoi(e->d_name);
			if (tid <= 0 || traced(t, tid))
				continue;
			if (t->n == TRACEES_MAX) {
				closedir(d);
				return cxlcr_error("pid %d has more than %d threads", (int)t->pid, TRACEES_MAX);
			}
			if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0 || ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 ||
			    !wait_trap(tid))
				continue;
			t->tid[t->n++] = tid;
			more = true;
		}
		closedir(d);
	}
	return t->n ? 0 : cxlcr_error("pid %d has no threads left", (int)t->pid);
}

static void cont_all(const struct tracees *t)
{
	for (int i = 0; i < t->n; i++)
		ptrace(PTRACE_CONT, t->tid[i], 0, 0);
}

/* Lets the child run undisturbed for ns. */
static void pause_for(uint64_t ns)
{
	struct timespec pause = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
	while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
		;
}

/* Between batches the prefetcher takes only CPU time nobody else wants
 * (SCHED_IDLE), so a batch starts when the child and whoever asked for it
 * leave a CPU idle; during a batch, while the child is stopped, it runs
 * like anyone else, so that it does not keep the child stopped on a busy
 * host. */
static void run_idle(bool idle)
{
	struct sched_param p = { 0 };
	sched_setscheduler(0, idle ? SCHED_IDLE : SCHED_OTHER, &p);
}

/* Has the child made the page at addr its own already (a write since it
 * resumed)? Then its page is anonymous: present, and not a file page
 * (/proc/PID/pagemap bits 63 and 61). Overwriting it from the snapshot
 * would undo the child's write. */
static bool owned_already(int pagemap, uint64_t addr)
{
	uint64_t e;
	if (pread(pagemap, &e, sizeof(e), (off_t)(addr / CXLCR_SNAPSHOT_PAGE_SIZE * sizeof(e))) != sizeof(e))
		return true; /* cannot tell: leave it */
	return (e >> 63 & 1) && !(e >> 61 & 1);
}

/* Writes pages [from, to) of the list from the snapshot into the stopped
 * child, but those it has written itself since it resumed. */
static int write_batch(pid_t pid, int pagemap, const struct cxlcr_changed_pages *h, const uint64_t *pages,
		       uint64_t from, uint64_t to, const struct cxlcr_snapshot *s, uint64_t *run, uint64_t *done)
{
	struct iovec local[IOV_MAX_RUNS], remote[IOV_MAX_RUNS];
	size_t n = 0, len = 0;
	for (uint64_t i = from; i < to; i++) {
		uint64_t leaf = pages[i] < s->header.page_count ? cxlcr_snapshot_leaf(s, pages[i], run) : 0;
		if (CXLCR_LEAF_TIER(leaf) != CXLCR_TIER_CXL)
			continue; /* zero in the snapshot: nothing to copy */
		const uint8_t *src = cxlcr_snapshot_copy(s, CXLCR_LEAF_OFFSET(leaf));
		if (!src)
			continue; /* checked on open: cannot happen */
		uint64_t dst = h->heap_address + pages[i] * CXLCR_SNAPSHOT_PAGE_SIZE;
		if (owned_already(pagemap, dst))
			continue;
		if (n && (const uint8_t *)local[n - 1].iov_base + local[n - 1].iov_len == src &&
		    (uint64_t)(uintptr_t)remote[n - 1].iov_base + remote[n - 1].iov_len == dst) {
			local[n - 1].iov_len += CXLCR_SNAPSHOT_PAGE_SIZE;
			remote[n - 1].iov_len += CXLCR_SNAPSHOT_PAGE_SIZE;
		} else if (n < IOV_MAX_RUNS) {
			local[n] = (struct iovec){ (void *)(uintptr_t)src, CXLCR_SNAPSHOT_PAGE_SIZE };
			remote[n] = (struct iovec){ (void *)(uintptr_t)dst, CXLCR_SNAPSHOT_PAGE_SIZE };
			n++;
		} else {
			break; /* BATCH_PAGES <= IOV_MAX_RUNS: cannot happen */
		}
		len += CXLCR_SNAPSHOT_PAGE_SIZE;
		(*done)++;
	}
	if (n && process_vm_writev(pid, local, n, remote, n, 0) != (ssize_t)len)
		return cxlcr_error("pid %d: cannot prefetch %zu bytes: %s", (int)pid, len, strerror(errno));
	return 0;
}

/* The changed-pages list of a fork dump, checked (0: there is none). */
static int read_changed_pages(const char *dir, struct cxlcr_changed_pages *h, uint64_t **pages)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, CXLCR_CHANGED_PAGES_FILE);
	*pages = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : cxlcr_error("%s: %s", path, strerror(errno));
	struct stat st;
	int rc = -1;
	if (fstat(fd, &st) < 0 || read(fd, h, sizeof(*h)) != (ssize_t)sizeof(*h) ||
	    h->magic != CXLCR_CHANGED_PAGES_MAGIC || h->version != 1 ||
	    h->page_size != CXLCR_SNAPSHOT_PAGE_SIZE || h->count > (1ull << 36) ||
	    (uint64_t)st.st_size != sizeof(*h) + h->count * sizeof(uint64_t)) {
		cxlcr_error("%s is not a changed-pages list (or is truncated)", path);
		goto out;
	}
	size_t want = h->count * sizeof(uint64_t);
	*pages = malloc(want ? want : 1);
	if (!*pages || read(fd, *pages, want) != (ssize_t)want) {
		free(*pages);
		*pages = NULL;
		cxlcr_error("%s: cannot read its %" PRIu64 " pages", path, h->count);
		goto out;
	}
	rc = 1;
out:
	close(fd);
	return rc;
}

int prefetch_load(const char *dir, const struct cxlcr_snapshot *snapshot, struct prefetch_list *list)
{
	memset(list, 0, sizeof(*list));
	int rc = read_changed_pages(dir, &list->header, &list->pages);
	if (rc <= 0)
		return rc;
	if (list->header.heap_address != snapshot->header.heap_address) {
		free(list->pages);
		list->pages = NULL;
		return cxlcr_error("the changed-pages list is of another heap");
	}
	return 1;
}

int prefetch_child(const struct prefetch_list *list, pid_t pid, const struct cxlcr_snapshot *snapshot,
		   uint64_t head_start_ns, uint64_t *pages_done, double *ms)
{
	const struct cxlcr_changed_pages h = list->header;
	const uint64_t *pages = list->pages;
	*pages_done = 0;
	*ms = 0;
	int rc;
	uint64_t t0, run = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	int pagemap = open(path, O_RDONLY | O_CLOEXEC);
	if (pagemap < 0)
		return cxlcr_error("%s: %s", path, strerror(errno));
	static struct tracees t;
	t.pid = pid;
	t.n = 0;
	rc = 0;
	run_idle(true);
	/* The requests that waited for the child (a platform's first call of
	 * a function it scaled out) come first: each batch would stop them. */
	pause_for(head_start_ns);
	t0 = cxlcr_mono_ns();
	for (uint64_t at = 0; at < h.count && rc == 0; at += BATCH_PAGES) {
		uint64_t to = at + BATCH_PAGES < h.count ? at + BATCH_PAGES : h.count;
		run_idle(false);
		uint64_t stopped = cxlcr_mono_ns();
		rc = stop_all(&t);
		if (rc == 0)
			rc = write_batch(pid, pagemap, &h, pages, at, to, snapshot, &run, pages_done);
		cont_all(&t);
		run_idle(true);
		/* The child runs at least as long as it was stopped before the
		 * next batch: stopped back to back, it would be stopped for the
		 * whole prefetch (~60 ms for 10,000 pages), and a request that
		 * reaches it meanwhile would wait for all of it. */
		if (to < h.count)
			pause_for(cxlcr_mono_ns() - stopped);
	}
	run_idle(false);
	if (t.n && stop_all(&t) == 0)
		for (int i = 0; i < t.n; i++)
			ptrace(PTRACE_DETACH, t.tid[i], 0, 0);
	close(pagemap);
	*ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	return rc < 0 ? -1 : 0;
}
