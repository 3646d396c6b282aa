/*
 * The memory map of a fork child (mm-<pid>.img).
 *
 * In the parent, the arena is one MAP_SHARED mapping of its region of the
 * pool: [arena header | heap]. CRIU dumped it as a shared file mapping
 * without pages. The child gets, at the same addresses:
 *
 *   arena header         a MAP_PRIVATE view of the snapshot's copy of the
 *                        header (its first pages), then zero pages
 *   a run of CXL pages   a MAP_PRIVATE view of the pool at the run's offset
 *                        in the snapshot (its copies are packed in heap
 *                        order, so consecutive pages are one mapping)
 *   a run of zero pages  a private anonymous mapping (no pages in the
 *                        images: it reads as zero)
 *   cold pages           refused: nothing can bring them in yet
 *
 * In copy mode (pager/pager.h) the whole arena part (header and heap) is
 * private anonymous memory instead, with no pages in the images: the
 * child's pager fills it before the child runs and on its faults.
 *
 * so it shares the snapshot's pages read-only through the page cache and
 * owns only those it writes (copy-on-write). CRIU restores a private file
 * mapping by opening the file (shmid: its id in files.img) with the VMA's
 * fdflags and mapping it; its content comes from the file unless the
 * pagemap has pages for it, which it must not have here.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/error.h"
#include "image_io.h"
#include "internal.h"
#include "mm.pb-c.h"
#include "mm_image.h"
#include "pagemap.pb-c.h"

/* A piece of the child's map, with vma_entry's fd at its default: CRIU
 * does not use the field in an image (vma.proto), and -1 is what it
 * writes. */
static VmaEntry *push(struct vma_out *o, const VmaEntry *like, uint64_t start, uint64_t end)
{
	VmaEntry *e = vma_out_piece(o, like, start, end);
	if (e)
		e->fd = -1;
	return e;
}

/* A piece of a parent VMA that stays what it was (the part of a pool
 * mapping outside the arena records, say): only its file offset moves
 * (vma_out_piece moves it). */
static void emit_unchanged(struct vma_out *o, const VmaEntry *orig, uint64_t start, uint64_t end)
{
	push(o, orig, start, end);
}

/* A copy-on-write view of the pool at device offset pgoff. The file is
 * opened read-only: a private mapping never writes it back. */
static void emit_pool_view(struct vma_out *o, const VmaEntry *orig, uint64_t start, uint64_t end,
			   uint64_t pgoff)
{
	VmaEntry *e = push(o, orig, start, end);
	if (!e)
		return;
	e->pgoff = pgoff;
	e->flags = (orig->flags & ~(uint32_t)(MAP_SHARED | MAP_ANONYMOUS)) | MAP_PRIVATE;
	e->status = CRIU_VMA_AREA_REGULAR | CRIU_VMA_FILE_PRIVATE;
	e->has_fdflags = true;
	e->fdflags = O_RDONLY;
}

/* Private anonymous memory: no file, no pages, reads as zero. */
static void emit_zero(struct vma_out *o, const VmaEntry *orig, uint64_t start, uint64_t end)
{
	VmaEntry *e = push(o, orig, start, end);
	if (!e)
		return;
	e->pgoff = 0;
	e->shmid = 0;
	e->flags = (orig->flags & ~(uint32_t)MAP_SHARED) | MAP_PRIVATE | MAP_ANONYMOUS;
	e->status = CRIU_VMA_AREA_REGULAR | CRIU_VMA_ANON_PRIVATE;
	e->has_fdflags = false;
	e->fdflags = 0;
}

/*
 * The part of [start, end) that maps the arena header area, which starts
 * at header offset at: the pages of the header become views of the
 * snapshot's copy of them (taken in the same freeze as the heap, and kept
 * alive by the child's borrow of the snapshot), the rest of the area
 * reads as zero. Never a view of the parent's arena region: that is live
 * (the child would see its parent's later stats and requests, and be woken
 * by its futexes) and is freed and reused once the parent stops. Returns
 * where the heap part starts.
 */
static uint64_t emit_header_part(struct vma_out *o, const VmaEntry *orig, uint64_t start, uint64_t end,
				 uint64_t at, const struct cxlcr_snapshot *snap)
{
	uint64_t stop = start + (CXLCR_ARENA_HEAP_OFFSET - at) < end ? start + (CXLCR_ARENA_HEAP_OFFSET - at) : end;
	uint64_t copied = snap->header.arena_header_size;
	if (at < copied) {
		uint64_t to = start + (copied - at) < stop ? start + (copied - at) : stop;
		emit_pool_view(o, orig, start, to,
			       snap->region.offset + snap->header.arena_header_offset + at);
		start = to;
	}
	if (start < stop)
		emit_zero(o, orig, start, stop);
	return stop;
}

