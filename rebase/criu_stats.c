/*
 * CRIU's figures of a dump (criu_stats.h), read with the image code of
 * this folder: they tell a freeze's parts apart for `migrate --json`.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "criu_stats.h"
#include "image_io.h"
#include "stats.pb-c.h"

int criu_read_dump_stats(const char *dir, struct criu_dump_stats *out)
{
	memset(out, 0, sizeof(*out));
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cxlcr_error("%s: %s", dir, strerror(errno));
	struct image_file f = { 0 };
	ProtobufCMessage *m = NULL;
	int rc = image_load(dirfd, "stats-dump", CRIU_STATS_MAGIC, &f);
	if (rc > 0 && image_next(&f, &stats_entry__descriptor, &m) > 0) {
		const StatsEntry *e = (const StatsEntry *)m;
		if (e->dump) {
			out->freezing_ms = e->dump->freezing_time / 1e3;
			out->frozen_ms = e->dump->frozen_time / 1e3;
			out->memdump_ms = e->dump->memdump_time / 1e3;
			out->memwrite_ms = e->dump->memwrite_time / 1e3;
			out->pages_written = e->dump->pages_written;
		}
		protobuf_c_message_free_unpacked(m, NULL);
	}
	image_free(&f);
	close(dirfd);
	return rc > 0 ? 0 : -1;
}
