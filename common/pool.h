/*
 * Opening, formatting and carving up a pool.
 *
 * Only the metadata area (superblock and region table) is mapped by
 * cxlcr_pool_open(); regions are mapped on their own, at an address of the
 * caller's choosing, with cxlcr_pool_map().
 */
#ifndef CXLCR_POOL_H
#define CXLCR_POOL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "pool_format.h"

#define CXLCR_POOL_DEFAULT_PATH  "/dev/shm/cxlcr/pool"
#define CXLCR_POOL_DEFAULT_SIZE  (16ull << 30)
/* A lock holder whose lock word has not changed for this long, on the
 * waiter's own clock, is taken to be dead. */
#define CXLCR_POOL_LOCK_LEASE_NS (5ull * 1000000000ull)
/* What cxlcr_pool_open() and cxlcr_pool_format() return for a path they do
 * not trust (see cxlcr_pool_open()). */
#define CXLCR_POOL_UNSAFE (-2)

struct cxlcr_pool {
	int fd;
	char path[PATH_MAX];
	bool devdax;             /* a devdax character device, not a file */
	/* A devdax device's rules apply: it cannot be mapped privately nor
	 * registered with userfaultfd, so children are copies. True on a
	 * device, and on a file formatted as one (CXLCR_POOL_F_AS_DEVDAX).
	 * devdax above is about the storage (holes, blocks, a physical
	 * address); this is about what may be done with a mapping of it. */
	bool dax_rules;
	/* Cleared memory stays allocated (written with zeros, never punched):
	 * a device, and a file formatted with CXLCR_POOL_F_KEEP_MEMORY. */
	bool keeps_memory;
	uint64_t device_size;
	struct cxlcr_superblock *sb;  /* the mapped metadata area */
	struct cxlcr_region *table;
	uint64_t lock_word;      /* the lock word as we last wrote it, while we hold the lock */
	uint64_t lock_lease_ns;  /* how long this process waits for a silent holder (0: the default) */
	/* Tests only: called at named points of the lock's protocol ("locked",
	 * "unlocking", "commit", "alloc:publish", "free:unlocked") so that a
	 * test can stall a holder exactly there. NULL otherwise. */
	void (*test_hook)(struct cxlcr_pool *pool, const char *point);
	/* A fence this process works under (cxlcr_pool_guard), NULL if none. */
	const uint64_t *guard_word;
	uint64_t guard_want;
	/* A second word the same work must still read (cxlcr_pool_guard_also). */
	const uint64_t *guard_also_word;
	uint64_t guard_also_want;
	/* The fence word of the host this process works for, mapped from
	 * the host table (cxlcr_pool_host_guard), NULL if none. */
	void *host_map;
	size_t host_map_len;
	const uint64_t *host_word;
	uint64_t host_want;
	/* The entry + 1 of the host this process works for (set with its
	 * guard, cxlcr_pool_host_guard), 0 if none: it goes into the lock
	 * word (CXLCR_LOCK_HOST). */
	uint32_t host_entry;
	/* The entry + 1 of the host judged dead whose worker this process
	 * last took the lock from, 0 if none. */
	uint32_t lock_taken_from_host;
	/* The entry + 1 of a host the caller has judged dead on its own
	 * watch (a fence of it sets it while it takes the lock): a worker of
	 * that host loses the lock to us at once. 0: none. */
	uint32_t judged_dead_entry;
};

/* Every change this process makes to the region table from now on is
 * made only while *word (a word in the pool, mapped by the caller for as
 * long as the guard is set) reads want: checked under the pool lock right
 * before each write, so a change of *word made under the lock too (a
 * recovery taken over by another host: common/hosts.h) stops this one
 * before its next step. word NULL: no guard. */
void cxlcr_pool_guard(struct cxlcr_pool *pool, const uint64_t *word, uint64_t want);
/* A second word of the same guard (cleared with it by cxlcr_pool_guard):
 * a recovery reopened by a restore by hand is that restore's only while
 * the recovery's fence word is the one it reopened and its done word is
 * the restore's own (common/hosts.h, cxlcr_host_fence_guard_by_hand). */
void cxlcr_pool_guard_also(struct cxlcr_pool *pool, const uint64_t *word, uint64_t want);