/*
 * [start, end) of a pool VMA that record rec describes: the arena header
 * part becomes a view of the arena, the heap part (all of an extent's
 * record) one mapping per run of the snapshot's run table. Heap pages are
 * found by their address: an arena's heap is one range where its owner
 * maps it, whichever extents of the pool it lies in.
 */
static int emit_arena_part(struct vma_out *o, const VmaEntry *orig, const struct cxlcr_arena_record *rec,
			   uint64_t start, uint64_t end, const struct cxlcr_snapshot *snap, bool copy,
			   struct cxlcr_rebase_stats *stats, const char *img)
{
	if (copy) {
		/* Copy mode: all of it (header and heap) the child's own
		 * anonymous memory, empty until its pager fills it. */
		emit_zero(o, orig, start, end);
		stats->runs_copy++;
		return 0;
	}
	uint64_t dev = rec->map_pgoff + (start - rec->map_address);
	if (rec->region_kind == CXLCR_KIND_ARENA && dev < rec->region_offset + CXLCR_ARENA_HEAP_OFFSET)
		start = emit_header_part(o, orig, start, end, dev - rec->region_offset, snap);
	if (start >= end)
		return 0;
	uint64_t heap_address = snap->header.heap_address;
	if (start < heap_address || end > heap_address + snap->header.heap_size)
		return cxlcr_error("%s: %s maps heap at %#" PRIx64 "-%#" PRIx64 ", outside snapshot %s's heap",
				   img, rec->region_name, start, end, snap->region.name);
	uint64_t page = (start - heap_address) / REBASE_PAGE, last = (end - heap_address) / REBASE_PAGE;
	/* The snapshot's runs, as checked on open, from the one holding `page`. */
	const struct cxlcr_snapshot_run *run = snap->runs, *runs_end = snap->runs + snap->run_count;
	size_t lo = 0, hi = snap->run_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (run[mid].first_page + run[mid].pages <= page)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (run += lo; page < last; run++) {
		if (run == runs_end || run->first_page > page)
			return cxlcr_error("%s: snapshot %s: no leaf for heap page %" PRIu64, img, snap->region.name,
					   page);
		uint64_t next = run->first_page + run->pages < last ? run->first_page + run->pages : last;
		uint32_t tier = CXLCR_LEAF_TIER(run->leaf);
		switch (tier) {
		case CXLCR_TIER_CXL:
			emit_pool_view(o, orig, heap_address + page * REBASE_PAGE, heap_address + next * REBASE_PAGE,
				       CXLCR_LEAF_OFFSET(run->leaf) + (page - run->first_page) * REBASE_PAGE);
			stats->runs_cxl++;
			break;
		case CXLCR_TIER_ZERO:
			emit_zero(o, orig, heap_address + page * REBASE_PAGE, heap_address + next * REBASE_PAGE);
			stats->runs_zero++;
			break;
		case CXLCR_TIER_COLD:
			return cxlcr_error("%s: arena %s: heap page %" PRIu64 " (at %#" PRIx64
					   ") is on the cold tier: cold pages are not supported yet",
					   img, rec->region_name, page, heap_address + page * REBASE_PAGE);
		default:
			return cxlcr_error("%s: snapshot %s: leaf %" PRIu64 " has unknown tier %u", img,
					   snap->region.name, page, tier);
		}
		page = next;
	}
	return 0;
}

/* A record is rebased only onto a snapshot of its own arena, taken while
 * the arena had the same owner, and mapped where the snapshot says. */
