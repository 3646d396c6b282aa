/*
 * Draining a host: every service it runs migrates to another host of the
 * pod, one at a time, each with the migrate every operator uses (its
 * lease, its fencing, its freeze; a failed one leaves the service running
 * where it was, with its data). A host is drained on an operator's
 * request (`cxlcr host drain H`) or by its own daemon when its kernel's
 * log says the machine is failing (kmsg.c).
 *
 * Destinations are the other hosts registered in the pod's host table
 * (not left), taken in turn; a migrate that fails on one (a destination
 * that does not answer) is tried on the next. Fork children are not
 * moved: they hold no arena of their own and end with their host.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <linux/close_range.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/util.h"
#include "../daemon/cli.h"
#include "../daemon/json.h"
#include "../daemon/service_there.h"
#include "recovery.h"

#define MIGRATE_TRIES 3

/* The other registered hosts of the pod, in table order. */
static int other_hosts(struct cxlcr_pool *pool, const char *host, char (*out)[CXLCR_HOST_MAX], int cap)
{
	struct cxlcr_hosts_map m;
	int rc = cxlcr_hosts_open(pool, false, &m);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	int n = 0;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX && n < cap; i++) {
		const struct cxlcr_host_entry *e = &m.entries[i];
		char why[64];
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != CXLCR_HOST_RUNNING ||
		    !cxlcr_host_entry_intact(e, why, sizeof(why)) ||
		    !strncmp(e->id.name, host, CXLCR_HOST_MAX))
			continue;
		cxlcr_copy_field(out[n++], CXLCR_HOST_MAX, e->id.name);
	}
	cxlcr_hosts_close(&m);
	return n;
}

/* `cxlcr migrate NAME --to TO`, as a command of its own (its lease and
 * deadlines are the verb's): 0 if it moved, else its one line in why. */
