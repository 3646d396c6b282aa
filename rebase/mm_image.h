/*
 * A task's memory map image (mm-<pid>.img) as rebase/ rewrites it: read its
 * one entry, build a new list of VMAs, write it back (mm.c for fork
 * children, relocate.c for a recovery into fresh regions).
 */
#ifndef CXLCR_REBASE_MM_IMAGE_H
#define CXLCR_REBASE_MM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "image_io.h"
#include "mm.pb-c.h"

/* VMAs being built, in address order. */
struct vma_out {
	VmaEntry *v;
	size_t n, cap;
	bool oom;
};

/* Appends to o a copy of like narrowed to [start, end), a file mapping's
 * offset moved with its start: both rewrites cut a dumped VMA into pieces
 * and change only some of them. NULL when out of memory, and from then on
 * (o->oom says so), so that a caller may check once at the end. */
VmaEntry *vma_out_piece(struct vma_out *o, const VmaEntry *like, uint64_t start, uint64_t end);

/* qsort() order of arena records by map_address: both rewrites walk a
 * task's VMAs and its records side by side, in address order. */
int mm_records_by_address(const void *a, const void *b);

/* -1 with one line (img names the image) if a record of recs[0..n) is not
 * all mapped by the VMAs whose overlaps with it covered[] counted: both
 * rewrites cut the VMAs where the records say, and a record the map does
 * not wholly hold would be left pointing at the old offsets. */
struct cxlcr_arena_record;
int mm_records_covered(const struct cxlcr_arena_record *recs, size_t n, const uint64_t *covered, const char *img);

/* Loads the one MmEntry of mm-<pid>.img of dirfd into *m (its name in
 * name): 1; -1 with one line if it is missing (a task with arena records
 * must have one), truncated, or holds more than one entry. The caller
 * frees *m (protobuf_c_message_free_unpacked) and f (image_free). */
int mm_image_read(int dirfd, int pid, char *name, size_t len, struct image_file *f, ProtobufCMessage **m);

/* Writes mm as name into dirfd with vmas in place of its own VMAs
 * (replace: the file there is removed first, as image_write() creates). */
int mm_image_write(int dirfd, const char *name, const MmEntry *mm, const struct vma_out *vmas, bool replace);

#endif
