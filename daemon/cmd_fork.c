/*
 * cxlcr fork NAME --to HOST [--count N] [--json]: clones of a running
 * service on a pod host (fork.h). The command line is a client of the fork
 * API like any other (include/cxlcr/cxlcr.h): it asks the daemon of the
 * parent's host on that host's Unix API socket, where being root is the
 * credential.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/util.h"
#include "../include/cxlcr/cxlcr.h"
#include "api.h"
#include "cli.h"
#include "rpc.h"

#define FORK_USAGE "cxlcr fork NAME --to HOST [--count N] [--mode share|copy] [--fetch background|eager|lazy] [--json]"

static void print_result(const char *name, const char *to, const struct cxlcr_fork_result *r,
			 bool json)
{
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", name);
		json_str(&j, "to", to);
		json_array_begin(&j, "children");
		for (unsigned i = 0; i < r->count; i++) {
			json_object_begin(&j, NULL);
			json_str(&j, "name", r->child[i].name);
			json_str(&j, "host", r->child[i].host);
			json_str(&j, "address", r->child[i].address);
			json_i64(&j, "pid", r->child[i].pid);
			json_double(&j, "restore_ms", r->child[i].restore_ms);
			json_u64(&j, "prefetched_pages", r->child[i].prefetched_pages);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_double(&j, "freeze_ms", r->freeze_ms);
		json_double(&j, "snapshot_ms", r->snapshot_ms);
		json_double(&j, "restore_ms", r->restore_ms);
		json_double(&j, "total_ms", r->total_ms);
		json_u64(&j, "image_bytes", r->image_bytes);
		json_u64(&j, "snapshot_bytes", r->snapshot_bytes);
		json_str(&j, "mode", r->mode);
		json_end(&j);
		return;
	}
	bool copy = !strcmp(r->mode, "copy");
	for (unsigned i = 0; i < r->count; i++)
		if (copy)
			printf("%s on %s at %s, pid %d (restored and its pages copied in %.1f ms)\n",
			       r->child[i].name, r->child[i].host, r->child[i].address, r->child[i].pid,
			       r->child[i].restore_ms);
		else
			printf("%s on %s at %s, pid %d (restored in %.1f ms, %llu changed pages being prefetched)\n",
			       r->child[i].name, r->child[i].host, r->child[i].address, r->child[i].pid,
			       r->child[i].restore_ms, r->child[i].prefetched_pages);
	char images[32], pages[32];
	printf("%s forked %u times onto %s in %.1f ms (restore %.1f ms), %s of images", name, r->count, to,
	       r->total_ms, r->restore_ms, cxlcr_format_size(r->image_bytes, images, sizeof(images)));
	/* A fork from the newest snapshot froze nothing; a first one took it. */
	if (r->freeze_ms > 0)
		printf("; a new snapshot: %s of heap, %s frozen %.1f ms\n",
		       cxlcr_format_size(r->snapshot_bytes, pages, sizeof(pages)), name, r->freeze_ms);
	else
		printf("; from %s's newest snapshot (cxlcr snapshot %s takes a new one)\n", name, name);
}

int cmd_fork(int argc, char **argv)
{
	static const struct option opts[] = { { "to", required_argument, 0, 't' },
					      { "count", required_argument, 0, 'n' },
					      { "mode", required_argument, 0, 'm' },
					      { "fetch", required_argument, 0, 'f' },
					      { "json", no_argument, 0, 'j' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *to = NULL;
	unsigned long count = 1;
	bool json = false;
	const char *mode = NULL, *fetch = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "t:n:m:f:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (strcmp(optarg, "background") && strcmp(optarg, "eager") && strcmp(optarg, "lazy"))
				return fail(EXIT_USAGE, "--fetch %s: background, eager or lazy", optarg);
			fetch = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "share") && strcmp(optarg, "copy"))
				return fail(EXIT_USAGE, "--mode %s: share or copy", optarg);
			mode = optarg;
			break;
		case 't': to = optarg; break;
		case 'n': {
			char *end;
			count = strtoul(optarg, &end, 10);
			if (*end || optarg[0] == '-' || count < 1 || count > CXLCR_API_MAX_CHILDREN)
				return fail(EXIT_USAGE, "--count %s: an integer from 1 to %d", optarg,
					    CXLCR_API_MAX_CHILDREN);
			break;
		}
		case 'j': json = true; break;
		case 'h':
			printf("usage: %s\n\n"
			       "Starts N (default 1) children of the running service NAME on pod host\n"
			       "HOST: services of their own named NAME.1, NAME.2, ..., each with its own\n"
			       "address, that begin with NAME's heap as it was at the fork and share its\n"
			       "pages in the pool until they write them (--mode share, the default on a\n"
			       "file pool), or each gets its own copy of the heap, which a pager fills\n"
			       "from the snapshot (--mode copy, the default and the only way on a devdax\n"
			       "pool or for a tiered snapshot). In copy mode --fetch says how: the hot\n"
			       "pages before the child runs and the rest while it runs (background, the\n"
			       "default), all before (eager), or each on its first touch (lazy).\n"
			       "NAME goes on running.\n"
			       "Prints one line per child (name, host, address, pid) and the timings;\n"
			       "--json: one object with \"children\" and freeze_ms, snapshot_ms,\n"
			       "restore_ms, total_ms, image_bytes, snapshot_bytes, mode.\n"
			       "Programs do the same through the fork API (libcxlcr, <cxlcr/cxlcr.h>).\n",
			       FORK_USAGE);
			return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || !to)
		return fail(EXIT_USAGE, "usage: %s", FORK_USAGE);
	const char *name = argv[optind];
	if (!cxlcr_valid_name(to))
		return fail(EXIT_USAGE, "--to %s: not a host name", to);

	char owner[CXLCR_HOST_MAX];
	int rc = service_pod_host(name, owner);
	if (rc)
		return rc;
	/* The fork API's socket of the owner's daemon, if this machine has
	 * it; else (another machine's daemon, or no /run here) the command
	 * line hands the verb to that daemon over the control protocol, and
	 * the daemon asks its own fork API. */
	char endpoint[128];
	struct stat st;
	api_socket_path(owner, endpoint, sizeof(endpoint));
	if (!cli_host && (stat(endpoint, &st) < 0 || !S_ISSOCK(st.st_mode)))
		return forward_to_host(owner, argc, argv);
	struct cxlcr_api *api = cxlcr_api_connect(endpoint, "");
	if (!api)
		return fail(EXIT_FAIL, "host %s: %s", owner, cxlcr_api_error(NULL));
	static struct cxlcr_fork_result result;
	if (cxlcr_api_fork_mode(api, name, to, (unsigned)count, mode, fetch, &result) < 0) {
		rc = fail(EXIT_FAIL, "%s", cxlcr_api_error(api));
		cxlcr_api_close(api);
		return rc;
	}
	cxlcr_api_close(api);
	print_result(name, to, &result, json);
	return EXIT_OK;
}
