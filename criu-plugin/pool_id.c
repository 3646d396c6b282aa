/*
 * Which file or device is the pool on this host.
 *
 * A mapping or an fd is the pool's if it is the same object, whatever path
 * it was reached by: the same inode of the same file system for a pool
 * file, the same device number for a devdax pool (a device node can be
 * made anywhere, so its own inode says nothing).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "plugin.h"

/* How to recognise a pool that is open. */
int pool_id_of(const struct cxlcr_pool *pool, struct pool_id *id)
{
	struct stat st;
	memset(id, 0, sizeof(*id));
	cxlcr_copy_field(id->path, sizeof(id->path), pool->path);
	if (fstat(pool->fd, &st) < 0)
		return cxlcr_error("pool %s: %s", pool->path, strerror(errno));
	id->devdax = S_ISCHR(st.st_mode);
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->rdev = st.st_rdev;
	memcpy(id->uuid, pool->sb->uuid, sizeof(id->uuid));
	id->known = true;
	return 0;
}

/* Opens the pool at path, which validates it (a path that merely exists is
 * not a pool), and notes how to recognise it and its uuid. */
int pool_id_load(const char *path, struct pool_id *id)
{
	struct cxlcr_pool pool;
	memset(id, 0, sizeof(*id));
	cxlcr_copy_field(id->path, sizeof(id->path), path);
	if (cxlcr_pool_open(&pool, path) < 0)
		return -1;
	int rc = pool_id_of(&pool, id);
	cxlcr_pool_close(&pool);
	return rc;
}

bool pool_id_match(const struct pool_id *id, const struct stat *st)
{
	if (!id->known)
		return false;
	if (id->devdax)
		return S_ISCHR(st->st_mode) && st->st_rdev == id->rdev;
	return S_ISREG(st->st_mode) && st->st_dev == id->dev && st->st_ino == id->ino;
}
