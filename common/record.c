/*
 * Checkpoint records of the CRIU plugin: what a checkpoint says about the
 * arenas its tasks map. A restore follows these records to take an arena
 * over, so a record that is not exactly what a dump wrote (another
 * program's file, another format version, a flipped bit, a cut-off copy)
 * must be refused, never half-followed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "error.h"
#include "record.h"

/* No process maps anywhere near this many pool regions. */
#define RECORD_FILE_MAX (4096 * sizeof(struct cxlcr_arena_record))

static uint32_t arena_checksum(const struct cxlcr_arena_record *r)
{
	return cxlcr_crc32c(0, r, offsetof(struct cxlcr_arena_record, checksum));
}

static uint32_t file_checksum(const struct cxlcr_file_record *r)
{
	return cxlcr_crc32c(0, r, offsetof(struct cxlcr_file_record, checksum));
}

void cxlcr_arena_record_seal(struct cxlcr_arena_record *r)
{
	r->magic = CXLCR_ARENA_RECORD_MAGIC;
	r->version = CXLCR_RECORD_VERSION;
	r->record_size = sizeof(*r);
	r->checksum = arena_checksum(r);
}

void cxlcr_file_record_seal(struct cxlcr_file_record *r)
{
	r->magic = CXLCR_FILE_RECORD_MAGIC;
	r->version = CXLCR_RECORD_VERSION;
	r->record_size = sizeof(*r);
	r->checksum = file_checksum(r);
}

static bool terminated(const char *s, size_t len)
{
	return memchr(s, 0, len) != NULL;
}

/* The header words every record starts with, checked in the order that
 * gives the most useful message: foreign, then other version, then size. */
static int check_header(uint64_t magic, uint64_t want_magic, uint32_t version, uint32_t size,
			uint32_t want_size, const char *what)
{
	if (magic != want_magic)
		return cxlcr_error("not a cxlcr %s record (bad magic)", what);
	if (version != CXLCR_RECORD_VERSION)
		return cxlcr_error("%s record of format version %u, this cxlcr reads version %u", what,
				   version, CXLCR_RECORD_VERSION);
	if (size != want_size)
		return cxlcr_error("corrupt %s record (size %u, expected %u)", what, size, want_size);
	return 0;
}

int cxlcr_arena_record_check(const struct cxlcr_arena_record *r)
{
	if (check_header(r->magic, CXLCR_ARENA_RECORD_MAGIC, r->version, r->record_size,
			 sizeof(*r), "arena") < 0)
		return -1;
	if (r->checksum != arena_checksum(r))
		return cxlcr_error("corrupt arena record (checksum mismatch)");
	if (!terminated(r->region_name, sizeof(r->region_name)) ||
	    !terminated(r->host, sizeof(r->host)) || !terminated(r->pool_path, sizeof(r->pool_path)))
		return cxlcr_error("corrupt arena record (unterminated name)");
	if (r->map_length == 0 || r->map_pgoff < r->region_offset ||
	    r->map_length > r->region_size ||
	    r->map_pgoff - r->region_offset > r->region_size - r->map_length)
		return cxlcr_error("corrupt arena record (mapping %llu+%llu outside region %llu+%llu)",
				   (unsigned long long)r->map_pgoff, (unsigned long long)r->map_length,
				   (unsigned long long)r->region_offset,
				   (unsigned long long)r->region_size);
	if (r->nspid <= 0)
		return cxlcr_error("corrupt arena record (pid %d)", r->nspid);
	return 0;
}

int cxlcr_file_record_check(const struct cxlcr_file_record *r)
{
	if (check_header(r->magic, CXLCR_FILE_RECORD_MAGIC, r->version, r->record_size, sizeof(*r),
			 "file") < 0)
		return -1;
	if (r->checksum != file_checksum(r))
		return cxlcr_error("corrupt file record (checksum mismatch)");
	if (!terminated(r->path, sizeof(r->path)) || r->path[0] != '/')
		return cxlcr_error("corrupt file record (bad path)");
	return 0;
}

bool cxlcr_is_arena_record_file(const char *name)
{
	int pid;
	char tail[8];
	return sscanf(name, "cxlcr-arena-%d%7s", &pid, tail) == 2 && !strcmp(tail, ".img");
}

const char *cxlcr_arena_record_name(char *buf, size_t len, pid_t nspid)
{
	snprintf(buf, len, CXLCR_ARENA_RECORD_FILE, (int)nspid);
	return buf;
}

const char *cxlcr_file_record_name(char *buf, size_t len, uint32_t id)
{
	snprintf(buf, len, CXLCR_FILE_RECORD_FILE, id);
	return buf;
}