static int check_record(const struct cxlcr_arena_record *rec, const struct cxlcr_snapshot *snap, bool copy,
			const char *img)
{
	const struct cxlcr_snapshot_header *h = &snap->header;
	const char *name = rec->region_name;
	if (rec->flags & CXLCR_RECORD_F_FORK)
		return cxlcr_error("%s: arena %s: the checkpoint is of a fork child already", img, name);
	if ((rec->flags & (CXLCR_RECORD_F_DEVDAX | CXLCR_RECORD_F_DAX_RULES)) && !copy)
		return cxlcr_error("%s: arena %s lies on a devdax pool, which cannot be mapped privately "
				   "(fork --mode copy)", img, name);
	if (memcmp(rec->pool_uuid, h->pool_uuid, sizeof(h->pool_uuid)))
		return cxlcr_error("%s: arena %s is of another pool than snapshot %s", img, name, h->name);
	if (rec->region_kind == CXLCR_KIND_EXTENT && (rec->flags & CXLCR_RECORD_F_SHARED)) {
		/* More of the heap: it must be this arena's, all inside the
		 * snapshot's heap (emit_arena_part() maps it by address). */
		if (!cxlcr_extent_of(name, h->arena_name))
			return cxlcr_error("%s: %s is not an extent of arena %s, whose snapshot %s this is", img,
					   name, h->arena_name, h->name);
		if ((rec->map_address | rec->map_length) % REBASE_PAGE || rec->map_address < h->heap_address ||
		    rec->map_address + rec->map_length > h->heap_address + h->heap_size)
			return cxlcr_error("%s: extent %s is mapped at %#" PRIx64 "+%" PRIu64 ", outside snapshot "
					   "%s's heap", img, name, rec->map_address, rec->map_length, h->name);
		return 0;
	}
	if (rec->region_kind != CXLCR_KIND_ARENA || !(rec->flags & CXLCR_RECORD_F_SHARED))
		return cxlcr_error("%s: region %s is not a shared mapping of an arena (kind %u, flags %#x)",
				   img, name, rec->region_kind, rec->flags);
	if (rec->region_generation != h->arena_generation)
		return cxlcr_error("%s: snapshot %s was taken of arena generation %" PRIu64
				   ", the checkpoint maps arena %s of generation %" PRIu64,
				   img, h->name, h->arena_generation, name, rec->region_generation);
	if (rec->owner_epoch != h->arena_epoch)
		return cxlcr_error("%s: arena %s changed owner between the snapshot (epoch %" PRIu64
				   ") and the checkpoint (epoch %" PRIu64 ")", img, name, h->arena_epoch,
				   rec->owner_epoch);
	if (rec->region_size < CXLCR_ARENA_HEAP_OFFSET ||
	    h->heap_size < rec->region_size - CXLCR_ARENA_HEAP_OFFSET)
		return cxlcr_error("%s: arena %s holds %" PRIu64 " bytes, snapshot %s a heap of %" PRIu64,
				   img, name, rec->region_size, h->name, h->heap_size);
	if ((rec->map_address | rec->map_length | rec->map_pgoff) % REBASE_PAGE)
		return cxlcr_error("%s: arena %s: mapping %#" PRIx64 "+%" PRIu64 " is not page aligned",
				   img, name, rec->map_address, rec->map_length);
	uint64_t heap_dev = rec->region_offset + CXLCR_ARENA_HEAP_OFFSET;
	if (rec->map_pgoff + rec->map_length > heap_dev &&
	    rec->map_address - rec->map_pgoff + heap_dev != h->heap_address)
		return cxlcr_error("%s: arena %s maps its heap at %#" PRIx64 ", snapshot %s has it at %#" PRIx64,
				   img, name, rec->map_address - rec->map_pgoff + heap_dev, h->name,
				   h->heap_address);
	return 0;
}

/* The parent VMA v must be the shared pool mapping that rec describes
 * around address at. */
static int check_pool_vma(const VmaEntry *v, const struct cxlcr_arena_record *rec, uint64_t at,
			  const char *img)
{
	uint32_t other = CRIU_VMA_FILE_PRIVATE | CRIU_VMA_ANON_SHARED | CRIU_VMA_ANON_PRIVATE |
			 CRIU_VMA_AREA_SYSVIPC | CRIU_VMA_AREA_MEMFD | CRIU_VMA_EXT_PLUGIN;
	if (!(v->status & CRIU_VMA_AREA_REGULAR) || !(v->status & CRIU_VMA_FILE_SHARED) ||
	    (v->status & other) || !(v->flags & MAP_SHARED) || (v->flags & MAP_ANONYMOUS))
		return cxlcr_error("%s: the VMA at %#" PRIx64 " is not a shared file mapping (status %#x, "
				   "flags %#x), but arena %s is mapped there", img, v->start, v->status,
				   v->flags, rec->region_name);
	if (v->pgoff + (at - v->start) != rec->map_pgoff + (at - rec->map_address))
		return cxlcr_error("%s: the VMA at %#" PRIx64 " maps file offset %" PRIu64 " at %#" PRIx64
				   ", arena %s says %" PRIu64, img, v->start, v->pgoff + (at - v->start), at,
				   rec->region_name, rec->map_pgoff + (at - rec->map_address));
	if (v->shmid > UINT32_MAX)
		return cxlcr_error("%s: the VMA at %#" PRIx64 " names file id %" PRIu64, img, v->start,
				   v->shmid);
	return 0;
}

