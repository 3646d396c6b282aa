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
	const char *wd_name; /* the working directory's name here, or NULL: the checkpoint's */
	int failed;
};

/* Can name be one directory's name in HOST_WD_DIR? */
static bool wd_name_ok(const char *name)
{
	return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/* The NAME of HOST_WD_DIR/NAME, a service's working directory, if path
 * (without its leading slash) is one; NULL for anything else, a file in
 * one too (CRIU opens that by its path: a host's own service has it). */
static const char *wd_name_of(const char *path)
{
	size_t n = strlen(HOST_WD_DIR) - 1;
	if (strncmp(path, HOST_WD_DIR + 1, n) || path[n] != '/')
		return NULL;
	return wd_name_ok(path + n + 1) ? path + n + 1 : NULL;
}

/* The checkpoint's paths under HOST_LOG_DIR, and its working directories
 * under HOST_WD_DIR, to fn. */
static int walk_own(const char *dir, void (*fn)(const char *path, void *arg), void *arg)
{
	if (rebase_files_under(dir, HOST_LOG_DIR "/", fn, arg) < 0)
		return -1;
	return rebase_files_under(dir, HOST_WD_DIR "/", fn, arg);
}

int host_wd_open(const char *name, char *path, size_t len)
{
	if (!wd_name_ok(name))
		return cxlcr_error("'%s' cannot name a working directory", name);
	snprintf(path, len, "%s/%s", HOST_WD_DIR, name);
	char crtools[PATH_MAX + 16];
	snprintf(crtools, sizeof(crtools), "%s/proc.crtools", path);
	if ((mkdir("/run/cxlcr", 0755) < 0 && errno != EEXIST) || (mkdir(HOST_WD_DIR, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(path, 0700) < 0 && errno != EEXIST))
		return cxlcr_error("cannot make this host's %s: %s", path, strerror(errno));
	/* An empty directory that a dump killed between its parasite's mkdir
	 * and rmdir left: every later dump's mkdir would fail on it. */
	rmdir(crtools);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("cannot open this host's %s: %s", path, strerror(errno));
	return fd;
}

/* Is dir (dev, ino) some live process's working directory? */
static bool wd_in_use(dev_t dev, ino_t ino)
{
	DIR *d = opendir("/proc");
	if (!d)
		return true;
	struct dirent *e;
	bool used = false;
	while (!used && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char cwd[300];
		struct stat st;
		snprintf(cwd, sizeof(cwd), "/proc/%s/cwd", e->d_name);
		used = stat(cwd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
	}
	closedir(d);
	return used;
}

/* Does directory path hold nothing but what CRIU's parasite may leave
 * there (proc.crtools)? What a service wrote stays, with the directory. */
static bool wd_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "proc.crtools");
	closedir(d);
	return empty;
}

bool host_wd_idle(const char *name)
{
	char path[PATH_MAX];
	if (!wd_name_ok(name))
		return false;
	snprintf(path, sizeof(path), "%s/%s", HOST_WD_DIR, name);
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && wd_empty(path) && !wd_in_use(st.st_dev, st.st_ino);
}

void host_wd_remove(const char *name)
{
	if (!host_wd_idle(name))
		return;
	char path[PATH_MAX], crtools[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", HOST_WD_DIR, name);
	snprintf(crtools, sizeof(crtools), "%s/proc.crtools", path);
	rmdir(crtools);
	rmdir(path);
}

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
	const char *wd = wd_name_of(path);
	if (!wd && strncmp(path, HOST_LOG_DIR + 1, strlen(HOST_LOG_DIR) - 1))
		return; /* a file in a working directory */
	if (hf->n == HOST_FILES_MAX) {
		w->failed = cxlcr_error("the checkpoint names more than %d files under %s and %s", HOST_FILES_MAX,
					HOST_LOG_DIR, HOST_WD_DIR);
		return;
	}
	char here[PATH_MAX];
	int fd = wd ? host_wd_open(w->wd_name ? w->wd_name : wd, here, sizeof(here)) : open_here(path);
	if (fd < 0) {
		w->failed = wd ? -1
			       : cxlcr_error("cannot open this host's /%s for the restore: %s", path, strerror(errno));
		return;
	}
	hf->fd[hf->n] = fd;
	snprintf(hf->arg[hf->n], sizeof(hf->arg[hf->n]), "fd[%d]:%s", w->first_fd + hf->n, path);
	hf->n++;
}

int host_files_open_as(const char *dir, int first_fd, const char *wd_name, struct host_files *hf)
{
	hf->n = 0;
	struct walk w = { hf, first_fd, wd_name, 0 };
	if (walk_own(dir, add, &w) < 0 || w.failed < 0) {
		host_files_close(hf);
		return -1;
	}
	return 0;
}

int host_files_open(const char *dir, int first_fd, struct host_files *hf)
{
	return host_files_open_as(dir, first_fd, NULL, hf);
}

int host_files_open_paths(char *const *paths, int n, int first_fd, struct host_files *hf)
{
	hf->n = 0;
	struct walk w = { hf, first_fd, NULL, 0 };
	for (int i = 0; i < n && !w.failed; i++) {
		const char *rel = paths[i] + (paths[i][0] == '/');
		if ((strncmp(rel, HOST_LOG_DIR + 1, strlen(HOST_LOG_DIR) - 1) || rel[strlen(HOST_LOG_DIR) - 1] != '/' ||
		     strstr(rel, "/../")) &&
		    !wd_name_of(rel))
			w.failed = cxlcr_error("%s is not a file under %s nor a directory of %s", paths[i], HOST_LOG_DIR,
					       HOST_WD_DIR);
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
	if (!wd_name_of(path) && strncmp(path, HOST_LOG_DIR + 1, strlen(HOST_LOG_DIR) - 1))
		return; /* a file in a working directory: not one of a host's own */
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
	if (walk_own(dir, match, &m) < 0 || m.other)
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
	char cwd[64], target[PATH_MAX];
	snprintf(cwd, sizeof(cwd), "/proc/%d/cwd", (int)pid);
	ssize_t len = readlink(cwd, target, sizeof(target) - 1);
	if (len > 0 && n < max) {
		target[len] = 0;
		if (wd_name_of(target + 1))
			snprintf(paths[n++], PATH_MAX, "%s", target);
	}
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
