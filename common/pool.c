/*
 * The pool: superblock checks, the allocation lock, and the region table.
 *
 * Several processes on several hosts allocate regions at once. They agree
 * through one lock word in the superblock, taken with a compare-and-swap on
 * the shared device; every write under the lock is published (persist.h)
 * before the lock is let go, and every reader refreshes before it reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "devdax.h"
#include "error.h"
#include "persist.h"
#include "pool.h"
#include "util.h"

#define META_SIZE CXLCR_DATA_OFFSET

const char *cxlcr_pool_path(void)
{
	const char *p = getenv("CXLCR_POOL");
	return p && *p ? p : CXLCR_POOL_DEFAULT_PATH;
}

static uint32_t superblock_checksum(const struct cxlcr_superblock *sb)
{
	return cxlcr_crc32c(0, sb, offsetof(struct cxlcr_superblock, checksum));
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Who may own what the pool's path leads through: root, or the user this
 * process runs as (a pool of one's own). */
static bool trusted_owner(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

static const char *trusted_owners(char *buf, size_t len)
{
	if (geteuid() == 0)
		return "root";
	snprintf(buf, len, "root or uid %u", (unsigned)geteuid());
	return buf;
}

/* A refusal of a path another user could have prepared: cxlcr_error() has
 * said why. */
static int unsafe(int error)
{
	(void)error;
	return CXLCR_POOL_UNSAFE;
}

/* A directory on the way to the pool is trusted when nobody but root (or
 * us) can change what its names lead to: it is owned by root or us, and
 * nobody else may write it, unless it is sticky and root's (/dev/shm,
 * /tmp), where others may add names but not remove or rename ours. */
static int check_dir(const char *what, const char *dir, const struct stat *st)
{
	char owners[48];
	if (!S_ISDIR(st->st_mode))
		return unsafe(cxlcr_error("%s: %s is not a directory", what, dir));
	if (!trusted_owner(st->st_uid))
		return unsafe(cxlcr_error("%s: directory %s is owned by uid %u, not %s", what, dir,
					  (unsigned)st->st_uid, trusted_owners(owners, sizeof(owners))));
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !((st->st_mode & S_ISVTX) && st->st_uid == 0))
		return unsafe(cxlcr_error("%s: directory %s is writable by group or others (mode %04o)", what,
					  dir, (unsigned)(st->st_mode & 07777)));
	return 0;
}

/* The pool itself: a regular file of root (or us) that nobody else may
 * read or write (a service's heap is in it), or a devdax device of root
 * (or us) that others may not write; its group is the administrator's. */
static int check_node(const char *what, const struct stat *st)
{
	char owners[48];
	if (!S_ISREG(st->st_mode) && !S_ISCHR(st->st_mode))
		return cxlcr_error("%s: not a devdax device or a regular file", what);
	if (!trusted_owner(st->st_uid))
		return unsafe(cxlcr_error("%s: owned by uid %u, not %s", what, (unsigned)st->st_uid,
					  trusted_owners(owners, sizeof(owners))));
	if (S_ISREG(st->st_mode) && (st->st_mode & 077))
		return unsafe(cxlcr_error("%s: mode %04o, others than its owner may use it (want 0600)",
					  what, (unsigned)(st->st_mode & 07777)));
	if (S_ISCHR(st->st_mode) && (st->st_mode & S_IWOTH))
		return unsafe(cxlcr_error("%s: device mode %04o, others may write it", what,
					  (unsigned)(st->st_mode & 07777)));
	return 0;
}

/* Why name, in the directory dirfd, could not be opened without following
 * a link: it is one, or it is not what was asked for, or it is missing. */
static int open_failed(const char *what, int dirfd, const char *name, const char *shown, int err)
{
	struct stat st;
	if ((err == ELOOP || err == ENOTDIR) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		return unsafe(cxlcr_error("%s: %s is a symbolic link (name the pool by its real path)", what,
					  shown));
	cxlcr_error("%s: %s%s", what, strerror(err), err == ENOENT ? " (run `cxlcr pool format` first)" : "");
	errno = err;
	return -1;
}

/* Opens the directory that holds the last name of path, walking from /
 * one name at a time with O_NOFOLLOW, so that no symbolic link is ever
 * followed, and checking each directory on the way (check_dir). With
 * create, missing directories are made 0700. Returns the directory's fd,
 * with *leaf pointing at the last name inside abs (path made absolute). */
static int open_parent(const char *what, const char *path, bool create, char *abs, size_t len,
		       const char **leaf)
{
	size_t n = 0;
	if (path[0] != '/') {
		if (!getcwd(abs, len))
			return cxlcr_error("%s: no working directory: %s", what, strerror(errno));
		n = strlen(abs);
	}
	if (snprintf(abs + n, len - n, "%s%s", n ? "/" : "", path) >= (int)(len - n))
		return cxlcr_error("%s: path too long", what);
	for (n = strlen(abs); n > 1 && abs[n - 1] == '/'; n--)
		abs[n - 1] = 0;
	char *last = strrchr(abs, '/');
	*leaf = last + 1;
	if (!**leaf || !strcmp(*leaf, "..")) {
		cxlcr_error("%s: names a directory", what);
		errno = EISDIR;
		return -1;
	}
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cxlcr_error("%s: /: %s", what, strerror(e));
	}
	int rc = check_dir(what, "/", &st);
	for (char *p = abs + 1, *end; rc == 0 && p < last; p = end + 1) {
		end = strchr(p, '/');
		if (end == p || (end == p + 1 && *p == '.'))
			continue;
		*end = 0;
		int next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, p, 0700) < 0 && errno != EEXIST)
				rc = cxlcr_error("%s: cannot create %s: %s", what, abs, strerror(errno));
			else
				next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0 && rc == 0)
			rc = open_failed(what, fd, p, abs, errno);
		if (next >= 0) {
			close(fd);
			fd = next;
			rc = fstat(fd, &st) < 0 ? cxlcr_error("%s: %s: %s", what, abs, strerror(errno))
						: check_dir(what, abs, &st);
		}
		*end = '/';
	}
	if (rc < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return rc;
	}
	return fd;
}

int cxlcr_check_trusted_dir(const char *dir)
{
	char path[PATH_MAX], abs[PATH_MAX];
	const char *leaf;
	if (snprintf(path, sizeof(path), "%s/.", dir) >= (int)sizeof(path))
		return cxlcr_error("%s: path too long", dir);
	int fd = open_parent(dir, path, false, abs, sizeof(abs), &leaf);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Size of what the pool is: a devdax device's capacity (asked of
 * libdaxctl first, so that another character device is named as such),
 * or a file's length; and whether it may be trusted (check_node). */
static int identify(struct cxlcr_pool *pool, const char *what)
{
	struct stat st;
	if (fstat(pool->fd, &st) < 0)
		return cxlcr_error("%s: %s", what, strerror(errno));
	pool->devdax = S_ISCHR(st.st_mode);
	if (pool->devdax && cxlcr_devdax_size(st.st_rdev, pool->path, &pool->device_size) < 0)
		return -1;
	int rc = check_node(what, &st);
	if (rc == 0 && !pool->devdax)
		pool->device_size = (uint64_t)st.st_size;
	return rc;
}

static int map_metadata(struct cxlcr_pool *pool)
{
	void *m = mmap(NULL, META_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd, 0);
	if (m == MAP_FAILED)
		return cxlcr_error("pool %s: cannot map its superblock: %s", pool->path, strerror(errno));
	pool->sb = m;
	pool->table = (struct cxlcr_region *)((char *)m + CXLCR_TABLE_OFFSET);
	return 0;
}

/* Opens the pool at path through a path nobody else could have prepared
 * (open_parent, check_node), creating a missing file 0600 with create, and
 * finds out what it is. Returns 0, CXLCR_POOL_UNSAFE, or -1 with errno
 * (ENOENT: it, or a directory above it, does not exist). */
