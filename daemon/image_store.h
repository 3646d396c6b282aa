/*
 * Checkpoints live in the pool, so the destination host needs no shared
 * file system: an image set is published as an image-store region
 * ("SERVICE.EPOCH", struct cxlcr_image_set), and fetched back into a local
 * directory for CRIU to read.
 */
#ifndef CXLCR_IMAGE_STORE_H
#define CXLCR_IMAGE_STORE_H
#include <stdint.h>
#include "../common/pool.h"

/* Copies every file of dir into a new image-store region described by
 * meta (service, arena generation and epoch, ...), marking it complete
 * last. *bytes receives the size of the image files. */
int image_store_publish(struct cxlcr_pool *pool, const char *dir, struct cxlcr_image_set *meta,
			uint64_t *bytes);

/* The newest complete image set of a service; its header into *meta. */
int image_store_find(struct cxlcr_pool *pool, const char *service, struct cxlcr_region *region,
		     struct cxlcr_image_set *meta);

/* Writes the files of an image set into dir, checking every checksum. */
int image_store_fetch(struct cxlcr_pool *pool, const struct cxlcr_region *region, const char *dir);

/* Frees the image sets of a service, but the one with keep_generation. */
void image_store_reclaim(struct cxlcr_pool *pool, const char *service, uint64_t keep_generation);

#endif
