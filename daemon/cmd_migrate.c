/*
 * cxlcr checkpoint | restore | migrate: the CXLResume path.
 *
 * Each verb runs in the daemon of the host concerned: checkpoint and
 * migrate on the service's current host, restore on the destination. The
 * heap stays in its arena throughout; only CRIU's images of the rest of the
 * process move, through the pool's image store.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tracking/track.h"
#include "../common/error.h"
#include "../common/util.h"
#include "../common/rtnl.h"
#include "../control/fence.h"
#include "../control/lease.h"
#include "../recovery/recovery.h"
#include "../common/catalog.h"
#include "cli.h"
#include "host_files.h"
#include "container.h"
#include "criu.h"
#include "exec.h"
#include "image_store.h"
#include "rpc.h"
#include "restore.h"
#include "rpc_tcp.h"

#define KILL_WAIT_MS 10000
#define SHED_TIMEOUT_MS 50 /* a service that does not answer is dumped as it is */

/* The source's processes that were stopped before the freeze (an
 * operator's SIGSTOP), taken by checkpoint_service(): a failed verb
 * resumes only the others. */
static pid_t source_stopped[EXEC_HELD_STOPPED_MAX];
static size_t source_nstopped;

/* After a failed checkpoint or migrate: the source resumes with its arena,
 * or is fenced if a restored copy owns and runs it (control/fence.h).
 * Writes where the service runs now into where. 1 resumed, 0 fenced, -1
 * its process had ended (judged by the start time noted at the freeze too:
 * another process that has its pid now is neither resumed nor killed). */
static int resume_source(struct cxlcr_pool *pool, const struct service *s, struct verb_lease *l, char *where,
			 size_t len)
{
	uint64_t start = l->frozen_pid == s->region.owner_pid ? l->frozen_start : 0;
	int resumed = service_resume_or_fence(pool, s->region.generation, s->region.owner_pid, start, this_host(),
					      s->region.veth, source_stopped, source_nstopped, where, len);
	verb_lease_note_frozen(l, 0, 0, NULL, 0);
	return resumed;
}

/* What became of a failed verb's source, for its one line: resumed is
 * resume_source()'s answer, or -1 when the source was found dead. */
static const char *source_after(int resumed, const char *name, const char *where, char *buf, size_t len)
{
	if (resumed > 0)
		snprintf(buf, len, "it goes on running on %s with all its data", this_host());
	else if (resumed == 0 && !strncmp(where, "nowhere", 7))
		snprintf(buf, len, "it was fenced, and runs %s", where);
	else if (resumed == 0)
		snprintf(buf, len, "it goes on running on %s with all its data", where);
	else
		snprintf(buf, len, "its process has ended; its arena is kept, and a checkpoint of it, if one "
			 "was published, restores it (cxlcr restore %s)", name);
	return buf;
}

/* Dumps a service and publishes its images in the pool. */
/* Where a checkpoint's time goes (migrate and checkpoint --json). */
struct freeze_parts {
	double shed_ms;               /* before the freeze: the service drops its page tables */
	double dump_ms;               /* criu dump, start to end (the tasks stay frozen after it) */
	struct criu_dump_stats criu;  /* CRIU's own view of it */
	double publish_ms;            /* the images into the pool (frozen) */
	uint64_t dumped_ns;           /* when CRIU's dump ended (the tasks still frozen) */
	uint64_t published_ns;        /* when they were complete there: the destination may restore */
	struct session *session;      /* a migrate's destination, waited for before the shed */
	double ready_wait_ms;         /* how long (before the freeze) */
	bool readied;                 /* whether it said it was readied */
};

struct session;
static double session_ready(struct session *ss, bool *readied);

static void json_freeze_parts(struct json *j, const struct freeze_parts *p)
{
	json_object_begin(j, "freeze_parts");
	if (p->session) {
		json_double(j, "ready_wait_ms", p->ready_wait_ms);
		json_bool(j, "destination_readied", p->readied);
	}
	json_double(j, "shed_ms", p->shed_ms);
	json_double(j, "criu_dump_ms", p->dump_ms);
	json_double(j, "criu_freezing_ms", p->criu.freezing_ms);
	json_double(j, "criu_frozen_ms", p->criu.frozen_ms);
	json_double(j, "criu_memdump_ms", p->criu.memdump_ms);
	json_double(j, "criu_memwrite_ms", p->criu.memwrite_ms);
	json_u64(j, "criu_pages_written", p->criu.pages_written);
	json_double(j, "publish_ms", p->publish_ms);
	json_object_end(j);
}