static int open_device(struct cxlcr_pool *pool, const char *path, bool create)
{
	memset(pool, 0, sizeof(*pool));
	pool->fd = -1;
	cxlcr_copy_field(pool->path, sizeof(pool->path), path);
	char what[PATH_MAX + 8], abs[PATH_MAX];
	const char *leaf;
	snprintf(what, sizeof(what), "pool %s", path);
	int dir = open_parent(what, path, create, abs, sizeof(abs), &leaf);
	if (dir < 0)
		return dir;
	pool->fd = openat(dir, leaf, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	int rc = pool->fd < 0 ? open_failed(what, dir, leaf, abs, errno) : identify(pool, what);
	int e = errno;
	close(dir);
	if (rc < 0 && pool->fd >= 0) {
		close(pool->fd);
		pool->fd = -1;
	}
	errno = e;
	return rc;
}

static int host_guard_from_env(struct cxlcr_pool *pool);

static int check_superblock(struct cxlcr_pool *pool)
{
	struct cxlcr_superblock *sb = pool->sb;
	cxlcr_refresh(sb, sizeof(*sb));
	if (sb->magic != CXLCR_POOL_MAGIC)
		return cxlcr_error("pool %s: not a cxlcr pool (no superblock magic)", pool->path);
	if (sb->version != CXLCR_POOL_VERSION)
		return cxlcr_error("pool %s: format version %u, this cxlcr reads version %u",
				   pool->path, sb->version, CXLCR_POOL_VERSION);
	if (sb->checksum != superblock_checksum(sb))
		return cxlcr_error("pool %s: corrupt superblock (checksum mismatch)", pool->path);
	if (sb->superblock_size != CXLCR_SUPERBLOCK_SIZE || sb->table_offset != CXLCR_TABLE_OFFSET ||
	    sb->region_max != CXLCR_REGION_MAX || sb->region_entry_size != sizeof(struct cxlcr_region) ||
	    sb->data_offset != CXLCR_DATA_OFFSET || sb->size < CXLCR_POOL_MIN_SIZE ||
	    sb->size % CXLCR_POOL_ALIGN)
		return cxlcr_error("pool %s: corrupt superblock (inconsistent layout)", pool->path);
	pool->dax_rules = pool->devdax || (sb->flags & CXLCR_POOL_F_AS_DEVDAX);
	pool->keeps_memory = pool->devdax || (sb->flags & CXLCR_POOL_F_KEEP_MEMORY);
	if (sb->size > pool->device_size)
		return cxlcr_error("pool %s: truncated (superblock says %llu bytes, device has %llu)",
				   pool->path, (unsigned long long)sb->size,
				   (unsigned long long)pool->device_size);
	return 0;
}

int cxlcr_pool_open(struct cxlcr_pool *pool, const char *path)
{
	int rc = open_device(pool, path, false);
	if (rc < 0)
		return rc;
	if (pool->device_size < CXLCR_SUPERBLOCK_SIZE) {
		cxlcr_error("pool %s: truncated (%llu bytes, no room for a superblock)", path,
			    (unsigned long long)pool->device_size);
		goto fail;
	}
	if (pool->device_size < META_SIZE) {
		cxlcr_error("pool %s: truncated (%llu bytes)", path,
			    (unsigned long long)pool->device_size);
		goto fail;
	}
	if (map_metadata(pool) < 0 || check_superblock(pool) < 0 || host_guard_from_env(pool) < 0)
		goto fail;
	return 0;
fail:
	cxlcr_pool_close(pool);
	return -1;
}

int cxlcr_pool_may_map_private(const struct cxlcr_pool *pool)
{
	if (!pool->dax_rules)
		return 0;
	errno = EINVAL;
	return cxlcr_error("pool %s is a devdax %s, which cannot be mapped privately", pool->path,
			   pool->devdax ? "device" : "stand-in (formatted --as-devdax)");
}

void cxlcr_pool_detach(struct cxlcr_pool *pool)
{
	if (pool->sb)
		munmap(pool->sb, META_SIZE);
	pool->sb = NULL;
	pool->table = NULL;
}

int cxlcr_pool_attach(struct cxlcr_pool *pool)
{
	if (map_metadata(pool) < 0)
		return -1;
	if (check_superblock(pool) < 0) {
		cxlcr_pool_detach(pool);
		return -1;
	}
	return 0;
}

void cxlcr_pool_close(struct cxlcr_pool *pool)
{
	cxlcr_pool_host_unguard(pool);
	if (pool->sb)
		munmap(pool->sb, META_SIZE);
	if (pool->fd >= 0)
		close(pool->fd);
	pool->sb = NULL;
	pool->table = NULL;
	pool->fd = -1;
}

/* Whether anything but the pool's own bookkeeping (the verb leases, made
 * by the first verb, and the host table, by the first daemon; both kept) is
 * in the pool: the data of someone. */
static bool pool_has_regions(struct cxlcr_pool *pool)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		const struct cxlcr_region *r = &pool->table[i];
		bool bookkeeping = r->state == CXLCR_REGION_LIVE &&
				   (r->kind == CXLCR_KIND_LEASES || r->kind == CXLCR_KIND_HOSTS);
		if (r->state != CXLCR_REGION_FREE && !bookkeeping)
			return true;
	}
	return false;
}

/* Creates the pool file (and the directories above it) if needed, opens
 * it into pool and sets its length. A file on tmpfs or hugetlbfs stays
 * sparse: pages are only allocated as the arenas touch them. */
static int prepare_file(struct cxlcr_pool *pool, const char *path, uint64_t size)
{
	int rc = open_device(pool, path, true);
	if (rc < 0)
		return rc;
	if (pool->devdax) {
		cxlcr_pool_close(pool);
		return cxlcr_error("pool %s: became a device while being formatted", path);
	}
	struct statfs fs;
	if (fstatfs(pool->fd, &fs) == 0 && (uint64_t)fs.f_blocks * (uint64_t)fs.f_bsize < size) {
		char a[32], b[32];
		cxlcr_pool_close(pool);
		return cxlcr_error("pool %s: %s does not fit on its file system (%s)", path,
				   cxlcr_format_size(size, a, sizeof(a)),
				   cxlcr_format_size((uint64_t)fs.f_blocks * fs.f_bsize, b, sizeof(b)));
	}
	/* Shrinking first drops the old contents of a re-formatted pool. */
	if (ftruncate(pool->fd, 0) < 0 || ftruncate(pool->fd, (off_t)size) < 0) {
		int e = errno;
		cxlcr_pool_close(pool);
		return cxlcr_error("pool %s: cannot size it to %llu bytes: %s", path,
				   (unsigned long long)size, strerror(e));
	}
	pool->device_size = size;
	return 0;
}

int cxlcr_pool_format(const char *path, uint64_t size, bool force, struct cxlcr_pool *out)
{
	return cxlcr_pool_format_as(path, size, force, 0, out);
}

int cxlcr_pool_format_as(const char *path, uint64_t size, bool force, uint32_t flags,
			 struct cxlcr_pool *out)
{
	if (flags & ~(CXLCR_POOL_F_AS_DEVDAX | CXLCR_POOL_F_KEEP_MEMORY))
		return cxlcr_error("pool %s: unknown format flags %#x", path, flags);
	struct cxlcr_pool pool;
	/* What is there already, if anything: a device, or a file to reuse. */
	int rc = open_device(&pool, path, false);
	if (rc < 0 && (rc == CXLCR_POOL_UNSAFE || errno != ENOENT))
		return rc;
	bool is_device = rc == 0 && pool.devdax;
	if (rc == 0 && !is_device)
		cxlcr_pool_close(&pool);

