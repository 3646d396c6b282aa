/* cxlcr ps | status NAME | stop NAME | rm NAME */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/arena.h"
#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/util.h"
#include "../control/fence.h"
#include "../control/outcome.h"
#include "cli.h"
#include "image_store.h"
#include "container.h"
#include "fork.h"
#include "rpc.h"
#include "rpc_tcp.h"
#include "service_there.h"

#define STOP_GRACE_MS 10000

int cmd_ps(int argc, char **argv)
{
	struct verb_args a;
	int code;
	if (!parse_verb_args(argc, argv, "cxlcr ps [--json]", false, NULL, &a, &code))
		return code;
	bool json = a.json;
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	struct json j;
	if (json) {
		json_begin(&j, stdout);
		json_array_begin(&j, "services");
	} else {
		printf("%-20s %-8s %8s %-12s %10s %10s %9s  %s\n", "NAME", "STATE", "PID", "HOST",
		       "ARENA", "USED", "FALLBACKS", "COMMAND");
	}
	/* Every service first, then one question to each other host about
	 * those it runs (daemon/service_there.h). */
	struct service *all = calloc(CXLCR_REGION_MAX, sizeof(*all));
	if (!all) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "out of memory");
	}
	size_t n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(&pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && cxlcr_kind_is_service(r.kind))
			service_load(&pool, &r, &all[n++]);
	}
	service_ask_hosts(&pool, all, n);
	for (size_t i = 0; i < n; i++) {
		const struct service *s = &all[i];
		const struct cxlcr_region *r = &s->region;
		if (json) {
			json_object_begin(&j, NULL);
			service_print_json(&j, s);
			json_object_end(&j);
			continue;
		}
		char size[32], used[32];
		/* A fork child has no arena of its own: its heap is its parent's
		 * snapshot, copy-on-write. */
		bool child = r->kind == CXLCR_KIND_CHILD;
		printf("%-20s %-8s %8d %-12.12s %10s %10s %9llu  %.*s\n", r->name, s->state, r->owner_pid,
		       r->owner_host,
		       child ? "-" : cxlcr_format_size(s->heap_size ? s->heap_size : r->size, size, sizeof(size)),
		       child ? "-" : cxlcr_format_size((uint64_t)s->used, used, sizeof(used)),
		       (unsigned long long)s->fallback_allocs, 60, s->command);
	}
	free(all);
	if (json) {
		json_array_end(&j);
		json_end(&j);
	}
	cxlcr_pool_close(&pool);
	return EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
	struct verb_args a;
	int code;
	if (!parse_verb_args(argc, argv, "cxlcr status NAME [--json]", true, NULL, &a, &code))
		return code;
	bool json = a.json;
	const char *name = a.name;
	struct cxlcr_pool pool;
	struct service s;
	int rc = service_find_for(&pool, name, &s, true);
	if (rc)
		return rc;
	service_ask_hosts(&pool, &s, 1); /* one of another host: its host says */
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		service_print_json(&j, &s);
		json_end(&j);
	} else {
		char sz[32], b[32], c[32];
		printf("service   %s (%s%s%s)\n", s.region.name, s.state, s.state_reason[0] ? ": " : "",
		       s.state_reason);
		printf("pid       %d on host %s (its own pid there)\n", s.region.owner_pid, s.region.owner_host);
		if (s.region.service_ip) {
			char ip[16];
			printf("address   %s (link %s)\n", ip_string(ntohl(s.region.service_ip), ip), s.region.veth);
		}
		printf("command   %s\n", s.command);
		if (s.region.kind == CXLCR_KIND_CHILD) {
			if (strstr(s.command, "copy mode"))
				printf("heap      its own copy of its parent's snapshot (copy mode: its pager "
				       "installed the pages)\n");
			else
				printf("heap      its parent's snapshot, copy-on-write (RssAnon: what it owns)\n");
			if (s.rss_anon_kb >= 0)
				printf("memory    RssAnon %lld kB, RssFile %lld kB\n", (long long)s.rss_anon_kb,
				       (long long)s.rss_file_kb);
			cxlcr_pool_close(&pool);
			return EXIT_OK;
		}
		char lim[32];
		printf("arena     %s in %u extent%s (may grow to %s) at 0x%llx, pool offset %llu, epoch %llu\n",
		       cxlcr_format_size(s.heap_size, sz, sizeof(sz)), s.extents, s.extents == 1 ? "" : "s",
		       cxlcr_format_size(s.heap_limit, lim, sizeof(lim)), (unsigned long long)s.heap_address,
		       (unsigned long long)s.region.offset, (unsigned long long)s.region.owner_epoch);
		printf("used      %s\n", cxlcr_format_size((uint64_t)s.used, b, sizeof(b)));
		if (s.recovery_interval_ms) {
			uint64_t now = cxlcr_now_ns();
			if (s.recovery_point[0])
				printf("recovery  a point every %u ms; newest %s (epoch %llu, %.0f ms old)\n",
				       s.recovery_interval_ms, s.recovery_point, (unsigned long long)s.recovery_point_epoch,
				       now > s.recovery_point_ns ? (double)(now - s.recovery_point_ns) / 1e6 : 0.0);
			else
				printf("recovery  a point every %u ms; none yet\n", s.recovery_interval_ms);
		}
		if (s.recovered_from_host[0])
			printf("recovered on %s from recovery point %s after its host %s died\n", s.recovered_on_host,
			       s.restored_from_point, s.recovered_from_host);
		else if (s.restored_from_point[0])
			printf("restored  from recovery point %s\n", s.restored_from_point);
		if (s.lost)
			printf("lost      its host died and it had no recovery point\n");
		if (s.failed_reason[0])
			printf("%s %s\n", s.failed ? "failed   " : "recovery ", s.failed_reason);
		if (s.has_last_verb) {
			uint64_t now = cxlcr_now_ns();
			printf("last verb %s on %s, %s (%.1f s ago)%s%s\n", s.last_verb.verb, s.last_verb.host,
			       verb_outcome_word(s.last_verb.result),
			       now > s.last_verb.ended_ns ? (double)(now - s.last_verb.ended_ns) / 1e9 : 0.0,
			       s.last_verb.reason[0] ? ": " : "", s.last_verb.reason);
		}
		if (s.fallback_allocs)
			printf("fallbacks %llu allocations (%s) in private memory from glibc: the arena could not "
			       "grow (%s); %llu before the arena was ready\n",
			       (unsigned long long)s.fallback_allocs, cxlcr_format_size(s.fallback_bytes, c, sizeof(c)),
			       s.heap_size + CXLCR_HEAP_ALIGN > s.heap_limit ? "it reached --arena-max"
									: "the pool is full",
			       (unsigned long long)s.early_allocs);
		else
			printf("fallbacks none (%llu allocations before the arena was ready)\n",
			       (unsigned long long)s.early_allocs);
		if (s.rss_anon_kb >= 0)
			printf("memory    RssShmem %lld kB (arena), RssAnon %lld kB, RssFile %lld kB\n",
			       (long long)s.rss_shmem_kb, (long long)s.rss_anon_kb, (long long)s.rss_file_kb);
	}
	cxlcr_pool_close(&pool);
	return EXIT_OK;
}

