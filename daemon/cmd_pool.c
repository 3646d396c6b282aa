/* cxlcr pool format | cxlcr pool info (cxlcr pool check: cmd_pool_check.c) */
#include <getopt.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/util.h"
#include "cli.h"

static void uuid_string(const uint8_t u[16], char out[37])
{
	static const int dash[] = { 4, 6, 8, 10 };
	int o = 0;
	for (int i = 0, d = 0; i < 16; i++) {
		if (d < 4 && i == dash[d]) {
			out[o++] = '-';
			d++;
		}
		o += snprintf(out + o, 3, "%02x", u[i]);
	}
	out[o] = 0;
}

static int count_regions(const struct cxlcr_pool *pool, uint64_t *bytes)
{
	int n = 0;
	*bytes = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		if (pool->table[i].state == CXLCR_REGION_LIVE) {
			n++;
			*bytes += pool->table[i].size;
		}
	}
	return n;
}

/* The memory the pool holds: a device all of it, a file its allocated
 * blocks (what a pool that gives memory back has not given). */
static uint64_t memory_held(const struct cxlcr_pool *pool)
{
	struct stat st;
	if (pool->devdax || fstat(pool->fd, &st) < 0)
		return pool->sb->size;
	return (uint64_t)st.st_blocks * 512;
}

static void print_pool(const struct cxlcr_pool *pool, bool json, const char *verb)
{
	char uuid[37], size[32], used_s[32];
	uint64_t used;
	int regions = count_regions(pool, &used);
	uuid_string(pool->sb->uuid, uuid);
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "path", pool->path);
		json_str(&j, "kind", pool->devdax ? "devdax" : "file");
		json_bool(&j, "devdax_rules", pool->dax_rules);
		json_bool(&j, "keeps_memory", pool->keeps_memory);
		json_str(&j, "uuid", uuid);
		json_u64(&j, "version", pool->sb->version);
		json_u64(&j, "size", pool->sb->size);
		json_u64(&j, "regions", (uint64_t)regions);
		json_u64(&j, "region_bytes", used);
		json_u64(&j, "memory_held", memory_held(pool));
		json_end(&j);
		return;
	}
	char held[32];
	printf("%s%s%s pool %s: %s, uuid %s, format %u, %d region%s (%s), %s of memory held%s\n", verb,
	       *verb ? " " : "", pool->devdax ? "devdax" : pool->dax_rules ? "emulated devdax" : "emulated",
	       pool->path, cxlcr_format_size(pool->sb->size, size, sizeof(size)), uuid, pool->sb->version,
	       regions, regions == 1 ? "" : "s", cxlcr_format_size(used, used_s, sizeof(used_s)),
	       cxlcr_format_size(memory_held(pool), held, sizeof(held)),
	       pool->keeps_memory && !pool->devdax ? ", keeps its memory" : "");
}

/*
 * How many processes of this host map the pool at path: a pool formatted
 * under a running service is no longer that service's heap, but it would go
 * on running on it. (Other hosts of a pod are not seen here.)
 */
static int mapped_by_processes(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return 0;
	DIR *proc = opendir("/proc");
	if (!proc)
		return 0;
	int count = 0;
	struct dirent *e;
	while ((e = readdir(proc))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		count += cxlcr_pid_maps_file(atoi(e->d_name), st.st_dev, st.st_ino, 0, 0);
	}
	closedir(proc);
	return count;
}

static int pool_format(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "size", required_argument, 0, 's' },
		{ "force", no_argument, 0, 'f' },        { "json", no_argument, 0, 'j' },
		{ "as-devdax", no_argument, 0, 'D' },    { "keep-memory", no_argument, 0, 'K' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	const char *device = cxlcr_pool_path();
	uint64_t size = 0;
	bool force = false, json = false;
	uint32_t flags = 0;
	int c;
	while ((c = getopt_long(argc, argv, "d:s:fjDKh", opts, NULL)) != -1) {
		switch (c) {
		case 'd': device = optarg; break;
		case 's':
			if (cxlcr_parse_size(optarg, &size) < 0 || size == 0)
				return fail(EXIT_USAGE, "--size %s: not a size (try 16G)", optarg);
			break;
		case 'f': force = true; break;
		case 'j': json = true; break;
		case 'D': flags |= CXLCR_POOL_F_AS_DEVDAX; break;
		case 'K': flags |= CXLCR_POOL_F_KEEP_MEMORY; break;
		case 'h':
			printf("usage: cxlcr pool format [--device PATH] [--size SIZE] [--force] [--as-devdax]\n"
			       "                         [--keep-memory] [--json]\n\n"
			       "Formats PATH (default $CXLCR_POOL or %s) as an empty pool.\n"
			       "PATH is a devdax device (/dev/daxX.Y, sized with libdaxctl) or a file on\n"
			       "tmpfs or hugetlbfs (an emulated pool, created if missing; default size %llu GiB).\n"
			       "A pool that still holds arenas is only formatted with --force.\n"
			       "--as-devdax: a file that keeps a devdax device's rules (never mapped\n"
			       "privately, so fork children are copies): runs the devdax paths without a device.\n"
			       "--keep-memory: a file that keeps its memory as a device does: what is cleared is\n"
			       "written with zeros, never given back, so new regions find their pages present\n"
			       "(in a VM that hands freed memory to its host, a first touch is a fault there).\n",
			       CXLCR_POOL_DEFAULT_PATH, CXLCR_POOL_DEFAULT_SIZE >> 30);
			return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return fail(EXIT_USAGE, "pool format: unexpected argument '%s'", argv[optind]);
	int busy = mapped_by_processes(device ? device : cxlcr_pool_path());
	if (busy > 0)
		return fail(EXIT_FAIL, "pool %s is in use: %d process%s of this host map it (stop the "
				       "services first; --force does not override this)", device ? device : cxlcr_pool_path(),
			    busy, busy == 1 ? "" : "es");
	struct cxlcr_pool pool;
	int rc = cxlcr_pool_format_as(device, size, force, flags, &pool);
	if (rc < 0)
		return fail(rc == CXLCR_POOL_UNSAFE ? EXIT_NO_POOL : EXIT_FAIL, "%s", cxlcr_last_error());
	print_pool(&pool, json, "formatted");
	cxlcr_pool_close(&pool);
	return EXIT_OK;
}

static int pool_info(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 && !json) {
		printf("usage: cxlcr pool info [--json]\n");
		return strcmp(argv[1], "--help") ? EXIT_USAGE : EXIT_OK;
	}
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	print_pool(&pool, json, "");
	cxlcr_pool_close(&pool);
	return EXIT_OK;
}

int cmd_pool(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "format"))
		return pool_format(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "info"))
		return pool_info(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "check"))
		return pool_check(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: cxlcr pool format [--device PATH] [--size SIZE] [--force] [--as-devdax]\n"
		       "                         [--keep-memory] [--json]\n"
		       "       cxlcr pool info [--json]\n"
		       "       cxlcr pool check [--json]\n");
		return EXIT_OK;
	}
	return fail(EXIT_USAGE, "usage: cxlcr pool format|info|check [options]");
}