/* The host a daemon's worker works for may be declared dead and fenced
 * while the worker is still under way (its host frozen, cut off, slow):
 * whatever it has not written by then must never be written, since the
 * winner is already recovering the host's services from what the pool
 * held at the fence. So a daemon puts "INDEX:FENCE" in
 * $CXLCR_HOST_GUARD (its host table entry and that entry's fence word
 * while it is not fenced), and every process it starts (workers, the
 * `cxlcr snapshot` of a recovery point, their CRIU and its plugin)
 * inherits it: cxlcr_pool_open() then guards the pool on that word as
 * cxlcr_pool_guard() does, beside any guard set there, and the catalog's
 * publish asks it too. Services do not inherit it (cmd_run.c).
 * host_guard sets (index, want) on an open pool, host_unguard drops it
 * (a fenced daemon's own clean-up under its fence's done guard). */
#define CXLCR_HOST_GUARD_ENV "CXLCR_HOST_GUARD"
int cxlcr_pool_host_guard(struct cxlcr_pool *pool, uint32_t index, uint64_t want);
void cxlcr_pool_host_unguard(struct cxlcr_pool *pool);
/* Called while cxlcr_pool_lock() waits for a holder, about every
 * millisecond (fn rate-limits itself): a daemon beats its heartbeat there
 * (a wait of up to the lock's lease), for a host whose daemon waits for a
 * lock is not a dead one. NULL: none. */
void cxlcr_pool_on_lock_wait(void (*fn)(struct cxlcr_pool *pool));
/* The lock is still ours and every guard holds (-1 with one line if not):
 * for a writer outside the region table (the catalog) right before it
 * writes under the lock. */
int cxlcr_pool_held(struct cxlcr_pool *pool);

/* $CXLCR_POOL, or the default emulated pool. */
const char *cxlcr_pool_path(void);

/* Formats path as an empty pool of size bytes (0: the whole devdax device,
 * or CXLCR_POOL_DEFAULT_SIZE for a file). A pool that still holds regions is
 * only overwritten with force. Missing directories above a pool file are
 * made 0700, the file 0600; the path must be one cxlcr_pool_open() trusts. */
int cxlcr_pool_format(const char *path, uint64_t size, bool force,
		      struct cxlcr_pool *out);
/* The same with flags for a file: CXLCR_POOL_F_AS_DEVDAX keeps a devdax
 * device's rules (how the devdax paths run without a device),
 * CXLCR_POOL_F_KEEP_MEMORY its memory. A device gets neither: it has both. */
int cxlcr_pool_format_as(const char *path, uint64_t size, bool force, uint32_t flags,
			 struct cxlcr_pool *out);
/* 0 if a private (copy-on-write) mapping of the pool may be made; else an
 * error naming the rule, as the kernel's devdax driver refuses one. */
int cxlcr_pool_may_map_private(const struct cxlcr_pool *pool);

/* Opens and validates an existing pool: a missing, truncated, foreign or
 * corrupt one, or one of an unknown format version, is refused. So is a
 * path that another user could have prepared (CXLCR_POOL_UNSAFE): it is
 * followed from / without following symbolic links, every directory on the
 * way must be owned by root (or this process's euid) and not writable by
 * group or others unless it is sticky and root's (like /dev/shm), and the
 * pool must be a file of that owner with mode 0600, or a devdax device of
 * that owner that others cannot write. */
int cxlcr_pool_open(struct cxlcr_pool *pool, const char *path);
void cxlcr_pool_close(struct cxlcr_pool *pool);

/* A process that keeps the pool open for long (the preload) holds only its
 * file descriptor between uses: detach unmaps the metadata, attach maps
 * and checks it again. A checkpoint of such a process then carries no
 * shared mapping of the pool's metadata, nor does a fork child made of it. */
void cxlcr_pool_detach(struct cxlcr_pool *pool);
int cxlcr_pool_attach(struct cxlcr_pool *pool);

/* The pool-wide allocation lock (see struct cxlcr_pool_lock). Unlocking
 * fails, saying so, if the lock was taken over meanwhile. */
int cxlcr_pool_lock(struct cxlcr_pool *pool);
int cxlcr_pool_unlock(struct cxlcr_pool *pool);