static int checkpoint_service(struct cxlcr_pool *pool, const struct service *s, struct verb_lease *l,
			      uint64_t *image_bytes, struct freeze_parts *parts)
{
	char dir[PATH_MAX];
	/* (Taken again right before the shed: an operator's stop or continue
	 * meanwhile is the state the freeze finds.) */
	source_nstopped = container_stopped(s->region.owner_pid, source_stopped, EXEC_HELD_STOPPED_MAX);
	if (verb_lease_check(l, "the freeze") < 0)
		return -1;
	if (image_work_dir("dump", s->region.name, dir, sizeof(dir)) < 0)
		return -1;
	/* The images' region, before the freeze (image_store.h): CRIU dumps
	 * the service's anonymous memory and a few hundred KiB besides. */
	struct cxlcr_image_set meta;
	image_set_describe(pool, &s->region, s->region.name, &meta);
	uint64_t anon = s->rss_anon_kb > 0 ? (uint64_t)s->rss_anon_kb * 1024 : 0;
	struct cxlcr_region reserved;
	bool have_reserved = image_store_reserve(pool, &meta, anon + anon / 4 + (2u << 20), &reserved) == 0;
	/* Whoever takes the lease over from a dead holder resumes or fences
	 * what it froze. */
	verb_lease_note_frozen(l, s->region.owner_pid, s->region.owner_epoch, source_stopped, source_nstopped);
	/* Fewer page tables for CRIU to walk in the freeze: none at all once
	 * the tracker is gone. A tracked heap's dropped tables stay, full of
	 * the write-protect markers that keep what tracking knows (CRIU's
	 * smaps read and its guard-page scan walk them: ~2 ms per GiB of
	 * arena); its last userfaultfd closed, the kernel clears them and
	 * frees the empty tables. The checkpoint's service is tracked anew
	 * wherever it runs next (a failed migrate resumes it with a new
	 * tracker: control/fence.c). */
	cxlcr_tracker_end(pool, &s->region);
	/* Ended half-way through its start, it may have left the service a
	 * userfaultfd, which CRIU would refuse to dump. */
	if (cxlcr_tracker_settle(pool, &s->region) < 0)
		fprintf(stderr, "cxlcr: warning: %s: %s\n", s->region.name, cxlcr_last_error());
	/* A migrate's destination readies itself meanwhile: the freeze is
	 * not to share the CPUs with its CRIU's start (restore_session.c). */
	if (parts->session)
		parts->ready_wait_ms = session_ready(parts->session, &parts->readied);
	source_nstopped = container_stopped(s->region.owner_pid, source_stopped, EXEC_HELD_STOPPED_MAX);
	verb_lease_note_frozen(l, s->region.owner_pid, s->region.owner_epoch, source_stopped, source_nstopped);
	uint64_t s0 = cxlcr_mono_ns();
	service_shed_page_tables(pool, s, SHED_TIMEOUT_MS);
	uint64_t t0 = cxlcr_mono_ns();
	parts->shed_ms = (double)(t0 - s0) / 1e6;
	/* CRIU takes the service's link off the bridge once the tasks are
	 * frozen: that is its network lock (criu.h). */
	int dumped = service_fence_growth(pool, s, GROW_FENCE_TIMEOUT_MS);
	if (dumped == 0) {
		dumped = criu_dump(s->region.owner_pid, dir, s->region.veth, true);
		service_unfence_growth(pool, s);
	}
	if (dumped < 0) {
		if (have_reserved)
			cxlcr_region_free(pool, reserved.generation);
		image_work_dir_failed(dir); /* CRIU's log stays */
		return -1;
	}
	uint64_t t1 = cxlcr_mono_ns();
	parts->dumped_ns = t1;
	parts->dump_ms = (double)(t1 - t0) / 1e6;
	criu_read_dump_stats(dir, &parts->criu); /* only figures: zeros if absent */
	if (verb_lease_check(l, "publishing the checkpoint") < 0) {
		if (have_reserved)
			cxlcr_region_free(pool, reserved.generation);
		return -1;
	}
	/* The destination may start the moment the set is marked complete,
	 * before the publish has returned (it still unmaps the set): the
	 * restore is timed from that moment, so that its parts, the
	 * destination's own account, fit inside it. */
	if (image_store_publish_in(pool, dir, &meta, have_reserved ? &reserved : NULL, image_bytes,
				   &parts->published_ns) < 0)
		return -1;
	parts->publish_ms = (double)(cxlcr_mono_ns() - t1) / 1e6;
	/* Only the newest checkpoint of a service is worth keeping. */
	char name[CXLCR_NAME_MAX + 24];
	snprintf(name, sizeof(name), "%s.%llu", s->region.name, (unsigned long long)meta.arena_epoch);
	struct cxlcr_region r;
	image_store_reclaim(pool, s->region.name,
			    cxlcr_region_find(pool, CXLCR_KIND_IMAGES, name, &r) ? r.generation : 0);
	image_work_dir_remove(dir);
	return 0;
}

