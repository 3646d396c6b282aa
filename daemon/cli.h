/*
 * Internal header of the `cxlcr` command line.
 *
 *   cxlcr.c        the command line's main
 *   cxlcrd.c       the per-host daemon's main: runs verbs sent by cxlcr
 *   dispatch.c     the verb table, usage, forwarding a verb to a host
 *   rpc.c          the client/daemon protocol
 *   cmd_pool.c     cxlcr pool format | pool info
 *   cmd_pool_check.c  cxlcr pool check: the region table and catalog, for leaks and overlaps
 *   cmd_pod.c      cxlcr pod up | pod down: emulated hosts on this machine
 *   cmd_pod_host.c cxlcr pod logs | pod exec: looking into one emulated host
 *   cmd_run.c      cxlcr run: start a service under the preload
 *   cmd_status.c   cxlcr ps | status | stop | rm
 *   cmd_migrate.c  cxlcr checkpoint | restore | migrate
 *   cmd_fork.c     cxlcr fork: a client of the fork API (api.h)
 *   container.c    a service's own namespaces and network address
 *   criu.c         running CRIU for a service
 *   image_store.c  checkpoints published in the pool
 *   services.c     what the pool knows about a service, plus local /proc facts
 *   exec.c         running external tools
 */
#ifndef CXLCR_CLI_H
#define CXLCR_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "json.h"

/* Exit codes, so scripts can tell failures apart. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,      /* the operation failed */
	EXIT_USAGE = 2,     /* bad command line */
	EXIT_NOT_FOUND = 3, /* no such service */
	EXIT_NO_POOL = 4,   /* the pool cannot be opened */
};

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

/* The pod host this process acts for: set in cxlcrd's workers, NULL in a
 * plain command line. */
extern const char *cli_host;
/* cli_host, or this machine's name. */
const char *this_host(void);

int cli_dispatch(int argc, char **argv);
/* Runs this verb on host's daemon instead, with our stdout and stderr. */
int forward_to_host(const char *host, int argc, char **argv);

