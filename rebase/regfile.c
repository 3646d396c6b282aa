/*
 * The pool's entry in files.img. A child maps the pool privately, through
 * the same file entry as the parent's shared mapping: CRIU opens the path
 * of that entry (with the VMA's fdflags) and maps it. So the entry must be
 * a regular file, be the pool the arena records name, and be openable for
 * reading.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "fdinfo.pb-c.h"
#include "image_io.h"
#include "internal.h"

/* "/dev/shm/x/pool" and "dev/shm/x/pool" are one path to CRIU. */
static bool same_path(const char *a, const char *b)
{
	while (*a == '/')
		a++;
	while (*b == '/')
		b++;
	return strcmp(a, b) == 0;
}

int check_pool_file_entry(int src_dir, uint32_t file_id, const char *pool_path)
{
	const char *name = "files.img";
	struct image_file f;
	int rc = image_load(src_dir, name, CRIU_FILES_MAGIC, &f);
	if (rc == 0)
		return cxlcr_error("image %s: missing (the pool's file entry %#x is in it)", name, file_id);
	if (rc < 0)
		return -1;
	ProtobufCMessage *m;
	bool found = false;
	while (!found && (rc = image_next(&f, &file_entry__descriptor, &m)) > 0) {
		const FileEntry *fe = (const FileEntry *)m;
		if (fe->id == file_id) {
			found = true;
			const RegFileEntry *reg = fe->reg;
			if (fe->type != FD_TYPES__REG || !reg)
				rc = cxlcr_error("image %s: file %#x, which the arena mappings use, is not a "
						 "regular file (type %d)", name, file_id, (int)fe->type);
			else if (!same_path(reg->name, pool_path))
				rc = cxlcr_error("image %s: file %#x is %s, not the pool %s", name, file_id,
						 reg->name, pool_path);
			else if ((reg->flags & O_ACCMODE) == O_WRONLY || (reg->flags & O_PATH))
				rc = cxlcr_error("image %s: the pool %s is opened with flags %#o, which allow "
						 "no private mapping", name, reg->name, reg->flags);
		}
		protobuf_c_message_free_unpacked(m, NULL);
	}
	image_free(&f);
	if (rc < 0)
		return -1;
	if (!found)
		return cxlcr_error("image %s: no file %#x, which the arena mappings use", name, file_id);
	return 0;
}
