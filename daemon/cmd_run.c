/*
 * cxlcr run: start a service with its heap in a new arena of the pool.
 *
 * The service is started detached (its own session, reparented to init),
 * with stdin on /dev/null, stdout and stderr in a log file, and no other
 * inherited fds: CRIU refuses to checkpoint a process holding stray pipes or
 * files of another mount. `cxlcr run` returns only once the preload inside
 * the service has attached the arena (it reports through a pipe), or with
 * the reason it could not: a service never runs without its shared heap.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tracking/track.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "cli.h"
#include "config.h"
#include "host_files.h"
#include "container.h"
#include "service_there.h"

#define DEFAULT_ARENA_SIZE (1ull << 30)
#define READY_TIMEOUT_MS   60000
#define READY_FD           3
#define SERVICE_NAME_MAX   40 /* leaves room for a checkpoint's ".EPOCH" */

/*
 * A forked child sees the arena as the parent changes it (MAP_SHARED), not
 * as it was at fork time. Redis forks for RDB snapshots and AOF rewrites;
 * such a child would save an inconsistent data set. Returns true when the
 * command line leaves fork-based persistence on.
 */
static bool redis_forks_for_persistence(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strncmp(base, "redis-server", 12) != 0)
		return false;
	bool save = true, aof = false; /* Redis 7 defaults */
	int i = 1;
	if (i < argc && argv[i][0] != '-') {
		FILE *f = fopen(argv[i], "r");
		char line[1024];
		while (f && fgets(line, sizeof(line), f)) {
			char key[64], val[512] = "";
			if (sscanf(line, " %63s %511[^\n]", key, val) < 1 || key[0] == '#')
				continue;
			if (!strcasecmp(key, "save"))
				save = strcmp(val, "\"\"") && strcmp(val, "''") && val[0];
			else if (!strcasecmp(key, "appendonly"))
				aof = !strncasecmp(val, "yes", 3);
		}
		if (f)
			fclose(f);
		i++;
	}
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--save"))
			save = i + 1 < argc && argv[i + 1][0] && argv[i + 1][0] != '-';
		else if (!strcmp(argv[i], "--appendonly") && i + 1 < argc)
			aof = !strcasecmp(argv[i + 1], "yes");
	}
	return save || aof;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cxlcr run --name NAME [--host HOST] [--arena SIZE] [--arena-max SIZE] [--log FILE]\n"
		"                 [--env NAME=VALUE]... [--recovery-interval MS] [--json] -- CMD [ARGS...]\n\n"
		"Starts CMD detached, with its heap in a new arena NAME of the pool\n"
		"($CXLCR_POOL or %s). Default arena size %llu GiB; log in %s/NAME.log\n"
		"(a pod's services: in podN/ there).\n"
		"A full arena grows in extents up to --arena-max (default: as far as the\n"
		"pool can give); only then do allocations fall back to glibc.\n"
		"With --host, it runs on that pod host in its own PID, network and UTS\n"
		"namespaces, with its own address on the pod network (cxlcr status shows it).\n"
		"--env adds to CMD's environment (a pod host's daemon starts it with a clean one).\n"
		"--recovery-interval MS: its host's daemon takes a recovery point (an\n"
		"incremental snapshot and dump) every MS milliseconds; 0: none. Default: the\n"
		"host daemon's recovery_interval (1000) for a service of a pod host, else 0.\n"
		"CMD runs in a directory of its own, /run/cxlcr/wd/NAME on its host (a tmpfs;\n"
		"name files in ARGS by absolute paths).\n"
		"Returns once the arena is attached, or fails with the reason.\n",
		CXLCR_POOL_DEFAULT_PATH, DEFAULT_ARENA_SIZE >> 30, HOST_LOG_DIR);
}

/* What the service process needs to become the service. */
#define RUN_ENV_MAX 64

struct launch {
	int ready;              /* write end of the pipe the preload reports on */
	const char *log, *preload, *pool, *name;
	uint64_t arena, arena_max; /* arena_max 0: no limit but the pool */
	char **cmd;
	char **env;             /* NAME=VALUE, NULL-terminated */
};

/* In the service process: detach, set up stdio and the preload's
 * environment, and exec. Never returns. */
