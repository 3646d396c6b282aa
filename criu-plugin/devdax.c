/*
 * A pool on a devdax device: what CRIU cannot do alone.
 *
 * CRIU refuses to dump a mapping of a character device unless a plugin
 * vouches for it, cannot dump an open fd of one at all, and re-creates a
 * mapping from the path it had on the dumping host. A devdax pool reached
 * from several hosts may have a different path on each (/dev/dax0.0 here,
 * /dev/dax1.0 there); its offsets are device-relative, so only the path
 * changes, never the offset.
 *
 * A pool file needs none of this: CRIU handles file mappings and fds by
 * itself, and an emulated pod's hosts share the file's path.
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
#include "../common/pool.h"
#include "../common/record.h"
#include "../common/util.h"
#include "plugin.h"

/* Paths as CRIU gives them and as we record them: absolute, though CRIU
 * sometimes leaves out the leading slash. */
static bool same_path(const char *a, const char *b)
{
	while (*a == '/')
		a++;
	while (*b == '/')
		b++;
	return !strcmp(a, b);
}

int devdax_admit_vma(const struct pool_id *id, const struct stat *st)
{
	return id->devdax && pool_id_match(id, st) ? 0 : -ENOTSUP;
}

/* Opens this host's pool device at path with flags, after making sure it
 * is the pool the checkpoint was taken from. */
static int open_pool_device(const char *path, const uint8_t uuid[16], int flags)
{
	struct cxlcr_pool pool;
	char want[40], have[40];
	if (cxlcr_pool_open(&pool, path) < 0)
		return -1;
	bool same = !memcmp(pool.sb->uuid, uuid, 16);
	cxlcr_uuid_str(pool.sb->uuid, have);
	cxlcr_pool_close(&pool);
	if (!same)
		return cxlcr_error("record is from another pool (uuid %s; pool %s is %s)",
				   cxlcr_uuid_str(uuid, want), path, have);
	int fd = open(path, flags);
	if (fd < 0)
		return cxlcr_error("pool %s: %s", path, strerror(errno));
	return fd;
}

/* An open fd of the pool device: recorded as its path, open flags and
 * the pool's uuid. CRIU's fd-level state (number, cloexec, owner) it
 * saves itself. */
int devdax_dump_fd(int dirfd, int fd, uint32_t file_id, const struct pool_id *id)
{
	struct stat st;
	if (!id->devdax || fstat(fd, &st) < 0 || !pool_id_match(id, &st))
		return -ENOTSUP;
	struct cxlcr_file_record rec;
	memset(&rec, 0, sizeof(rec));
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, rec.path, sizeof(rec.path) - 1);
	if (n <= 0 || rec.path[0] != '/')
		return cxlcr_error("pool device fd: cannot tell its path: %s",
				   n < 0 ? strerror(errno) : "not absolute");
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return cxlcr_error("pool device fd: %s", strerror(errno));
	rec.open_flags = (uint32_t)flags;
	rec.file_id = file_id;
	memcpy(rec.pool_uuid, id->uuid, sizeof(rec.pool_uuid));
	cxlcr_file_record_seal(&rec);
	char name[64];
	return cxlcr_file_record_write(dirfd, cxlcr_file_record_name(name, sizeof(name), file_id), &rec);
}

/* Reopens a recorded pool device fd from this host's pool path, with the
 * open flags it had (those that only mattered at open time left out). */
int devdax_restore_fd(int dirfd, uint32_t file_id, const char *pool_path)
{
	struct cxlcr_file_record rec;
	char name[64];
	int rc = cxlcr_file_record_read(dirfd, cxlcr_file_record_name(name, sizeof(name), file_id), &rec);
	if (rc <= 0)
		return rc == 0 ? -ENOTSUP : -1;
	int flags = (int)rec.open_flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
	return open_pool_device(pool_path, rec.pool_uuid, flags);
}

static bool is_record_file(const char *name, const char *kind)
{
	size_t len = strlen(name), k = strlen(kind);
	return !strncmp(name, kind, k) && len > k + 4 && !strcmp(name + len - 4, ".img");
}

bool devdax_dumped_pool(int dirfd, const char *path, uint8_t uuid[16])
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	rewinddir(d);
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		if (is_record_file(e->d_name, "cxlcr-arena-")) {
			struct cxlcr_arena_record *recs;
			ssize_t n = cxlcr_arena_records_read(dirfd, e->d_name, &recs);
			for (ssize_t i = 0; i < n && !found; i++) {
				if ((recs[i].flags & CXLCR_RECORD_F_DEVDAX) &&
				    same_path(recs[i].pool_path, path)) {
					memcpy(uuid, recs[i].pool_uuid, 16);
					found = true;
				}
			}
			if (n > 0)
				free(recs);
		} else if (is_record_file(e->d_name, "cxlcr-file-")) {
			struct cxlcr_file_record rec;
			if (cxlcr_file_record_read(dirfd, e->d_name, &rec) == 1 && same_path(rec.path, path)) {
				memcpy(uuid, rec.pool_uuid, 16);
				found = true;
			}
		}
	}
	closedir(d);
	return found;
}

/*
 * A mapping of the pool device is about to be re-created. If the device
 * has another path on this host, map that one instead, at the same device
 * offset. Returns 1 with the fd to map (CRIU closes it), or -ENOTSUP when
 * CRIU should simply reopen the recorded path.
 */
int devdax_update_vma(int dirfd, const char *path, const char *pool_path, uint64_t old_pgoff,
		      uint64_t *new_pgoff, int *plugin_fd)
{
	uint8_t uuid[16];
	if (!devdax_dumped_pool(dirfd, path, uuid) || same_path(path, pool_path))
		return -ENOTSUP;
	int fd = open_pool_device(pool_path, uuid, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	*new_pgoff = old_pgoff;
	*plugin_fd = fd;
	return 1;
}
