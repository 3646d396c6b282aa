/*
 * cxlcr_rebase_fork(): a fork child's image set from its parent's
 * checkpoint and a snapshot of the parent's arena (see rebase.h).
 *
 * Every task with arena records gets a new mm image (mm.c) and fork
 * records (fork_record.c); the pool's file entry is checked (regfile.c);
 * the namespace holding the service link gets the child's network
 * identity (netid.c). Everything else is hard-linked: one checkpoint
 * serves many children.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/record.h"
#include "../common/util.h"
#include "internal.h"

/* The image names of one directory, sorted. */
struct names {
	char **v;
	size_t n;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	ns->v = NULL;
	ns->n = 0;
}

/* The regular files of dirfd (dirfd stays usable). */
static int list_files(int dirfd, const char *path, struct names *ns)
{
	ns->v = NULL;
	ns->n = 0;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return cxlcr_error("cannot read %s: %s", path, strerror(errno));
	}
	size_t cap = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (ns->n == cap) {
			cap = cap ? cap * 2 : 64;
			char **more = realloc(ns->v, cap * sizeof(*more));
			if (!more) {
				rc = cxlcr_error("out of memory");
				break;
			}
			ns->v = more;
		}
		if (!(ns->v[ns->n] = strdup(e->d_name))) {
			rc = cxlcr_error("out of memory");
			break;
		}
		ns->n++;
	}
	closedir(d);
	if (rc < 0)
		free_names(ns);
	else if (ns->n)
		qsort(ns->v, ns->n, sizeof(*ns->v), cmp_names);
	return rc;
}

static bool has_name(const struct names *ns, const char *name)
{
	return ns->n && bsearch(&name, ns->v, ns->n, sizeof(*ns->v), cmp_names) != NULL;
}

/* "<prefix><number>.img" -> number. */
static bool numbered(const char *name, const char *prefix, unsigned *num)
{
	size_t len = strlen(prefix);
	if (strncmp(name, prefix, len))
		return false;
	char *end;
	errno = 0;
	unsigned long v = strtoul(name + len, &end, 10);
	if (end == name + len || errno || v > 0x7fffffff || strcmp(end, ".img"))
		return false;
	*num = (unsigned)v;
	return true;
}

/* An image taken over unchanged: a hard link, or a copy where the two
 * directories are on different file systems. */
static int link_or_copy(int src_dir, int dst_dir, const char *name)
{
	if (linkat(src_dir, name, dst_dir, name, 0) == 0)
		return 0;
	if (errno != EXDEV && errno != EPERM)
		return cxlcr_error("cannot link image %s: %s", name, strerror(errno));
	int in = openat(src_dir, name, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return cxlcr_error("cannot read image %s: %s", name, strerror(errno));
	int out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		int e = errno;
		close(in);
		return cxlcr_error("cannot create image %s: %s", name, strerror(e));
	}
	int rc = 0;
	char buf[1 << 16];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = cxlcr_error("cannot read image %s: %s", name, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = write(out, buf + done, (size_t)(n - done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = cxlcr_error("cannot copy image %s: %s", name, w < 0 ? strerror(errno) : "short write");
				break;
			}
			done += w;
		}
		if (rc < 0)
			break;
	}
	close(in);
	if (close(out) < 0 && rc == 0)
		rc = cxlcr_error("cannot copy image %s: %s", name, strerror(errno));
	return rc;
}

/* What a directory of CRIU's holds besides the images: its logs, its
 * statistics and pid files. A restore writes its own (opened with
 * O_TRUNC: a hard link would truncate the parent's), so these are not
 * taken over. */
static bool is_image(const char *name)
{
	size_t len = strlen(name);
	return strncmp(name, "stats-", 6) && !(len > 4 && !strcmp(name + len - 4, ".log")) &&
	       !(len > 4 && !strcmp(name + len - 4, ".pid"));
}

struct job {
	int src, dst;
	const char *src_path;
	const struct cxlcr_rebase_fork *spec;
	struct cxlcr_rebase_stats *stats;
	struct names in;
	struct names done;   /* written into dst: not to be linked */
	uint32_t pool_file_id;
	bool have_pool_file;
	char pool_path[CXLCR_RECORD_PATH_MAX];
};

static int mark_done(struct job *j, const char *name)
{
	char **more = realloc(j->done.v, (j->done.n + 1) * sizeof(*more));
	if (!more)
		return cxlcr_error("out of memory");
	j->done.v = more;
	if (!(more[j->done.n] = strdup(name)))
		return cxlcr_error("out of memory");
	j->done.n++;
	qsort(j->done.v, j->done.n, sizeof(*j->done.v), cmp_names);
	return 0;
}

/* One task with arena records: its memory map and its fork records. */
static int rebase_task(struct job *j, const char *record_file, int pid)
{
	struct cxlcr_arena_record *recs = NULL;
	ssize_t n = cxlcr_arena_records_read(j->src, record_file, &recs);
	if (n < 0)
		return -1;
	if (n == 0)
		return cxlcr_error("record %s: vanished while rebasing", record_file);
	char mm[64];
	snprintf(mm, sizeof(mm), "mm-%d.img", pid);
	uint32_t file_id = 0;
	int rc = rebase_task_mm(j->src, j->dst, pid, recs, (size_t)n, j->spec->snapshot, j->spec->copy, &file_id,
				 j->stats);
	if (rc == 0 && j->have_pool_file && file_id != j->pool_file_id)
		rc = cxlcr_error("%s: the arena is mapped through file %#x, another task's through %#x", mm,
				 file_id, j->pool_file_id);
	if (rc == 0) {
		j->pool_file_id = file_id;
		j->have_pool_file = true;
		snprintf(j->pool_path, sizeof(j->pool_path), "%s", recs[0].pool_path);
		rc = write_fork_records(j->dst, record_file, recs, (size_t)n, j->spec->snapshot);
	}
	if (rc == 0)
		rc = mark_done(j, mm);
	if (rc == 0)
		rc = mark_done(j, record_file);
	if (rc == 0)
		j->stats->files_rewritten += 2;
	free(recs);
	return rc;
}

