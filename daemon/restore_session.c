/*
 * A migrate's destination, readied before the source freezes.
 *
 * `cxlcr restore-session NAME --lease L --epoch E ...` is what a migrate
 * asks of its destination's daemon instead of a restore after the
 * checkpoint (cmd_migrate.c). It starts at once, while the source still
 * runs: it makes the service's network namespace and starts the CRIU that
 * will restore it (criu.h: criu_restore_ahead()), then waits for the
 * checkpoint of epoch E to be published in the pool and restores it.
 * What used to follow the publication, inside the freeze (the request to
 * the destination, its worker, the namespace, CRIU's start), is done by
 * then; what is left is noticing the publication and CRIU's restore.
 *
 * Its first line of output is SESSION_READIED (or SESSION_UNREADY when it
 * could not ready anything: the restore then makes its own), written as
 * soon as it is so; the source waits for it, bounded, before it freezes
 * (cmd_migrate.c). The JSON of the restore follows at the end.
 *
 * The wait watches only the pool, the network connection the request came
 * on and its own deadline, as a real pod allows: the image set's region
 * (reserved before the freeze: image_store.h) has its `complete` word set
 * last, which the session reads every POLL_US. The source gives up by
 * releasing the migrate's lease (a failed checkpoint resumes the source
 * first) or by going away; either ends the session, which undoes what it
 * made. Nothing here is restored before the checkpoint is complete, and
 * restore_service() then checks the lease, the claim and the epoch as for
 * any restore.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "../control/fence.h"
#include "../control/lease.h"
#include "cli.h"
#include "container.h"
#include "criu.h"
#include "exec.h"
#include "pod.h"
#include "restore.h"
#include "rpc.h"

#define POLL_US 200         /* between two looks at the image set's header: 50 us took ~15% of a CPU of the 2 the dump needed */
#define LEASE_EVERY_NS 1000000ull /* the lease is checked once a millisecond */

/* Has the caller of this request gone (given up, or died)? */
static bool caller_gone(void)
{
	int fd = rpc_caller_fd();
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Waits until the image set NAME.EPOCH is complete in the pool: 0, or -1
 * with why (the lease moved on, the caller went, the deadline passed). */
static int await_images(struct cxlcr_pool *pool, const char *name, uint64_t epoch, const struct verb_lease *l,
			uint64_t deadline)
{
	char set[CXLCR_NAME_MAX + 24];
	snprintf(set, sizeof(set), "%s.%llu", name, (unsigned long long)epoch);
	struct cxlcr_region r;
	struct cxlcr_image_set *h = NULL;
	uint64_t lease_at = 0;
	int rc = -1;
	for (;;) {
		uint64_t now = cxlcr_mono_ns();
		if (now >= deadline) {
			cxlcr_error("the checkpoint %s was not published in time", set);
			break;
		}
		if (now >= lease_at) {
			if (verb_lease_check(l, "waiting for the checkpoint") < 0)
				break;
			if (caller_gone()) {
				cxlcr_error("the migrate that asked for this restore has gone");
				break;
			}
			/* A reservation too small for the dump is replaced under
			 * the same name: look again. */
			struct cxlcr_region live;
			if (h && cxlcr_region_get(pool, r.generation, &live) < 0) {
				munmap(h, sizeof(*h));
				h = NULL;
			}
			lease_at = now + LEASE_EVERY_NS;
		}
		if (!h && cxlcr_region_find(pool, CXLCR_KIND_IMAGES, set, &r))
			h = cxlcr_pool_map(pool, r.offset, sizeof(*h), 0, 0);
		if (h) {
			cxlcr_refresh(h, sizeof(*h));
			if (__atomic_load_n(&h->complete, __ATOMIC_ACQUIRE) == CXLCR_IMAGES_COMPLETE) {
				rc = 0;
				break;
			}
		}
		struct timespec t = { 0, POLL_US * 1000 };
		nanosleep(&t, NULL);
	}
	if (h)
		munmap(h, sizeof(*h));
	return rc;
}

struct session_args {
	const char *name, *lease, *source_pool;
	uint64_t epoch;
	char *files[HOST_FILES_MAX];
	int n_files;
	bool json;
};

static int parse(int argc, char **argv, struct session_args *a, int *code)
{
	static const struct option opts[] = { { "lease", required_argument, 0, 'L' },
					      { "epoch", required_argument, 0, 'E' },
					      { "source-pool", required_argument, 0, 'P' },
					      { "host-file", required_argument, 0, 'F' },
					      { "json", no_argument, 0, 'j' },
					      { 0, 0, 0, 0 } };
	memset(a, 0, sizeof(*a));
	bool epoch = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'L': a->lease = optarg; break;
		case 'E': a->epoch = strtoull(optarg, NULL, 10); epoch = true; break;
		case 'P': a->source_pool = optarg; break;
		case 'F':
			if (a->n_files == HOST_FILES_MAX) {
				*code = fail(EXIT_USAGE, "at most %d --host-file", HOST_FILES_MAX);
				return -1;
			}
			a->files[a->n_files++] = optarg;
			break;
		case 'j': a->json = true; break;
		default: *code = EXIT_USAGE; return -1;
		}
	}
	if (optind != argc - 1 || !a->lease || !epoch || !cli_host) {
		*code = fail(EXIT_USAGE, "usage: cxlcr restore-session NAME --lease LEASE --epoch E [--source-pool PATH] "
					 "[--host-file PATH]... [--json] (run by cxlcr migrate on the destination host)");
		return -1;
	}
	a->name = argv[optind];
	return 0;
}

