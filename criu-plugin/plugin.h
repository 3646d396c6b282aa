/*
 * Internal header of cxlcr_criu.so, the CRIU plugin of cxlcr.
 *
 *   cxlcr_criu.c   registration and the hooks: thin, they log and decide
 *                  what CRIU sees; everything else is in the helpers below,
 *                  which report errors with cxlcr_error() and never log, so
 *                  that tests/criu_plugin_test.c runs them without CRIU
 *   pool_id.c      which file or device is the pool on this host
 *   proc.c         what /proc says about a task: its pid namespace pid and
 *                  its mappings of the pool
 *   dump.c         the arena records of a task (dump)
 *   restore.c      checking those records and taking the arenas over (restore)
 *   devdax.c       device VMAs, open device fds and device paths (devdax pools)
 *   fork.c         remote fork: the snapshot of a dump, fork records on restore
 *   netlock.c      a pod service's network lock (its link on the pod bridge)
 */
#ifndef CXLCR_CRIU_PLUGIN_H
#define CXLCR_CRIU_PLUGIN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../common/pool_format.h"

/* pool_id.c: the pool as this host's file system names it. */
struct pool_id {
	bool known;              /* a valid pool was found at path */
	bool devdax;             /* a character device: matched by st_rdev */
	dev_t dev;               /* a file: matched by st_dev and st_ino */
	ino_t ino;
	dev_t rdev;
	uint8_t uuid[16];
	char path[PATH_MAX];
};

struct cxlcr_pool;
int pool_id_of(const struct cxlcr_pool *pool, struct pool_id *id);
int pool_id_load(const char *path, struct pool_id *id);
bool pool_id_match(const struct pool_id *id, const struct stat *st);

/* proc.c */
struct pool_mapping {
	uint64_t start, end;     /* [start, end) in the task's address space */
	uint64_t pgoff;          /* device offset (bytes) mapped at start */
	uint32_t prot;           /* PROT_* of the first piece */
	bool shared;
};

/* One line of /proc/PID/maps. */
struct maps_line {
	uint64_t start, end, pgoff, inode;
	unsigned int dev_major, dev_minor;
	char perms[5];
};

bool proc_parse_maps_line(const char *line, struct maps_line *m);
int proc_innermost_nspid(pid_t pid, pid_t *nspid);
/* The task's mappings of the pool, adjacent pieces of one mapping merged,
 * in address order. *out is malloc'd (NULL when there are none). */
int proc_pool_mappings(pid_t pid, const struct pool_id *id, struct pool_mapping **out,
		       size_t *n);
/* Does the task map a cxlcr pool file other than id (a pool this CRIU was
 * not told about)? 1 and its path in where, 0 if not, -1 on error. */
int proc_other_pool(pid_t pid, const struct pool_id *id, char *where, size_t len);

/* dump.c: writes the task's arena records into dirfd. Returns how many
 * (0: it maps no region of the pool), -1 on error. */
int dump_task_arenas(int dirfd, pid_t pid, const struct pool_id *id, bool leaves_running);

/* live_source.c: checkpoints whose source runs on. Whether this criu dump
 * lets the tasks run on (or cannot tell); and whether a record may be
 * restored (-1: it was dumped with the tasks left running and its arena is
 * still the source's). (A task's start time: cxlcr_process_start().) */
bool criu_leaves_running(void);
struct cxlcr_region;
int live_source_check(const struct cxlcr_arena_record *rec, const struct cxlcr_region *now);
/* Removes the records an earlier dump left in dirfd. */
int dump_remove_old_records(int dirfd);

/* netlock.c: take the service's link off the pod bridge (dump), put it
 * back on (restore). 1 when done, 0 when there is no lock to take (CRIU
 * not run by a cxlcr daemon), -1 on error. A release says how many
 * unresolved neighbour entries it flushed, and whether the link was still
 * not running when it gave up waiting for it (late). */
int netlock_take(void);
int netlock_release(int *flushed, bool *late);

/* restore.c */
int restore_check_record(struct cxlcr_pool *pool, const struct cxlcr_arena_record *rec);
/* Checks every arena record of dirfd against the pool at pool_path (no
 * take-over); *records says how many there were. */
int restore_precheck(int dirfd, const char *pool_path, int *records);
/* Checks the records of the restored tasks pids (one tree) and, if all
 * hold, takes their arenas over. Returns how many records they had (0:
 * none), -1 if they must not run (then nothing was taken). */
int restore_take_over(int dirfd, const pid_t *pids, size_t count, const char *pool_path);
/* The restored tree's tasks (CRIU traces them all when its late hooks
 * run): root first, then the others, at most max. */
size_t restore_traced_tasks(pid_t root, pid_t *pids, size_t max);
/* Ties the restored tree's life to CRIU's until CRIU lets it run: every
 * thread gets PTRACE_O_EXITKILL. 0, or -1 if a thread could not be tied
 * (then the tree must not take anything over). */
int restore_die_with_criu(const pid_t *pids, size_t count);
/* Starts a new restore: forgets what the last one took over. */
void restore_forget_claims(void);
/* Kills and reaps every task this process traces (CRIU: the restored tree). */
void restore_kill_traced(void);
/* Notes in dirfd (CXLCR_RESTORE_PARTS_FILE) how long the take-over and the
 * network lock's release took, for the daemon's restore --json. */
void restore_note_parts(int dirfd, uint64_t take_over_ns, uint64_t netlock_ns);

/* fork.c */
/* Snapshots the arena of frozen task pid into a new snapshot region called
 * name, and notes it in the image directory (CXLCR_SNAPSHOT_INFO_FILE),
 * beside CRIU's dump: fork_snapshot_begin() starts it in a thread of its
 * own (or, if none can be started, does it at once: then its result is
 * already fork_snapshot_end()'s), and fork_snapshot_end() waits for it,
 * which must happen before CRIU lets the tasks run (the plugin's exit hook).
 * 0, or -1 with one line, which end also notes in the image directory
 * (CXLCR_SNAPSHOT_ERROR_FILE) for the daemon: a dump that CRIU finished
 * may have taken no snapshot. took_ns: how long the snapshot took;
 * waited_ns: how much of that was left when end was called. */
int fork_snapshot_begin(int dirfd, pid_t pid, const struct pool_id *id, const char *name);
int fork_snapshot_end(uint64_t *took_ns, uint64_t *waited_ns);
/* Does a fork record name a whole snapshot of this pool? */
int fork_check_record(struct cxlcr_pool *pool, const struct cxlcr_arena_record *rec);
/* The restored child pid borrows the record's snapshot for its lifetime
 * (its snapshot checked by fork_check_record() before). */
int fork_borrow_for(struct cxlcr_pool *pool, pid_t pid, const struct cxlcr_arena_record *rec);


/* devdax.c: each returns -ENOTSUP for what is not the pool's, so that
 * CRIU goes on as without the plugin. */
int devdax_admit_vma(const struct pool_id *id, const struct stat *st);
int devdax_dump_fd(int dirfd, int fd, uint32_t file_id, const struct pool_id *id);
int devdax_restore_fd(int dirfd, uint32_t file_id, const char *pool_path);
int devdax_update_vma(int dirfd, const char *path, const char *pool_path, uint64_t old_pgoff,
		      uint64_t *new_pgoff, int *plugin_fd);
/* Did the dump record path as the devdax pool? Then *uuid is that pool's. */
bool devdax_dumped_pool(int dirfd, const char *path, uint8_t uuid[16]);

#endif