int cmd_checkpoint(int argc, char **argv)
{
	struct verb_args a;
	struct cxlcr_pool pool;
	struct service s;
	struct verb_lease l;
	int code;
	if (!service_verb_here(argc, argv, "cxlcr checkpoint NAME [--json]", NULL, &a, &pool, &s, &code))
		return code;
	if ((code = verb_begin_here(&pool, &s, "checkpoint", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return code;
	}
	uint64_t t0 = cxlcr_mono_ns(), bytes = 0;
	struct freeze_parts parts = { 0 };
	/* Left stopped, and ended once the checkpoint is safe in the pool:
	 * tearing down the page tables of a large arena mapping takes
	 * ~100 ms per 4 GiB, which need not delay the checkpoint. */
	if (checkpoint_service(&pool, &s, &l, &bytes, &parts) < 0) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		char where[CXLCR_HOST_MAX + 64], after[CXLCR_ERROR_MAX];
		int resumed = pid_alive(s.region.owner_pid) ? resume_source(&pool, &s, &l, where, sizeof(where)) : -1;
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "checkpoint of %s failed: %s; %s", a.name, why,
			    source_after(resumed, a.name, where, after, sizeof(after)));
	}
	double total = (double)(cxlcr_mono_ns() - t0) / 1e6;
	kill(s.region.owner_pid, SIGKILL);
	pid_wait_exit(s.region.owner_pid, KILL_WAIT_MS);
	host_wd_remove(a.name); /* the host that restores it makes its own */
	verb_lease_note_frozen(&l, 0, 0, NULL, 0);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (a.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", a.name);
		json_str(&j, "host", this_host());
		json_double(&j, "freeze_ms", parts.dump_ms);
		json_double(&j, "checkpoint_ms", total);
		json_double(&j, "total_ms", total);
		json_u64(&j, "image_bytes", bytes);
		json_freeze_parts(&j, &parts);
		json_end(&j);
	} else {
		char b[32];
		printf("%s checkpointed on %s: %s of images in the pool, %.1f ms; the heap stayed in its arena\n",
		       a.name, this_host(), cxlcr_format_size(bytes, b, sizeof(b)), total);
	}
	return EXIT_OK;
}

/* Before a migrate freezes the source: the destination makes the network
 * namespace the restore will join (or, with --undo, removes it again when
 * the migrate failed), so that the freeze does not wait for it. */
