/*
 * What the parts of rebase/ share: each file rewrites one kind of image
 * (mm.c the memory map, regfile.c checks the pool's file entry,
 * fork_record.c the plugin's records, netid.c the network identity) and
 * rebase.c drives them over an image directory.
 */
#ifndef CXLCR_REBASE_INTERNAL_H
#define CXLCR_REBASE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/pool_format.h"
#include "rebase.h"

#define REBASE_PAGE ((uint64_t)4096)

/* CRIU's VMA status bits (criu/include/image.h): what vma_entry.status
 * holds in mm-*.img. */
#define CRIU_VMA_AREA_REGULAR  (1u << 0)
#define CRIU_VMA_FILE_PRIVATE  (1u << 6)
#define CRIU_VMA_FILE_SHARED   (1u << 7)
#define CRIU_VMA_ANON_SHARED   (1u << 8)
#define CRIU_VMA_ANON_PRIVATE  (1u << 9)
#define CRIU_VMA_AREA_SYSVIPC  (1u << 10)
#define CRIU_VMA_AREA_MEMFD    (1u << 14)
#define CRIU_VMA_EXT_PLUGIN    (1u << 27)

/* The kernel's default vm.max_map_count is 65530; a child needs room for
 * a few mappings of its own on top of what it is restored with. */
#define REBASE_MAX_VMAS 65000u

/* mm.c: rewrites mm-<pid>.img of src_dir into dst_dir, the VMAs of the
 * arena records recs[0..n) becoming views of the snapshot (copy: anonymous
 * memory), and checks that
 * pagemap-<pid>.img holds no page of them. *pool_file_id receives the id
 * of the pool's file (files.img) that the arena mappings use. */
int rebase_task_mm(int src_dir, int dst_dir, int pid, const struct cxlcr_arena_record *recs,
		   size_t n, const struct cxlcr_snapshot *snap, bool copy, uint32_t *pool_file_id,
		   struct cxlcr_rebase_stats *stats);

/* regfile.c: the file entry file_id of files.img is the pool (pool_path,
 * as the dumping host named it) and can be opened for a private mapping. */
int check_pool_file_entry(int src_dir, uint32_t file_id, const char *pool_path);

/* fork_record.c: writes name into dst_dir: the arena records recs[0..n)
 * as fork records of snapshot snap. */
int write_fork_records(int dst_dir, const char *name, const struct cxlcr_arena_record *recs,
		       size_t n, const struct cxlcr_snapshot *snap);

/* netid.c: the network images of net namespace image id ns_id
 * (netdev-, ifaddr-, route-<ns_id>.img): the link spec->ifname gets the
 * child's MAC and IPv4 address. Sets *found if this namespace has that
 * link. Writes the images it rewrote to dst_dir; the caller links the
 * others. */
int rebase_netns(int src_dir, int dst_dir, unsigned ns_id, const struct cxlcr_rebase_fork *spec,
		 int *found, struct cxlcr_rebase_stats *stats);

#endif