	if (is_device) {
		if (size == 0)
			size = pool.device_size;
		if (size > pool.device_size) {
			cxlcr_error("pool %s: device holds %llu bytes, %llu asked for", path,
				    (unsigned long long)pool.device_size, (unsigned long long)size);
			goto fail;
		}
		size -= size % CXLCR_POOL_ALIGN;
	} else {
		if (size == 0)
			size = CXLCR_POOL_DEFAULT_SIZE;
		size = round_up(size, CXLCR_POOL_ALIGN);
	}
	if (size < CXLCR_POOL_MIN_SIZE) {
		cxlcr_error("pool %s: %llu bytes is too small (at least %llu MiB)", path,
			    (unsigned long long)size, (unsigned long long)(CXLCR_POOL_MIN_SIZE >> 20));
		if (is_device)
			cxlcr_pool_close(&pool);
		return -1;
	}

	/* Never silently wipe the arenas of running services. */
	if (!force) {
		struct cxlcr_pool old;
		if (cxlcr_pool_open(&old, path) == 0) {
			bool busy = pool_has_regions(&old);
			cxlcr_pool_close(&old);
			if (busy) {
				if (is_device)
					cxlcr_pool_close(&pool);
				return cxlcr_error("pool %s holds regions; pass --force to format it anyway", path);
			}
		}
	}

	if (!is_device && (rc = prepare_file(&pool, path, size)) < 0)
		return rc;
	if (map_metadata(&pool) < 0)
		goto fail;

	struct cxlcr_superblock *sb = pool.sb;
	/* Invalidate first, so a crash part-way leaves no valid-looking pool. */
	sb->magic = 0;
	cxlcr_publish(sb, sizeof(*sb));
	memset(pool.table, 0, CXLCR_REGION_MAX * sizeof(struct cxlcr_region));
	cxlcr_publish(pool.table, CXLCR_REGION_MAX * sizeof(struct cxlcr_region));

	memset(sb, 0, sizeof(*sb));
	sb->version = CXLCR_POOL_VERSION;
	sb->superblock_size = CXLCR_SUPERBLOCK_SIZE;
	if (getrandom(sb->uuid, sizeof(sb->uuid), 0) != sizeof(sb->uuid)) {
		cxlcr_error("pool %s: no random bytes for its uuid: %s", path, strerror(errno));
		goto fail;
	}
	sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40); /* RFC 4122 v4 */
	sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80);
	sb->size = size;
	sb->table_offset = CXLCR_TABLE_OFFSET;
	sb->region_max = CXLCR_REGION_MAX;
	sb->region_entry_size = sizeof(struct cxlcr_region);
	sb->data_offset = CXLCR_DATA_OFFSET;
	sb->formatted_ns = cxlcr_now_ns();
	sb->flags = pool.devdax ? CXLCR_POOL_F_DEVDAX : flags;
	pool.dax_rules = pool.devdax || (flags & CXLCR_POOL_F_AS_DEVDAX);
	pool.keeps_memory = pool.devdax || (flags & CXLCR_POOL_F_KEEP_MEMORY);
	sb->checksum = superblock_checksum(sb);
	cxlcr_publish(sb, sizeof(*sb));
	sb->magic = CXLCR_POOL_MAGIC;
	sb->checksum = superblock_checksum(sb);
	cxlcr_publish(sb, sizeof(*sb));

	if (out) {
		*out = pool;
	} else {
		cxlcr_pool_close(&pool);
	}
	return 0;
fail:
	cxlcr_pool_close(&pool);
	return -1;
}

/* The test hook (struct cxlcr_pool), if a test set one. */
static void hook(struct cxlcr_pool *pool, const char *point)
{
	if (pool->test_hook)
		pool->test_hook(pool, point);
}

static uint64_t lease_ns(const struct cxlcr_pool *pool)
{
	return pool->lock_lease_ns ? pool->lock_lease_ns : CXLCR_POOL_LOCK_LEASE_NS;
}

/* The lock word as the device has it now. */
static uint64_t load_lock(struct cxlcr_pool *pool)
{
	cxlcr_refresh(&pool->sb->lock, sizeof(pool->sb->lock));
	return __atomic_load_n(&pool->sb->lock.owner, __ATOMIC_SEQ_CST);
}