/* Frees a service's arena (and its checkpoints and snapshots): only once nothing runs
 * in it. A fork child has
 * no arena; what it gives back is its borrow of the snapshot it came from,
 * recorded for its pid: the reaper ends it now that the pid is gone. */
static int free_arena(struct cxlcr_pool *pool, struct service *s)
{
	if (service_free(pool, &s->region) < 0)
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	/* Its checkpoints go with it: a new service of the same name starts
	 * its epochs again, and would find their names taken (issue 13
	 * point 6). */
	if (s->region.kind == CXLCR_KIND_ARENA) {
		image_store_reclaim(pool, s->region.name, 0);
		snapshot_forget(pool, s->region.name);
	}
	/* The child's borrow is recorded for its pid on its host: this one
	 * (a service of another host is stopped by that host's daemon). */
	if (s->region.kind == CXLCR_KIND_CHILD)
		cxlcr_catalog_reap(pool, NULL);
	return EXIT_OK;
}

static int stop_under_lease(struct cxlcr_pool *pool, struct service *sp, const char *name, bool json);

/*
 * A service whose process is another host's (its pid means nothing here)
 * is stopped or removed by that host's daemon, reached over the control
 * protocol: true when the verb was handed there or refused (the pool
 * closed, *code its exit status). One whose state the pool alone says
 * (lost, failed: recovery left no process of it) is the business of
 * whoever asks.
 */
