/*
 * What /proc says about a task: its pid inside its own pid namespace, and
 * where it maps the pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../common/error.h"
#include "plugin.h"

/* "start-end perms offset major:minor inode [path]", numbers in hex but
 * the inode. */
bool proc_parse_maps_line(const char *line, struct maps_line *m)
{
	int n = sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64, &m->start,
		       &m->end, m->perms, &m->pgoff, &m->dev_major, &m->dev_minor, &m->inode);
	return n == 7 && m->start < m->end && strlen(m->perms) == 4;
}

/*
 * The last field of "NSpid:" is the pid in the innermost pid namespace:
 * the one CRIU dumps and restores a task with. A kernel without NSpid has
 * no nested pid namespaces to speak of, and the pid is the pid.
 */
int proc_innermost_nspid(pid_t pid, pid_t *nspid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return cxlcr_error("%s: %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	*nspid = pid;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		char *tok, *save = NULL;
		for (tok = strtok_r(line + 6, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
			*nspid = (pid_t)strtol(tok, NULL, 10);
		break;
	}
	free(line);
	fclose(f);
	if (*nspid <= 0)
		return cxlcr_error("%s: no pid in NSpid", path);
	return 0;
}

static uint32_t prot_of(const char *perms)
{
	return (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
	       (perms[2] == 'x' ? PROT_EXEC : 0);
}

/*
 * Is this mapping of the pool? A pool file is recognised by the device and
 * inode that maps shows. A devdax device is not (maps shows the device
 * node's inode): the mapped object is reached through map_files, which
 * keeps its st_rdev. A stat of map_files costs a lookup of the VMA, and a
 * fork child has hundreds of pool VMAs: only devdax pays it.
 */
static bool maps_pool(pid_t pid, const struct maps_line *m, const struct pool_id *id)
{
	if (!id->devdax)
		return makedev(m->dev_major, m->dev_minor) == id->dev && m->inode == id->ino;
	char path[96];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start,
		 m->end);
	return stat(path, &st) == 0 && pool_id_match(id, &st);
}

/* Appends one piece, merging it into the previous one when it continues
 * it in both address and device offset: mprotect() and madvise() split a
 * mapping into several VMAs, but it is still one mapping of one region. */
static int add_piece(struct pool_mapping **v, size_t *n, size_t *cap, const struct maps_line *m)
{
	bool shared = m->perms[3] == 's';
	if (*n) {
		struct pool_mapping *last = &(*v)[*n - 1];
		if (last->end == m->start && last->shared == shared &&
		    last->pgoff + (last->end - last->start) == m->pgoff) {
			last->end = m->end;
			return 0;
		}
	}
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct pool_mapping *nv = realloc(*v, ncap * sizeof(*nv));
		if (!nv)
			return cxlcr_error("out of memory");
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*n)++] = (struct pool_mapping){
		.start = m->start, .end = m->end, .pgoff = m->pgoff,
		.prot = prot_of(m->perms), .shared = shared,
	};
	return 0;
}

int proc_pool_mappings(pid_t pid, const struct pool_id *id, struct pool_mapping **out, size_t *n)
{
	char path[64];
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	if (!id->known)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return cxlcr_error("%s: %s", path, strerror(errno));
	char *line = NULL;
	size_t linecap = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &linecap, f) > 0) {
		struct maps_line m;
		if (!proc_parse_maps_line(line, &m)) {
			rc = cxlcr_error("%s: cannot parse '%.80s'", path, line);
			break;
		}
		if (m.inode && maps_pool(pid, &m, id))
			rc = add_piece(out, n, &cap, &m);
	}
	free(line);
	fclose(f);
	if (rc < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

/* Does the file mapped at m start with a pool superblock? Only files are
 * looked at: a devdax device cannot be read(), and CRIU refuses its
 * mappings anyway unless the plugin admits them as the pool's. */
static bool looks_like_pool(pid_t pid, const struct maps_line *m)
{
	char path[96];
	uint64_t magic = 0;
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start,
		 m->end);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	struct stat st;
	bool yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		   pread(fd, &magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
		   magic == CXLCR_POOL_MAGIC;
	close(fd);
	return yes;
}

int proc_other_pool(pid_t pid, const struct pool_id *id, char *where, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return cxlcr_error("%s: %s", path, strerror(errno));
	char *line = NULL;
	size_t linecap = 0;
	int found = 0;
	while (!found && getline(&line, &linecap, f) > 0) {
		struct maps_line m;
		if (!proc_parse_maps_line(line, &m) || !m.inode || m.perms[3] != 's' ||
		    maps_pool(pid, &m, id) || !looks_like_pool(pid, &m))
			continue;
		const char *file = strchr(line, '/');
		snprintf(where, len, "%.*s", file ? (int)strcspn(file, "\n") : 1, file ? file : "?");
		found = 1;
	}
	free(line);
	fclose(f);
	return found;
}
