/*
 * A service's own /proc files, made to follow it.
 *
 * A service runs in a PID namespace of its own but sees its host's /proc,
 * so a file it opens as /proc/self/stat (Redis reads its RSS there every
 * cron tick) is open as /proc/6/stat, the host's pid for it, and CRIU
 * dumps that path. Restored anywhere else (another host, a fork child, the
 * same host after the process was replaced) the path names another pid:
 * none, and the restore failed ("Can't open file proc/6/stat on
 * restore"), or someone else's, whose file the service would then read.
 *
 * CRIU's restore opens each task's files in that task, so in a checkpoint
 * of one process such a path is written back as /proc/self/...: the
 * restored process opens its own file. Paths under task/ (a thread's
 * file) keep their numbers, as do the paths of a checkpoint of several
 * processes, where the task that holds the file need not be the one it
 * names: their restore still fails in one line rather than opening a
 * wrong file wherever that pid is free.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "fdinfo.pb-c.h"
#include "image_io.h"
#include "pstree.pb-c.h"
#include "rebase.h"

/* If path (with or without its leading '/') is /proc/<pid> or a file of
 * it other than a thread's, its rest after the pid ("" or "/..."). */
static const char *own_proc_rest(const char *path, pid_t pid)
{
	while (*path == '/')
		path++;
	if (strncmp(path, "proc/", 5) != 0)
		return NULL;
	char *end;
	long n = strtol(path + 5, &end, 10);
	if (end == path + 5 || n != pid || (*end && *end != '/'))
		return NULL;
	if (!strncmp(end, "/task/", 6) || !strcmp(end, "/task"))
		return NULL;
	return end;
}

/* Whether the checkpoint in dirfd is of one process (pstree.img). */
static int one_process(int dirfd)
{
	struct image_file f;
	int rc = image_load(dirfd, "pstree.img", CRIU_PSTREE_MAGIC, &f);
	if (rc <= 0)
		return rc == 0 ? cxlcr_error("image pstree.img: missing") : -1;
	unsigned n = 0;
	ProtobufCMessage *m;
	while ((rc = image_next(&f, &pstree_entry__descriptor, &m)) > 0) {
		n++;
		protobuf_c_message_free_unpacked(m, NULL);
	}
	image_free(&f);
	return rc < 0 ? -1 : n == 1;
}

int cxlcr_rebase_proc_self(const char *dir, pid_t pid, unsigned *rewritten)
{
	*rewritten = 0;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cxlcr_error("%s: cannot open the image directory", dir);
	/* Most checkpoints name no /proc file: a glance at the image's bytes
	 * (protobuf keeps strings as they are) spares them the parsing. */
	struct image_file f;
	int rc = image_load(dirfd, "files.img", CRIU_FILES_MAGIC, &f);
	if (rc <= 0 || !memmem(f.data, f.len, "proc/", 5) || (rc = one_process(dirfd)) <= 0) {
		image_free(&f); /* also after a failed load: it leaves none */
		close(dirfd);
		return rc < 0 ? -1 : 0;
	}
	struct image_out o;
	image_begin(&o, "files.img.proc-self", CRIU_FILES_MAGIC);
	ProtobufCMessage *m;
	while ((rc = image_next(&f, &file_entry__descriptor, &m)) > 0) {
		FileEntry *fe = (FileEntry *)m;
		const char *rest = fe->type == FD_TYPES__REG && fe->reg ? own_proc_rest(fe->reg->name, pid) : NULL;
		char *now = NULL;
		if (rest && asprintf(&now, "%sproc/self%s", fe->reg->name[0] == '/' ? "/" : "", rest) < 0) {
			rc = cxlcr_error("out of memory rewriting files.img");
			protobuf_c_message_free_unpacked(m, NULL);
			break;
		}
		if (now) { /* unpacked with the default allocator: strings are malloc's */
			free(fe->reg->name);
			fe->reg->name = now;
			(*rewritten)++;
		}
		image_put(&o, m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	image_free(&f);
	if (rc < 0 || *rewritten == 0) {
		image_out_free(&o);
		close(dirfd);
		return rc < 0 ? -1 : 0;
	}
	unlinkat(dirfd, o.name, 0); /* a leftover of a dump killed here */
	if (image_write(dirfd, &o) < 0)
		rc = -1;
	else if (renameat(dirfd, "files.img.proc-self", dirfd, "files.img") < 0)
		rc = cxlcr_error("%s: cannot replace files.img: %s", dir, strerror(errno));
	if (rc < 0)
		unlinkat(dirfd, "files.img.proc-self", 0);
	close(dirfd);
	return rc < 0 ? -1 : 0;
}
