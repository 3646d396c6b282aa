/*
 * Remote fork (the CXLfork path): clones of a running service on a pod host.
 *
 * fork_service() runs in the daemon of the parent's host: it freezes the
 * parent briefly, snapshots its arena into the pool (catalog entry named
 * after the service) and checkpoints the rest of it with the parent left
 * running, then has the destination's daemon restore `count` children from
 * that one snapshot, concurrently. Each child is pid 1 of its own PID and
 * network namespaces with its own service address, reads the parent's heap
 * through the pool (copy-on-write) and holds its borrow of the snapshot for
 * as long as it lives. Children are services of kind CXLCR_KIND_CHILD named
 * PARENT.N: `cxlcr ps`, `status`, `stop`, `rm` handle them.
 *
 * The same function serves `cxlcr fork` and the fork API (api.h).
 */
#ifndef CXLCR_FORK_H
#define CXLCR_FORK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "../common/pool_format.h"

#define FORK_MAX_CHILDREN 64 /* a snapshot has at most 64 borrowers at once */

struct fork_request {
	char service[CXLCR_NAME_MAX]; /* the parent */
	char host[CXLCR_HOST_MAX];    /* where the children run */
	unsigned count;               /* 1..FORK_MAX_CHILDREN */
	bool fresh;                   /* snapshot first, even if the catalog has one */
};

struct fork_child {
	char name[CXLCR_NAME_MAX];    /* PARENT.N */
	char host[CXLCR_HOST_MAX];
	uint32_t ip;                  /* network order */
	pid_t pid;                    /* as the child's host sees it */
	double restore_ms;            /* this child's restore, request to running */
	uint64_t prefetched_pages;    /* its parent's changed pages, made its own once it runs */
};

struct fork_reply {
	unsigned count;
	struct fork_child child[FORK_MAX_CHILDREN];
	double freeze_ms;             /* the parent was frozen this long */
	double snapshot_ms;           /* part of it: copying the arena's pages */
	double restore_ms;            /* all children restored (concurrently) */
	double total_ms;              /* request to the last child running */
	uint64_t image_bytes;         /* CRIU's images of the parent */
	uint64_t snapshot_bytes;      /* heap pages stored in the snapshot */
	char snapshot[CXLCR_NAME_MAX];/* the snapshot the children come from */
	char error[512];              /* one line when fork_service() fails */
};

/*
 * Forks req->count children of req->service onto req->host, from the
 * newest snapshot of the service (one is taken first if there is none, or
 * with req->fresh). Returns 0, or -1 with rep->error saying what failed
 * (the parent goes on running with all its data, and no child of this
 * request is left behind). Runs anywhere: the snapshot is taken by the
 * daemon of the parent's host, the children are restored by the
 * destination's (`cxlcr snapshot`, `cxlcr fork-restore`).
 */
int fork_service(const struct fork_request *req, struct fork_reply *rep);

/* prefetch.c: the pages a child's parent changed between its last two
 * snapshots (CXLCR_CHANGED_PAGES_FILE of the image set in dir): load
 * returns 1 with the list, 0 if there is none, -1; prefetch_child() then,
 * once the child has run on its own for head_start_ns, makes them the
 * child's own, stopping it for one short batch at a time (0, or -1). */
struct cxlcr_snapshot;
struct prefetch_list {
	struct cxlcr_changed_pages header;
	uint64_t *pages;
};
int prefetch_load(const char *dir, const struct cxlcr_snapshot *snapshot, struct prefetch_list *list);
int prefetch_child(const struct prefetch_list *list, pid_t pid, const struct cxlcr_snapshot *snapshot,
		   uint64_t head_start_ns, uint64_t *pages_done, double *ms);

/* cmd_snapshot.c: the parent's side. */
struct snapshot_result {
	char name[CXLCR_NAME_MAX];    /* the snapshot region: SERVICE.sNNN */
	uint64_t generation;          /* ... and its generation */
	double draft_ms;              /* copying the heap while the parent ran */
	double freeze_ms;             /* CRIU's dump ran this long (snapshot included) */
	double frozen_ms;             /* ... of which the parent was frozen (CRIU's own figure) */
	double snapshot_ms;           /* part of it: bringing the copy up to date and publishing it */
	double open_ms, written_ms, holes_ms, publish_ms; /* ... and its parts */
	double total_ms;
	uint64_t image_bytes;
	uint64_t snapshot_bytes;
	uint64_t pages_cxl, pages_zero;
	uint64_t pages_own;           /* stored in this snapshot (the rest of pages_cxl is its bases') */
	uint32_t bases;               /* earlier snapshots whose pages it shares: incremental if > 0 */
	char base[CXLCR_NAME_MAX];    /* the snapshot it was taken on, if incremental */
	char full_because[160];       /* else why it copied every page */
	uint64_t pages_changed;       /* since the previous snapshot: prefetched into children */
	uint64_t pages_refreshed;     /* copied again in the freeze: changed after the draft */
	uint64_t pages_written;       /* ... of the pages write tracking said were written */
	bool tracked;                 /* the freeze copied only written pages (tracking/) */
	char untracked_because[160];  /* else why it compared every page */
};
struct service;
/* Snapshots service s, which runs on this host, and publishes the snapshot
 * in the catalog under the service's name. */
int snapshot_service(struct cxlcr_pool *pool, const struct service *s, bool full, bool recovery_point,
		     struct snapshot_result *out);
/* A service's snapshots go with it (stop, rm): its catalog entry is
 * tombstoned (its region freed when the last child returns it), its
 * snapshots' image sets and any stray snapshot freed now. */
void snapshot_forget(struct cxlcr_pool *pool, const char *service);

#endif