/* Checks that dir and every directory above it could only have been made
 * and filled by root or this process's euid (the rules of cxlcr_pool_open()),
 * walking from / without following links. -1 with the reason if not;
 * errno is ENOENT if a part of it does not exist. */
int cxlcr_check_trusted_dir(const char *dir);

/* Whether a live region of this kind and name exists; if so, and copy is
 * not NULL, a stable copy of its entry (see stable_copy() in pool.c): the
 * table itself may be rewritten, and the slot reused by another region,
 * at any time. Call with the lock held when the answer must stay true. */
bool cxlcr_region_find(struct cxlcr_pool *pool, uint32_t kind, const char *name,
		       struct cxlcr_region *copy);

/* A live region keeps only its first size bytes (a multiple of
 * CXLCR_POOL_ALIGN, not more than it has); the rest is free space. The
 * caller clears the tail first if the pool needs it, and never touches it
 * again. */
int cxlcr_region_shrink(struct cxlcr_pool *pool, uint64_t generation, uint64_t size);

/* A stable copy of entry i of the region table, whatever its state. */
void cxlcr_region_slot(struct cxlcr_pool *pool, uint32_t i, struct cxlcr_region *copy);

/* Allocates a region of at least size bytes (rounded up to CXLCR_POOL_ALIGN)
 * under the pool lock; it reads as zero. Fails if a live region of that kind and name exists.
 * *copy receives the entry as written. */
int cxlcr_region_alloc(struct cxlcr_pool *pool, uint32_t kind, const char *name,
		       uint64_t size, struct cxlcr_region *copy);

/* cxlcr_region_alloc() without clearing the space: the region holds what
 * it held before (zeros, or a freed region's bytes where the pool keeps
 * its memory). For a caller that writes every byte it will ever read
 * before anyone reads it, and whose region nobody reads as anything
 * until it says so (a snapshot draft, which zeroes its own header): on a
 * pool that keeps its memory, clearing is a write of the whole region and
 * its write-back, ~25 ms of each recovery point at 1 GiB. */
int cxlcr_region_alloc_uncleared(struct cxlcr_pool *pool, uint32_t kind, const char *name, uint64_t size,
				 struct cxlcr_region *copy);

/* cxlcr_region_alloc(), with the region's owner (pid, 0 for none yet; its
 * host; its command, NULL for none) in the entry already when it becomes
 * live, as cxlcr_region_set_owner() would set them. An allocation and a
 * set_owner are two changes, and a maker that dies between them (a
 * recovery's winner killed, a fork worker) leaves a region that is nobody's:
 * no host's clean-up ever frees it. */
int cxlcr_region_alloc_owned(struct cxlcr_pool *pool, uint32_t kind, const char *name, uint64_t size,
			     int32_t pid, const char *host, const char *command, struct cxlcr_region *copy);

/* Frees the region with this generation (if it is still live), and gives
 * its memory back where the device allows it, without holding the lock
 * while it does (the region is FREEING meanwhile). */
int cxlcr_region_free(struct cxlcr_pool *pool, uint64_t generation);

/* Rewrites a live region's owner fields under the lock; the epoch is bumped.
 * pid 0 means nobody. */
int cxlcr_region_set_owner(struct cxlcr_pool *pool, uint64_t generation,
			   int32_t pid, const char *host, const char *command);

/* Makes pid on host the owner of the region with this generation, if it
 * has no owner or already is that process (a service that exec'd keeps its
 * pid). Fails, naming the owner, if another process holds it. */
int cxlcr_region_claim(struct cxlcr_pool *pool, uint64_t generation, int32_t pid,
		       const char *host, const char *command, struct cxlcr_region *copy);

/* Gives the arena with this generation the lowest IPv4 address of
 * [first, first+count) (host order) that no other arena holds, and records
 * its pod link name. */
int cxlcr_region_assign_net(struct cxlcr_pool *pool, uint64_t generation, uint32_t first,
			    uint32_t count, const char *veth, uint32_t *ip);
/* Records an arena's pod link name (a restored service gets a new one). */
int cxlcr_region_set_veth(struct cxlcr_pool *pool, uint64_t generation, const char *veth);

/* Changes a live region's kind from `from` to `to` under the lock (fails
 * if it is not of kind `from`). */
