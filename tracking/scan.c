/*
 * Write tracking: the userfaultfd side and the scan (track.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/checksum.h"
#include "../common/error.h"
#include "track.h"
#include "uapi.h"

#define SCAN_BATCH 512

void cxlcr_written_free(struct cxlcr_written *w)
{
	free(w->ranges);
	memset(w, 0, sizeof(*w));
}

int cxlcr_written_add(struct cxlcr_written *w, uint64_t start, uint64_t end)
{
	w->bytes += end - start;
	if (w->count && w->ranges[w->count - 1].end == start) {
		w->ranges[w->count - 1].end = end;
		return 0;
	}
	if (w->count == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct cxlcr_range *more = realloc(w->ranges, cap * sizeof(*more));
		if (!more)
			return cxlcr_error("out of memory for written ranges");
		w->ranges = more;
		w->cap = cap;
	}
	w->ranges[w->count++] = (struct cxlcr_range){ start, end };
	return 0;
}

int cxlcr_track_open(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		cxlcr_error("cannot open %s: %s", path, strerror(errno));
	return fd;
}

/* One PAGEMAP_SCAN returns at most SCAN_BATCH regions and says where its
 * walk stopped: the scan goes on from there to the end of the range. */
int cxlcr_track_scan(int pagemap_fd, uint64_t lo, uint64_t hi, struct cxlcr_written *w)
{
	struct page_region vec[SCAN_BATCH];
	uint64_t at = lo;
	while (at < hi) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg),
			.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
			.start = at,
			.end = hi,
			.vec = (uint64_t)(uintptr_t)vec,
			.vec_len = SCAN_BATCH,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};
		long n = ioctl(pagemap_fd, PAGEMAP_SCAN, &arg);
		if (n < 0) {
			if (errno == EPERM)
				return 1; /* a page without asynchronous write protection */
			return cxlcr_error("PAGEMAP_SCAN of %#llx-%#llx: %s", (unsigned long long)at,
					   (unsigned long long)hi, strerror(errno));
		}
		for (long i = 0; i < n; i++)
			if (cxlcr_written_add(w, vec[i].start, vec[i].end) < 0)
				return -1;
		if (arg.walk_end <= at)
			return cxlcr_error("PAGEMAP_SCAN made no progress at %#llx", (unsigned long long)at);
		at = arg.walk_end;
	}
	return 0;
}

int cxlcr_track_make_uffd(void)
{
	/* User-mode only: a service that dropped its privileges may make one
	 * so, and no fault of ours is ever handled (the mode is asynchronous). */
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return cxlcr_error("userfaultfd: %s", strerror(errno));
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int e = errno;
		close(fd);
		return cxlcr_error("userfaultfd: asynchronous write protection not available: %s", strerror(e));
	}
	return fd;
}

int cxlcr_track_register(int uffd, uint64_t lo, uint64_t hi)
{
	struct uffdio_register reg = { .range = { .start = lo, .len = hi - lo }, .mode = UFFDIO_REGISTER_MODE_WP };
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		return cxlcr_error("userfaultfd: cannot register %#llx-%#llx for write tracking: %s",
				   (unsigned long long)lo, (unsigned long long)hi, strerror(errno));
	return 0;
}

/* A saved set: its magic, the count of ranges, the ranges, and the CRC-32C
 * of all of that. */
#define WRITTEN_FILE_MAGIC 0x4e54495257434c58ULL /* "XLCWRITN" */

int cxlcr_written_save(int dirfd, const char *file, const struct cxlcr_written *w)
{
	uint64_t head[2] = { WRITTEN_FILE_MAGIC, w->count };
	uint32_t crc = cxlcr_crc32c(0, head, sizeof(head));
	crc = cxlcr_crc32c(crc, w->ranges, w->count * sizeof(w->ranges[0]));
	int fd = openat(dirfd, file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cxlcr_error("%s: %s", file, strerror(errno));
	size_t len = w->count * sizeof(w->ranges[0]);
	bool ok = write(fd, head, sizeof(head)) == (ssize_t)sizeof(head) &&
		  (!len || write(fd, w->ranges, len) == (ssize_t)len) && write(fd, &crc, sizeof(crc)) == sizeof(crc);
	if (close(fd) < 0)
		ok = false;
	return ok ? 0 : cxlcr_error("%s: cannot be written", file);
}

int cxlcr_written_load(int dirfd, const char *file, struct cxlcr_written *w)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : cxlcr_error("%s: %s", file, strerror(errno));
	uint64_t head[2];
	int rc = -1;
	if (read(fd, head, sizeof(head)) != (ssize_t)sizeof(head) || head[0] != WRITTEN_FILE_MAGIC ||
	    head[1] > (1u << 26)) {
		cxlcr_error("%s is not a set of written ranges", file);
		goto out;
	}
	size_t len = head[1] * sizeof(w->ranges[0]);
	struct cxlcr_range *r = malloc(len ? len : 1);
	uint32_t crc, want;
	if (!r || (len && read(fd, r, len) != (ssize_t)len) || read(fd, &want, sizeof(want)) != sizeof(want)) {
		free(r);
		cxlcr_error("%s is truncated", file);
		goto out;
	}
	crc = cxlcr_crc32c(cxlcr_crc32c(0, head, sizeof(head)), r, len);
	for (uint64_t i = 0; crc == want && i < head[1]; i++)
		if (r[i].end <= r[i].start || cxlcr_written_add(w, r[i].start, r[i].end) < 0)
			crc = ~want;
	free(r);
	if (crc != want) {
		cxlcr_error("%s is corrupt", file);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}
