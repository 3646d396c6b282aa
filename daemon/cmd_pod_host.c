/*
 * cxlcr pod logs HOST | pod exec HOST -- CMD: looking into one emulated
 * host, as one would log in to a machine of a real pod. A host's files
 * (its daemon's log, its verbs' work directories) are in its own mount
 * namespace (emulation/hostfs.h), not on this machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../emulation/hostfs.h"
#include "cli.h"
#include "pod.h"

/* The pod of this pool and a host name of the form hI, or the cold
 * tier's memory host; else one line. */
static const struct pod *host_of_pod(const char *verb, const char *host)
{
	const struct pod *pod = pod_current(false);
	int index, end = 0;
	if (!pod) {
		fail(EXIT_FAIL, "no pod is up for this pool (cxlcr pod up)");
		return NULL;
	}
	if (strcmp(host, TIER_MEM_HOST) &&
	    (sscanf(host, "h%d%n", &index, &end) != 1 || host[end] || index < 0)) {
		fail(EXIT_USAGE, "pod %s: %s is not a host of this pod", verb, host);
		return NULL;
	}
	return pod;
}

/* Prints one of the host's logs, in the host's /var/log/cxlcr: by default
 * its daemon's (its stderr), or the memory server's on the memory host. */
int pod_logs(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: cxlcr pod logs HOST [LOG]\n\n"
		       "Prints a log of emulated host HOST, from its own %s: by default its daemon's\n"
		       "(cxlcrd), on memory host %s its memory server's (%s). LOG names another:\n"
		       "pager (copy-mode children's pagers), prefetch (fork prefetches), cxlcrd.\n",
		       HOST_LOG_DIR, TIER_MEM_HOST, TIER_MEMD_LOG);
		return argc == 2 || argc == 3 ? EXIT_OK : EXIT_USAGE;
	}
	const char *host = argv[1];
	const char *name = argc == 3 ? argv[2] : strcmp(host, TIER_MEM_HOST) ? "cxlcrd" : TIER_MEMD_LOG;
	if (!*name || strchr(name, '/') || name[0] == '.')
		return fail(EXIT_USAGE, "pod logs: '%s' is not the name of a log (pager, prefetch, cxlcrd, ...)", name);
	const struct pod *pod = host_of_pod("logs", host);
	if (!pod)
		return EXIT_USAGE;
	if (hostfs_enter(pod, host) < 0)
		return fail(EXIT_FAIL, "pod logs: %s", cxlcr_last_error());
	char path[256];
	snprintf(path, sizeof(path), "%s/%s.log", HOST_LOG_DIR, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(EXIT_FAIL, "pod logs: host %s has no %s: %s", host, path, strerror(errno));
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			break;
	close(fd);
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

/* Runs CMD as if on the host: in its mount, network and UTS namespaces. */
int pod_exec(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: cxlcr pod exec HOST [--] CMD [ARGS...]\n\nRuns CMD on emulated host HOST: in its own "
		       "file system, network and host name.\n");
		return argc >= 2 ? EXIT_OK : EXIT_USAGE;
	}
	const char *host = argv[1];
	int first = argc > 2 && !strcmp(argv[2], "--") ? 3 : 2;
	if (first >= argc)
		return fail(EXIT_USAGE, "pod exec %s: no command given", host);
	const struct pod *pod = host_of_pod("exec", host);
	if (!pod)
		return EXIT_USAGE;
	char name[32], ns[64];
	pod_host_netns(pod, host, name, sizeof(name));
	snprintf(ns, sizeof(ns), "/run/netns/%s", name);
	int net = open(ns, O_RDONLY | O_CLOEXEC);
	if (net < 0)
		return fail(EXIT_FAIL, "pod exec: host %s is not up (%s: %s)", host, ns, strerror(errno));
	if (hostfs_enter(pod, host) < 0)
		return fail(EXIT_FAIL, "pod exec: %s", cxlcr_last_error());
	if (setns(net, CLONE_NEWNET) < 0 || unshare(CLONE_NEWUTS) < 0 || sethostname(host, strlen(host)) < 0)
		return fail(EXIT_FAIL, "pod exec: cannot enter the namespaces of %s: %s", host, strerror(errno));
	close(net);
	/* As the host's daemon: its command line judges the pod as it does. */
	char index[16];
	snprintf(index, sizeof(index), "%d", pod->index);
	setenv("CXLCR_POD", index, 1);
	execvp(argv[first], argv + first);
	return fail(127, "pod exec: %s: %s", argv[first], strerror(errno));
}