/* Compare-and-swap of the lock word, written back for the other hosts. */
static bool swap_lock(struct cxlcr_pool *pool, uint64_t expected, uint64_t desired)
{
	bool done = __atomic_compare_exchange_n(&pool->sb->lock.owner, &expected, desired, false,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	cxlcr_publish(&pool->sb->lock, sizeof(pool->sb->lock));
	return done;
}

/* Compare-and-swap of a region entry's state, written back likewise. */
static bool swap_state(struct cxlcr_region *r, uint32_t expected, uint32_t desired)
{
	bool done = __atomic_compare_exchange_n(&r->state, &expected, desired, false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST);
	cxlcr_publish(r, sizeof(*r));
	return done;
}

/* A rewrite of entry r's fields, by the lock's holder, goes between these
 * two: seq odd while it lasts, the next even value after (written as a
 * value, not a bump, so that a holder resuming after a take-over, which
 * made seq even already, leaves it even). Readers: stable_copy(). */
static uint32_t begin_change(struct cxlcr_region *r)
{
	uint32_t seq = __atomic_load_n(&r->seq, __ATOMIC_SEQ_CST) & ~1u;
	__atomic_store_n(&r->seq, seq + 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&r->seq, sizeof(r->seq));
	return seq;
}

static void end_change(struct cxlcr_region *r, uint32_t seq)
{
	cxlcr_publish(r, sizeof(*r));
	__atomic_store_n(&r->seq, seq + 2, __ATOMIC_SEQ_CST);
	cxlcr_publish(&r->seq, sizeof(r->seq));
}

static int lost_lock(struct cxlcr_pool *pool)
{
	return cxlcr_error("pool %s: pool lock was taken over while this process held it", pool->path);
}

void cxlcr_pool_guard(struct cxlcr_pool *pool, const uint64_t *word, uint64_t want)
{
	pool->guard_word = word;
	pool->guard_want = want;
	pool->guard_also_word = NULL;
}

void cxlcr_pool_guard_also(struct cxlcr_pool *pool, const uint64_t *word, uint64_t want)
{
	pool->guard_also_word = word;
	pool->guard_also_want = want;
}

void cxlcr_pool_host_unguard(struct cxlcr_pool *pool)
{
	if (pool->host_map)
		munmap(pool->host_map, pool->host_map_len);
	pool->host_map = NULL;
	pool->host_map_len = 0;
	pool->host_word = NULL;
}

/* Maps the page of the host table that holds entry index's fence word
 * (found by the table's region, as common/hosts.c lays it out). */
int cxlcr_pool_host_guard(struct cxlcr_pool *pool, uint32_t index, uint64_t want)
{
	cxlcr_pool_host_unguard(pool);
	struct cxlcr_region r;
	if (index >= CXLCR_HOSTS_MAX)
		return cxlcr_error("%s: host table entry %u: no such entry", CXLCR_HOST_GUARD_ENV, index);
	if (!cxlcr_region_find(pool, CXLCR_KIND_HOSTS, CXLCR_HOSTS_REGION, &r) || r.size < CXLCR_HOSTS_SIZE)
		return cxlcr_error("pool %s has no host table to guard this process's work by", pool->path);
	void *m = cxlcr_pool_map(pool, r.offset, CXLCR_HOSTS_SIZE, 0, 0);
	if (!m)
		return -1;
	const struct cxlcr_host_entry *e =
		(const struct cxlcr_host_entry *)(const void *)((const uint8_t *)m + CXLCR_HOSTS_HEADER_SIZE) + index;
	pool->host_map = m;
	pool->host_map_len = CXLCR_HOSTS_SIZE;
	pool->host_word = &e->fence;
	pool->host_want = want;
	pool->host_entry = index + 1;
	return 0;
}

/* $CXLCR_HOST_GUARD, if set, on a pool just opened. */
static int host_guard_from_env(struct cxlcr_pool *pool)
{
	const char *v = getenv(CXLCR_HOST_GUARD_ENV);
	if (!v || !*v)
		return 0;
	char *end;
	errno = 0;
	unsigned long index = strtoul(v, &end, 10);
	unsigned long long want = 0;
	if (!errno && *end == ':') {
		const char *w = end + 1;
		want = strtoull(w, &end, 10);
		if (!errno && end != w && !*end && index < CXLCR_HOSTS_MAX)
			return cxlcr_pool_host_guard(pool, (uint32_t)index, want);
	}
	return cxlcr_error("%s='%s': not INDEX:FENCE", CXLCR_HOST_GUARD_ENV, v);
}

/* One guard's word still reads what this process works under. */
static int word_holds(const uint64_t *word, uint64_t want, const char *whose)
{
	if (!word)
		return 0;
	cxlcr_refresh(word, sizeof(*word));
	uint64_t now = __atomic_load_n(word, __ATOMIC_SEQ_CST);
	if (now == want)
		return 0;
	return cxlcr_error("fenced: %s (fence %llu, now %llu); it changes nothing more", whose,
			   (unsigned long long)want, (unsigned long long)now);
}

/* The guards' words still read what this process works under (see
 * cxlcr_pool_guard, cxlcr_pool_host_guard); the lock is held. */
static int guard_holds(struct cxlcr_pool *pool)
{
	if (word_holds(pool->guard_word, pool->guard_want, "the work of this process was taken over") < 0 ||
	    word_holds(pool->guard_also_word, pool->guard_also_want, "the work of this process was taken over") < 0)
		return -1;
	return word_holds(pool->host_word, pool->host_want,
			  "the host this process works for was declared dead and fenced");
}

/* Whether we still hold the lock (and our guard, if we work under one). A
 * holder that was stalled past its lease (stopped, frozen, paused, or just
 * slow) may have lost the lock to a waiter, and must then write nothing
 * more: every commit to the region table asks this right before it
 * writes. */
static int still_held(struct cxlcr_pool *pool)
{
	hook(pool, "commit");
	cxlcr_fence();
	uint64_t word = load_lock(pool);
	if (!pool->lock_word || CXLCR_LOCK_TOKEN(word) != CXLCR_LOCK_TOKEN(pool->lock_word))
		return lost_lock(pool);
	return guard_holds(pool);
}

int cxlcr_pool_held(struct cxlcr_pool *pool)
{
	return still_held(pool);
}

/* Tells waiters that we are alive and working: bumps the renewal count of
 * our lock word. It is a compare-and-swap with the word we wrote last, so
 * it fails, and the caller must stop, once the lock is someone else's. */
static int renew_lock(struct cxlcr_pool *pool)
{
	uint64_t mine = pool->lock_word;
	uint64_t next = (mine & ~CXLCR_LOCK_RENEWAL_MASK) | ((mine + 1) & CXLCR_LOCK_RENEWAL_MASK);
	if (!mine || !swap_lock(pool, mine, next))
		return lost_lock(pool);
	pool->lock_word = next;
	return 0;
}

/* Right after taking the lock from a holder that went silent: that holder
 * may only be stalled, and go on where it stopped. The entries it was
 * allocating become ABANDONED, so that its publish (STAGING -> LIVE) fails
 * whenever it comes back; their space stays taken, as it may still be
 * clearing it, until it gives them back itself. Entries that it reserves
 * after this, it finds unpublishable through still_held(). */
static void fence_out_staging(struct cxlcr_pool *pool)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (__atomic_load_n(&r->state, __ATOMIC_SEQ_CST) == CXLCR_REGION_STAGING)
			swap_state(r, CXLCR_REGION_STAGING, CXLCR_REGION_ABANDONED);
		/* A rewrite it left half done stays as it is, but readers
		 * stop waiting for it to end (stable_copy()). */
		uint32_t seq = __atomic_load_n(&r->seq, __ATOMIC_SEQ_CST);
		if (seq & 1) {
			__atomic_store_n(&r->seq, seq + 1, __ATOMIC_SEQ_CST);
			cxlcr_publish(&r->seq, sizeof(r->seq));
		}
	}
}

static void (*lock_wait_fn)(struct cxlcr_pool *pool);
static __thread bool waiting; /* within lock_wait_fn */

void cxlcr_pool_on_lock_wait(void (*fn)(struct cxlcr_pool *pool))
{
	lock_wait_fn = fn;
}

#define WAIT_FN_EVERY_NS 1000000ull

/* Does the lock word name a host the caller has judged dead (a fence of
 * it, on the caller's own watch of its heartbeat)? Its worker, dead or
 * stalled with it, loses the lock at once rather than after the lock's
 * lease: the fence that waits for it holds up that host's recovery. */
static bool holder_judged_dead(const struct cxlcr_pool *pool, uint64_t word)
{
	uint32_t entry = CXLCR_LOCK_HOST(word);
	return entry && entry == pool->judged_dead_entry;
}

int cxlcr_pool_lock(struct cxlcr_pool *pool)
{
	uint64_t token = 0;
	while (token == 0) {
		if (getrandom(&token, sizeof(token), 0) != sizeof(token))
			return cxlcr_error("pool lock: no random bytes: %s", strerror(errno));
		token >>= CXLCR_LOCK_RENEWAL_BITS + (64 - CXLCR_LOCK_HOST_SHIFT);
	}
	token |= (uint64_t)pool->host_entry << (CXLCR_LOCK_HOST_SHIFT - CXLCR_LOCK_RENEWAL_BITS);
	uint64_t mine = token << CXLCR_LOCK_RENEWAL_BITS;
	uint64_t next_wait_fn = 0;
	/* The wait hook reads the region table, which may itself wait for
	 * this lock (stable_copy() of an entry a stalled holder left odd): a
	 * wait within it calls no hook. */
	bool nested = waiting;

	/* A holder is alive while its lock word changes (it renews the word as
	 * it works). One that leaves it unchanged for a whole lease died or
	 * stalled holding it. The lease is timed on our own monotonic clock,
	 * from when we first saw that word, so hosts need not agree on the
	 * time, and a stalled holder is fenced out (still_held). */
	uint64_t lease = lease_ns(pool), start = cxlcr_mono_ns(), since = start, last = 0;
	bool took_over = false;
	for (unsigned spins = 0;; spins++) {
		uint64_t seen = load_lock(pool);
		if (seen == 0) {
			if (swap_lock(pool, 0, mine))
				break;
			continue;
		}
		uint64_t now = cxlcr_mono_ns();
		if (seen != last) {
			last = seen;
			since = now;
		} else if ((now - since >= lease || holder_judged_dead(pool, seen)) && swap_lock(pool, seen, mine)) {
			took_over = true;
			break;
		}
		if (now - start > 4 * lease)
			return cxlcr_error("pool %s: allocation lock still held by another process",
					   pool->path);
		if (lock_wait_fn && !nested && now >= next_wait_fn) {
			next_wait_fn = now + WAIT_FN_EVERY_NS;
			waiting = true;
			lock_wait_fn(pool);
			waiting = false;
		}
		if (spins < 64) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 100000 };
			nanosleep(&ts, NULL);
		}
	}
	pool->lock_word = mine;
	pool->lock_taken_from_host = took_over && holder_judged_dead(pool, last) ? CXLCR_LOCK_HOST(last) : 0;
	/* What the previous holder wrote may still be stale in our cache. */
	cxlcr_refresh(pool->sb, sizeof(*pool->sb));
	cxlcr_refresh(pool->table, CXLCR_REGION_MAX * sizeof(struct cxlcr_region));
	if (took_over) {
		__atomic_add_fetch(&pool->sb->lock.takeovers, 1, __ATOMIC_SEQ_CST);
		cxlcr_publish(&pool->sb->lock, sizeof(pool->sb->lock));
		fence_out_staging(pool);
	}
	hook(pool, "locked");
	return 0;
}