static bool handed_to_owner(struct cxlcr_pool *pool, const struct service *s, const char *verb, int argc,
			    char **argv, int *code)
{
	if (s->local || !s->region.owner_pid || strcmp(s->state, "remote"))
		return false;
	cxlcr_pool_close(pool);
	char owner[CXLCR_HOST_MAX + 1];
	cxlcr_copy_field(owner, sizeof(owner), s->region.owner_host);
	if (!cli_host && rpc_host_up(owner))
		*code = forward_to_host(owner, argc, argv);
	else
		*code = fail(EXIT_FAIL, "service '%.*s' is on host %s; %s it there", (int)CXLCR_NAME_MAX, s->region.name,
			     owner, verb);
	return true;
}

int cmd_stop(int argc, char **argv)
{
	struct verb_args a;
	int code;
	if (!parse_verb_args(argc, argv, "cxlcr stop NAME [--json]", true, NULL, &a, &code))
		return code;
	bool json = a.json;
	const char *name = a.name;
	struct cxlcr_pool pool;
	struct service s;
	int rc = service_find(&pool, name, &s);
	if (rc)
		return rc;
	if (handed_to_owner(&pool, &s, "stop", argc, argv, &rc))
		return rc;
	struct verb_lease l;
	if ((rc = verb_begin(&pool, &s, "stop", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return rc;
	}
	rc = stop_under_lease(&pool, &s, name, json);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	return rc;
}

/* cxlcr stop, once it holds the service's lease. */
static int stop_under_lease(struct cxlcr_pool *pool, struct service *sp, const char *name, bool json)
{
	struct service s = *sp;
	int rc;
	uint64_t t0 = cxlcr_mono_ns();
	bool killed = false;
	if (s.running) {
		/* SIGTERM first, so the service can shut down cleanly. */
		if (service_signal(&s, SIGTERM) < 0 && errno != ESRCH) {
			return fail(EXIT_FAIL, "cannot signal pid %d: %s", s.region.owner_pid, strerror(errno));
		}
		if (pid_wait_exit(s.region.owner_pid, STOP_GRACE_MS) != 1) {
			service_signal(&s, SIGKILL);
			killed = true;
			if (pid_wait_exit(s.region.owner_pid, STOP_GRACE_MS) != 1) {
				return fail(EXIT_FAIL, "pid %d did not exit", s.region.owner_pid);
			}
		}
	}
	rc = free_arena(pool, &s);
	if (rc)
		return rc;
	double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", name);
		json_bool(&j, "was_running", s.running);
		json_bool(&j, "killed", killed);
		json_double(&j, "total_ms", ms);
		json_end(&j);
	} else {
		printf("%s stopped%s, %s (%.0f ms)\n", name,
		       !s.running ? " (was not running)" : killed ? " with SIGKILL" : "",
		       s.region.kind == CXLCR_KIND_CHILD ? "its snapshot returned" : "arena freed", ms);
	}
	return EXIT_OK;
}

int cmd_rm(int argc, char **argv)
{
	struct verb_args a;
	int code;
	if (!parse_verb_args(argc, argv, "cxlcr rm NAME [--json]", true, NULL, &a, &code))
		return code;
	bool json = a.json;
	const char *name = a.name;
	struct cxlcr_pool pool;
	struct service s;
	int rc = service_find(&pool, name, &s);
	if (rc)
		return rc;
	if (handed_to_owner(&pool, &s, "rm", argc, argv, &rc))
		return rc;
	struct verb_lease l;
	if ((rc = verb_begin(&pool, &s, "rm", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return rc;
	}
	if (s.running || !strcmp(s.state, "remote")) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "service '%s' is %s (pid %d on %s); use `cxlcr stop %s`", name,
			    s.state, s.region.owner_pid, s.region.owner_host, name);
	}
	rc = free_arena(&pool, &s);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (rc)
		return rc;
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", name);
		json_bool(&j, "removed", true);
		json_end(&j);
	} else {
		printf("%s removed, arena freed\n", name);
	}
	return EXIT_OK;
}