int cmd_pool(int argc, char **argv);
int pool_check(int argc, char **argv);
int cmd_pod(int argc, char **argv);
int pod_logs(int argc, char **argv);  /* cmd_pod_host.c */
int pod_exec(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_restore(int argc, char **argv);
/* `cxlcr restore`: cmd_restore, or, with --recovery-point on a host other
 * than the service's own dead one, recovery/restore_elsewhere.c. */
int cmd_restore_verb(int argc, char **argv);
int cmd_migrate(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_huge_pages(int argc, char **argv);
int cmd_fork_restore(int argc, char **argv);
int cmd_restore_prepare(int argc, char **argv);
int cmd_restore_session(int argc, char **argv);
/* restore-session's first line: the destination is readied (its namespace
 * made, its CRIU waiting), or could ready nothing (the restore makes its
 * own later). */
#define SESSION_READIED "readied"
#define SESSION_UNREADY "unready"
int cmd_gc(int argc, char **argv);
int cmd_hosts(int argc, char **argv);
int cmd_tier(int argc, char **argv);
/* A service of dead host dead_host, fenced by this host, restored here
 * from its newest recovery point into a fresh arena (recovery/takeover.c;
 * cmd_migrate.c; generation: its arena, live, or quarantined already by a
 * recovery that was taken over; fresh: room for the fresh arena, which
 * says how long it took): 0 (point: its name, pid: the new process), 1 if
 * it has no recovery point, -1 with one line (nothing changed then). */
struct recovery_fresh;
int restore_recovered(struct cxlcr_pool *pool, uint64_t generation, const char *dead_host, char *point, size_t len,
		      pid_t *pid, struct recovery_fresh *fresh);

/* The command line most verbs share: NAME, --json, and a host option. */
struct verb_args {
	const char *name;
	const char *host;  /* the host option's value (--host, --to) */
	bool json;
	bool quiet;        /* restore for a migrate: the caller reports */
	const char *lease; /* --lease: a step run under the lease of the verb that asked (control/lease.h) */
	bool recovery_point; /* --recovery-point: a snapshot a daemon takes on its own (recovery/points.c) */
	bool full;           /* --full: a snapshot that copies every page, never an incremental one */
	bool tier;           /* --tier: cold pages go to the cold tier (docs/cold-tier.md) */
	double hot_window_s; /* --hot-window SEC: how long the hot set is watched (0: the default) */
};

/* What parse_verb_args() last parsed whole in this process (NULL: nothing),
 * its strings argv's: the service a request was about. */
const struct verb_args *verb_args_last(void);

/* Parses "[NAME] [--json] [--quiet] [--HOST_OPT HOST]" (host_opt NULL: no
 * host option; want_name: NAME is required, else none is allowed).
 * Returns false when the command is done already (--help, bad usage), with
 * *code its exit status. */
bool parse_verb_args(int argc, char **argv, const char *usage, bool want_name,
		     const char *host_opt, struct verb_args *a, int *code);

/* The file `rel` next to this program's binary, if it exists there (the
 * build tree, or an installed prefix); NULL otherwise. */
const char *path_near_exe(const char *rel, char *buf, size_t len);
/* Where this binary's companions are (daemon/paths.c): the build tree's
 * next to it, else those `make install` put under its prefix. */
const char *installed_preload(char *buf, size_t len);     /* NULL: none */
const char *installed_plugin_dir(void);
const char *installed_daemon(char *buf, size_t len);
const char *installed_memd(char *buf, size_t len);

/* Prints "cxlcr: <message>" on stderr and returns code. */
__attribute__((format(printf, 2, 3)))
int fail(int code, const char *fmt, ...);
/* The line of the last fail() ("" if none): a verb's reason for the record
 * of its outcome (control/outcome.h). */
const char *fail_last(void);
/* Opens the pool named by $CXLCR_POOL (or the default), printing why not. */
int open_pool_or_fail(struct cxlcr_pool *pool);
/* The pool's path made absolute (as given if it cannot be resolved), for
 * a process that starts elsewhere (a host's daemon, a memory server, a
 * service): once the pool has opened (0), else the exit status printed. */
int pool_path_abs(char *out, size_t len);

/* Everything `ps` and `status` show about one service. */
struct service {
	struct cxlcr_region region;   /* a copy of its arena's table entry */
	const char *state;            /* running, exited, checkpointed, starting, lost, failed, recovering;
	                               * remote: of another host, not asked (service_ask_hosts());
	                               * unknown: its host did not answer (state_reason says so) */
	char state_reason[CXLCR_ERROR_MAX]; /* why the state is unknown ("" otherwise) */
	bool local;                   /* its owner is on this host (its pid is this host's) */
	bool running;
	int64_t used;                 /* arena bytes in use */
	uint64_t fallback_allocs, fallback_bytes, early_allocs;
	uint64_t released_bytes;      /* freed heap given back to the pool so far */
	bool tracked;                 /* its writes are tracked (tracking/) */
	bool small_pages;             /* ... at 4 KiB: its heap has small mappings (since its first snapshot) */
	uint32_t recovery_interval_ms; /* recovery points every this often (recovery/points.c); 0: none */
	char recovery_point[CXLCR_NAME_MAX]; /* the newest one, "" if none */
	uint64_t recovery_point_epoch;   /* ... the arena's owner epoch it was taken in */
	uint64_t recovery_point_ns;      /* ... CLOCK_REALTIME of its host when it was published */
	char restored_from_point[CXLCR_NAME_MAX + 24]; /* the point its heap was last reset from, if any */
	uint64_t restored_from;          /* ... its snapshot region's generation */
	char recovered_from_host[CXLCR_HOST_MAX]; /* its host died; it was recovered from there ("": no) */
	char recovered_on_host[CXLCR_HOST_MAX];   /* ... onto this host */
	bool lost;                       /* its host died and it had no recovery point */
	bool failed;                     /* its recovery was given up on (recovery/marks.c) */
	char failed_reason[192];         /* why its last recovery failed ("": none did) */
	uint64_t pool_dev, pool_ino;  /* the pool file, to tell the service's process from a reused pid */
	uint64_t heap_address, heap_size;
	uint64_t heap_limit;          /* what it may grow to (--arena-max) */
	uint32_t extents;             /* pieces of the pool it lies in */
	int64_t rss_anon_kb, rss_shmem_kb, rss_file_kb; /* -1: not known */
	char command[CXLCR_ARENA_COMMAND_MAX]; /* in full, from the arena header */
	char verb[CXLCR_LEASE_VERB_MAX + CXLCR_HOST_MAX + 40]; /* who holds its lease ("" nobody) */
	struct cxlcr_verb_outcome last_verb; /* the last verb's outcome (control/outcome.h) */
	bool has_last_verb;
};

/* What the pool and, for a service of this host, /proc say about it (one
 * of another host is "remote": its pid means nothing here). */
int service_load(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct service *s);
/* Its state once whether its process runs is known (judged here, or said
 * by its host: running, else checkpointed, exited, lost or failed). */
void service_judged(struct cxlcr_pool *pool, struct service *s, bool runs);
/* Opens the pool and loads the named service, or prints why not and
 * returns the exit status; on success the pool is left open. */
int service_find(struct cxlcr_pool *pool, const char *name, struct service *s);
/* The same for status: also a service whose host died while a recovery
 * has it between its old arena and its fresh one (state "recovering"),
 * which no verb may touch. */
int service_find_for(struct cxlcr_pool *pool, const char *name, struct service *s, bool status);
void service_print_json(struct json *j, const struct service *s);
/* Sends sig to a local service; 0 or -1 with errno. */
int service_signal(const struct service *s, int sig);
/* Frees the memory of a service whose process has ended: its tracker is
 * ended first (it maps the arena's header), then the arena and its
 * extents, or a child's region. */
int service_free(struct cxlcr_pool *pool, const struct cxlcr_region *r);
/* Asks the service to drop its page tables over its heap (preload/shed.c)
 * and waits for it, at most timeout_ms: CRIU walks them in the freeze.
 * Snapshots wait SERVICE_SHED_ANSWER_MS (a service whose helper does not
 * answer is dumped as it is); a migrate, in its critical path, less. */
#define SERVICE_SHED_ANSWER_MS 2000
bool service_shed_page_tables(struct cxlcr_pool *pool, const struct service *s, int timeout_ms);
/* Before a dump: no growth of the service's heap may be under way while
 * CRIU freezes it (pool_format.h, grow_fence). Fences growth off, waits
 * for the growths under way to end (at most timeout_ms, else fails,
 * fence down again); unfence after the dump, whatever its outcome. */
#define GROW_FENCE_TIMEOUT_MS 2000
int service_fence_growth(struct cxlcr_pool *pool, const struct service *s, int timeout_ms);
void service_unfence_growth(struct cxlcr_pool *pool, const struct service *s);
/* Fails, saying why, unless the service runs on this daemon's host, in a
 * pod (the verbs that dump a service run where it runs). */
int service_require_here(const struct service *s);
/* Client side: runs the verb in the daemon of the service's host. */
int service_forward_to_owner(const char *name, int argc, char **argv);
/* The pod host the service runs on, or prints why there is none and
 * returns the exit status. */
int service_pod_host(const char *name, char host[CXLCR_HOST_MAX]);
/* The start of a verb that runs where its service runs (checkpoint,
 * migrate, snapshot): parses "NAME [--json] [--HOST_OPT HOST]" (the host
 * option required when given), hands the verb to the daemon of the
 * service's host when run from the command line, and there loads the
 * service, which must run on this host. True, with the pool open, when the
 * verb goes on here; false when it is done, with *code its exit status. */
bool service_verb_here(int argc, char **argv, const char *usage, const char *host_opt, struct verb_args *a,
		       struct cxlcr_pool *pool, struct service *s, int *code);
/* Waits up to timeout_ms for a local process to exit (pidfd). 1 = gone. */
int pid_wait_exit(int pid, int timeout_ms);
bool pid_alive(int pid);

#endif
