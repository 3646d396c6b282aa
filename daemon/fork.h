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

/* How a child gets its heap (docs/remote-fork.md): copy-on-write views of
 * the snapshot (share; file pools only), or its own anonymous memory that
 * a pager fills by copy (copy; pager/pager.h). The default is share on a
 * file pool and copy on a devdax pool. */
enum fork_mode { FORK_MODE_DEFAULT = 0, FORK_MODE_SHARE, FORK_MODE_COPY };
/* "share", "copy" (or NULL for the default) and back: -1 if neither. */
int fork_mode_parse(const char *s);
const char *fork_mode_name(int mode);

struct fork_request {
	char service[CXLCR_NAME_MAX]; /* the parent */
	int mode;                     /* enum fork_mode */
	char fetch[16];               /* copy mode: "background", "eager", "lazy"; "": the default */
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
	char mode[8];                 /* "share" or "copy": what the children got */
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

/* Ends and frees the fork children of parent (NULL: of any parent) that
 * a dead maker on this host left half made; how many (fork.c). */
struct cxlcr_pool;
int fork_drop_half_made(struct cxlcr_pool *pool, const char *parent);

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
	double shed_ms;               /* its page tables dropped before the freeze (0: not) */
	double small_pages_ms;        /* its heap remapped with small pages first (0: it had them) */
	uint32_t precopy_passes;      /* pre-copy passes before the freeze (cmd_snapshot.c) */
	uint64_t precopy_pages;       /* ... pages they found written */
	double precopy_ms;
	double freeze_ms;             /* CRIU's dump ran this long (snapshot included) */
	double frozen_ms;             /* ... of which the parent was frozen (CRIU's own figure) */
	double snapshot_ms;           /* part of it: bringing the copy up to date and publishing it */
	double open_ms, written_ms, holes_ms, publish_ms; /* ... and its parts */
	double beside_ms, waited_ms;  /* it ran beside CRIU's dump this long, and held the resume this long */
	double seal_ms;               /* its run table and checksums, once the service went on */
	double total_ms;
	uint64_t image_bytes;
	uint64_t snapshot_bytes;
	uint64_t room_freed_bytes;    /* what its draft reserved and its finish did not use, given back */
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
	uint32_t punches_logged;      /* punches since the draft whose pages the punch log gave */
	uint64_t runs;                /* of its leaf table (a child that shares its pages maps each) */
	char draft_compared_because[160]; /* why the incremental draft compared every page ("": it did not) */
	/* A tiered snapshot (--tier, daemon/snapshot_tier.c) */
	bool tiered;
	uint64_t pages_hot, pages_cold;  /* pages_zero above; they add up to the heap's pages */
	uint64_t hot_seen;            /* heap pages present after the hot window */
	uint64_t cxl_bytes;           /* its region in the pool */
	uint64_t untiered_bytes;      /* the region of the full snapshot it was made from */
	uint64_t cold_bytes;          /* on the memory server */
	double hot_window_ms, tier_ms, tier_write_ms;
	char tier_server[32];
};
struct service;
struct verb_lease;
/* Snapshots service s, which runs on this host, and publishes the snapshot
 * in the catalog under the service's name. Its freeze is recorded in l,
 * the verb's lease (control/lease.h). */
int snapshot_service(struct cxlcr_pool *pool, const struct service *s, struct verb_lease *l, bool full,
		     bool recovery_point, uint32_t tier_window_ms, struct snapshot_result *out);
/* Tiered snapshots (daemon/snapshot_tier.c): the service's hot set, found
 * before the snapshot (its page tables dropped, then window_ms of running,
 * then the pages present: a malloc'd bitmap of *pages bits); then the full
 * snapshot out names split into a tiered one, which replaces it in out. */
int snapshot_hot_set(struct cxlcr_pool *pool, const struct service *s, uint32_t window_ms, uint64_t **hot,
		     uint64_t *pages, struct snapshot_result *out);
int snapshot_tier(struct cxlcr_pool *pool, const uint64_t *hot, uint64_t pages, struct snapshot_result *out);
/* A service's snapshots go with it (stop, rm): its catalog entry is
 * tombstoned (its region freed when the last child returns it), its
 * snapshots' image sets and any stray snapshot freed now. */
void snapshot_forget(struct cxlcr_pool *pool, const char *service);

#endif
