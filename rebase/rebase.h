/*
 * rebase: turns a checkpoint of a running parent and a snapshot of its
 * arena into the image set of a fork child (the CXLfork path).
 *
 * The parent's arena is a MAP_SHARED mapping of its arena region. In the
 * child it becomes copy-on-write views of the snapshot at the same address:
 * each run of stored (CXL) heap pages a MAP_PRIVATE mapping of the pool at
 * the run's device offset inside the snapshot, each run of zero pages a
 * private anonymous mapping, and the arena header a MAP_PRIVATE view of the
 * parent's header. The child reads the parent's heap from the pool without
 * copying it and owns only the pages it writes.
 *
 * The child also gets its own identity on the pod network: its service link
 * carries the child's MAC and IPv4 address instead of the parent's, and the
 * cxlcr CRIU plugin's arena record becomes a fork record (the plugin checks
 * the snapshot and does not take the arena over).
 *
 * CRIU images are read and written with protobuf-c (code generated at build
 * time from the .proto files of CRIU's images/ directory); an image that is foreign, corrupt or
 * truncated is refused with one line saying which file and why.
 */
#ifndef CXLCR_REBASE_H
#define CXLCR_REBASE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "../common/snapshot.h"

struct cxlcr_rebase_fork {
	const struct cxlcr_snapshot *snapshot; /* open; its leaf table gives the page runs */
	uint32_t child_ip;        /* network order: replaces the parent's address on ifname */
	uint8_t child_mac[6];     /* replaces the parent's MAC on ifname */
	const char *ifname;       /* the service's link inside its netns ("eth0") */
	bool copy;                /* copy mode: the arena becomes anonymous memory, which the
				   * child's pager fills (pager/pager.h); else copy-on-write views */
};

struct cxlcr_rebase_stats {
	uint64_t vmas_in;         /* VMAs of the parent's tasks that map the arena */
	uint64_t vmas_out;        /* ... and of the child's */
	uint64_t runs_cxl;        /* MAP_PRIVATE views of the snapshot */
	uint64_t runs_zero;       /* anonymous zero runs */
	uint64_t runs_copy;       /* copy mode: anonymous arena mappings the pager fills */
	uint64_t files_linked;    /* images taken over unchanged (hard links or copies) */
	uint64_t files_rewritten;
	uint64_t ns;
};

/*
 * Writes into dst_dir (which exists and is empty) the image set of a child
 * of the parent checkpointed in src_dir. Images that need no change are
 * hard-linked (copied across file systems), so one fetched checkpoint
 * serves many children; CRIU's logs, stats-* and *.pid files are left
 * out. src_dir is never modified. The snapshot must be of the arena the
 * checkpoint maps (same generation and owner epoch); for copy-on-write
 * views it must hold no cold pages and the pool must be a file (a devdax
 * device cannot be mapped privately); copy mode (spec->copy) takes any
 * pool, and one process of the service mapping the arena. The child's address must lie in the parent's subnet. Returns 0, or -1 with
 * cxlcr_last_error() saying which image and why (dst_dir may then hold a
 * partial set; the caller removes it).
 */
int cxlcr_rebase_fork(const char *src_dir, const char *dst_dir, const struct cxlcr_rebase_fork *spec,
		      struct cxlcr_rebase_stats *stats);

/* Calls fn with the path (without its leading '/') of every regular file
 * of the checkpoint in dir whose path starts with prefix. 0 (also when
 * the checkpoint has no files.img), or -1 and one line on a corrupt one. */
int rebase_files_under(const char *dir, const char *prefix, void (*fn)(const char *path, void *arg), void *arg);

/*
 * In the checkpoint in dir, just dumped from the process whose pid (as
 * its /proc shows it) is pid: the paths of files it holds under its own
 * /proc/<pid> become /proc/self/... (rebase/proc_self.c says why and
 * when). *rewritten counts them. 0, or -1 and one line.
 */
int cxlcr_rebase_proc_self(const char *dir, pid_t pid, unsigned *rewritten);

/* The processes of the checkpoint in dir that were stopped when it was
 * taken (their pids in its own PID namespace, pstree.img's), at most max
 * of them, into pids, *n of them (stopped.c); the root process's pid into
 * *root unless root is NULL. 0, or -1 with one line. */
int cxlcr_rebase_stopped_tasks(const char *dir, pid_t *pids, size_t max, size_t *n, pid_t *root);

/*
 * A region of the pool whose contents were copied into another, mapped at
 * the same addresses (a dead host's arena and extents recovered into fresh
 * ones: recovery/fresh_arena.c).
 */
struct cxlcr_rebase_move {
	uint64_t old_generation, new_generation;
	uint64_t old_offset, new_offset; /* device-relative */
	uint64_t size;
};

/*
 * Rewrites, in place, the checkpoint in dir (a fetched copy) so that its
 * tasks map the new regions of moves[0..n) where they mapped the old ones:
 * the shared pool mappings of their memory maps (mm-<pid>.img) and the
 * plugin's records (cxlcr-arena-<pid>.img: generation, offsets, and the
 * owner epoch `epoch`, which the restore's take-over expects). 0, or -1
 * with one line naming the image.
 */
int cxlcr_rebase_relocate(const char *dir, const struct cxlcr_rebase_move *moves, size_t n, uint64_t epoch);

#endif
