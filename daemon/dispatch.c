/* The verbs of cxlcr, and running one here or on a pod host's daemon. */
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../control/owner_state.h"
#include "../recovery/recovery.h"
#include "cli.h"
#include "rpc.h"
#include "service_there.h"

#define CXLCR_VERSION "0.2.0"

const char *cli_host;

const char *this_host(void)
{
	return cli_host ? cli_host : cxlcr_host_name();
}

static char last_failure[CXLCR_ERROR_MAX];

int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_failure, sizeof(last_failure), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cxlcr: %s\n", last_failure);
	return code;
}

const char *fail_last(void)
{
	return last_failure;
}

int open_pool_or_fail(struct cxlcr_pool *pool)
{
	if (cxlcr_pool_open(pool, cxlcr_pool_path()) < 0)
		return fail(EXIT_NO_POOL, "%s", cxlcr_last_error());
	return 0;
}

int pool_path_abs(char *out, size_t len)
{
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	char abs[PATH_MAX];
	cxlcr_copy_field(out, len, realpath(pool.path, abs) ? abs : pool.path);
	cxlcr_pool_close(&pool);
	return 0;
}

static struct verb_args last_parsed; /* verb_args_last() */
static bool parsed;

bool parse_verb_args(int argc, char **argv, const char *usage, bool want_name,
		     const char *host_opt, struct verb_args *a, int *code)
{
	const struct option opts[] = { { host_opt ? host_opt : "host", required_argument, 0, 'H' },
				       { "json", no_argument, 0, 'j' },
				       { "quiet", no_argument, 0, 'q' },
				       { "lease", required_argument, 0, 'L' },
				       { "recovery-point", no_argument, 0, 'P' },
				       { "full", no_argument, 0, 'F' },
				       { "tier", no_argument, 0, 'T' },
				       { "hot-window", required_argument, 0, 'W' },
				       { "help", no_argument, 0, 'h' },
				       { 0, 0, 0, 0 } };
	int c;
	memset(a, 0, sizeof(*a));
	while ((c = getopt_long(argc, argv, host_opt ? "H:jqhL:PFTW:" : "jqhL:PFTW:", opts, NULL)) != -1) {
		switch (c) {
		case 'H': a->host = optarg; break;
		case 'j': a->json = true; break;
		case 'q': a->quiet = true; break;
		case 'L': a->lease = optarg; break;
		case 'P': a->recovery_point = true; break;
		case 'F': a->full = true; break;
		case 'T': a->tier = true; break;
		case 'W': {
			char *end;
			a->hot_window_s = strtod(optarg, &end);
			if (*end || !(a->hot_window_s > 0 && a->hot_window_s <= 60)) {
				*code = fail(EXIT_USAGE, "--hot-window %s: seconds, more than 0 and at most 60", optarg);
				return false;
			}
			break;
		}
		case 'h': printf("usage: %s\n", usage); *code = EXIT_OK; return false;
		default: *code = EXIT_USAGE; return false;
		}
	}
	if (want_name ? optind != argc - 1 : optind != argc) {
		*code = fail(EXIT_USAGE, "usage: %s", usage);
		return false;
	}
	if (want_name)
		a->name = argv[optind];
	last_parsed = *a;
	parsed = true;
	return true;
}

const struct verb_args *verb_args_last(void)
{
	return parsed ? &last_parsed : NULL;
}

static const struct command commands[] = {
	{ "pool", cmd_pool, "format or inspect the shared pool" },
	{ "pod", cmd_pod, "start or stop the emulated pod hosts" },
	{ "hosts", cmd_hosts, "list the pod's hosts and whether they live" },
	{ "host", cmd_host, "drain a host: migrate its services to the pod's other hosts" },
	{ "run", cmd_run, "start a service with its heap in a pool arena" },
	{ "ps", cmd_ps, "list services and their arenas" },
	{ "status", cmd_status, "show one service" },
	{ "checkpoint", cmd_checkpoint, "checkpoint a service into the pool" },
	{ "restore", cmd_restore_verb, "restore a service on a host from its checkpoint or recovery point" },
	{ "migrate", cmd_migrate, "move a running service to another host" },
	{ "fork", cmd_fork, "start copies of a running service on a host" },
	{ "stop", cmd_stop, "stop a service and free its arena" },
	{ "rm", cmd_rm, "free the arena of a service that has exited" },
	{ "snapshot", cmd_snapshot, "snapshot a running service for remote fork" },
	{ "huge-pages", cmd_huge_pages, "map a tracked service's heap with 2 MiB pages again" },
	{ "gc", cmd_gc, "remove what crashed verbs left behind" },
	{ "tier", cmd_tier, "start or stop the cold tier's memory server, or show it" },
	{ "fork-restore", cmd_fork_restore, "(internal) restore fork children on this host" },
	{ "restore-prepare", cmd_restore_prepare, "(internal) make a restore's network ahead of a migrate" },
	{ "restore-session", cmd_restore_session, "(internal) a migrate's destination: readied, then restores its checkpoint" },
	{ "owner-state", cmd_owner_state, "(internal) whether an arena's owner on this host runs" },
	{ "service-state", cmd_service_state, "(internal) whether services of this host run, and their memory" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: cxlcr <command> [options]\n\n"
		     "Moves and clones services whose heap lives in shared CXL memory.\n\n"
		     "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nEvery command takes --help and --json. The pool is $CXLCR_POOL, or %s.\n",
		CXLCR_POOL_DEFAULT_PATH);
}

int cli_dispatch(int argc, char **argv)
{
	if (argc < 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[0], "--version")) {
		char buf[PATH_MAX];
		const char *p;
		printf("cxlcr %s (pool format %u)\n", CXLCR_VERSION, CXLCR_POOL_VERSION);
		/* Which parts this binary would use: the build tree's or an
		 * installed prefix's (make install). */
		printf("preload: %s\n", (p = installed_preload(buf, sizeof(buf))) ? p : "(not found)");
		printf("criu plugin directory: %s\n", installed_plugin_dir());
		printf("daemon: %s\n", installed_daemon(buf, sizeof(buf)));
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[0], commands[i].name)) {
			optind = 0; /* getopt starts afresh for each verb */
			return commands[i].run(argc, argv);
		}
	}
	return fail(EXIT_USAGE, "unknown command '%s' (see cxlcr --help)", argv[0]);
}

int forward_to_host(const char *host, int argc, char **argv)
{
	fflush(NULL);
	/* The verb on the host may wait one deadline for another host and
	 * then end what it started: the command line waits for that too. */
	int rc = rpc_call_within(host, argc, argv, STDOUT_FILENO, STDERR_FILENO, 2 * rpc_timeout_ms() + 30000);
	if (rc < 0)
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	return rc;
}
