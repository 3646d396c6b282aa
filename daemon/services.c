/*
 * What cxlcr knows about a service: its arena's entry in the pool's region
 * table, the statistics the preload keeps in the arena header, and, when the
 * service runs on this host, what /proc says about its memory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/catalog.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "../control/lease.h"
#include "../control/outcome.h"
#include "../tracking/track.h"
#include "host_files.h"
#include "cli.h"
#include "container.h"
#include "image_store.h"
#include "rpc.h"
#include "rpc_tcp.h"

bool pid_alive(int pid)
{
	char path[64], state = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	/* "pid (comm) S ...": a zombie has exited already. */
	int n = fscanf(f, "%*d (%*[^)]) %c", &state);
	fclose(f);
	return n == 1 && state != 'Z' && state != 'X';
}

int pid_wait_exit(int pid, int timeout_ms)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return errno == ESRCH ? 1 : -1;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int rc = poll(&p, 1, timeout_ms);
	close(fd);
	if (rc < 0)
		return -1;
	return rc == 1 || !pid_alive(pid);
}

/* Does pid map the service's memory of the pool: its arena region (an
 * arena's owner), or any of the pool file (a fork child's views; a
 * copy-mode child maps none of it, but holds it open)? A pid that was
 * reused by another process does not. */
static bool maps_service(int pid, const struct service *s)
{
	if (s->region.kind != CXLCR_KIND_ARENA)
		return cxlcr_pid_maps_file(pid, s->pool_dev, s->pool_ino, 0, 0) ||
		       cxlcr_pid_has_file_open(pid, s->pool_dev, s->pool_ino);
	return cxlcr_pid_maps_file(pid, s->pool_dev, s->pool_ino, s->region.offset,
				   s->region.offset + s->region.size);
}

/*
 * A pidfd of the process that runs service s, or -1 if none does. A pid
 * stands for the service only while it is a process that maps the
 * service's memory: the check is made while the pidfd holds the process,
 * and the pidfd must not have seen it end meanwhile, so the pid cannot be
 * reused between the check and the use (ps said a reused pid "running",
 * and stop killed whatever had it).
 */
static int service_pidfd(const struct service *s)
{
	int pid = s->region.owner_pid;
	if (pid <= 0)
		return -1;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -1;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (!pid_alive(pid) || !maps_service(pid, s) || poll(&p, 1, 0) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void read_rss(int pid, struct service *s)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		long long v;
		if (sscanf(line, "RssAnon: %lld", &v) == 1)
			s->rss_anon_kb = v;
		else if (sscanf(line, "RssShmem: %lld", &v) == 1)
			s->rss_shmem_kb = v;
		else if (sscanf(line, "RssFile: %lld", &v) == 1)
			s->rss_file_kb = v;
	}
	fclose(f);
}

/* Sums the per-thread usage slots of the arena header (see stats.c). */
static void read_arena_stats(struct cxlcr_pool *pool, struct service *s)
{
	size_t len = sizeof(struct cxlcr_arena_header);
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, s->region.offset, len, 0, 0);
	if (!h)
		return;
	cxlcr_refresh(h, len);
	if (h->magic == CXLCR_ARENA_MAGIC && h->region_generation == s->region.generation) {
		int64_t used = __atomic_load_n(&h->retired_used, __ATOMIC_RELAXED);
		for (uint32_t i = 0; i < CXLCR_ARENA_STAT_SLOTS; i++)
			used += __atomic_load_n(&h->slots[i].used, __ATOMIC_RELAXED);
		s->used = used < 0 ? 0 : used;
		s->fallback_allocs = h->fallback_allocs;
		s->fallback_bytes = h->fallback_bytes;
		s->early_allocs = h->early_allocs;
		s->released_bytes = h->released_bytes;
		s->tracked = __atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE) != 0;
		s->small_pages = __atomic_load_n(&h->track_small_pages, __ATOMIC_ACQUIRE) &&
				 __atomic_load_n(&h->track_small_mapped, __ATOMIC_ACQUIRE);
		s->recovery_interval_ms = __atomic_load_n(&h->recovery_interval_ms, __ATOMIC_ACQUIRE);
		s->restored_from = __atomic_load_n(&h->restored_from, __ATOMIC_ACQUIRE);
		if (s->restored_from)
			cxlcr_copy_field(s->restored_from_point, sizeof(s->restored_from_point), h->restored_from_name);
		cxlcr_copy_field(s->recovered_from_host, sizeof(s->recovered_from_host), h->recovered_from_host);
		cxlcr_copy_field(s->recovered_on_host, sizeof(s->recovered_on_host), h->recovered_on_host);
		s->lost = __atomic_load_n(&h->lost, __ATOMIC_ACQUIRE) != 0;
		s->failed = __atomic_load_n(&h->failed, __ATOMIC_ACQUIRE) != 0;
		cxlcr_copy_field(s->failed_reason, sizeof(s->failed_reason), h->failed_reason);
		s->heap_address = h->heap_address;
		s->heap_size = h->heap_size;
		s->heap_limit = h->heap_reserved;
		s->extents = h->extent_count;
		memcpy(s->command, h->command, sizeof(s->command));
		s->command[sizeof(s->command) - 1] = 0;
	}
	munmap(h, len);
}