int cmd_restore_prepare(int argc, char **argv)
{
	bool undo = false;
	const char *lease = NULL, *epoch = NULL;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--undo"))
			undo = true;
		else if (!strcmp(argv[i], "--lease") && i + 1 < argc)
			lease = argv[++i];
		else if (!strcmp(argv[i], "--epoch") && i + 1 < argc)
			epoch = argv[++i];
		else
			lease = NULL, argc = 0;
	}
	if (argc < 2 || !lease || !cli_host)
		return fail(EXIT_USAGE, "usage: cxlcr restore-prepare NAME --lease LEASE [--undo [--epoch E]] (run by "
				       "cxlcr migrate on the destination host)");
	struct cxlcr_pool pool;
	struct service s;
	struct verb_lease l;
	int rc = service_find(&pool, argv[1], &s);
	if (rc)
		return rc;
	/* Only under the lease of the migrate that asked: the link name is
	 * the next epoch's, which a live service may carry already. */
	if ((rc = verb_begin(&pool, &s, "migrate", lease, &l))) {
		cxlcr_pool_close(&pool);
		return rc;
	}
	/* The link of the restore from epoch E (the freeze's), which the
	 * epoch may have moved past since (--undo --epoch). */
	char link[16];
	uint64_t from = epoch ? strtoull(epoch, NULL, 10) : s.region.owner_epoch;
	container_link_name(pool.sb->uuid, s.region.generation, from + 1, link);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (undo) {
		container_netns_release(link, true);
		return EXIT_OK;
	}
	if (container_netns_prepare(link, ntohl(s.region.service_ip)) < 0)
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	return EXIT_OK;
}

/*
 * A restore from the newest recovery point (recovery/restore_point.c),
 * on the host where the service ran: its process must be gone; the point
 * is borrowed for the restore's length, and the heap is made what it was
 * at the point before CRIU restores the point's dump.
 */
static int recovery_prepare(struct cxlcr_pool *pool, const char *name, struct cxlcr_borrow *b, char *point,
			    size_t len, struct recovery_fresh *moved)
{
	struct cxlcr_region arena;
	struct service s;
	if (!cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, &arena))
		return cxlcr_error("no service named '%s'", name);
	service_load(pool, &arena, &s);
	if (s.running)
		return cxlcr_error("%s runs (pid %d): a recovery point is restored only once it has died", name,
				   (int)arena.owner_pid);
	if (strncmp(arena.owner_host, this_host(), CXLCR_HOST_MAX))
		return cxlcr_error("%s ran on %.*s: its recovery point is restored there", name, (int)CXLCR_HOST_MAX,
				   arena.owner_host);
	if (cxlcr_catalog_borrow(pool, name, NULL, b) < 0)
		return cxlcr_error("%s has no recovery point", name);
	struct cxlcr_region snap;
	if (cxlcr_region_get(pool, b->snapshot_generation, &snap) < 0 ||
	    recovery_reset_arena(pool, &arena, b->snapshot_generation, moved) < 0) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		cxlcr_catalog_return(pool, b);
		return cxlcr_error("%s", why);
	}
	cxlcr_copy_field(point, len, snap.name);
	return 0;
}

int restore_recovered(struct cxlcr_pool *pool, uint64_t generation, const char *dead_host, char *point, size_t len,
		      pid_t *pid, struct recovery_fresh *fresh)
{
	struct cxlcr_region old;
	char name[CXLCR_NAME_MAX];
	point[0] = 0;
	if (cxlcr_region_get(pool, generation, &old) < 0 ||
	    (old.kind != CXLCR_KIND_ARENA && old.kind != CXLCR_KIND_QUARANTINE))
		return cxlcr_error("no service's arena of generation %llu", (unsigned long long)generation);
	cxlcr_copy_field(name, sizeof(name), old.name);
	if (strncmp(old.owner_host, dead_host, CXLCR_HOST_MAX))
		return cxlcr_error("%s runs on %.*s, not on %s", name, (int)CXLCR_HOST_MAX, old.owner_host, dead_host);
	/* Lost only if the catalog has no point of it: a borrow that failed
	 * otherwise (slots full, replaced again and again) is a failed try,
	 * tried again (recovery/takeover.c). */
	struct cxlcr_borrow b;
	struct cxlcr_catalog_info any;
	if (cxlcr_catalog_borrow(pool, name, NULL, &b) < 0)
		return cxlcr_catalog_find(pool, name, &any) < 0 ? 1 : -1;
	struct cxlcr_region snap;
	if (cxlcr_region_get(pool, b.snapshot_generation, &snap) < 0 ||
	    recovery_fresh_arena(pool, &old, b.snapshot_generation, dead_host, fresh) < 0) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		cxlcr_catalog_return(pool, &b);
		return cxlcr_error("%s", why);
	}
	cxlcr_copy_field(point, len, snap.name);
	/* The address is taken over: a frozen host's service still has its
	 * link on the bridge, with the same address and MAC. */
	if (old.veth[0]) {
		int sk = cxlcr_rtnl_open();
		if (sk >= 0) {
			cxlcr_rtnl_link_del(sk, old.veth);
			close(sk);
		}
	}
	recovery_test_step("made");
	struct service s;
	struct verb_lease l = { 0 };
	service_load(pool, &fresh->arena, &s);
	int rc = verb_begin(pool, &s, "restore", NULL, &l) ? -1 : 0;
	if (rc == 0) {
		struct restore_from from = { snap.name, b.snapshot_generation, fresh };
		char link[16];
		uint64_t bytes = 0;
		struct restore_parts parts;
		rc = restore_service(pool, name, &from, &l, pid, link, &bytes, &parts, NULL);
		verb_lease_release(&l);
	}
	cxlcr_catalog_return(pool, &b);
	if (rc < 0)
		recovery_fresh_undo(pool, fresh);
	return rc;
}


