/*
 * A checkpoint whose arena moved: the same heap, at the same addresses,
 * but in other regions of the pool. A dead host's service is restored from
 * its recovery point into a fresh arena made from the point's snapshot
 * (recovery/fresh_arena.c), so that the dead host's own arena, which a
 * host that was only frozen may still write, is read by nobody. The
 * point's dump maps the old regions: each task's memory map (mm-<pid>.img)
 * and the plugin's records (cxlcr-arena-<pid>.img) are rewritten here to
 * map the new ones at the same addresses, in place in a fetched copy of
 * the dump. Nothing else in the images names a pool offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/record.h"
#include "image_io.h"
#include "internal.h"
#include "mm.pb-c.h"
#include "mm_image.h"

static const struct cxlcr_rebase_move *move_of(const struct cxlcr_rebase_move *moves, size_t n, uint64_t generation)
{
	for (size_t i = 0; i < n; i++)
		if (moves[i].old_generation == generation)
			return &moves[i];
	return NULL;
}

/*
 * Every shared pool VMA piece that a moved record maps gets the new
 * region's offset; a VMA the kernel merged across two regions that lay
 * side by side is split where the records meet. recs are sorted by
 * address and hold only moved records.
 */
static int move_vmas(const MmEntry *mm, const struct cxlcr_arena_record *recs, size_t n,
		     const struct cxlcr_rebase_move *moves, size_t nmoves, struct vma_out *o, const char *img)
{
	uint64_t *covered = calloc(n ? n : 1, sizeof(*covered));
	if (!covered)
		return cxlcr_error("%s: out of memory", img);
	int rc = -1;
	for (size_t i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *v = mm->vmas[i];
		uint64_t cur = v->start;
		for (size_t r = 0; r < n; r++) {
			const struct cxlcr_arena_record *rec = &recs[r];
			uint64_t rec_end = rec->map_address + rec->map_length;
			if (rec->map_address >= v->end || rec_end <= v->start)
				continue;
			uint64_t s = rec->map_address > cur ? rec->map_address : cur;
			uint64_t e = rec_end < v->end ? rec_end : v->end;
			uint64_t at = v->pgoff + (s - v->start);
			if (!(v->status & CRIU_VMA_FILE_SHARED) || at != rec->map_pgoff + (s - rec->map_address)) {
				cxlcr_error("%s: the VMA at %#" PRIx64 " is not arena %s's shared mapping of pool offset %"
					    PRIu64, img, v->start, rec->region_name, rec->map_pgoff + (s - rec->map_address));
				goto out;
			}
			const struct cxlcr_rebase_move *m = move_of(moves, nmoves, rec->region_generation);
			if (at < m->old_offset || at + (e - s) > m->old_offset + m->size) {
				cxlcr_error("%s: arena %s maps pool offset %" PRIu64 " outside its region", img,
					    rec->region_name, at);
				goto out;
			}
			if (s > cur && !vma_out_piece(o, v, cur, s))
				goto oom;
			VmaEntry *p = vma_out_piece(o, v, s, e);
			if (!p)
				goto oom;
			p->pgoff = m->new_offset + (at - m->old_offset);
			covered[r] += e - s;
			cur = e;
		}
		if (cur < v->end && !vma_out_piece(o, v, cur, v->end))
			goto oom;
	}
	if (mm_records_covered(recs, n, covered, img) < 0)
		goto out;
	rc = 0;
	goto out;
oom:
	cxlcr_error("%s: out of memory", img);
out:
	free(covered);
	return rc;
}

/* Rewrites mm-<pid>.img of dirfd for the moved records of one task. */
static int move_task_mm(int dirfd, int pid, const struct cxlcr_arena_record *recs, size_t n,
			const struct cxlcr_rebase_move *moves, size_t nmoves)
{
	char name[64];
	struct image_file f = { 0 };
	ProtobufCMessage *m = NULL;
	struct vma_out out = { 0 };
	int rc = -1;
	if (mm_image_read(dirfd, pid, name, sizeof(name), &f, &m) < 0)
		goto out;
	if (move_vmas((const MmEntry *)m, recs, n, moves, nmoves, &out, name) < 0)
		goto out;
	rc = mm_image_write(dirfd, name, (const MmEntry *)m, &out, true);
out:
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	image_free(&f);
	free(out.v);
	return rc;
}

struct relocation {
	const struct cxlcr_rebase_move *moves;
	size_t n;
	uint64_t epoch;
	int tasks;
};

static int relocate_file(int dirfd, const char *file, struct cxlcr_arena_record *recs, size_t n, void *arg)
{
	struct relocation *r = arg;
	unsigned pid;
	if (sscanf(file, "cxlcr-arena-%u.img", &pid) != 1 || !pid)
		return cxlcr_error("record %s: not a task's record file", file);
	struct cxlcr_arena_record *moved = malloc((n ? n : 1) * sizeof(*moved));
	if (!moved)
		return cxlcr_error("record %s: out of memory", file);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (move_of(r->moves, r->n, recs[i].region_generation) && !(recs[i].flags & CXLCR_RECORD_F_FORK))
			moved[k++] = recs[i];
	qsort(moved, k, sizeof(*moved), mm_records_by_address);
	int rc = k ? move_task_mm(dirfd, (int)pid, moved, k, r->moves, r->n) : 0;
	free(moved);
	if (rc < 0 || !k)
		return rc;
	for (size_t i = 0; i < n; i++) {
		const struct cxlcr_rebase_move *m = move_of(r->moves, r->n, recs[i].region_generation);
		if (!m || (recs[i].flags & CXLCR_RECORD_F_FORK))
			continue;
		recs[i].region_generation = m->new_generation;
		recs[i].map_pgoff = m->new_offset + (recs[i].map_pgoff - m->old_offset);
		recs[i].region_offset = m->new_offset;
		recs[i].owner_epoch = r->epoch;
		cxlcr_arena_record_seal(&recs[i]);
	}
	r->tasks++;
	return cxlcr_arena_records_write(dirfd, file, recs, n);
}

int cxlcr_rebase_relocate(const char *dir, const struct cxlcr_rebase_move *moves, size_t n, uint64_t epoch)
{
	for (size_t i = 0; i < n; i++)
		if (moves[i].old_offset % REBASE_PAGE || moves[i].new_offset % REBASE_PAGE)
			return cxlcr_error("relocation of region %llu: offsets not page aligned",
					   (unsigned long long)moves[i].old_generation);
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cxlcr_error("%s: %s", dir, strerror(errno));
	struct relocation r = { moves, n, epoch, 0 };
	int rc = cxlcr_arena_records_each(dirfd, relocate_file, &r);
	close(dirfd);
	if (rc == 0 && !r.tasks)
		rc = cxlcr_error("%s: no task maps the moved arena: not its checkpoint", dir);
	return rc;
}