int cmd_restore_session(int argc, char **argv)
{
	struct session_args a;
	int code;
	if (parse(argc, argv, &a, &code) < 0)
		return code;
	uint64_t t0 = cxlcr_mono_ns();
	struct cxlcr_pool pool;
	struct service s;
	struct verb_lease l = { 0 };
	if ((code = service_find(&pool, a.name, &s)))
		return code;
	if ((code = verb_begin(&pool, &s, "restore", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return code;
	}
	/* The restore's network and its CRIU, made now, before the freeze. */
	char link[16];
	container_link_name(pool.sb->uuid, s.region.generation, a.epoch + 1, link);
	const struct pod *pod = pod_current(false);
	const char *renamed = a.source_pool && strcmp(a.source_pool, pool.path) ? a.source_pool : NULL;
	struct criu_ahead ahead;
	int netns = -1;
	bool ready = pod && container_netns_prepare(link, ntohl(s.region.service_ip)) == 0 &&
		     (netns = container_netns_open(link)) >= 0;
	setenv("CXLCR_RECOVERY_POINT", "", 1); /* a checkpoint's restore (restore.c) */
	exec_adopt_orphans();
	if (ready && criu_restore_ahead(&ahead, pod->bridge, link, renamed, pool.fd, netns, a.files, a.n_files) < 0)
		ready = false;
	if (netns >= 0)
		close(netns);
	/* Without them the restore makes its own, later: slower, not wrong. */
	if (!ready)
		memset(&ahead, 0, sizeof(ahead));
	/* The source waits for this line (bounded) before it freezes, so
	 * that this host's work so far does not share the CPUs with its
	 * freeze; the JSON follows at the end. */
	printf("%s\n", ready ? SESSION_READIED : SESSION_UNREADY);
	fflush(stdout);
	uint64_t deadline = t0 + (uint64_t)criu_timeout_s() * 1000000000ull;
	if (await_images(&pool, a.name, a.epoch, &l, deadline) < 0) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		criu_ahead_abort(&ahead);
		container_netns_release(link, true);
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "restore of %s on %s: %s", a.name, this_host(), why);
	}
	uint64_t t1 = cxlcr_mono_ns(), bytes = 0;
	pid_t pid = 0;
	struct restore_parts parts = { 0 };
	int restored = restore_service(&pool, a.name, NULL, &l, &pid, link, &bytes, &parts, &ahead);
	criu_ahead_abort(&ahead); /* spent, or never used */
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (restored < 0)
		return fail(EXIT_FAIL, "restore of %s on %s failed: %s", a.name, this_host(), cxlcr_last_error());
	double ms = (double)(cxlcr_mono_ns() - t1) / 1e6;
	if (a.json) {
		struct json j;
		json_restore_begin(&j, a.name, pid);
		/* Before the checkpoint was there: readied and waiting. */
		json_double(&j, "ahead_ms", (double)(t1 - t0) / 1e6);
		json_bool(&j, "criu_ahead", ready);
		json_restore_end(&j, ms, &parts, bytes);
	}
	return EXIT_OK;
}