int cmd_restore(int argc, char **argv)
{
	struct verb_args a;
	int code;
	if (!parse_verb_args(argc, argv, "cxlcr restore NAME --host HOST [--recovery-point] [--json]", true, "host", &a,
			     &code))
		return code;
	if (!a.host && !cli_host)
		return fail(EXIT_USAGE, "usage: cxlcr restore NAME --host HOST [--json]");
	if (!cli_host)
		return forward_to_host(a.host, argc, argv);
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	/* One verb at a time on the service (or this one under the lease
	 * of the migrate that asked). */
	struct verb_lease l = { 0 };
	struct cxlcr_region arena;
	if (cxlcr_region_find(&pool, CXLCR_KIND_ARENA, a.name, &arena)) {
		struct service s;
		service_load(&pool, &arena, &s);
		if ((rc = verb_begin(&pool, &s, "restore", a.lease, &l))) {
			cxlcr_pool_close(&pool);
			return rc;
		}
	}
	uint64_t t0 = cxlcr_mono_ns(), bytes = 0;
	pid_t pid = 0;
	char link[16];
	/* From its newest recovery point: the heap is made what it was then
	 * first, under the lease, with the point borrowed meanwhile. */
	struct restore_from from = { 0 };
	struct cxlcr_borrow point = { 0 };
	char point_name[CXLCR_NAME_MAX] = "";
	/* (A service recovered into a fresh arena that died before its first
	 * point of its own: its point is the one it was made from, whose dump
	 * is rebased onto its regions as after the recovery.) */
	static struct recovery_fresh moved;
	if (a.recovery_point &&
	    recovery_prepare(&pool, a.name, &point, point_name, sizeof(point_name), &moved) < 0) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "restore of %s from its recovery point: %s", a.name, cxlcr_last_error());
	}
	if (a.recovery_point) {
		from.point_name = point_name;
		from.point_generation = point.snapshot_generation;
		from.fresh = moved.n ? &moved : NULL;
	}
	struct restore_parts parts = { 0 };
	int restored = restore_service(&pool, a.name, a.recovery_point ? &from : NULL, &l, &pid, link, &bytes, &parts,
				       NULL);
	if (a.recovery_point)
		cxlcr_catalog_return(&pool, &point);
	verb_lease_release(&l);
	if (restored < 0) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "restore of %s on %s failed: %s", a.name, this_host(),
			    cxlcr_last_error());
	}
	cxlcr_pool_close(&pool);
	double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (a.quiet && !a.json)
		return EXIT_OK;
	if (a.json) {
		struct json j;
		json_restore_begin(&j, a.name, pid);
		json_restore_end(&j, ms, &parts, bytes);
	} else {
		printf("%s restored on %s: pid %d, %.1f ms\n", a.name, this_host(), pid, ms);
	}
	return EXIT_OK;
}

/* The destination makes the restore's network namespace while the source
 * still runs (restore-prepare); with undo, takes it away again. Only
 * cleaning up after a failed migrate now (the session makes it: below). */