int cxlcr_pool_unlock(struct cxlcr_pool *pool)
{
	hook(pool, "unlocking");
	cxlcr_publish(pool->sb, sizeof(*pool->sb));
	cxlcr_publish(pool->table, CXLCR_REGION_MAX * sizeof(struct cxlcr_region));
	uint64_t mine = pool->lock_word;
	pool->lock_word = 0;
	if (!mine || !swap_lock(pool, mine, 0))
		return cxlcr_error("pool %s: pool lock was taken over while this process held it; "
				   "released nothing", pool->path);
	return 0;
}

/* Lets go of the lock at the end of an operation that returns rc, whose
 * own error (if any) stays the one reported. Its commits were fenced, so
 * what it did stands even when the release fails because the lock was
 * taken over after its last commit: the caller is not told otherwise. */
static int finish(struct cxlcr_pool *pool, int rc)
{
	char saved[CXLCR_ERROR_MAX];
	if (rc < 0)
		cxlcr_copy_field(saved, sizeof(saved), cxlcr_last_error());
	cxlcr_pool_unlock(pool);
	if (rc < 0)
		cxlcr_error("%s", saved);
	return rc;
}

/* The live entry of this kind and name, for the lock's holder. */
static struct cxlcr_region *find_live(struct cxlcr_pool *pool, uint32_t kind, const char *name)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (r->state == CXLCR_REGION_LIVE && r->kind == kind && !strncmp(r->name, name, CXLCR_NAME_MAX))
			return r;
	}
	return NULL;
}

static void stable_copy(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct cxlcr_region *copy);

bool cxlcr_region_find(struct cxlcr_pool *pool, uint32_t kind, const char *name, struct cxlcr_region *copy)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i], c;
		cxlcr_refresh(r, sizeof(*r));
		/* A glance first (most entries are not it), then a stable
		 * copy, which is what is judged and handed out. */
		if (r->state != CXLCR_REGION_LIVE || r->kind != kind || strncmp(r->name, name, CXLCR_NAME_MAX))
			continue;
		stable_copy(pool, r, &c);
		if (c.state == CXLCR_REGION_LIVE && c.kind == kind && !strncmp(c.name, name, CXLCR_NAME_MAX)) {
			if (copy)
				*copy = c;
			return true;
		}
	}
	return false;
}

static struct cxlcr_region *find_generation(struct cxlcr_pool *pool, uint64_t generation)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (r->state == CXLCR_REGION_LIVE && r->generation == generation)
			return r;
	}
	return NULL;
}

static int region_gone(struct cxlcr_pool *pool, uint64_t generation)
{
	return cxlcr_error("pool %s: region %llu is gone", pool->path, (unsigned long long)generation);
}

static int by_offset(const void *a, const void *b)
{
	const struct cxlcr_region *x = *(const struct cxlcr_region *const *)a;
	const struct cxlcr_region *y = *(const struct cxlcr_region *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* First fit over the gaps between the entries that take space, table
 * locked. Every entry that is not FREE takes its space: one being
 * allocated, abandoned or freed may still be written or cleared by the
 * process that holds it. An entry whose range lies outside the data area
 * (a FREE entry's leftovers, as one just reserved may have) takes none. */
static int find_space(struct cxlcr_pool *pool, uint64_t size, uint64_t *offset)
{
	struct cxlcr_region *taken[CXLCR_REGION_MAX];
	size_t n = 0;
	uint64_t pool_size = pool->sb->size;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (r->state != CXLCR_REGION_FREE && r->offset >= CXLCR_DATA_OFFSET && r->offset < pool_size)
			taken[n++] = r;
	}
	qsort(taken, n, sizeof(taken[0]), by_offset);
	uint64_t at = CXLCR_DATA_OFFSET;
	for (size_t i = 0; i <= n; i++) {
		uint64_t end = i < n ? taken[i]->offset : pool_size;
		if (end >= at && end - at >= size) {
			*offset = at;
			return 0;
		}
		if (i < n) {
			uint64_t len = taken[i]->size < pool_size - taken[i]->offset ? taken[i]->size
										    : pool_size - taken[i]->offset;
			if (taken[i]->offset + len > at)
				at = taken[i]->offset + len;
		}
	}
	return -1;
}

/* An entry for an allocation: FREE -> STAGING by compare-and-swap, so that
 * a holder that lost the lock and reserves at the same time never gets the
 * same one. */
static struct cxlcr_region *reserve_slot(struct cxlcr_pool *pool)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (__atomic_load_n(&r->state, __ATOMIC_SEQ_CST) == CXLCR_REGION_FREE &&
		    swap_state(r, CXLCR_REGION_FREE, CXLCR_REGION_STAGING))
			return r;
	}
	return NULL;
}

/* Gives back an entry we reserved and will not publish. Whether it is still
 * STAGING or was ABANDONED by whoever took the lock over, nobody else
 * writes it, so it may go back to FREE. */
static void release_slot(struct cxlcr_region *r)
{
	if (!swap_state(r, CXLCR_REGION_STAGING, CXLCR_REGION_FREE))
		swap_state(r, CXLCR_REGION_ABANDONED, CXLCR_REGION_FREE);
}

bool cxlcr_pool_next_data(const struct cxlcr_pool *pool, uint64_t from, uint64_t end, uint64_t *lo,
			  uint64_t *hi)
{
	if (from >= end)
		return false;
	*lo = from;
	*hi = end;
	if (pool->devdax)
		return true;
	off_t data = lseek(pool->fd, (off_t)from, SEEK_DATA);
	if (data < 0)
		return errno != ENXIO;       /* ENXIO: nothing but holes after from */
	if ((uint64_t)data < from)           /* a file that ignores SEEK_DATA */
		return true;
	if ((uint64_t)data >= end)
		return false;
	*lo = (uint64_t)data / CXLCR_SNAPSHOT_PAGE_SIZE * CXLCR_SNAPSHOT_PAGE_SIZE;
	off_t hole = lseek(pool->fd, data, SEEK_HOLE);
	if (hole > data && (uint64_t)hole < end)
		*hi = round_up((uint64_t)hole, CXLCR_SNAPSHOT_PAGE_SIZE);
	return true;
}

/*
 * Writes zeros over [offset, offset+size), where it may hold data: how a
 * pool that keeps its memory clears it. Clearing a large region takes a
 * while; a lock holder renews its lease before each chunk, so that waiters
 * do not take it for dead, and stops as soon as the lock is no longer its
 * own. The chunk is small enough to clear within a lease even where each
 * page is a fault in a hypervisor (~28 us a 4 KiB page: 16 MiB in ~0.1 s).
 */
static int clear_by_writing(struct cxlcr_pool *pool, uint64_t offset, uint64_t size)
{
	const uint64_t chunk = 16ull << 20;
	uint64_t lo, hi, end = offset + size;
	for (uint64_t at = offset; cxlcr_pool_next_data(pool, at, end, &lo, &hi); at = hi) {
		char *m = cxlcr_pool_map(pool, lo, hi - lo, 0, 0);
		if (!m)
			return -1;
		for (uint64_t done = 0; done < hi - lo; done += chunk) {
			uint64_t n = hi - lo - done < chunk ? hi - lo - done : chunk;
			if (pool->lock_word && renew_lock(pool) < 0) {
				munmap(m, hi - lo);
				return -1;
			}
			memset(m + done, 0, n);
			cxlcr_publish(m + done, n);
		}
		munmap(m, hi - lo);
	}
	return 0;
}

/* A hole reads as zero and gives the memory back to tmpfs. */
static int punch(struct cxlcr_pool *pool, uint64_t offset, uint64_t size)
{
	if (fallocate(pool->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)size) < 0)
		return cxlcr_error("pool %s: cannot clear %llu bytes at %llu: %s", pool->path,
				   (unsigned long long)size, (unsigned long long)offset, strerror(errno));
	return 0;
}

int cxlcr_pool_zero(struct cxlcr_pool *pool, uint64_t offset, uint64_t size)
{
	return pool->keeps_memory ? clear_by_writing(pool, offset, size) : punch(pool, offset, size);
}