/* The service's arena header, mapped, if it still is the service's. */
static struct cxlcr_arena_header *map_header(struct cxlcr_pool *pool, const struct service *s)
{
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, s->region.offset, sizeof(*h), 0, 0);
	if (h && (h->magic != CXLCR_ARENA_MAGIC || h->region_generation != s->region.generation)) {
		munmap(h, sizeof(*h));
		h = NULL;
	}
	return h;
}

bool service_shed_page_tables(struct cxlcr_pool *pool, const struct service *s, int timeout_ms)
{
	struct cxlcr_arena_header *h = map_header(pool, s);
	bool answered = false;
	if (!h)
		return false;
	uint32_t want = __atomic_add_fetch(&h->shed_request, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&h->doorbell, 1, __ATOMIC_ACQ_REL);
	cxlcr_futex_wake_all(&h->doorbell);
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		uint32_t done = __atomic_load_n(&h->shed_done, __ATOMIC_ACQUIRE);
		if ((answered = done == want) || cxlcr_mono_ns() >= deadline)
			break;
		cxlcr_futex_wait_until(&h->shed_done, done, deadline);
	}
	munmap(h, sizeof(*h));
	return answered;
}

int service_fence_growth(struct cxlcr_pool *pool, const struct service *s, int timeout_ms)
{
	struct cxlcr_arena_header *h = map_header(pool, s);
	if (!h)
		return 0; /* no preload: nothing grows */
	uint32_t *w = &h->grow_fence;
	uint32_t seen = __atomic_or_fetch(w, CXLCR_GROW_FENCE, __ATOMIC_ACQ_REL);
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	while ((seen & ~CXLCR_GROW_FENCE) && cxlcr_mono_ns() < deadline) {
		cxlcr_futex_wait_until(w, seen, deadline);
		seen = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	}
	munmap(h, sizeof(*h));
	if (!(seen & ~CXLCR_GROW_FENCE))
		return 0;
	service_unfence_growth(pool, s);
	return cxlcr_error("%s: its heap has been growing for over %d ms: not frozen now (try again)", s->region.name,
			   timeout_ms);
}

void service_unfence_growth(struct cxlcr_pool *pool, const struct service *s)
{
	struct cxlcr_arena_header *h = map_header(pool, s);
	if (!h)
		return;
	__atomic_and_fetch(&h->grow_fence, ~CXLCR_GROW_FENCE, __ATOMIC_ACQ_REL);
	cxlcr_futex_wake_all(&h->grow_fence);
	munmap(h, sizeof(*h));
}

/* The newest recovery point of a service that takes them: the snapshot
 * the catalog holds under its name. */
static void load_recovery_point(struct cxlcr_pool *pool, struct service *s)
{
	struct cxlcr_catalog_info info;
	struct cxlcr_region snap;
	if (!s->recovery_interval_ms || cxlcr_catalog_find(pool, s->region.name, &info) < 0 ||
	    cxlcr_region_get(pool, info.snapshot_generation, &snap) < 0)
		return;
	const struct cxlcr_snapshot_header *h = cxlcr_pool_map(pool, snap.offset, sizeof(*h), 0, 0);
	if (!h)
		return;
	cxlcr_refresh(h, sizeof(*h));
	if (h->complete == CXLCR_SNAPSHOT_COMPLETE) {
		cxlcr_copy_field(s->recovery_point, sizeof(s->recovery_point), snap.name);
		s->recovery_point_epoch = h->arena_epoch;
		s->recovery_point_ns = info.published_ns;
	}
	munmap((void *)(uintptr_t)h, sizeof(*h));
}