static int rebase_memory(struct job *j)
{
	int tasks = 0;
	for (size_t i = 0; i < j->in.n; i++) {
		unsigned pid;
		if (!numbered(j->in.v[i], "cxlcr-arena-", &pid) || pid == 0)
			continue;
		char mm[64];
		snprintf(mm, sizeof(mm), "mm-%u.img", pid);
		if (!has_name(&j->in, mm))
			return cxlcr_error("record %s: there is no %s: not a checkpoint of that task", j->in.v[i], mm);
		if (rebase_task(j, j->in.v[i], (int)pid) < 0)
			return -1;
		tasks++;
	}
	if (!tasks)
		return cxlcr_error("%s: no arena records (cxlcr-arena-*.img): not a checkpoint of a cxlcr "
				   "service, or dumped without the cxlcr plugin", j->src_path);
	/* A copy-mode child's heap is paged into one process by its pager;
	 * and it maps no file there. */
	if (j->spec->copy)
		return tasks == 1 ? 0 : cxlcr_error("%s: %d processes map the arena; copy mode pages one",
						     j->src_path, tasks);
	return check_pool_file_entry(j->src, j->pool_file_id, j->pool_path);
}

/* The child's own MAC and address on its link. A checkpoint whose network
 * namespace CRIU did not dump (CRIU ran inside it) holds no network images:
 * the daemon then makes the child's namespace itself, with its identity. */
static int rebase_network(struct job *j)
{
	int links = 0, namespaces = 0;
	for (size_t i = 0; i < j->in.n; i++) {
		unsigned ns;
		int found = 0;
		if (!numbered(j->in.v[i], "netdev-", &ns))
			continue;
		namespaces++;
		if (rebase_netns(j->src, j->dst, ns, j->spec, &found, j->stats) < 0)
			return -1;
		if (!found)
			continue;
		links++;
		const char *prefixes[] = { "netdev", "ifaddr", "route" };
		for (size_t k = 0; k < 3; k++) {
			char name[64];
			snprintf(name, sizeof(name), "%s-%u.img", prefixes[k], ns);
			if (has_name(&j->in, name) && mark_done(j, name) < 0)
				return -1;
		}
	}
	if (namespaces == 0)
		return 0;
	if (links != 1)
		return cxlcr_error("%s: %s link %s in the checkpoint's network namespaces", j->src_path,
				   links ? "more than one" : "no", j->spec->ifname);
	return 0;
}

static int check_spec(const struct cxlcr_rebase_fork *spec)
{
	static const uint8_t zero_mac[6];
	if (!spec || !spec->snapshot || !spec->snapshot->runs)
		return cxlcr_error("rebase: no open snapshot");
	if (!spec->ifname || !spec->ifname[0] || strlen(spec->ifname) >= 16)
		return cxlcr_error("rebase: bad interface name");
	if (spec->child_ip == 0 || spec->child_ip == 0xffffffffu)
		return cxlcr_error("rebase: no address for the child");
	if (!memcmp(spec->child_mac, zero_mac, 6) || (spec->child_mac[0] & 1))
		return cxlcr_error("rebase: the child's MAC must be a non-zero unicast address");
	return 0;
}

int cxlcr_rebase_fork(const char *src_dir, const char *dst_dir, const struct cxlcr_rebase_fork *spec,
		      struct cxlcr_rebase_stats *stats)
{
	uint64_t t0 = cxlcr_mono_ns();
	struct cxlcr_rebase_stats local;
	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (check_spec(spec) < 0)
		return -1;
	struct job j = { .src = -1, .dst = -1, .src_path = src_dir, .spec = spec, .stats = stats };
	int rc = -1;
	j.src = open(src_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j.src < 0) {
		cxlcr_error("cannot open %s: %s", src_dir, strerror(errno));
		goto out;
	}
	j.dst = open(dst_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j.dst < 0) {
		cxlcr_error("cannot open %s: %s", dst_dir, strerror(errno));
		goto out;
	}
	struct names existing;
	if (list_files(j.dst, dst_dir, &existing) < 0)
		goto out;
	size_t had = existing.n;
	free_names(&existing);
	if (had) {
		cxlcr_error("%s is not empty", dst_dir);
		goto out;
	}
	if (list_files(j.src, src_dir, &j.in) < 0)
		goto out;
	if (rebase_memory(&j) < 0 || rebase_network(&j) < 0)
		goto out;
	for (size_t i = 0; i < j.in.n; i++) {
		if (has_name(&j.done, j.in.v[i]) || !is_image(j.in.v[i]))
			continue;
		if (link_or_copy(j.src, j.dst, j.in.v[i]) < 0)
			goto out;
		stats->files_linked++;
	}
	rc = 0;
out:
	free_names(&j.in);
	free_names(&j.done);
	if (j.src >= 0)
		close(j.src);
	if (j.dst >= 0)
		close(j.dst);
	stats->ns = cxlcr_mono_ns() - t0;
	return rc;
}
