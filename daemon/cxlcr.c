/*
 * cxlcr: the command-line client of cxlcr. Each verb lives in its own
 * cmd_*.c file; this file dispatches and holds what they all share.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "cli.h"

#define CXLCR_VERSION "0.1.0"

static const struct command commands[] = {
	{ "pool", cmd_pool, "format or inspect the shared pool" },
	{ "run", cmd_run, "start a service with its heap in a pool arena" },
	{ "ps", cmd_ps, "list services and their arenas" },
	{ "status", cmd_status, "show one service" },
	{ "stop", cmd_stop, "stop a service and free its arena" },
	{ "rm", cmd_rm, "free the arena of a service that has exited" },
};

int fail(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("cxlcr: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int open_pool_or_fail(struct cxlcr_pool *pool)
{
	if (cxlcr_pool_open(pool, cxlcr_pool_path()) < 0)
		return fail(EXIT_NO_POOL, "%s", cxlcr_last_error());
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: cxlcr <command> [options]\n\n"
		     "Moves and clones services whose heap lives in shared CXL memory.\n\n"
		     "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nEvery command takes --help and --json. The pool is $CXLCR_POOL, or %s.\n",
		CXLCR_POOL_DEFAULT_PATH);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("cxlcr %s (pool format %u)\n", CXLCR_VERSION, CXLCR_POOL_VERSION);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	return fail(EXIT_USAGE, "unknown command '%s' (see cxlcr --help)", argv[1]);
}