/* A service whose process does not run may be one that recovery gave up
 * on: its host was declared dead with nothing to recover it from
 * (recovery/takeover.c), or its recovery failed again and again (left
 * down for an operator). */
static void settle_down(struct service *s)
{
	if (s->running)
		return;
	if (s->lost)
		s->state = "lost";
	else if (s->failed)
		s->state = "failed";
}

int service_load(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct service *s)
{
	int pidfd;
	memset(s, 0, sizeof(*s));
	s->region = *r;
	s->rss_anon_kb = s->rss_shmem_kb = s->rss_file_kb = -1;
	verb_lease_describe(pool, r, s->verb, sizeof(s->verb));
	s->has_last_verb = verb_outcome_read(pool, r->generation, &s->last_verb);
	struct stat st;
	if (fstat(pool->fd, &st) == 0) {
		s->pool_dev = st.st_dev;
		s->pool_ino = st.st_ino;
	}
	/* Its pid is its host's own (hosts share no pid namespace): only a
	 * service of this host is looked at here; another host's is that
	 * host's to judge (service_ask_hosts(), daemon/service_there.h). */
	s->local = !strncmp(r->owner_host, this_host(), CXLCR_HOST_MAX);
	bool runs = false;
	if (s->local && r->owner_pid != 0 && (pidfd = service_pidfd(s)) >= 0) {
		close(pidfd);
		runs = true;
		read_rss(r->owner_pid, s);
	}
	cxlcr_copy_field(s->command, sizeof(s->command), r->command);
	read_arena_stats(pool, s);
	if (r->owner_pid != 0 && s->local) {
		service_judged(pool, s, runs);
	} else {
		s->state = r->owner_pid == 0 ? "starting" : "remote";
		settle_down(s);
	}
	load_recovery_point(pool, s);
	return 0;
}

void service_judged(struct cxlcr_pool *pool, struct service *s, bool runs)
{
	struct cxlcr_region images;
	struct cxlcr_image_set meta;
	s->running = runs;
	if (runs)
		s->state = "running";
	else
		s->state = image_store_find(pool, s->region.name, &images, &meta) == 0 &&
					   meta.arena_epoch == s->region.owner_epoch
				   ? "checkpointed"
				   : "exited";
	settle_down(s);
}

/* The arena of a service whose host was declared dead, quarantined by a
 * recovery that has not made its fresh arena yet (recovery/takeover.c):
 * the service is still there to be asked about, as recovering. */
static bool quarantined_arena(struct cxlcr_pool *pool, const char *name, struct cxlcr_region *out)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_QUARANTINE ||
		    strncmp(r.name, name, CXLCR_NAME_MAX) || r.size < sizeof(struct cxlcr_arena_header))
			continue;
		const struct cxlcr_arena_header *h = cxlcr_pool_map(pool, r.offset, sizeof(*h), 0, 0);
		if (!h)
			continue;
		cxlcr_refresh(h, sizeof(*h));
		bool arena = h->magic == CXLCR_ARENA_MAGIC && h->region_generation == r.generation &&
			     !__atomic_load_n(&h->recovered_into, __ATOMIC_ACQUIRE);
		munmap((void *)(uintptr_t)h, sizeof(*h));
		if (arena) {
			*out = r;
			return true;
		}
	}
	return false;
}

int service_find(struct cxlcr_pool *pool, const char *name, struct service *s)
{
	return service_find_for(pool, name, s, false);
}