/*
 * Gives [offset, offset+size) of a pool file its blocks now (fallocate),
 * so that a page of it never meets a full file system later: on tmpfs a
 * sparse pool's page is only allocated at its first touch, and a touch
 * that finds no room is a SIGBUS in the service (or in CRIU's plugin,
 * copying a snapshot). Other pools and files on the same file system
 * count, as they take its room. The blocks stay holes to SEEK_DATA until
 * written (tmpfs keeps them not up to date), so snapshots still skip
 * them. In chunks, renewing the lock between them; a refusal gives back
 * what it got. Nothing to do on devdax: the device is all there.
 */
static int reserve_blocks(struct cxlcr_pool *pool, uint64_t offset, uint64_t size)
{
	if (pool->devdax)
		return 0;
	const uint64_t chunk = 256ull << 20;
	for (uint64_t done = 0; done < size; done += chunk) {
		uint64_t n = size - done < chunk ? size - done : chunk;
		if (pool->lock_word && renew_lock(pool) < 0)
			return -1;
		if (fallocate(pool->fd, 0, (off_t)(offset + done), (off_t)n) < 0) {
			int e = errno;
			punch(pool, offset, done + n); /* even where the pool keeps its memory: there is none to spare */
			struct statvfs fs;
			char want[32], have[32];
			uint64_t avail = fstatvfs(pool->fd, &fs) == 0 ? (uint64_t)fs.f_bavail * fs.f_frsize : 0;
			if (e == ENOSPC)
				return cxlcr_error("pool %s: no room on its file system for %s more (%s free)",
						   pool->path, cxlcr_format_size(size, want, sizeof(want)),
						   cxlcr_format_size(avail, have, sizeof(have)));
			return cxlcr_error("pool %s: cannot reserve %s at offset %llu: %s", pool->path,
					   cxlcr_format_size(size, want, sizeof(want)), (unsigned long long)offset,
					   strerror(e));
		}
	}
	return 0;
}

/* An allocation is one entry reserved (STAGING), filled in, its space
 * cleared (and its blocks reserved on a file), and published by one compare-and-swap STAGING -> LIVE that a
 * take-over defeats (fence_out_staging): a holder that lost the lock on
 * the way never makes a region, and never clears space another holder
 * handed out. */
static uint32_t owner_start_of(int32_t pid, const char *host);

/* Who a region is born owned by (cxlcr_region_alloc_owned), or NULL. */
struct born_owner {
	int32_t pid;
	uint32_t start;
	const char *host, *command;
};

static int region_alloc(struct cxlcr_pool *pool, uint32_t kind, const char *name, uint64_t size,
			const struct born_owner *o, bool clear, struct cxlcr_region *copy)
{
	if (!cxlcr_valid_name(name))
		return cxlcr_error("invalid name '%s' (letters, digits, '.', '_', '-'; at most %u)",
				   name, CXLCR_NAME_MAX - 1);
	size = round_up(size ? size : 1, CXLCR_POOL_ALIGN);
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	int rc = -1;
	struct cxlcr_region *slot = NULL;
	uint64_t offset;
	/* (Quarantined regions keep their names: several may share one.) */
	if (!cxlcr_kind_held_back(kind) && find_live(pool, kind, name)) {
		cxlcr_error("pool %s: a region named '%s' already exists", pool->path, name);
		goto out;
	}
	if (find_space(pool, size, &offset) < 0) {
		char a[32];
		cxlcr_error("pool %s: no free space for %s", pool->path,
			    cxlcr_format_size(size, a, sizeof(a)));
		goto out;
	}
	if (!(slot = reserve_slot(pool))) {
		cxlcr_error("pool %s: region table full (%u regions)", pool->path, CXLCR_REGION_MAX);
		goto out;
	}
	uint32_t seq = begin_change(slot);
	memset((char *)slot + sizeof(slot->state), 0, offsetof(struct cxlcr_region, seq) - sizeof(slot->state));
	slot->kind = kind;
	slot->generation = __atomic_add_fetch(&pool->sb->generation, 1, __ATOMIC_SEQ_CST);
	slot->offset = offset;
	slot->size = size;
	cxlcr_copy_field(slot->name, sizeof(slot->name), name);
	slot->created_ns = cxlcr_now_ns();
	if (o) { /* as cxlcr_region_set_owner() would, before the entry is live */
		slot->owner_pid = o->pid;
		slot->owner_start = o->start;
		slot->owner_epoch = CXLCR_EPOCH_BORN;
		cxlcr_copy_field(slot->owner_host, sizeof(slot->owner_host), o->host ? o->host : "");
		if (o->command)
			cxlcr_copy_field(slot->command, sizeof(slot->command), o->command);
	}
	end_change(slot, seq);
	cxlcr_publish(&pool->sb->generation, sizeof(pool->sb->generation));
	/* The space is ours to clear only if the lock still was when the
	 * entry that takes it became visible: a holder that took the lock over
	 * before then may have handed the space out. */
	if (still_held(pool) < 0 || (clear && cxlcr_pool_zero(pool, offset, size) < 0) ||
	    reserve_blocks(pool, offset, size) < 0) {
		release_slot(slot);
		goto out;
	}
	hook(pool, "alloc:publish");
	if (!swap_state(slot, CXLCR_REGION_STAGING, CXLCR_REGION_LIVE)) {
		release_slot(slot);
		lost_lock(pool);
		goto out;
	}
	if (copy)
		*copy = *slot;
	rc = 0;
out:
	return finish(pool, rc);
}

int cxlcr_region_alloc(struct cxlcr_pool *pool, uint32_t kind, const char *name, uint64_t size,
		       struct cxlcr_region *copy)
{
	return region_alloc(pool, kind, name, size, NULL, true, copy);
}

int cxlcr_region_alloc_uncleared(struct cxlcr_pool *pool, uint32_t kind, const char *name, uint64_t size,
				 struct cxlcr_region *copy)
{
	return region_alloc(pool, kind, name, size, NULL, false, copy);
}

int cxlcr_region_alloc_owned(struct cxlcr_pool *pool, uint32_t kind, const char *name, uint64_t size,
			     int32_t pid, const char *host, const char *command, struct cxlcr_region *copy)
{
	struct born_owner o = { .pid = pid, .start = owner_start_of(pid, host), .host = host, .command = command };
	return region_alloc(pool, kind, name, size, &o, true, copy);
}

/* A free gives the memory back without holding the lock, which takes a
 * while for a large region: under the lock the entry goes LIVE -> FREEING,
 * which hides it and keeps its space taken; then the memory is punched
 * out; then the entry goes FREEING -> FREE. That last step needs no lock:
 * nobody else writes a FREEING entry, and an allocator sees it either
 * still taking its space or free. A freer that stalls or dies in between
 * leaves the space taken, never handed out while it may still clear it. */
int cxlcr_region_free(struct cxlcr_pool *pool, uint64_t generation)
{
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	struct cxlcr_region *r = find_generation(pool, generation);
	uint64_t offset = r ? r->offset : 0, size = r ? r->size : 0;
	int rc = !r ? region_gone(pool, generation) : still_held(pool);
	if (rc == 0 && !swap_state(r, CXLCR_REGION_LIVE, CXLCR_REGION_FREEING)) {
		rc = region_gone(pool, generation);
	} else if (rc == 0 && __atomic_load_n(&r->generation, __ATOMIC_SEQ_CST) != generation) {
		/* We stalled right before marking it, lost the lock, and the
		 * entry was freed and used again meanwhile: it is not ours. */
		swap_state(r, CXLCR_REGION_FREEING, CXLCR_REGION_LIVE);
		rc = lost_lock(pool);
	}
	if (finish(pool, rc) < 0)
		return -1;
	hook(pool, "free:unlocked");
	if (!pool->keeps_memory) /* else the next region there clears it */
		cxlcr_pool_zero(pool, offset, size);
	swap_state(r, CXLCR_REGION_FREEING, CXLCR_REGION_FREE);
	return 0;
}

