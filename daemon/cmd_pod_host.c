/*
 * cxlcr pod logs HOST | pod exec HOST -- CMD: looking into one emulated
 * host, as one would log in to a machine of a real pod. A host's files
 * (its daemon's log, its verbs' work directories) are in its own mount
 * namespace (emulation/hostfs.h), not on this machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/error.h"
#include "../emulation/hostfs.h"
#include "../emulation/hostgroup.h"
#include "../emulation/hostpid.h"
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

/*
 * Runs CMD as if on the host: in its mount, network, UTS and pid
 * namespaces (those of its init: emulation/hostpid.h; its /proc shows the
 * host's processes) and its cgroup, as a process logged in there would. A
 * pid namespace is entered by children only: CMD runs in a child, whose
 * exit status this one passes on, and which dies with it (as a command
 * run over ssh dies with its connection).
 */
int pod_exec(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: cxlcr pod exec HOST [--] CMD [ARGS...]\n\nRuns CMD on emulated host HOST: in its own "
		       "file system, network, host name and processes (its /proc).\n");
		return argc >= 2 ? EXIT_OK : EXIT_USAGE;
	}
	const char *host = argv[1];
	int first = argc > 2 && !strcmp(argv[2], "--") ? 3 : 2;
	if (first >= argc)
		return fail(EXIT_USAGE, "pod exec %s: no command given", host);
	const struct pod *pod = host_of_pod("exec", host);
	if (!pod)
		return EXIT_USAGE;
	int init = hostpid_open(pod, host);
	if (init < 0)
		return fail(EXIT_FAIL, "pod exec: host %s is not up (no init of its own runs: cxlcr pod up)", host);
	/* Entering the mount namespace moves to its root: the same directory
	 * as here is taken again there (the hosts share all but their own
	 * directories), if it exists. */
	char cwd[PATH_MAX];
	bool had_cwd = getcwd(cwd, sizeof(cwd)) != NULL;
	/* Joined from here: this process does not enter the pid namespace
	 * (its children do), so the host's /proc has no /proc/self for it. */
	hostgroup_join(pod, host); /* a pod host's: the memory host has none */
	if (setns(init, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWTIME) < 0)
		return fail(EXIT_FAIL, "pod exec: cannot enter the namespaces of %s: %s", host, strerror(errno));
	close(init);
	if (had_cwd && chdir(cwd) < 0 && chdir("/") < 0)
		return fail(EXIT_FAIL, "pod exec: no directory to run in on %s", host);
	/* As the host's daemon: its command line judges the pod as it does. */
	char index[16];
	snprintf(index, sizeof(index), "%d", pod->index);
	setenv("CXLCR_POD", index, 1);
	int alive[2];
	if (pipe2(alive, O_CLOEXEC) < 0)
		return fail(EXIT_FAIL, "pod exec: pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		/* Its parent is outside the namespace (getppid() says 0): the
		 * pipe's hang-up tells a parent that died before the prctl. */
		close(alive[1]);
		struct pollfd p = { .fd = alive[0], .events = POLLIN };
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || poll(&p, 1, 0) != 0)
			_exit(127);
		execvp(argv[first], argv + first);
		fprintf(stderr, "cxlcr: pod exec: %s: %s\n", argv[first], strerror(errno));
		_exit(127);
	}
	close(alive[0]);
	if (child < 0)
		return fail(EXIT_FAIL, "pod exec: fork: %s", strerror(errno));
	/* The terminal's signals are the command's: it decides. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	int status;
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return fail(EXIT_FAIL, "pod exec: waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