static void prepare_on(const char *host, const char *name, const char *lease, bool undo, uint64_t epoch)
{
	char why[CXLCR_ERROR_MAX], e[24];
	snprintf(e, sizeof(e), "%llu", (unsigned long long)epoch);
	char *argv[] = { "restore-prepare", (char *)name, "--lease", (char *)lease, "--undo", "--epoch", e, NULL };
	rpc_call_capture(host, undo ? 7 : 4, argv, NULL, 0, why, sizeof(why));
}

/*
 * The destination's half of a migrate (restore_session.c): asked for
 * before the freeze, so that the destination readies the restore (its
 * network, its CRIU) while the source runs, and answered once the service
 * runs there. The call runs in a process of its own, forked from this
 * worker (it dies with it, and so the destination's session ends), and
 * hands its answer back through a pipe. A thread would share the
 * environment this worker changes around CRIU.
 */
struct session {
	pid_t pid;
	int answer; /* the read end of its pipe */
	int out;    /* the read end of the destination's stdout, relayed */
	char said[1024]; /* what came of it: the readiness line, then the restore's JSON */
	size_t said_len;
};

/* How long a migrate waits for its destination to be readied before it
 * freezes the source anyway (the restore then readies what is left in the
 * freeze: slower, not wrong). */
#define SESSION_READY_WAIT_MS 1000

struct session_answer {
	int rc;
	char why[CXLCR_ERROR_MAX];
};

