/*
 * The pager of a copy-mode fork child (docs/remote-fork.md, "Copy mode").
 *
 * A copy-mode child's arena is its own anonymous memory at the original
 * address (rebase/ maps it so; a devdax pool cannot be mapped privately,
 * and its mappings refuse userfaultfd MISSING registration, so this is the
 * only way children work on real CXL memory). CRIU restores the child
 * stopped; the pager then, before any of its threads runs:
 *   1. takes a userfaultfd made by the child itself (inject.h),
 *   2. registers the arena's mappings MISSING,
 *   3. installs the snapshot's pages by copy (UFFDIO_COPY): its hot pages
 *      (background, the default), every stored page (eager), or none
 *      (lazy),
 *   4. lets the child run,
 * and serves every fault on a page not installed yet: a copy from the
 * snapshot in the pool, or UFFDIO_ZEROPAGE for a page the snapshot holds
 * as zero; in background mode it installs the other stored pages too,
 * in heap order, a chunk at a time between faults, which come first.
 * page_source() in pager.c is the one place where a page's source is
 * chosen (the cold tier plugs in there).
 *
 * The pager is a process of its own, started by the destination's
 * fork-restore in the host's cgroup, watched by a keeper process. The
 * pager is the child's tracer with PTRACE_O_EXITKILL, so a pager that
 * dies, however it dies, takes its child with it: a child cannot run
 * without its pages, and since the child holds a copy of the userfaultfd
 * its faults wait rather than read zeros in between. The keeper then
 * writes why into the child's region (`cxlcr status` shows it) and into
 * the host's own /var/log/cxlcr/pager.log (`cxlcr pod logs H pager`). The
 * child's writes land in its own memory only: the snapshot is only ever
 * read.
 */
#ifndef CXLCR_PAGER_H
#define CXLCR_PAGER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cxlcr_snapshot;
struct cold_ahead;

/* The CPUs the pagers run on (a list, "0-1,8"), from the daemon's
 * pager_cpus: kept off a service's own CPUs, a child's background fetch
 * and faults do not take its CPU time (docs/cold-tier.md). Unset: wherever
 * the daemon may run. */
#define PAGER_CPUS_ENV "CXLCR_PAGER_CPUS"

struct pager_child {
	pid_t pid;                            /* restored with --leave-stopped */
	const char *name;                     /* the child service (PARENT.N) */
	const char *host;                     /* this host, which the child's region names */
	uint64_t region_generation;           /* its region: where the keeper says why it died */
	const struct cxlcr_snapshot *snapshot;/* open: its pages, header copy and runs */
	int fetch;                            /* enum pager_fetch */
	const uint64_t *hot;                  /* background: heap pages installed before it runs */
	uint64_t hot_count;
	struct cold_ahead *ahead;             /* background: the cold pages fetched ahead (ahead.h), or NULL */
	bool stay_stopped;                    /* its snapshot's process was stopped (an operator's SIGSTOP) */
};

enum pager_fetch {
	PAGER_BACKGROUND = 0, /* the hot pages first, the rest while it runs (faults first) */
	PAGER_EAGER,          /* every stored page before it runs */
	PAGER_LAZY,           /* nothing before: every page on its first touch */
};

/* What a pager did, for the fork's answer. */
struct pager_stats {
	uint64_t pages_installed;             /* before the child ran */
	double install_ms;
};

/* "background", "eager", "lazy" (NULL: background): -1 if none of them. */
int pager_fetch_parse(const char *s);

/*
 * Starting the pager (and its keeper) of child c, which must be stopped,
 * in two halves, so that the pagers of several children start at once
 * (their readers connect, their pages go in, side by side):
 * pager_spawn() starts them; pager_wait() returns once the child runs with
 * its pages installed: 0, or -1 with cxlcr_last_error() (the child is then
 * dead: killed with its pager). pager_wait() is called once for each
 * handle spawned (it closes it). The pager and the keeper outlive the
 * caller; they hold nothing of it but the snapshot's mapping.
 */
struct pager_handle {
	int ready_fd;                         /* the pager's "ok" or its reason */
	pid_t keeper;
	int pid_fd;                           /* started before its child: where its pid goes */
};
int pager_spawn(const struct pager_child *c, struct pager_handle *h);
/*
 * A pager started before its child is restored (c->pid 0 at pager_spawn()):
 * a tiered snapshot's child waits for its pager's connection to the memory
 * server before it runs (pager.c, reader_start), and that connection
 * (~10-15 ms) is made while CRIU restores the child instead of after.
 * pager_give_pid() hands it the restored child's pid, before pager_wait();
 * pid 0 (the restore failed) ends the pager and its keeper instead, and
 * the handle with them.
 */
void pager_give_pid(struct pager_handle *h, pid_t pid);
int pager_wait(const struct pager_child *c, struct pager_handle *h, struct pager_stats *stats);

/* How many pages a cold fault reads: its own and those around it, one
 * RMA read (pager.c, read_around()), from the daemon's fault_around
 * (1: its page alone, as a plain demand pager reads; at most
 * PAGER_FAULT_AROUND_MAX, the default). pager_fault_around_parse() checks
 * a value (-1 with one line); pager_fault_around() is $CXLCR_FAULT_AROUND's,
 * or the default if it is unset. */
#define PAGER_FAULT_AROUND_ENV "CXLCR_FAULT_AROUND"
#define PAGER_FAULT_AROUND_MAX 16u
int pager_fault_around_parse(const char *text);
int pager_fault_around(void);

/* Knob for tests and the benchmark, in the daemon's environment: the
 * fetch policy of every new copy-mode child (read by fork-restore). */
#define PAGER_FETCH_ENV "CXLCR_PAGER_FETCH"

#endif