/* Puts "record NAME: " in front of the last error. */
static int name_error(const char *name)
{
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	return cxlcr_error("record %s: %s", name, why);
}

static int write_file(int dirfd, const char *name, const void *data, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return cxlcr_error("cannot create %s: %s", name, strerror(errno));
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			unlinkat(dirfd, name, 0);
			return cxlcr_error("cannot write %s: %s", name, strerror(e));
		}
		p += n;
		len -= (size_t)n;
	}
	if (close(fd) < 0)
		return cxlcr_error("cannot write %s: %s", name, strerror(errno));
	return 0;
}

int cxlcr_arena_records_write(int dirfd, const char *name, const struct cxlcr_arena_record *r,
			      size_t n)
{
	return write_file(dirfd, name, r, n * sizeof(*r));
}

int cxlcr_file_record_write(int dirfd, const char *name, const struct cxlcr_file_record *r)
{
	return write_file(dirfd, name, r, sizeof(*r));
}

/* Reads all of file name of dirfd (at most max bytes) into a malloc'd
 * buffer. 1 if read, 0 if it does not exist, -1 on error. */
static int read_file(int dirfd, const char *name, size_t max, void **data, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return cxlcr_error("record %s: %s", name, strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return cxlcr_error("record %s: %s", name, strerror(e));
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return cxlcr_error("record %s: not a record file (%s)", name,
				   S_ISREG(st.st_mode) ? "too large" : "not a regular file");
	}
	size_t size = (size_t)st.st_size, got = 0;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		close(fd);
		return cxlcr_error("record %s: out of memory", name);
	}
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*data = buf;
	*len = got;
	return 1;
}

ssize_t cxlcr_arena_records_read(int dirfd, const char *name, struct cxlcr_arena_record **out)
{
	void *data;
	size_t len;
	int rc = read_file(dirfd, name, RECORD_FILE_MAX, &data, &len);
	if (rc <= 0)
		return rc;
	const struct cxlcr_arena_record *r = data;
	size_t n = len / sizeof(*r);
	if (len == 0) {
		cxlcr_error("record %s: empty", name);
		goto bad;
	}
	/* What the file claims to be first, then whether it is whole. */
	if (len >= sizeof(r->magic) + sizeof(r->version) + sizeof(r->record_size) &&
	    check_header(r->magic, CXLCR_ARENA_RECORD_MAGIC, r->version, r->record_size,
			 sizeof(*r), "arena") < 0) {
		name_error(name);
		goto bad;
	}
	if (len % sizeof(*r)) {
		cxlcr_error("record %s: truncated (%zu bytes, records are %zu)", name, len, sizeof(*r));
		goto bad;
	}
	for (size_t i = 0; i < n; i++) {
		if (cxlcr_arena_record_check(&r[i]) < 0) {
			name_error(name);
			goto bad;
		}
	}
	*out = data;
	return (ssize_t)n;
bad:
	free(data);
	return -1;
}

int cxlcr_file_record_read(int dirfd, const char *name, struct cxlcr_file_record *out)
{
	void *data;
	size_t len;
	int rc = read_file(dirfd, name, sizeof(*out), &data, &len);
	if (rc <= 0)
		return rc;
	rc = -1;
	if (len != sizeof(*out))
		cxlcr_error("record %s: truncated (%zu bytes, expected %zu)", name, len, sizeof(*out));
	else if (cxlcr_file_record_check(data) < 0)
		name_error(name);
	else {
		memcpy(out, data, sizeof(*out));
		rc = 1;
	}
	free(data);
	return rc;
}

const char *cxlcr_uuid_str(const uint8_t u[16], char *buf)
{
	snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	return buf;
}

DIR *cxlcr_image_dir_open(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		cxlcr_error("cannot read the image directory: %s", strerror(errno));
		return NULL;
	}
	rewinddir(d);
	return d;
}

int cxlcr_arena_records_each(int dirfd,
			     int (*fn)(int dirfd, const char *file, struct cxlcr_arena_record *recs, size_t n,
				       void *arg),
			     void *arg)
{
	DIR *d = cxlcr_image_dir_open(dirfd);
	if (!d)
		return -1;
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		if (!cxlcr_is_arena_record_file(e->d_name))
			continue;
		struct cxlcr_arena_record *recs;
		ssize_t n = cxlcr_arena_records_read(dirfd, e->d_name, &recs);
		if (n <= 0) {
			rc = n < 0 ? -1 : 0;
			continue;
		}
		rc = fn(dirfd, e->d_name, recs, (size_t)n, arg) < 0 ? -1 : 0;
		free(recs);
	}
	closedir(d);
	return rc;
}