static void session_start(struct session *ss, const char *host, const char *name, const char *lease,
			  const struct service *s, const struct cxlcr_pool *pool)
{
	ss->pid = -1;
	ss->answer = -1;
	ss->out = -1;
	ss->said_len = 0;
	char epoch[24];
	snprintf(epoch, sizeof(epoch), "%llu", (unsigned long long)s->region.owner_epoch);
	/* What its checkpoint will name of this host's own files, so that
	 * the destination starts CRIU with its own of each (host_files.h). */
	static char files[HOST_FILES_MAX][PATH_MAX];
	int n = host_files_of(s->region.owner_pid, files, HOST_FILES_MAX);
	char *argv[16 + 2 * HOST_FILES_MAX] = { "restore-session", (char *)name, "--lease", (char *)lease,
						"--epoch", epoch, "--source-pool", (char *)pool->path, "--json" };
	int argc = 9;
	for (int i = 0; i < n; i++) {
		argv[argc++] = "--host-file";
		argv[argc++] = files[i];
	}
	argv[argc] = NULL;
	int p[2], o[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	if (pipe2(o, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return;
	}
	int timeout = rpc_timeout_ms();
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		close(o[0]);
		if (exec_die_with(parent) < 0)
			_exit(1);
		static struct session_answer a;
		a.rc = rpc_call_relay_within(host, argc, argv, o[1], a.why, sizeof(a.why), timeout);
		_exit(write(p[1], &a, sizeof(a)) == (ssize_t)sizeof(a) ? 0 : 1);
	}
	close(p[1]);
	close(o[1]);
	if (pid < 0) {
		close(p[0]);
		close(o[0]);
		return;
	}
	ss->pid = pid;
	ss->answer = p[0];
	ss->out = o[0];
}

/* Reads what the destination says into ss->said, until a whole line is
 * there (line) or its output ends, or until deadline (0: none). False
 * when there is no more to read. */
static bool session_read(struct session *ss, bool line, uint64_t deadline)
{
	while (ss->out >= 0 && ss->said_len < sizeof(ss->said) - 1 &&
	       !(line && memchr(ss->said, '\n', ss->said_len))) {
		if (deadline) {
			uint64_t now = cxlcr_mono_ns();
			struct pollfd p = { .fd = ss->out, .events = POLLIN };
			if (now >= deadline || poll(&p, 1, (int)((deadline - now + 999999) / 1000000)) <= 0)
				return true;
		}
		ssize_t n = read(ss->out, ss->said + ss->said_len, sizeof(ss->said) - 1 - ss->said_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		ss->said_len += (size_t)n;
	}
	return true;
}

/* Waits (at most SESSION_READY_WAIT_MS) for the destination's first line:
 * its namespace made and its CRIU waiting, so that the freeze does not
 * share the CPUs with that. Returns the ms waited; *readied whether it
 * said so. */
static double session_ready(struct session *ss, bool *readied)
{
	uint64_t t0 = cxlcr_mono_ns();
	session_read(ss, true, t0 + SESSION_READY_WAIT_MS * 1000000ull);
	*readied = ss->said_len > strlen(SESSION_READIED) &&
		   !memcmp(ss->said, SESSION_READIED "\n", strlen(SESSION_READIED) + 1);
	return (double)(cxlcr_mono_ns() - t0) / 1e6;
}

/* The session's answer: 0 and the destination's JSON in out, or -1 with
 * why (its one line, or why there was none). */
static int session_wait(struct session *ss, char *out, size_t out_len, char *why, size_t why_len)
{
	static struct session_answer a;
	memset(&a, 0, sizeof(a));
	bool got = false;
	/* Its output to the end (the pipe's end comes with its process's);
	 * the readiness line, whenever it came, is no part of the JSON. */
	session_read(ss, false, 0);
	if (ss->out >= 0)
		close(ss->out);
	ss->out = -1;
	ss->said[ss->said_len] = 0;
	char *json = ss->said;
	if (!strncmp(json, SESSION_READIED "\n", strlen(SESSION_READIED) + 1) ||
	    !strncmp(json, SESSION_UNREADY "\n", strlen(SESSION_UNREADY) + 1))
		json += strcspn(json, "\n") + 1;
	if (ss->answer >= 0) {
		size_t have = 0;
		while (have < sizeof(a)) {
			ssize_t n = read(ss->answer, (char *)&a + have, sizeof(a) - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			have += (size_t)n;
		}
		got = have == sizeof(a);
		close(ss->answer);
		ss->answer = -1;
	}
	if (ss->pid > 0)
		while (waitpid(ss->pid, NULL, 0) < 0 && errno == EINTR)
			;
	ss->pid = -1;
	if (!got) {
		snprintf(why, why_len, "the restore on the destination did not answer");
		return -1;
	}
	snprintf(out, out_len, "%s", json);
	snprintf(why, why_len, "%s", a.why);
	return a.rc == 0 ? 0 : -1;
}

int cmd_migrate(int argc, char **argv)
{
	struct verb_args a;
	struct cxlcr_pool pool;
	struct service s;
	struct verb_lease l;
	int code;
	if (!service_verb_here(argc, argv, "cxlcr migrate NAME --to HOST [--json]", "to", &a, &pool, &s, &code))
		return code;
	if (!strcmp(a.host, this_host())) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_USAGE, "service '%s' already runs on %s", a.name, a.host);
	}
	if (!rpc_host_up(a.host)) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "host %s is not up (see cxlcr pod up)", a.host);
	}
	if ((code = verb_begin_here(&pool, &s, "migrate", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return code;
	}
	char lease[48];
	verb_lease_arg(&l, lease, sizeof(lease));

	/* 0. The destination readies the restore (its network, its CRIU)
	 * and waits for the checkpoint. */
	struct session session;
	session_start(&session, a.host, a.name, lease, &s, &pool);
	/* 1. Freeze and checkpoint; the source stays frozen until the end. */
	uint64_t t0 = cxlcr_mono_ns(), bytes = 0;
	struct freeze_parts parts = { .session = &session };
	char why[CXLCR_ERROR_MAX], restored[1024] = "";
	if (checkpoint_service(&pool, &s, &l, &bytes, &parts) < 0) {
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		char where[CXLCR_HOST_MAX + 64] = "", after[CXLCR_ERROR_MAX];
		int resumed = pid_alive(s.region.owner_pid) ? resume_source(&pool, &s, &l, where, sizeof(where)) : -1;
		/* The namespace the session made is asked away (under the lease,
		 * named by the freeze's epoch); the lease let go, the session
		 * ends, and undoes what else it made. */
		prepare_on(a.host, a.name, lease, true, s.region.owner_epoch);
		verb_lease_release(&l);
		char ignored[CXLCR_ERROR_MAX];
		session_wait(&session, restored, sizeof(restored), ignored, sizeof(ignored));
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "migrate of %s failed: %s; %s", a.name, why,
			    source_after(resumed, a.name, where, after, sizeof(after)));
	}
	/* From here the destination restores (its session saw the images
	 * complete; the source's link is off the bridge since the freeze: its
	 * address moves with it). This worker's clean-up of its dump runs
	 * meanwhile. */
	uint64_t t1 = parts.published_ns;
	if (session_wait(&session, restored, sizeof(restored), why, sizeof(why)) < 0) {
		char where[CXLCR_HOST_MAX + 64], after[CXLCR_ERROR_MAX];
		/* Fenced: the destination's restore took the arena over, and the
		 * image set is its to keep (a restore that dies after taking
		 * over renews it, and the service is then checkpointed). Ended
		 * while frozen: the image set is the service's only way back. */
		int resumed = resume_source(&pool, &s, &l, where, sizeof(where));
		if (resumed != 0) {
			if (resumed > 0)
				image_store_reclaim(&pool, a.name, 0);
			/* A restore whose worker died leaves its namespace, its
			 * link on the bridge with the service's address. */
			prepare_on(a.host, a.name, lease, true, s.region.owner_epoch);
		} else {
			/* Fenced for a restored task whose worker died: its keeper
			 * may end it before it runs, and nobody there would renew
			 * the checkpoint: the service is then checkpointed. */
			struct cxlcr_region images;
			struct cxlcr_image_set meta;
			if (image_store_find(&pool, a.name, &images, &meta) == 0)
				checkpoint_renew_stale(&pool, &images, &meta, true);
		}
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "migrate of %s to %s failed: %s; %s", a.name, a.host, why,
			    source_after(resumed, a.name, where, after, sizeof(after)));
	}
	uint64_t t2 = cxlcr_mono_ns();
	/* 3. Only now does the frozen source end. */
	kill(s.region.owner_pid, SIGKILL);
	pid_wait_exit(s.region.owner_pid, KILL_WAIT_MS);
	host_wd_remove(a.name); /* its own on the destination now */
	verb_lease_note_frozen(&l, 0, 0, NULL, 0);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	uint64_t t3 = cxlcr_mono_ns();
	if (a.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", a.name);
		json_str(&j, "from", this_host());
		json_str(&j, "to", a.host);
		json_double(&j, "freeze_ms", (double)(t2 - t0) / 1e6);
		json_double(&j, "dump_ms", parts.dump_ms);
		json_double(&j, "checkpoint_ms", (double)(t1 - t0) / 1e6);
		json_double(&j, "restore_ms", (double)(t2 - t1) / 1e6);
		/* The tasks were frozen from CRIU's freezing to the end of CRIU's
		 * restore: CRIU's own frozen time, then from the end of its dump
		 * (the publish, the destination's restore) to the restored tasks
		 * running. What comes before the dump (the image region reserved,
		 * the tracker ended, the shed, CRIU's start) and what the
		 * destination does once they run (after_ms) are outside. */
		json_double(&j, "frozen_ms", parts.criu.frozen_ms + (double)(t2 - parts.dumped_ns) / 1e6 -
						 json_find_number(restored, "after_ms"));
		json_freeze_parts(&j, &parts);
		/* The destination's own account of the restore; the rest of
		 * restore_ms is the request: its worker, the pool opened, the
		 * lease checked, the answer. */
		json_object_begin(&j, "restore_parts");
		double there = json_find_number(restored, "total_ms");
		json_double(&j, "request_ms", there > 0 ? (double)(t2 - t1) / 1e6 - there : 0);
		static const char *const keys[] = { "ahead_ms",	    "fetch_ms",	   "prepare_ms",	   "criu_restore_ms",
						    "after_ms",	    "tracker_ms",	   "plugin_take_over_ms",
						    "netlock_release_ms" };
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			json_double(&j, keys[k], json_find_number(restored, keys[k]));
		json_object_end(&j);
		json_double(&j, "total_ms", (double)(t3 - t0) / 1e6);
		json_u64(&j, "image_bytes", bytes);
		json_end(&j);
	} else {
		char b[32];
		printf("%s migrated %s -> %s in %.1f ms (frozen %.1f ms: checkpoint %.1f, restore %.1f), %s of images\n",
		       a.name, this_host(), a.host, (double)(t3 - t0) / 1e6, (double)(t2 - t0) / 1e6,
		       (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
		       cxlcr_format_size(bytes, b, sizeof(b)));
	}
	return EXIT_OK;
}