/* A live region gives its tail back (cxlcr_snapshot_trim): whoever holds
 * it has cleared the tail first where that is needed, and reads and
 * writes nothing there any more. Under the lock, as an allocation, so
 * that find_space() sees either size; only smaller, and in whole units of
 * the pool's alignment, so the region table stays as a device needs it. */
int cxlcr_region_shrink(struct cxlcr_pool *pool, uint64_t generation, uint64_t size)
{
	if (!size || size % CXLCR_POOL_ALIGN)
		return cxlcr_error("pool %s: a region cannot shrink to %llu bytes", pool->path,
				   (unsigned long long)size);
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	struct cxlcr_region *r = find_generation(pool, generation);
	int rc = !r ? region_gone(pool, generation) : still_held(pool);
	if (rc == 0 && size > r->size)
		rc = cxlcr_error("pool %s: region %.64s is %llu bytes, it cannot grow to %llu", pool->path, r->name,
				 (unsigned long long)r->size, (unsigned long long)size);
	if (rc == 0) {
		uint32_t seq = begin_change(r);
		r->size = size;
		end_change(r, seq);
	}
	return finish(pool, rc);
}

/*
 * What a region's owner_start says of a new owner: the start time of pid,
 * so that cxlcr_region_owner_gone() tells the owner from a process that
 * got its pid later. Only a process of the writer's own host can be looked
 * at (on a real pod another host's pids are another kernel's); else 0, not
 * known. Read before the pool lock is taken: /proc is no place to wait in
 * under it.
 */
static uint32_t owner_start_of(int32_t pid, const char *host)
{
	uint64_t start;
	if (pid <= 0 || !host || strncmp(host, cxlcr_host_name(), CXLCR_HOST_MAX) ||
	    !cxlcr_process_start(pid, &start))
		return 0;
	return (uint32_t)start ? (uint32_t)start : 1; /* 0 means not known */
}

bool cxlcr_region_owner_gone(const struct cxlcr_region *r, const char *host)
{
	if (r->owner_pid <= 0 || strncmp(r->owner_host, host, CXLCR_HOST_MAX))
		return false;
	uint64_t start;
	if (!cxlcr_process_start(r->owner_pid, &start))
		return true;
	uint32_t now = (uint32_t)start ? (uint32_t)start : 1;
	return r->owner_start != 0 && now != r->owner_start;
}

int cxlcr_region_set_owner(struct cxlcr_pool *pool, uint64_t generation, int32_t pid,
			   const char *host, const char *command)
{
	uint32_t start = owner_start_of(pid, host);
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	struct cxlcr_region *r = find_generation(pool, generation);
	int rc = !r ? region_gone(pool, generation) : still_held(pool);
	if (rc == 0) {
		uint32_t seq = begin_change(r);
		r->owner_pid = pid;
		r->owner_start = start;
		r->owner_epoch++;
		hook(pool, "change");
		cxlcr_copy_field(r->owner_host, sizeof(r->owner_host), host);
		if (command)
			cxlcr_copy_field(r->command, sizeof(r->command), command);
		end_change(r, seq);
	}
	return finish(pool, rc);
}

int cxlcr_region_claim(struct cxlcr_pool *pool, uint64_t generation, int32_t pid,
		       const char *host, const char *command, struct cxlcr_region *copy)
{
	uint32_t start = owner_start_of(pid, host);
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	int rc = -1;
	struct cxlcr_region *r = find_generation(pool, generation);
	if (!r) {
		region_gone(pool, generation);
	} else if (r->owner_pid && !(r->owner_pid == pid && !strncmp(r->owner_host, host, CXLCR_HOST_MAX))) {
		cxlcr_error("arena '%s' belongs to pid %d on host %.*s", r->name, r->owner_pid,
			    (int)CXLCR_HOST_MAX, r->owner_host);
	} else if (still_held(pool) == 0) {
		uint32_t seq = begin_change(r);
		r->owner_pid = pid;
		r->owner_start = start;
		r->owner_epoch++;
		cxlcr_copy_field(r->owner_host, sizeof(r->owner_host), host);
		if (command && !r->command[0])
			cxlcr_copy_field(r->command, sizeof(r->command), command);
		end_change(r, seq);
		if (copy)
			*copy = *r;
		rc = 0;
	}
	return finish(pool, rc);
}

int cxlcr_region_assign_net(struct cxlcr_pool *pool, uint64_t generation, uint32_t first,
			    uint32_t count, const char *veth, uint32_t *ip)
{
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	int rc = -1;
	struct cxlcr_region *r = find_generation(pool, generation);
	if (!r) {
		region_gone(pool, generation);
		goto out;
	}
	for (uint32_t cand = first; cand < first + count; cand++) {
		uint32_t net = htonl(cand);
		bool taken = false;
		for (uint32_t i = 0; i < CXLCR_REGION_MAX && !taken; i++)
			taken = pool->table[i].state == CXLCR_REGION_LIVE &&
				cxlcr_kind_is_service(pool->table[i].kind) && pool->table[i].service_ip == net;
		if (!taken) {
			if (still_held(pool) < 0)
				goto out;
			uint32_t seq = begin_change(r);
			r->service_ip = net;
			cxlcr_copy_field(r->veth, sizeof(r->veth), veth);
			end_change(r, seq);
			*ip = cand;
			rc = 0;
			goto out;
		}
	}
	cxlcr_error("pool %s: no free service address left", pool->path);
out:
	return finish(pool, rc);
}

int cxlcr_region_set_veth(struct cxlcr_pool *pool, uint64_t generation, const char *veth)
{
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	struct cxlcr_region *r = find_generation(pool, generation);
	int rc = !r ? region_gone(pool, generation) : still_held(pool);
	if (rc == 0) {
		uint32_t seq = begin_change(r);
		cxlcr_copy_field(r->veth, sizeof(r->veth), veth);
		end_change(r, seq);
	}
	return finish(pool, rc);
}

/* Live regions change kind (an arena quarantined after its host was
 * fenced), all or none: only from the kind the caller expects, under the
 * lock, so two recoveries of one region cannot both think they moved it,
 * and never into a second live region of one kind and name. let_go: their
 * owner's pid is forgotten in the same change (a made region's maker). */
static int change_kinds(struct cxlcr_pool *pool, size_t n, const uint64_t *generations, uint32_t from,
			const uint32_t *to, bool let_go, void (*also)(void *arg), void *arg)
{
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct cxlcr_region *r = find_generation(pool, generations[i]);
		rc = !r ? region_gone(pool, generations[i]) : 0;
		if (rc == 0 && r->kind != from)
			rc = cxlcr_error("region %.64s (generation %llu) is of kind %u, not %u", r->name,
					 (unsigned long long)generations[i], r->kind, from);
		if (rc == 0 && !cxlcr_kind_held_back(to[i]) && find_live(pool, to[i], r->name))
			rc = cxlcr_error("pool %s: a region named '%.64s' already exists", pool->path, r->name);
	}
	if (rc == 0)
		rc = still_held(pool);
	/* First to last: a maker killed in the middle (the lock does not stop
	 * that) leaves the first, the arena of a fresh one, committed, and
	 * some of the rest still being made, which the next recovery on its
	 * host undoes whole (recovery/ended_runs.c). */
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct cxlcr_region *r = find_generation(pool, generations[i]);
		uint32_t seq = begin_change(r);
		r->kind = to[i];
		if (let_go) {
			r->owner_pid = 0;
			r->owner_start = 0;
		}
		end_change(r, seq);
	}
	if (rc == 0 && also)
		also(arg);
	return finish(pool, rc);
}

int cxlcr_region_set_kind(struct cxlcr_pool *pool, uint64_t generation, uint32_t from, uint32_t to)
{
	return change_kinds(pool, 1, &generation, from, &to, false, NULL, NULL);
}

