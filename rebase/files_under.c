/*
 * The regular files of a checkpoint under one directory (files.img), for
 * a restoring host that must provide its own file of each such path: a
 * service's log in the host's own /var/log/cxlcr (daemon/host_files.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "fdinfo.pb-c.h"
#include "image_io.h"
#include "rebase.h"

int rebase_files_under(const char *dir, const char *prefix, void (*fn)(const char *path, void *arg), void *arg)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cxlcr_error("%s: cannot open the image directory", dir);
	struct image_file f;
	int rc = image_load(dirfd, "files.img", CRIU_FILES_MAGIC, &f);
	close(dirfd);
	if (rc <= 0)
		return rc;
	while (*prefix == '/')
		prefix++;
	size_t plen = strlen(prefix);
	ProtobufCMessage *m;
	while ((rc = image_next(&f, &file_entry__descriptor, &m)) > 0) {
		const FileEntry *fe = (const FileEntry *)m;
		const char *name = fe->type == FD_TYPES__REG && fe->reg ? fe->reg->name : NULL;
		while (name && *name == '/')
			name++;
		if (name && !strncmp(name, prefix, plen))
			fn(name, arg);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	image_free(&f);
	return rc < 0 ? -1 : 0;
}