int cxlcr_region_set_kind(struct cxlcr_pool *pool, uint64_t generation, uint32_t from, uint32_t to);
/* The n regions a recovery made (CXLCR_KIND_MAKING, its maker their owner)
 * become of kinds to[], owned by nobody on the same host, all in one
 * change or none; owner_epoch stays CXLCR_EPOCH_BORN until a restore
 * takes one over. */
int cxlcr_region_commit_made(struct cxlcr_pool *pool, size_t n, const uint64_t *generations, const uint32_t *to);
/* The same, then also(arg) in the same hold of the lock, once the change
 * is made: what must be written with the commit or not at all (the
 * recovery marks a commit of a fresh arena makes true, recovery/marks.c).
 * also must not take the pool lock, nor call what does (the lock is not
 * re-entrant: it would wait for itself, then take itself over); reading
 * the table (cxlcr_region_get) is fine. */
int cxlcr_region_commit_made_and(struct cxlcr_pool *pool, size_t n, const uint64_t *generations, const uint32_t *to,
				 void (*also)(void *arg), void *arg);
#define CXLCR_EPOCH_BORN 1 /* owner_epoch of a region born with its owner (cxlcr_region_alloc_owned) */

/* Makes [offset, offset+size) of the pool read as zero: a hole in a file,
 * stores on a devdax device and on a file that keeps its memory (only
 * where it holds data: a hole reads zero already). */
int cxlcr_pool_zero(struct cxlcr_pool *pool, uint64_t offset, uint64_t size);

/* The next stretch [*lo, *hi) of [from, end) (pool offsets, page aligned)
 * that may hold data; false when the rest is a hole. On a pool file,
 * SEEK_DATA/SEEK_HOLE report holes (never written, so zero) without
 * reading them. A devdax device, or a file system that cannot tell, is one
 * stretch of data. */
bool cxlcr_pool_next_data(const struct cxlcr_pool *pool, uint64_t from, uint64_t end, uint64_t *lo,
			  uint64_t *hi);

/* Maps len bytes of the pool at device offset off, MAP_SHARED. With align,
 * the mapping is placed so that address + head is a multiple of align. */
void *cxlcr_pool_map(struct cxlcr_pool *pool, uint64_t off, size_t len,
		     size_t align, size_t head);

/* A stable copy of the live region that holds [offset, offset+len) of the
 * pool, read without the lock (see stable_copy() in pool.c). Fails if no
 * single live region holds the whole range. */
int cxlcr_region_lookup(struct cxlcr_pool *pool, uint64_t offset, uint64_t len,
			struct cxlcr_region *copy);

/* A stable copy of the live region with this generation; fails if it is gone. */
int cxlcr_region_get(struct cxlcr_pool *pool, uint64_t generation, struct cxlcr_region *copy);

/* Compare-and-set of the owner: under the pool lock, if the region with
 * this generation is live and its owner_epoch is expected_epoch, makes pid
 * on host its owner and bumps the epoch. Of several callers with the same
 * expected_epoch exactly one succeeds. *now receives the entry as it is
 * afterwards; on failure it is zero if the region is gone (or the lock
 * could not be had), else the entry whose epoch moved on. */
/* The same for n regions at once, all or none: a restore of a tree of
 * tasks takes every arena the tree maps, or none (a refusal of one leaves
 * the others with their owner). now[i] gets region i as it is after (or,
 * for the one that refused, as it is). */
int cxlcr_region_claim_epochs(struct cxlcr_pool *pool, size_t n, const uint64_t *generations,
			      const uint64_t *expected_epochs, const int32_t *pids, const char *host,
			      struct cxlcr_region *now);
int cxlcr_region_claim_epoch(struct cxlcr_pool *pool, uint64_t generation, uint64_t expected_epoch,
			     int32_t pid, const char *host, struct cxlcr_region *now);

/* Has the process that owns region r, on host (the caller's own), ended?
 * Its pid alone cannot say: pids are reused, so the start time recorded
 * with it (owner_start) must still be that pid's. false when nobody owns
 * r, or its owner runs on another host (it cannot be seen from here). */
bool cxlcr_region_owner_gone(const struct cxlcr_region *r, const char *host);

#endif
