/*
 * Checkpoints live in the pool, so the destination host needs no shared
 * file system: an image set is published as an image-store region
 * ("SERVICE.EPOCH", struct cxlcr_image_set), and fetched back into a local
 * directory for CRIU to read.
 */
#ifndef CXLCR_IMAGE_STORE_H
#define CXLCR_IMAGE_STORE_H
#include <stddef.h>
#include <stdint.h>
#include "../common/pool.h"

/* The header of an image set called name, of a dump of the service whose
 * arena region is arena, made on this host (image_store_publish() adds the
 * files' part). */
void image_set_describe(const struct cxlcr_pool *pool, const struct cxlcr_region *arena, const char *name,
			struct cxlcr_image_set *meta);

/* Copies every file of dir into a new image-store region described by
 * meta (service, arena generation and epoch, ...), marking it complete
 * last. *bytes receives the size of the image files. */
int image_store_publish(struct cxlcr_pool *pool, const char *dir, struct cxlcr_image_set *meta,
			uint64_t *bytes);
/* A migrate publishes its images while the service is frozen: into a
 * region reserved before the freeze (image_store_reserve(), faulted in:
 * a tmpfs pool's fresh 2 MiB pages took 1-7 ms to find in the freeze), at
 * the size the dump will probably have. A dump larger than its
 * reservation goes into a region made then. On failure the caller frees
 * the reservation (cxlcr_region_free); publish_in frees it when it is too
 * small, and on its own failure. *complete_ns (if not NULL): when the set
 * was marked complete (cxlcr_mono_ns), the moment a destination waiting
 * for it may go on. */
int image_store_reserve(struct cxlcr_pool *pool, const struct cxlcr_image_set *meta, uint64_t size,
			struct cxlcr_region *out);
int image_store_publish_in(struct cxlcr_pool *pool, const char *dir, struct cxlcr_image_set *meta,
			   const struct cxlcr_region *reserved, uint64_t *bytes, uint64_t *complete_ns);

/* The newest complete image set of a service; its header into *meta. */
int image_store_find(struct cxlcr_pool *pool, const char *service, struct cxlcr_region *region,
		     struct cxlcr_image_set *meta);

/* Writes the files of an image set into dir, checking every checksum. */
int image_store_fetch(struct cxlcr_pool *pool, const struct cxlcr_region *region, const char *dir);

/* Claims an image set for a restore by this process on host, before CRIU
 * runs: of several restores of one checkpoint, only the one holding the
 * claim goes on (the others fail with one line naming the holder's host).
 * *claim receives what image_store_release() needs. The plugin's epoch
 * compare-and-set on the arena stays the final guard. */
int image_store_claim(struct cxlcr_pool *pool, const struct cxlcr_region *region, const char *host,
		      uint64_t *claim);

/* Gives up a claim after a failed restore, so the checkpoint can be tried
 * again; a no-op if the image set is gone or no longer ours. */
void image_store_release(struct cxlcr_pool *pool, const struct cxlcr_region *region, uint64_t claim);

/* Frees the image sets of a service, but the one with keep_generation. */
void image_store_reclaim(struct cxlcr_pool *pool, const char *service, uint64_t keep_generation);

/* Publishes the image set again, its arena records saying epoch, in place
 * of the old one (see renew_stale_checkpoint() in cmd_migrate.c). */
int image_store_renew(struct cxlcr_pool *pool, const struct cxlcr_region *images,
		      const struct cxlcr_image_set *meta, uint64_t epoch);

/* The pool's path on the host that made the image set, when this host
 * names the pool otherwise (CRIU is then given this host's pool for that
 * path); NULL when both name it the same. */
const char *image_store_renamed_pool(const struct cxlcr_pool *pool, struct cxlcr_image_set *meta);

/* A fresh local directory for one image set, under /var/lib/cxlcr/HOST/
 * ("WHAT.NAME.XXXXXX"), and its removal once done: unless $CXLCR_KEEP_WORK
 * asks to keep it (CRIU's logs, for a closer look). */
int image_work_dir(const char *what, const char *name, char *out, size_t len);
void image_work_dir_remove(const char *dir);

/* Where verbs make their work directories (one folder per host). */
#define IMAGE_WORK_DIR "/var/lib/cxlcr"
/* Removes a work directory, whatever $CXLCR_KEEP_WORK says (cxlcr gc). */
void image_work_dir_purge(const char *dir);
/* After a failed verb: the work directory keeps only CRIU's logs. */
void image_work_dir_failed(const char *dir);

/* Rewrites the plugin's records of the arena in the image directory dir to
 * say epoch (and seals them again). */
int image_store_reseal(const char *dir, uint64_t arena_generation, uint64_t epoch);
/* The plugin's records of each region generations[k] in dir now say
 * epochs[k] (one pass over the records). */
int image_store_reseal_regions(const char *dir, size_t n, const uint64_t *generations, const uint64_t *epochs);

#endif
