/* What a verb froze, on its host: frozen.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/checksum.h"
#include "frozen.h"

#define FROZEN_MAGIC 0x4e5a5246u /* "FRZN" */

struct frozen_record {
	uint32_t magic;
	int32_t pid;
	uint64_t start;
	uint32_t n;
	uint32_t crc; /* over the above (crc 0) and the n pids */
	pid_t stopped[FROZEN_STOPPED_MAX];
};

static void record_path(int32_t pid, uint64_t start, char *path, size_t len)
{
	snprintf(path, len, FROZEN_DIR "/%d.%" PRIu64, (int)pid, start);
}

static size_t record_len(uint32_t n)
{
	return offsetof(struct frozen_record, stopped) + n * sizeof(pid_t);
}

static uint32_t record_crc(struct frozen_record *r)
{
	uint32_t was = r->crc;
	r->crc = 0;
	uint32_t crc = cxlcr_crc32c(0, r, record_len(r->n));
	r->crc = was;
	return crc;
}

int frozen_record_write(int32_t pid, uint64_t start, const pid_t *stopped, size_t n)
{
	static struct frozen_record r;
	if (n > FROZEN_STOPPED_MAX)
		n = FROZEN_STOPPED_MAX;
	/* Nothing stopped is what no record says: nothing is written in
	 * the common case. */
	if (!n) {
		frozen_record_remove(pid, start);
		return 0;
	}
	r = (struct frozen_record){ .magic = FROZEN_MAGIC, .pid = pid, .start = start, .n = (uint32_t)n };
	memcpy(r.stopped, stopped, n * sizeof(pid_t));
	r.crc = record_crc(&r);
	char path[96], tmp[128];
	record_path(pid, start, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	(void)mkdir("/run/cxlcr", 0755);
	(void)mkdir(FROZEN_DIR, 0700);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t len = record_len(r.n);
	bool whole = fd >= 0 && write(fd, &r, len) == (ssize_t)len;
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (!whole || rename(tmp, path) < 0) {
		e = whole ? errno : e;
		unlink(tmp);
		/* An older record of it must not stand for this one: none
		 * is read as "not known", an old one would be believed. */
		unlink(path);
		return cxlcr_error("cannot record what was stopped before a freeze in %s: %s", path, strerror(e));
	}
	return 0;
}

ssize_t frozen_record_read(int32_t pid, uint64_t start, pid_t *stopped, size_t max)
{
	static struct frozen_record r;
	char path[96];
	record_path(pid, start, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return cxlcr_error("%s: %s", path, strerror(errno));
	ssize_t got = read(fd, &r, sizeof(r));
	close(fd);
	if (got < (ssize_t)offsetof(struct frozen_record, stopped) || r.magic != FROZEN_MAGIC || r.pid != pid ||
	    r.start != start || r.n > FROZEN_STOPPED_MAX || (size_t)got != record_len(r.n) || record_crc(&r) != r.crc)
		return cxlcr_error("%s is not a whole record of what was stopped", path);
	size_t n = r.n < max ? r.n : max;
	memcpy(stopped, r.stopped, n * sizeof(pid_t));
	return (ssize_t)n;
}

void frozen_record_remove(int32_t pid, uint64_t start)
{
	char path[96];
	record_path(pid, start, path, sizeof(path));
	unlink(path);
}