static int migrate_one(const char *name, const char *to, char *why, size_t len)
{
	char bin[PATH_MAX];
	if (!path_near_exe("cxlcr", bin, sizeof(bin))) {
		snprintf(why, len, "cannot find the cxlcr command");
		return -1;
	}
	int out[2];
	if (pipe2(out, O_CLOEXEC) < 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(out[1], 2);
		close_range(3, ~0u, 0);
		execl(bin, "cxlcr", "migrate", name, "--to", to, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	char buf[512] = "";
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) - 1 && (n = read(out[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(out[0]);
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		snprintf(why, len, "cannot run cxlcr migrate");
		return -1;
	}
	buf[strcspn(buf, "\n")] = 0;
	snprintf(why, len, "%s", buf);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int drain_host(struct cxlcr_pool *pool, const char *host, const char *only_to, uint64_t bound_ns,
	       struct drain_report *r)
{
	uint64_t start = cxlcr_mono_ns();
	memset(r, 0, sizeof(*r));
	char to[CXLCR_HOSTS_MAX][CXLCR_HOST_MAX];
	int hosts = 0;
	if (only_to) {
		cxlcr_copy_field(to[0], CXLCR_HOST_MAX, only_to);
		hosts = 1;
	} else if ((hosts = other_hosts(pool, host, to, CXLCR_HOSTS_MAX)) < 0) {
		return -1;
	}
	if (hosts == 0)
		return cxlcr_error("no other host of the pod to drain %s to", host);
	int next = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region reg;
		cxlcr_region_slot(pool, i, &reg);
		if (reg.state != CXLCR_REGION_LIVE || !cxlcr_kind_is_service(reg.kind) ||
		    strncmp(reg.owner_host, host, CXLCR_HOST_MAX))
			continue;
		struct drain_item *it = r->count < DRAIN_MAX ? &r->items[r->count++] : NULL;
		if (!it)
			break;
		cxlcr_copy_field(it->name, sizeof(it->name), reg.name);
		if (reg.kind == CXLCR_KIND_CHILD) {
			snprintf(it->why, sizeof(it->why), "a fork child: not moved");
			r->skipped++;
			continue;
		}
		struct service s;
		service_load_asking(pool, &reg, &s); /* drained from elsewhere: the host says */
		if (!s.running) {
			snprintf(it->why, sizeof(it->why), "not running (%s)", s.state);
			r->skipped++;
			continue;
		}
		/* Out of time: what is left goes by the hard-crash path. */
		if (bound_ns && cxlcr_mono_ns() - start >= bound_ns) {
			if (!r->handed_over && cxlcr_host_write_tombstone(pool, host, CXLCR_TOMBSTONE_HANDOFF) < 0) {
				snprintf(it->why, sizeof(it->why), "the drain ran out of time, and %s could not be "
					 "handed over: %s", host, cxlcr_last_error());
				r->failed++;
				continue;
			}
			snprintf(it->why, sizeof(it->why), "the drain ran out of time: handed over to the hard-crash "
				 "path (recovered elsewhere from its newest recovery point)");
			r->handed_over++;
			continue;
		}
		uint64_t t0 = cxlcr_mono_ns();
		int rc = -1;
		for (int tries = 0; rc < 0 && tries < MIGRATE_TRIES && tries < hosts; tries++) {
			const char *dest = to[next++ % hosts];
			rc = migrate_one(reg.name, dest, it->why, sizeof(it->why));
			if (rc == 0)
				cxlcr_copy_field(it->to, sizeof(it->to), dest);
		}
		it->ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
		it->moved = rc == 0;
		if (rc == 0) {
			it->why[0] = 0;
			r->moved++;
		} else {
			r->failed++;
		}
	}
	return 0;
}

int cmd_host(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "recover"))
		return host_recover(argc, argv);
	static const char *usage = "usage: cxlcr host drain HOST [--to HOST2] [--bound MS] [--json]\n"
				   "       cxlcr host recover DEAD --on HOST (run by a daemon)\n\n"
				   "Migrates every service of HOST to the pod's other hosts (or to HOST2),\n"
				   "one at a time; exits 1 if one could not be moved (it runs on where it was).\n"
				   "--bound MS: what is not moved after MS milliseconds is handed over to the\n"
				   "hard-crash path: HOST's tombstone says so, another host fences it and brings\n"
				   "those services back from their newest recovery points (exit 1).\n";
	if (argc < 2 || strcmp(argv[1], "drain")) {
		fputs(usage, argc > 1 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc > 1 && !strcmp(argv[1], "--help") ? EXIT_OK : EXIT_USAGE;
	}
	static const struct option opts[] = { { "to", required_argument, 0, 't' },
					      { "bound", required_argument, 0, 'b' },
					      { "json", no_argument, 0, 'j' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *to = NULL;
	bool json = false;
	uint64_t bound_ns = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc - 1, argv + 1, "t:b:jh", opts, NULL)) != -1) {
		switch (c) {
		case 't': to = optarg; break;
		case 'b': {
			char *end;
			long ms = strtol(optarg, &end, 10);
			if (*end || ms < 1 || ms > 86400000)
				return fail(EXIT_USAGE, "host drain: --bound %s: not a number of milliseconds", optarg);
			bound_ns = (uint64_t)ms * 1000000ull;
			break;
		}
		case 'j': json = true; break;
		case 'h': fputs(usage, stdout); return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind + 2 != argc)
		return fail(EXIT_USAGE, "host drain: name one host (cxlcr host drain HOST)");
	const char *host = argv[optind + 1];
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	static struct drain_report r;
	uint64_t t0 = cxlcr_mono_ns();
	if (drain_host(&pool, host, to, bound_ns, &r) < 0) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "drain of %s: %s", host, cxlcr_last_error());
	}
	double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	cxlcr_pool_close(&pool);
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "host", host);
		json_u64(&j, "moved", r.moved);
		json_u64(&j, "failed", r.failed);
		json_u64(&j, "skipped", r.skipped);
		json_u64(&j, "handed_over", r.handed_over);
		json_double(&j, "total_ms", ms);
		json_array_begin(&j, "services");
		for (uint32_t i = 0; i < r.count; i++) {
			json_object_begin(&j, NULL);
			json_str(&j, "name", r.items[i].name);
			json_bool(&j, "moved", r.items[i].moved);
			if (r.items[i].moved)
				json_str(&j, "to", r.items[i].to);
			else
				json_str(&j, "why", r.items[i].why);
			json_double(&j, "ms", r.items[i].ms);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_end(&j);
	} else {
		for (uint32_t i = 0; i < r.count; i++)
			if (r.items[i].moved)
				printf("%s -> %s (%.1f ms)\n", r.items[i].name, r.items[i].to, r.items[i].ms);
			else
				printf("%s stays: %s\n", r.items[i].name, r.items[i].why);
		printf("%s drained in %.1f ms: %u moved, %u failed, %u not moved, %u handed over\n", host, ms, r.moved,
		       r.failed, r.skipped, r.handed_over);
	}
	return r.failed || r.handed_over ? EXIT_FAIL : EXIT_OK;
}
