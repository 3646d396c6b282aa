/*
 * The fork record: what the cxlcr CRIU plugin finds in a child's image
 * set instead of the parent's arena record (the file format is
 * struct cxlcr_arena_record, pool_format.h). It still describes the
 * parent's mapping (map_*, the arena's offset, size and name: the child
 * maps the same addresses) but names the snapshot the child reads
 * (region_kind CXLCR_KIND_SNAPSHOT, region_generation the snapshot's
 * region) and carries CXLCR_RECORD_F_FORK, so that a restore checks the
 * snapshot instead of taking the arena over. The mapping is private now:
 * CXLCR_RECORD_F_SHARED is cleared.
 */
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/record.h"
#include "internal.h"

int write_fork_records(int dst_dir, const char *name, const struct cxlcr_arena_record *recs,
		       size_t n, const struct cxlcr_snapshot *snap)
{
	struct cxlcr_arena_record *fork = malloc(n * sizeof(*fork));
	if (!fork)
		return cxlcr_error("record %s: out of memory", name);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		fork[i] = recs[i];
		fork[i].flags = (recs[i].flags & ~CXLCR_RECORD_F_SHARED) | CXLCR_RECORD_F_FORK;
		fork[i].region_kind = CXLCR_KIND_SNAPSHOT;
		fork[i].region_generation = snap->header.region_generation;
		cxlcr_arena_record_seal(&fork[i]);
		rc = cxlcr_arena_record_check(&fork[i]);
	}
	if (rc == 0)
		rc = cxlcr_arena_records_write(dst_dir, name, fork, n);
	free(fork);
	return rc;
}
