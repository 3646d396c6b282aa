/*
 * A daemon watches its own kernel's log, and drains its host (drain.c)
 * when the kernel says the machine is failing: an oops or BUG, a soft
 * lockup or hung task, machine-check or memory-failure reports, CXL media
 * errors. Only records of the kernel facility count: anyone may write to
 * /dev/kmsg, and what a user writes there (facility LOG_USER and up) must
 * not move services.
 *
 * The watcher is a process of its own, forked by cxlcrd, that dies with
 * it. It reads /dev/kmsg (from its end: what was logged before the daemon
 * started is not news) or, in the emulated pod, a FIFO a test writes
 * records into ($CXLCR_KMSG, one per host: `pod up` with
 * $CXLCR_KMSG_DIR). A record is "PRIORITY,SEQUENCE,TIME,FLAGS;MESSAGE",
 * as /dev/kmsg gives it. A drain runs once per trigger; triggers that
 * come while one runs are folded into it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <linux/close_range.h>
#include <unistd.h>

#include "../common/error.h"
#include "../daemon/cli.h"
#include "recovery.h"

/* What in a kernel record means the machine is failing. */
static const char *const triggers[] = {
	"Oops", "BUG:", "kernel BUG", "soft lockup", "hung_task", "blocked for more than",
	"Machine check", "mce: [Hardware Error]", "Memory failure", "Hardware Error",
	"cxl_poison", "cxl_general_media", "cxl_dram", "media error",
};

const char *kmsg_trigger(const char *record)
{
	char *end;
	long prio = strtol(record, &end, 10);
	const char *msg = strchr(record, ';');
	if (end == record || *end != ',' || prio < 0 || !msg)
		return NULL;
	if (prio >> 3 != 0) /* LOG_KERN only */
		return NULL;
	for (size_t i = 0; i < sizeof(triggers) / sizeof(triggers[0]); i++)
		if (strstr(msg + 1, triggers[i]))
			return triggers[i];
	return NULL;
}

/* Runs `cxlcr host drain HOST`, logging what it says, and waits for it. */
static void drain(const char *host, kmsg_log_fn log)
{
	char bin[PATH_MAX];
	if (!path_near_exe("cxlcr", bin, sizeof(bin))) {
		log(LOG_ERR, "kernel log: cannot find the cxlcr command to drain %s", host);
		return;
	}
	int out[2];
	if (pipe2(out, O_CLOEXEC) < 0) {
		log(LOG_ERR, "kernel log: pipe: %s", strerror(errno));
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(out[1], 2);
		/* A failing machine may not last: what the drain cannot move in
		 * time goes by the hard-crash path (drain.c). */
		const char *bound = getenv("CXLCR_DRAIN_BOUND_MS");
		char dflt[16];
		snprintf(dflt, sizeof(dflt), "%d", DRAIN_BOUND_DEFAULT_MS);
		execl(bin, "cxlcr", "host", "drain", host, "--bound", bound && *bound ? bound : dflt, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	FILE *f = fdopen(out[0], "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		log(LOG_NOTICE, "kernel log: drain: %s", line);
	}
	if (f)
		fclose(f);
	else
		close(out[0]);
	int status = 0;
	if (pid > 0)
		waitpid(pid, &status, 0);
	bool done = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	log(done ? LOG_NOTICE : LOG_ERR, "kernel log: drain of %s %s", host,
	    done ? "done" : "left services behind (see above)");
}

/* Splits what was read into records (one a line; /dev/kmsg gives one a
 * read, a FIFO any number) and acts on the first trigger. */
static void watch(int fd, const char *host, kmsg_log_fn log)
{
	char buf[8192];
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && (errno == EINTR || errno == EPIPE))
			continue; /* EPIPE: /dev/kmsg overwrote records we had not read */
		if (n <= 0)
			return;
		have += (size_t)n;
		buf[have] = 0;
		bool drained = false;
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = 0;
			const char *why = kmsg_trigger(line);
			if (why && !drained) {
				log(LOG_WARNING, "kernel log: \"%.160s\" (%s): draining %s", strchr(line, ';') + 1, why,
				    host);
				drain(host, log);
				drained = true; /* the rest of this batch is the same failure */
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* a record longer than a buffer: not one of ours */
	}
}

int kmsg_watch_start(const char *path, const char *host, kmsg_log_fn log)
{
	if (!path || !*path)
		return 0;
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return cxlcr_error("kernel log watcher: fork: %s", strerror(errno));
	if (pid > 0)
		return 0;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	prctl(PR_SET_NAME, "cxlcrd-kmsg");
	/* Nothing of the daemon's but its log (stderr): its listening sockets,
	 * and above all the pipe it tells its starter it is ready on, whose
	 * reader would otherwise wait for us too. */
	close_range(3, ~0u, 0);
	/* O_RDWR on a FIFO: it never sees end-of-file when a writer closes. */
	struct stat st;
	bool fifo = stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
	int fd = open(path, (fifo ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0) {
		log(LOG_ERR, "kernel log: %s: %s (not watched)", path, strerror(errno));
		_exit(1);
	}
	if (!fifo)
		lseek(fd, 0, SEEK_END); /* /dev/kmsg: from now on */
	log(LOG_INFO, "kernel log: watching %s", path);
	watch(fd, host, log);
	_exit(0);
}