/* The maker is not the regions' owner once they are made: a service is
 * only once a restore takes the arena over (the claim, which moves
 * owner_epoch on). The epoch stays as it was born, so that a made arena
 * nobody ever took over can be told from one a service ran in
 * (recovery/ended_runs.c). All in one change against other holders of
 * the lock; a maker killed in the middle of it leaves the arena (the
 * first) committed and some extents still being made, which the next
 * recovery on its host undoes. */
int cxlcr_region_commit_made(struct cxlcr_pool *pool, size_t n, const uint64_t *generations, const uint32_t *to)
{
	return change_kinds(pool, n, generations, CXLCR_KIND_MAKING, to, true, NULL, NULL);
}

int cxlcr_region_commit_made_and(struct cxlcr_pool *pool, size_t n, const uint64_t *generations, const uint32_t *to,
				 void (*also)(void *arg), void *arg)
{
	return change_kinds(pool, n, generations, CXLCR_KIND_MAKING, to, true, also, arg);
}

void *cxlcr_pool_map(struct cxlcr_pool *pool, uint64_t off, size_t len, size_t align, size_t head)
{
	if (off + len > pool->sb->size) {
		cxlcr_error("pool %s: range %llu+%zu is beyond the pool", pool->path,
			    (unsigned long long)off, len);
		return NULL;
	}
	void *want = NULL;
	void *reserve = NULL;
	size_t reserve_len = 0;
	if (align) {
		/* Reserve room, then place the mapping at the aligned spot in it. */
		reserve_len = len + align;
		reserve = mmap(NULL, reserve_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (reserve == MAP_FAILED) {
			cxlcr_error("cannot reserve %zu bytes of address space: %s", reserve_len, strerror(errno));
			return NULL;
		}
		uintptr_t a = round_up((uintptr_t)reserve + head, align) - head;
		want = (void *)a;
	}
	void *m = mmap(want, len, PROT_READ | PROT_WRITE, MAP_SHARED | (want ? MAP_FIXED : 0),
		       pool->fd, (off_t)off);
	int e = errno;
	if (reserve) {
		char *r = reserve, *w = want;
		if (m == MAP_FAILED) {
			munmap(reserve, reserve_len);
		} else {
			if (w > r)
				munmap(r, (size_t)(w - r));
			if (r + reserve_len > w + len)
				munmap(w + len, (size_t)(r + reserve_len - (w + len)));
		}
	}
	if (m == MAP_FAILED) {
		cxlcr_error("pool %s: cannot map %zu bytes at offset %llu: %s", pool->path, len,
			    (unsigned long long)off, strerror(e));
		return NULL;
	}
	return m;
}

/*
 * Copies a region entry that another process, of this host or another, may
 * be rewriting: between two reads of its seq that are the same even value
 * (see struct cxlcr_region). A rewrite lasts a few stores, so this settles
 * at once; a seq that stays odd belongs to a holder stalled in the middle
 * of one, and the copy is then taken under the pool lock, which is taken
 * over from such a holder after its lease (and the seq made even). The
 * lock's holder itself copies directly: nobody else rewrites entries.
 */
static void stable_copy(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct cxlcr_region *copy)
{
	for (int tries = 0; !pool->lock_word; tries++) {
		cxlcr_refresh(r, sizeof(*r));
		uint32_t before = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
		if (!(before & 1)) {
			memcpy(copy, r, sizeof(*copy));
			cxlcr_fence();
			cxlcr_refresh(&r->seq, sizeof(r->seq));
			if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) == before)
				return;
		}
		if (tries == 1000) {
			bool locked = cxlcr_pool_lock(pool) == 0;
			cxlcr_refresh(r, sizeof(*r));
			memcpy(copy, r, sizeof(*copy));
			if (locked)
				cxlcr_pool_unlock(pool);
			return;
		}
		sched_yield();
	}
	memcpy(copy, r, sizeof(*copy));
}

void cxlcr_region_slot(struct cxlcr_pool *pool, uint32_t i, struct cxlcr_region *copy)
{
	stable_copy(pool, &pool->table[i], copy);
}

int cxlcr_region_lookup(struct cxlcr_pool *pool, uint64_t offset, uint64_t len,
			struct cxlcr_region *copy)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region c;
		stable_copy(pool, &pool->table[i], &c);
		if (c.state == CXLCR_REGION_LIVE && offset >= c.offset && len <= c.size &&
		    offset - c.offset <= c.size - len) {
			*copy = c;
			return 0;
		}
	}
	return cxlcr_error("pool %s: no region holds bytes %llu..%llu", pool->path,
			   (unsigned long long)offset, (unsigned long long)(offset + len));
}

int cxlcr_region_get(struct cxlcr_pool *pool, uint64_t generation, struct cxlcr_region *copy)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		const struct cxlcr_region *r = &pool->table[i];
		struct cxlcr_region c;
		/* A glance first, as cxlcr_region_find() does: a region's
		 * generation is set before it is live and does not change
		 * while it lives, so a slot whose glance is not it is not it.
		 * A stable copy of every slot on the way (two refreshes and
		 * a fence each) made each lookup by generation, of which a
		 * recovery point's catalog work does many, a walk of the
		 * whole table at twice the cost. */
		cxlcr_refresh(r, sizeof(*r));
		if (__atomic_load_n(&r->generation, __ATOMIC_RELAXED) != generation)
			continue;
		stable_copy(pool, r, &c);
		if (c.state == CXLCR_REGION_LIVE && c.generation == generation) {
			*copy = c;
			return 0;
		}
	}
	return cxlcr_error("pool %s: region %llu is gone", pool->path, (unsigned long long)generation);
}

int cxlcr_region_claim_epochs(struct cxlcr_pool *pool, size_t n, const uint64_t *generations,
			      const uint64_t *expected_epochs, const int32_t *pids, const char *host,
			      struct cxlcr_region *now)
{
	uint32_t starts[n ? n : 1];
	for (size_t i = 0; i < n; i++)
		starts[i] = owner_start_of(pids[i], host);
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	int rc = 0;
	/* All are checked before any is changed: under the lock no epoch can
	 * move in between, so either every region is taken or none. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct cxlcr_region *r = find_generation(pool, generations[i]);
		if (!r) {
			rc = -1;
			region_gone(pool, generations[i]);
		} else if (r->owner_epoch != expected_epochs[i]) {
			rc = -1;
			now[i] = *r;
			cxlcr_error("arena '%.*s' changed owner: epoch %llu expected, now %llu", (int)CXLCR_NAME_MAX,
				    r->name, (unsigned long long)expected_epochs[i], (unsigned long long)r->owner_epoch);
		} else if (cxlcr_kind_held_back(r->kind)) {
			rc = -1; /* never handed to anyone (pool_format.h) */
			cxlcr_error(r->kind == CXLCR_KIND_MAKING ? "arena '%.*s' is still being made by a recovery"
								 : "arena '%.*s' is quarantined: its host was fenced",
				    (int)CXLCR_NAME_MAX, r->name);
		}
	}
	if (rc == 0 && still_held(pool) < 0)
		rc = -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct cxlcr_region *r = find_generation(pool, generations[i]);
		uint32_t seq = begin_change(r);
		r->owner_pid = pids[i];
		r->owner_start = starts[i];
		r->owner_epoch++;
		cxlcr_copy_field(r->owner_host, sizeof(r->owner_host), host);
		end_change(r, seq);
		now[i] = *r;
	}
	return finish(pool, rc);
}

int cxlcr_region_claim_epoch(struct cxlcr_pool *pool, uint64_t generation, uint64_t expected_epoch,
			     int32_t pid, const char *host, struct cxlcr_region *now)
{
	memset(now, 0, sizeof(*now));
	return cxlcr_region_claim_epochs(pool, 1, &generation, &expected_epoch, &pid, host, now);
}
