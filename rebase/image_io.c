/*
 * CRIU image framing: magic words and [u32 size][protobuf] entries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "image_io.h"

/* No image that rebase reads comes anywhere near this. */
#define IMAGE_MAX_BYTES (256u << 20)

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));   /* images are written by this host's CRIU: native order */
	return v;
}

int image_load_raw(int dirfd, const char *name, size_t max_bytes, struct image_file *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return cxlcr_error("image %s: %s", name, strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return cxlcr_error("image %s: %s", name, strerror(e));
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max_bytes) {
		close(fd);
		return cxlcr_error("image %s: not an image (%s)", name,
				   S_ISREG(st.st_mode) ? "too large" : "not a regular file");
	}
	size_t size = (size_t)st.st_size, got = 0;
	f->data = malloc(size ? size : 1);
	if (!f->data) {
		close(fd);
		return cxlcr_error("image %s: out of memory", name);
	}
	while (got < size) {
		ssize_t n = read(fd, f->data + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			image_free(f);
			return cxlcr_error("image %s: %s", name, strerror(e));
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	f->len = got;
	return 1;
}

int image_load(int dirfd, const char *name, uint32_t magic, struct image_file *f)
{
	int rc = image_load_raw(dirfd, name, IMAGE_MAX_BYTES, f);
	if (rc <= 0)
		return rc;
	if (f->len < 8) {
		image_free(f);
		return cxlcr_error("image %s: truncated (%zu bytes, no image header)", name, f->len);
	}
	uint32_t head = get_u32(f->data), own = get_u32(f->data + 4);
	if ((head != CRIU_IMG_COMMON_MAGIC && head != CRIU_IMG_SERVICE_MAGIC) || own != magic) {
		image_free(f);
		return cxlcr_error("image %s: not the CRIU image expected (magic %#x %#x, expected %#x %#x)",
				   name, head, own, CRIU_IMG_COMMON_MAGIC, magic);
	}
	f->pos = 8;
	return 1;
}

int image_next(struct image_file *f, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg)
{
	*msg = NULL;
	if (f->pos == f->len)
		return 0;
	if (f->len - f->pos < 4)
		return cxlcr_error("image %s: truncated (%zu stray bytes at offset %zu)", f->name,
				   f->len - f->pos, f->pos);
	uint32_t size = get_u32(f->data + f->pos);
	if (size > f->len - f->pos - 4)
		return cxlcr_error("image %s: truncated (entry at offset %zu of %u bytes, %zu left)", f->name,
				   f->pos, size, f->len - f->pos - 4);
	*msg = protobuf_c_message_unpack(desc, NULL, size, f->data + f->pos + 4);
	if (!*msg)
		return cxlcr_error("image %s: corrupt entry at offset %zu (not a %s)", f->name, f->pos,
				   desc->name);
	f->pos += 4 + (size_t)size;
	return 1;
}

void image_free(struct image_file *f)
{
	free(f->data);
	f->data = NULL;
	f->len = f->pos = 0;
}

/* Makes room for n more bytes; on failure the image is marked failed. */
static uint8_t *reserve(struct image_out *o, size_t n)
{
	if (o->failed)
		return NULL;
	if (o->cap - o->len < n) {
		size_t cap = o->cap ? o->cap : 4096;
		while (cap - o->len < n)
			cap *= 2;
		uint8_t *more = realloc(o->data, cap);
		if (!more) {
			o->failed = true;
			return NULL;
		}
		o->data = more;
		o->cap = cap;
	}
	return o->data + o->len;
}

void image_put_raw(struct image_out *o, const void *data, size_t len)
{
	uint8_t *p = reserve(o, len);
	if (!p)
		return;
	memcpy(p, data, len);
	o->len += len;
}

static void put_u32(struct image_out *o, uint32_t v)
{
	image_put_raw(o, &v, sizeof(v));
}

void image_begin(struct image_out *o, const char *name, uint32_t magic)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name);
	if (magic) {
		put_u32(o, CRIU_IMG_COMMON_MAGIC);
		put_u32(o, magic);
	}
}

void image_put(struct image_out *o, const ProtobufCMessage *msg)
{
	size_t size = protobuf_c_message_get_packed_size(msg);
	if (size > UINT32_MAX) {
		o->failed = true;
		return;
	}
	put_u32(o, (uint32_t)size);
	uint8_t *p = reserve(o, size);
	if (!p)
		return;
	o->len += protobuf_c_message_pack(msg, p);
}

int image_write(int dirfd, struct image_out *o)
{
	int rc = 0;
	if (o->failed) {
		rc = cxlcr_error("image %s: out of memory while building it", o->name);
		goto out;
	}
	int fd = openat(dirfd, o->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = cxlcr_error("cannot create image %s: %s", o->name, strerror(errno));
		goto out;
	}
	const uint8_t *p = o->data;
	size_t left = o->len;
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = cxlcr_error("cannot write image %s: %s", o->name, n < 0 ? strerror(errno) : "short write");
			break;
		}
		p += n;
		left -= (size_t)n;
	}
	if (close(fd) < 0 && rc == 0)
		rc = cxlcr_error("cannot write image %s: %s", o->name, strerror(errno));
out:
	image_out_free(o);
	return rc;
}

void image_out_free(struct image_out *o)
{
	free(o->data);
	o->data = NULL;
	o->len = o->cap = 0;
}