/* The child's VMA list: every parent VMA, the arena parts replaced. */
static int rewrite_vmas(const MmEntry *mm, const struct cxlcr_arena_record *recs, size_t n,
			const struct cxlcr_snapshot *snap, bool copy, uint32_t *file_id, struct vma_out *o,
			struct cxlcr_rebase_stats *stats, const char *img)
{
	uint64_t *covered = calloc(n, sizeof(*covered));
	if (!covered)
		return cxlcr_error("%s: out of memory", img);
	int rc = -1;
	bool have_id = false;
	for (size_t i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *v = mm->vmas[i];
		uint64_t cur = v->start;
		if (v->end <= v->start || (i && v->start < mm->vmas[i - 1]->end)) {
			cxlcr_error("%s: corrupt VMA list (%#" PRIx64 "-%#" PRIx64 " out of order)", img,
				    v->start, v->end);
			goto out;
		}
		for (size_t r = 0; r < n; r++) {
			const struct cxlcr_arena_record *rec = &recs[r];
			uint64_t rec_end = rec->map_address + rec->map_length;
			if (rec->map_address >= v->end || rec_end <= v->start)
				continue;
			uint64_t s = rec->map_address > cur ? rec->map_address : cur;
			uint64_t e = rec_end < v->end ? rec_end : v->end;
			if (check_pool_vma(v, rec, s, img) < 0)
				goto out;
			if (have_id && v->shmid != *file_id) {
				cxlcr_error("%s: arena mappings of two files (ids %u and %" PRIu64 ")", img,
					    *file_id, v->shmid);
				goto out;
			}
			*file_id = (uint32_t)v->shmid;
			have_id = true;
			if (s > cur)
				emit_unchanged(o, v, cur, s);
			if (emit_arena_part(o, v, rec, s, e, snap, copy, stats, img) < 0)
				goto out;
			covered[r] += e - s;
			cur = e;
		}
		if (cur == v->start)
			push(o, v, v->start, v->end);
		else if (cur < v->end)
			emit_unchanged(o, v, cur, v->end);
	}
	if (mm_records_covered(recs, n, covered, img) < 0)
		goto out;
	if (o->oom) {
		cxlcr_error("%s: out of memory", img);
		goto out;
	}
	if (o->n > REBASE_MAX_VMAS) {
		cxlcr_error("%s: the child would have %zu mappings, more than %u (vm.max_map_count)", img,
			    o->n, REBASE_MAX_VMAS);
		goto out;
	}
	stats->vmas_in += mm->n_vmas;
	stats->vmas_out += o->n;
	rc = 0;
out:
	free(covered);
	return rc;
}

/* CRIU restores a private mapping's pages from the pagemap over what the
 * file holds: a page of the arena there would hide the snapshot's. A
 * shared mapping has none, so one there means the images are not what
 * rebase expects. */
static int check_pagemap(int src_dir, int pid, const struct cxlcr_arena_record *recs, size_t n)
{
	char name[64];
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	struct image_file f;
	int rc = image_load(src_dir, name, CRIU_PAGEMAP_MAGIC, &f);
	if (rc == 0)
		return cxlcr_error("image %s: missing", name);
	if (rc < 0)
		return -1;
	ProtobufCMessage *m;
	rc = image_next(&f, &pagemap_head__descriptor, &m);
	if (rc == 0)
		rc = cxlcr_error("image %s: truncated (no pagemap head)", name);
	if (rc < 0)
		goto out;
	protobuf_c_message_free_unpacked(m, NULL);
	while ((rc = image_next(&f, &pagemap_entry__descriptor, &m)) > 0) {
		const PagemapEntry *pe = (const PagemapEntry *)m;
		uint64_t pages = pe->has_nr_pages ? pe->nr_pages : pe->compat_nr_pages;
		uint64_t start = pe->vaddr, end = start + pages * REBASE_PAGE;
		for (size_t r = 0; r < n && rc > 0; r++) {
			uint64_t rs = recs[r].map_address, re = rs + recs[r].map_length;
			if (start < re && end > rs)
				rc = cxlcr_error("image %s: holds %" PRIu64 " page(s) at %#" PRIx64
						 " inside arena %s: cannot rebase a private copy of an arena",
						 name, pages, start, recs[r].region_name);
		}
		protobuf_c_message_free_unpacked(m, NULL);
		if (rc < 0)
			break;
	}
out:
	image_free(&f);
	return rc < 0 ? -1 : 0;
}