static void exec_service(void *arg)
{
	const struct launch *l = arg;
	setsid();
	int in = open("/dev/null", O_RDONLY);
	int out = open(l->log, O_WRONLY | O_CREAT | O_APPEND, 0640); /* a service's output is its own */
	if (in < 0 || out < 0) {
		dprintf(l->ready, "error: cannot open %s: %s\n", in < 0 ? "/dev/null" : l->log,
			strerror(errno));
		_exit(127);
	}
	dup2(in, 0);
	dup2(out, 1);
	dup2(out, 2);
	dup2(l->ready, READY_FD);
	close_range(READY_FD + 1, ~0u, 0);
	/* A service runs in a directory of its own on this host's /run
	 * (host_files.h: what CRIU's parasite does there in every dump), not
	 * in whoever ran the command's: what it writes where it stands
	 * (Redis's SAVE) lands there. A program named by a relative path is
	 * found first. */
	static char program[PATH_MAX];
	if (strchr(l->cmd[0], '/') && l->cmd[0][0] != '/' && realpath(l->cmd[0], program))
		l->cmd[0] = program;
	char wd[PATH_MAX];
	int wd_fd = host_wd_open(l->name, wd, sizeof(wd));
	if (wd_fd < 0 || fchdir(wd_fd) < 0) {
		dprintf(l->ready, "error: %s\n", wd_fd < 0 ? cxlcr_last_error() : strerror(errno));
		_exit(127);
	}
	close(wd_fd);
	char fd_s[16], size_s[32];
	snprintf(fd_s, sizeof(fd_s), "%d", READY_FD);
	snprintf(size_s, sizeof(size_s), "%llu", (unsigned long long)l->arena);
	setenv("LD_PRELOAD", l->preload, 1);
	setenv("CXLCR_POOL", l->pool, 1);
	setenv("CXLCR_ARENA", l->name, 1);
	setenv("CXLCR_ARENA_SIZE", size_s, 1);
	if (l->arena_max) {
		char max_s[32];
		snprintf(max_s, sizeof(max_s), "%llu", (unsigned long long)l->arena_max);
		setenv("CXLCR_ARENA_MAX", max_s, 1);
	} else {
		unsetenv("CXLCR_ARENA_MAX");
	}
	setenv("CXLCR_READY_FD", fd_s, 1);
	unsetenv("CXLCR_ARENA_OWNER");
	unsetenv(CXLCR_HOST_GUARD_ENV); /* the daemon's, for its workers (common/pool.h) */
	for (char **e = l->env; e && *e; e++)
		putenv(*e);
	execvp(l->cmd[0], l->cmd);
	dprintf(READY_FD, "error: cannot run %s: %s\n", l->cmd[0], strerror(errno));
	_exit(127);
}

