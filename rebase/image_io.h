/*
 * CRIU image files, as CRIU 4.x lays them out (criu/include/magic.h,
 * criu/image.c):
 *
 *   protobuf images   u32 IMG_COMMON_MAGIC (or IMG_SERVICE_MAGIC), u32 the
 *                     image's own magic, then entries of [u32 size][message]
 *   raw images        whatever the tool that wrote them wrote (ifaddr-*.img
 *                     and route-*.img hold `ip addr|route save` output)
 *
 * Readers load a whole file and walk its entries; writers build a whole
 * file in memory and write it in one go. Every error names the file.
 */
#ifndef CXLCR_REBASE_IMAGE_IO_H
#define CXLCR_REBASE_IMAGE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#define CRIU_IMG_COMMON_MAGIC   0x54564319u
#define CRIU_IMG_SERVICE_MAGIC  0x55105940u
#define CRIU_PAGEMAP_MAGIC      0x56084025u
#define CRIU_MM_MAGIC           0x57492820u
#define CRIU_STATS_MAGIC        0x57093306u /* stats-dump, stats-restore (service image) */
#define CRIU_FILES_MAGIC        0x56303138u
#define CRIU_PSTREE_MAGIC       0x50273030u
#define CRIU_NETDEV_MAGIC       0x57373951u

/* An image file read into memory. */
struct image_file {
	char name[128];
	uint8_t *data;
	size_t len;
	size_t pos;                 /* next entry (protobuf images) */
};

/* Reads all of file name of dirfd (refusing one above max_bytes).
 * 1 if read, 0 if there is no such file, -1 on error. */
int image_load_raw(int dirfd, const char *name, size_t max_bytes, struct image_file *f);

/* Reads a protobuf image and checks its two magic words: 1, 0 if it does
 * not exist, -1 if unreadable or foreign (names the file and both
 * magics). */
int image_load(int dirfd, const char *name, uint32_t magic, struct image_file *f);

/* The next entry of a protobuf image, unpacked with desc into *msg (free
 * it with protobuf_c_message_free_unpacked). 1: got one, 0: end of file,
 * -1: truncated or corrupt (names the file and the entry's offset). */
int image_next(struct image_file *f, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg);

void image_free(struct image_file *f);

/* An image being written: the whole file, built in memory. */
struct image_out {
	char name[128];
	uint8_t *data;
	size_t len, cap;
	bool failed;                /* out of memory: image_write() refuses */
};

/* Starts a protobuf image (magic 0: a raw image, no header). */
void image_begin(struct image_out *o, const char *name, uint32_t magic);
void image_put(struct image_out *o, const ProtobufCMessage *msg);
void image_put_raw(struct image_out *o, const void *data, size_t len);
/* Creates file o->name in dirfd (which must not have it yet) with what
 * was put, and frees o either way. */
int image_write(int dirfd, struct image_out *o);
void image_out_free(struct image_out *o);

#endif