int rebase_task_mm(int src_dir, int dst_dir, int pid, const struct cxlcr_arena_record *in_recs,
		   size_t n, const struct cxlcr_snapshot *snap, bool copy, uint32_t *pool_file_id,
		   struct cxlcr_rebase_stats *stats)
{
	char name[64];
	snprintf(name, sizeof(name), "mm-%d.img", pid);
	struct cxlcr_arena_record *recs = malloc(n * sizeof(*recs));
	if (!recs)
		return cxlcr_error("%s: out of memory", name);
	memcpy(recs, in_recs, n * sizeof(*recs));
	qsort(recs, n, sizeof(*recs), mm_records_by_address);

	int rc = -1;
	struct image_file f = { 0 };
	ProtobufCMessage *m = NULL;
	struct vma_out out = { 0 };
	for (size_t i = 0; i < n; i++) {
		if (check_record(&recs[i], snap, copy, name) < 0)
			goto out;
		if (i && recs[i].map_address < recs[i - 1].map_address + recs[i - 1].map_length) {
			cxlcr_error("%s: arena records overlap at %#" PRIx64, name, recs[i].map_address);
			goto out;
		}
	}
	if (mm_image_read(src_dir, pid, name, sizeof(name), &f, &m) < 0)
		goto out;
	const MmEntry *mm = (const MmEntry *)m;
	if (rewrite_vmas(mm, recs, n, snap, copy, pool_file_id, &out, stats, name) < 0)
		goto out;
	if (check_pagemap(src_dir, pid, recs, n) < 0)
		goto out;

	rc = mm_image_write(dst_dir, name, mm, &out, false);
out:
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	image_free(&f);
	free(out.v);
	free(recs);
	return rc;
}

VmaEntry *vma_out_piece(struct vma_out *o, const VmaEntry *like, uint64_t start, uint64_t end)
{
	if (o->oom)
		return NULL;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		VmaEntry *more = realloc(o->v, cap * sizeof(*more));
		if (!more) {
			o->oom = true;
			return NULL;
		}
		o->v = more;
		o->cap = cap;
	}
	VmaEntry *e = &o->v[o->n++];
	*e = *like;
	e->start = start;
	e->end = end;
	if (like->status & (CRIU_VMA_FILE_PRIVATE | CRIU_VMA_FILE_SHARED))
		e->pgoff = like->pgoff + (start - like->start);
	return e;
}

int mm_records_by_address(const void *a, const void *b)
{
	const struct cxlcr_arena_record *x = a, *y = b;
	return x->map_address < y->map_address ? -1 : x->map_address > y->map_address;
}

int mm_records_covered(const struct cxlcr_arena_record *recs, size_t n, const uint64_t *covered, const char *img)
{
	for (size_t r = 0; r < n; r++)
		if (covered[r] != recs[r].map_length)
			return cxlcr_error("%s: arena %s is mapped at %#" PRIx64 "+%" PRIu64
					   " by its record, but no VMA covers all of it", img, recs[r].region_name,
					   recs[r].map_address, recs[r].map_length);
	return 0;
}

int mm_image_read(int dirfd, int pid, char *name, size_t len, struct image_file *f, ProtobufCMessage **m)
{
	ProtobufCMessage *extra = NULL;
	snprintf(name, len, "mm-%d.img", pid);
	int got = image_load(dirfd, name, CRIU_MM_MAGIC, f);
	if (got == 0)
		cxlcr_error("image %s: missing, but task %d has arena records", name, pid);
	if (got <= 0)
		return -1;
	got = image_next(f, &mm_entry__descriptor, m);
	if (got == 0)
		cxlcr_error("image %s: truncated (no entry)", name);
	if (got <= 0)
		return -1;
	got = image_next(f, &mm_entry__descriptor, &extra);
	if (extra)
		protobuf_c_message_free_unpacked(extra, NULL);
	if (got != 0) {
		if (got > 0)
			cxlcr_error("image %s: corrupt (more than one mm entry)", name);
		return -1;
	}
	return 1;
}

int mm_image_write(int dirfd, const char *name, const MmEntry *mm, const struct vma_out *vmas, bool replace)
{
	VmaEntry **ptrs = malloc((vmas->n ? vmas->n : 1) * sizeof(*ptrs));
	if (!ptrs)
		return cxlcr_error("%s: out of memory", name);
	for (size_t i = 0; i < vmas->n; i++)
		ptrs[i] = &vmas->v[i];
	MmEntry out = *mm;
	out.n_vmas = vmas->n;
	out.vmas = ptrs;
	struct image_out o;
	image_begin(&o, name, CRIU_MM_MAGIC);
	image_put(&o, &out.base);
	free(ptrs);
	if (replace && unlinkat(dirfd, name, 0) < 0) {
		image_out_free(&o);
		return cxlcr_error("image %s: %s", name, strerror(errno));
	}
	return image_write(dirfd, &o);
}