/* Plain: a detached process of this machine, nobody's child but init's. */
static pid_t launch_detached(struct launch *l)
{
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return cxlcr_error("pipe: %s", strerror(errno));
	pid_t child = fork();
	if (child == 0) {
		pid_t service = fork();
		if (service == 0)
			exec_service(l);
		/* Its pid, so that a service that never reports can be ended. */
		if (write(report[1], &service, sizeof(service)) != sizeof(service))
			_exit(1);
		_exit(0);
	}
	close(report[1]);
	pid_t service = -1;
	if (child < 0 || read(report[0], &service, sizeof(service)) != sizeof(service) || service < 0)
		service = cxlcr_error("fork: %s", strerror(errno));
	close(report[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
	return service;
}

/* Waits for the preload's "ok PID" or "error: ..." line. */
static int wait_ready(int fd, int *pid, char *msg, size_t len)
{
	size_t got = 0;
	msg[0] = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int rc = poll(&p, 1, READY_TIMEOUT_MS);
		if (rc == 0) {
			snprintf(msg, len, "the service did not report its arena within %d s",
				 READY_TIMEOUT_MS / 1000);
			return -1;
		}
		ssize_t n = read(fd, msg + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		msg[got] = 0;
		if (strchr(msg, '\n'))
			break;
	}
	char *nl = strchr(msg, '\n');
	if (nl)
		*nl = 0;
	if (sscanf(msg, "ok %d", pid) == 1)
		return 0;
	if (!strncmp(msg, "error: ", 7))
		memmove(msg, msg + 7, strlen(msg + 7) + 1);
	else
		snprintf(msg, len, "the service exited before attaching its arena");
	return -1;
}

/* In a pod: pid 1 of its own namespaces, with its own address. */
static pid_t launch_in_pod(struct cxlcr_pool *pool, const struct cxlcr_region *region,
			   struct launch *l, char *link, uint32_t *ip)
{
	const struct pod *pod = pod_current(false);
	if (!pod)
		return -1;
	container_link_name(pool->sb->uuid, region->generation, 0, link);
	if (cxlcr_region_assign_net(pool, region->generation, pod_service_first(pod), POD_SERVICE_COUNT,
				    link, ip) < 0)
		return -1;
	return container_start(pod, l->name, link, *ip, exec_service, l);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, 0, 'n' }, { "arena", required_argument, 0, 'a' },
		{ "log", required_argument, 0, 'l' },  { "json", no_argument, 0, 'j' },
		{ "host", required_argument, 0, 'H' }, { "env", required_argument, 0, 'e' },
		{ "arena-max", required_argument, 0, 'm' },
		{ "recovery-interval", required_argument, 0, 'R' },
		{ "help", no_argument, 0, 'h' },       { 0, 0, 0, 0 }
	};
	static char *env[RUN_ENV_MAX + 1];
	int nenv = 0;
	const char *name = NULL, *log = NULL, *host = NULL;
	uint64_t arena = DEFAULT_ARENA_SIZE, arena_max = 0;
	long recovery_ms = -1; /* not given */
	bool json = false;
	int c;
	while ((c = getopt_long(argc, argv, "+n:a:m:l:H:e:R:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'a':
			if (cxlcr_parse_size(optarg, &arena) < 0 || arena < CXLCR_HEAP_ALIGN)
				return fail(EXIT_USAGE, "--arena %s: not a size of at least %llu MiB", optarg,
					    CXLCR_HEAP_ALIGN >> 20);
			break;
		case 'm':
			if (cxlcr_parse_size(optarg, &arena_max) < 0 || arena_max < CXLCR_HEAP_ALIGN)
				return fail(EXIT_USAGE, "--arena-max %s: not a size of at least %llu MiB", optarg,
					    CXLCR_HEAP_ALIGN >> 20);
			break;
		case 'R': {
			char *end;
			recovery_ms = strtol(optarg, &end, 10);
			if (*end || recovery_ms < 0 || recovery_ms > 86400000)
				return fail(EXIT_USAGE, "--recovery-interval %s: not a number of milliseconds", optarg);
			break;
		}
		case 'l': log = optarg; break;
		case 'H': host = optarg; break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=')
				return fail(EXIT_USAGE, "--env %s: not NAME=VALUE", optarg);
			if (nenv == RUN_ENV_MAX)
				return fail(EXIT_USAGE, "run: more than %d --env", RUN_ENV_MAX);
			env[nenv++] = optarg;
			break;
		case 'j': json = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (!name)
		return fail(EXIT_USAGE, "run: --name NAME is required (see cxlcr run --help)");
	if (arena_max && arena_max < arena)
		return fail(EXIT_USAGE, "run: --arena-max %llu MiB is smaller than --arena %llu MiB",
			    (unsigned long long)(arena_max >> 20), (unsigned long long)(arena >> 20));
	if (!cxlcr_valid_name(name))
		return fail(EXIT_USAGE, "run: invalid name '%s' (letters, digits, '.', '_', '-')", name);
	if (optind >= argc)
		return fail(EXIT_USAGE, "run: no command given (cxlcr run --name %s -- CMD ...)", name);
	char **cmd = argv + optind;
	int cmdc = argc - optind;
	if (strlen(name) > SERVICE_NAME_MAX)
		return fail(EXIT_USAGE, "run: name '%s' is longer than %d characters", name, SERVICE_NAME_MAX);
	/* A pod host's daemon starts the service there. */
	if (host && !cli_host)
		return forward_to_host(host, argc, argv);
	if (host && strcmp(host, cli_host))
		return fail(EXIT_USAGE, "run: this is host %s, not %s", cli_host, host);
	/* A pod host's service takes recovery points unless told otherwise:
	 * its daemon's recovery_interval (cxlcrd.c passes it on). */
	if (recovery_ms < 0) {
		const char *v = cli_host ? getenv(RECOVERY_INTERVAL_ENV) : NULL;
		recovery_ms = v ? daemon_config_interval(v) : 0;
		if (recovery_ms < 0)
			recovery_ms = cli_host ? DAEMON_RECOVERY_INTERVAL_DEFAULT_MS : 0;
	}

	char preload_buf[PATH_MAX], log_buf[PATH_MAX], pool_abs[PATH_MAX];
	const char *preload = installed_preload(preload_buf, sizeof(preload_buf));
	if (!preload || access(preload, R_OK) < 0)
		return fail(EXIT_FAIL, "cannot find libcxlcr-preload.so (set CXLCR_PRELOAD)");
	if (!log) {
		/* A pod's services log in a directory of the pod's own: two pods
		 * of one machine may run services of the same name. */
		const struct pod *pod = cli_host ? pod_current(false) : NULL;
		char dir[64];
		mkdir(HOST_LOG_DIR, 0755);
		if (pod) {
			snprintf(dir, sizeof(dir), "%s/pod%d", HOST_LOG_DIR, pod->index);
			mkdir(dir, 0750);
		} else {
			snprintf(dir, sizeof(dir), "%s", HOST_LOG_DIR);
		}
		snprintf(log_buf, sizeof(log_buf), "%s/%s.log", dir, name);
		log = log_buf;
	}

	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	if (!realpath(pool.path, pool_abs))
		cxlcr_copy_field(pool_abs, sizeof(pool_abs), pool.path);
	struct cxlcr_region old;
	if (cxlcr_region_find(&pool, CXLCR_KIND_ARENA, name, &old)) {
		struct service s;
		service_load_asking(&pool, &old, &s); /* one of another host: its host says */
		cxlcr_pool_close(&pool);
		if (s.running)
			return fail(EXIT_FAIL, "service '%s' is already running (pid %d on %.*s)", name,
				    s.region.owner_pid, (int)CXLCR_HOST_MAX, s.region.owner_host);
		return fail(EXIT_FAIL, "an arena named '%s' is left from an earlier run (%s); "
				       "free it with `cxlcr rm %s`", name, s.state, name);
	}

	/* The command line is recorded for `cxlcr ps`. */
	char command[CXLCR_COMMAND_MAX] = "";
	for (int i = 0; i < cmdc; i++) {
		size_t used = strlen(command);
		snprintf(command + used, sizeof(command) - used, "%s%s", i ? " " : "",
			 cmd[i][0] ? cmd[i] : "''");
	}
	struct cxlcr_region region;
	if (cxlcr_region_alloc_owned(&pool, CXLCR_KIND_ARENA, name, arena + CXLCR_ARENA_HEAP_OFFSET, 0, "", command,
				     &region) < 0) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	}
	if (redis_forks_for_persistence(cmdc, cmd))
		fprintf(stderr, "cxlcr: warning: %s keeps fork-based persistence (save/appendonly): its "
				"fork child sees the live arena, not a snapshot; pass --save '' "
				"--appendonly no\n", cmd[0]);

	uint64_t t0 = cxlcr_mono_ns();
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		cxlcr_region_free(&pool, region.generation);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "pipe: %s", strerror(errno));
	}
	struct launch l = { pipefd[1], log, preload, pool_abs, name, arena, arena_max, cmd, env };
	fflush(NULL);
	char link[16] = "";
	uint32_t ip = 0;
	pid_t pid = cli_host ? launch_in_pod(&pool, &region, &l, link, &ip) : launch_detached(&l);
	close(pipefd[1]);
	int reported = 0;
	char msg[CXLCR_ERROR_MAX];
	rc = pid < 0 ? (snprintf(msg, sizeof(msg), "%s", cxlcr_last_error()), -1)
		     : wait_ready(pipefd[0], &reported, msg, sizeof(msg));
	close(pipefd[0]);
	/* In a pod the preload sees itself as pid 1: record its real pid. */
	if (rc == 0 && cli_host &&
	    cxlcr_region_set_owner(&pool, region.generation, pid, this_host(), NULL) < 0) {
		snprintf(msg, sizeof(msg), "%s", cxlcr_last_error());
		rc = -1;
	}
	if (rc < 0) {
		/* Whatever started must not run on without its arena. */
		if (pid > 0)
			kill(pid, SIGKILL);
		struct cxlcr_region r;
		if (cxlcr_region_find(&pool, CXLCR_KIND_ARENA, name, &r) && r.owner_pid > 1 && pid_alive(r.owner_pid))
			kill(r.owner_pid, SIGKILL);
		cxlcr_region_free(&pool, region.generation);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "%s did not start: %s (log: %s)", name, msg, log);
	}
	/* Its writes are tracked from now on (snapshots copy only those). */
	struct cxlcr_region now;
	if (cxlcr_region_get(&pool, region.generation, &now) == 0)
		cxlcr_tracker_start(&pool, &now);
	/* Its host's daemon takes its recovery points (recovery/points.c). */
	if (recovery_ms > 0) {
		struct cxlcr_arena_header *h = cxlcr_pool_map(&pool, region.offset, sizeof(*h), 0, 0);
		if (h) {
			__atomic_store_n(&h->recovery_interval_ms, (uint32_t)recovery_ms, __ATOMIC_RELEASE);
			cxlcr_publish(&h->recovery_interval_ms, sizeof(h->recovery_interval_ms));
			munmap(h, sizeof(*h));
		}
	}
	double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", name);
		json_i64(&j, "pid", pid);
		json_str(&j, "host", this_host());
		char ip_s[16];
		if (ip)
			json_str(&j, "address", ip_string(ip, ip_s));
		else
			json_null_value(&j, "address");
		json_u64(&j, "arena_size", arena);
		json_u64(&j, "arena_offset", region.offset);
		json_str(&j, "log", log);
		json_double(&j, "total_ms", ms);
		json_end(&j);
	} else {
		char size[32];
		char ip_s[16];
		printf("%s started%s%s%s%s: pid %d, arena %s at pool offset %llu, log %s\n", name,
		       cli_host ? " on " : "", cli_host ? cli_host : "", ip ? " at " : "",
		       ip ? ip_string(ip, ip_s) : "", pid, cxlcr_format_size(arena, size, sizeof(size)),
		       (unsigned long long)region.offset, log);
	}
	cxlcr_pool_close(&pool);
	return EXIT_OK;
}