int service_find_for(struct cxlcr_pool *pool, const char *name, struct service *s, bool status)
{
	int rc = open_pool_or_fail(pool);
	if (rc)
		return rc;
	struct cxlcr_region r;
	if (!cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, &r) && !cxlcr_region_find(pool, CXLCR_KIND_CHILD, name, &r)) {
		if (status && quarantined_arena(pool, name, &r)) {
			/* (Unless its recovery was given up on, and a restore
			 * by hand that took it up died half-way.) */
			service_load(pool, &r, s);
			s->state = s->lost ? "lost" : s->failed ? "failed" : "recovering";
			return 0;
		}
		cxlcr_pool_close(pool);
		return fail(EXIT_NOT_FOUND, "no service named '%s' in pool %s", name, pool->path);
	}
	service_load(pool, &r, s);
	return 0;
}

void service_print_json(struct json *j, const struct service *s)
{
	json_str(j, "name", s->region.name);
	json_str(j, "state", s->state);
	/* Why it is unknown: its host did not answer (daemon/service_there.h). */
	if (s->state_reason[0])
		json_str(j, "state_reason", s->state_reason);
	else
		json_null_value(j, "state_reason");
	/* The pid on its host: a host's pids are its own. */
	if (s->region.owner_pid)
		json_i64(j, "pid", s->region.owner_pid);
	else
		json_null_value(j, "pid");
	json_str(j, "host", s->region.owner_host);
	char ip[16];
	if (s->region.service_ip)
		json_str(j, "address", ip_string(ntohl(s->region.service_ip), ip));
	else
		json_null_value(j, "address");
	json_str(j, "command", s->command);
	json_u64(j, "arena_size", s->heap_size ? s->heap_size : s->region.size - CXLCR_ARENA_HEAP_OFFSET);
	json_u64(j, "arena_max", s->heap_limit);
	json_u64(j, "arena_extents", s->extents);
	json_u64(j, "arena_used", (uint64_t)s->used);
	json_u64(j, "arena_offset", s->region.offset);
	char addr[32];
	snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)s->heap_address);
	json_str(j, "arena_address", addr);
	json_u64(j, "glibc_fallbacks", s->fallback_allocs);
	json_u64(j, "glibc_fallback_bytes", s->fallback_bytes);
	json_u64(j, "early_allocs", s->early_allocs);
	json_u64(j, "arena_released", s->released_bytes);
	json_bool(j, "write_tracking", s->tracked);
	json_bool(j, "small_pages", s->small_pages);
	json_u64(j, "recovery_interval_ms", s->recovery_interval_ms);
	if (s->restored_from_point[0])
		json_str(j, "restored_from_point", s->restored_from_point);
	else
		json_null_value(j, "restored_from_point");
	if (s->recovered_from_host[0]) {
		json_object_begin(j, "recovered");
		json_str(j, "from_host", s->recovered_from_host);
		json_str(j, "on_host", s->recovered_on_host);
		json_str(j, "point", s->restored_from_point);
		json_object_end(j);
	} else {
		json_null_value(j, "recovered");
	}
	if (s->failed_reason[0])
		json_str(j, "recovery_failed", s->failed_reason);
	else
		json_null_value(j, "recovery_failed");
	if (s->recovery_point[0]) {
		/* Its age by this host's clock against the one that published
		 * it: for people, not for deciding anything. */
		uint64_t now = cxlcr_now_ns();
		json_object_begin(j, "recovery_point");
		json_str(j, "name", s->recovery_point);
		json_u64(j, "epoch", s->recovery_point_epoch);
		json_double(j, "age_ms", now > s->recovery_point_ns ? (double)(now - s->recovery_point_ns) / 1e6 : 0);
		json_object_end(j);
	} else {
		json_null_value(j, "recovery_point");
	}
	json_u64(j, "owner_epoch", s->region.owner_epoch);
	/* A verb under way on it ("migrate by pid N on h0"): its lease. */
	if (s->verb[0])
		json_str(j, "verb", s->verb);
	else
		json_null_value(j, "verb");
	/* The last verb's outcome, whoever ran it (its command line may have
	 * died): for people and tests, its age by this host's clock. */
	if (s->has_last_verb) {
		uint64_t now = cxlcr_now_ns();
		json_object_begin(j, "last_verb");
		json_str(j, "verb", s->last_verb.verb);
		json_str(j, "result", verb_outcome_word(s->last_verb.result));
		json_str(j, "reason", s->last_verb.reason);
		json_str(j, "host", s->last_verb.host);
		json_double(j, "age_ms",
			    now > s->last_verb.ended_ns ? (double)(now - s->last_verb.ended_ns) / 1e6 : 0);
		json_object_end(j);
	} else {
		json_null_value(j, "last_verb");
	}
	if (s->rss_anon_kb >= 0) {
		json_i64(j, "rss_anon_kb", s->rss_anon_kb);
		json_i64(j, "rss_shmem_kb", s->rss_shmem_kb);
		json_i64(j, "rss_file_kb", s->rss_file_kb);
	}
}

