/* A host's own files that a checkpoint names: see host_files.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../rebase/rebase.h"
#include "host_files.h"

struct walk {
	struct host_files *hf;
	int first_fd;
	int failed;
};

/* Opens "/path" here (its directories made as `cxlcr run` makes them). */
static int open_here(const char *path)
{
	char abs[PATH_MAX];
	snprintf(abs, sizeof(abs), "/%s", path);
	for (char *p = abs + strlen(HOST_LOG_DIR) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdir(abs, 0750) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return open(abs, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
}

static void add(const char *path, void *arg)
{
	struct walk *w = arg;
	struct host_files *hf = w->hf;
	if (w->failed)
		return;
	for (int i = 0; i < hf->n; i++) {
		const char *known = strchr(hf->arg[i], ':') + 1;
		if (!strcmp(known, path))
			return; /* one file, several descriptions */
	}
	if (hf->n == HOST_FILES_MAX) {
		w->failed = cxlcr_error("the checkpoint names more than %d files under %s", HOST_FILES_MAX, HOST_LOG_DIR);
		return;
	}
	int fd = open_here(path);
	if (fd < 0) {
		w->failed = cxlcr_error("cannot open this host's /%s for the restore: %s", path, strerror(errno));
		return;
	}
	hf->fd[hf->n] = fd;
	snprintf(hf->arg[hf->n], sizeof(hf->arg[hf->n]), "fd[%d]:%s", w->first_fd + hf->n, path);
	hf->n++;
}

int host_files_open(const char *dir, int first_fd, struct host_files *hf)
{
	hf->n = 0;
	struct walk w = { hf, first_fd, 0 };
	if (rebase_files_under(dir, HOST_LOG_DIR "/", add, &w) < 0 || w.failed < 0) {
		host_files_close(hf);
		return -1;
	}
	return 0;
}

int host_files_open_paths(char *const *paths, int n, int first_fd, struct host_files *hf)
{
	hf->n = 0;
	struct walk w = { hf, first_fd, 0 };
	for (int i = 0; i < n && !w.failed; i++) {
		const char *rel = paths[i] + (paths[i][0] == '/');
		if (strncmp(rel, HOST_LOG_DIR + 1, strlen(HOST_LOG_DIR) - 1) || rel[strlen(HOST_LOG_DIR) - 1] != '/' ||
		    strstr(rel, "/../"))
			w.failed = cxlcr_error("%s is not a file under %s", paths[i], HOST_LOG_DIR);
		else
			add(rel, &w);
	}
	if (w.failed < 0) {
		host_files_close(hf);
		return -1;
	}
	return 0;
}

struct same {
	const struct host_files *hf;
	bool seen[HOST_FILES_MAX];
	bool other;
};

static void match(const char *path, void *arg)
{
	struct same *m = arg;
	for (int i = 0; i < m->hf->n; i++)
		if (!strcmp(strchr(m->hf->arg[i], ':') + 1, path)) {
			m->seen[i] = true;
			return;
		}
	m->other = true;
}

bool host_files_same(const struct host_files *hf, const char *dir)
{
	struct same m = { .hf = hf };
	if (rebase_files_under(dir, HOST_LOG_DIR "/", match, &m) < 0 || m.other)
		return false;
	for (int i = 0; i < hf->n; i++)
		if (!m.seen[i])
			return false;
	return true;
}

int host_files_of(pid_t pid, char (*paths)[PATH_MAX], int max)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char link[64 + 256], target[PATH_MAX];
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		if (strncmp(target, HOST_LOG_DIR "/", strlen(HOST_LOG_DIR) + 1))
			continue;
		bool known = false;
		for (int i = 0; i < n && !known; i++)
			known = !strcmp(paths[i], target);
		if (!known)
			snprintf(paths[n++], PATH_MAX, "%s", target);
	}
	closedir(d);
	return n;
}

void host_files_close(struct host_files *hf)
{
	for (int i = 0; i < hf->n; i++)
		close(hf->fd[i]);
	hf->n = 0;
}

void host_log_line(const char *name, const char *fmt, ...)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", HOST_LOG_DIR, name);
	mkdir(HOST_LOG_DIR, 0755);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
	FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char when[32];
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&now));
	fprintf(f, "%s ", when);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}