int service_signal(const struct service *s, int sig)
{
	if (!s->local || !s->region.owner_pid) {
		errno = ESRCH;
		return -1;
	}
	int fd = service_pidfd(s);
	if (fd < 0) {
		errno = ESRCH; /* gone, or the pid is another process's now */
		return -1;
	}
	int rc = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* Checkpoint, migrate and snapshot run in the daemon of the service's host. */
int service_require_here(const struct service *s)
{
	if (!s->running)
		return fail(EXIT_FAIL, "service '%s' is not running (%s)", s->region.name, s->state);
	if (strncmp(s->region.owner_host, this_host(), CXLCR_HOST_MAX))
		return fail(EXIT_FAIL, "service '%s' runs on %s, not %s", s->region.name,
			    s->region.owner_host, this_host());
	if (!s->region.veth[0])
		return fail(EXIT_FAIL, "service '%s' was not started on a pod host (cxlcr run --host)",
			    s->region.name);
	return 0;
}

int service_pod_host(const char *name, char host[CXLCR_HOST_MAX])
{
	struct cxlcr_pool pool;
	struct service s;
	int rc = service_find(&pool, name, &s);
	if (rc)
		return rc;
	cxlcr_pool_close(&pool);
	if (!rpc_host_up(s.region.owner_host))
		return fail(EXIT_FAIL, "service '%s' is not on a pod host (owner: %s)", name,
			    s.region.owner_host[0] ? s.region.owner_host : "none");
	memcpy(host, s.region.owner_host, CXLCR_HOST_MAX);
	host[CXLCR_HOST_MAX - 1] = 0;
	return EXIT_OK;
}

/* Client side: send the verb to the daemon of the service's host. */
int service_forward_to_owner(const char *name, int argc, char **argv)
{
	char host[CXLCR_HOST_MAX];
	int rc = service_pod_host(name, host);
	return rc ? rc : forward_to_host(host, argc, argv);
}

bool service_verb_here(int argc, char **argv, const char *usage, const char *host_opt, struct verb_args *a,
		       struct cxlcr_pool *pool, struct service *s, int *code)
{
	if (!parse_verb_args(argc, argv, usage, true, host_opt, a, code))
		return false;
	if (host_opt && !a->host) {
		*code = fail(EXIT_USAGE, "usage: %s", usage);
		return false;
	}
	if (!cli_host) {
		*code = service_forward_to_owner(a->name, argc, argv);
		return false;
	}
	if ((*code = service_find(pool, a->name, s)))
		return false;
	if ((*code = service_require_here(s))) {
		cxlcr_pool_close(pool);
		return false;
	}
	return true;
}

int service_free(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	if (r->kind == CXLCR_KIND_ARENA && cxlcr_tracker_end(pool, r) < 0)
		return -1;
	/* Its link goes before its address does. The kernel tears down a dead
	 * service's network namespace, and its end of the link, only later
	 * (up to a second here), and a service given the same address meanwhile
	 * has the same MAC (container_mac_of): the bridge would send some of
	 * its clients' packets to the old end, which resets their connections.
	 * Deleting one end deletes both at once. A link of another machine's
	 * is not here: nothing happens. */
	if (r->veth[0]) {
		char link[sizeof(r->veth) + 1] = "";
		memcpy(link, r->veth, sizeof(r->veth));
		container_netns_release(link, true);
	}
	/* Its working directory here goes too, if it has nothing in it. */
	char name[CXLCR_NAME_MAX + 1];
	snprintf(name, sizeof(name), "%.*s", (int)CXLCR_NAME_MAX, r->name);
	if (r->kind == CXLCR_KIND_ARENA || r->kind == CXLCR_KIND_CHILD)
		host_wd_remove(name);
	return cxlcr_service_free(pool, r);
}
