#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/checksum.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/record.h"
#include "../common/util.h"
#include "cli.h"
#include "container.h"
#include "image_store.h"

#define MAX_FILES 4096

static uint32_t header_checksum(const struct cxlcr_image_set *h, const struct cxlcr_image_file *files)
{
	uint32_t crc = cxlcr_crc32c(0, h, offsetof(struct cxlcr_image_set, checksum));
	return cxlcr_crc32c(crc, files, h->file_count * sizeof(*files));
}

static int read_file(const char *path, char *dst, uint64_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("%s: %s", path, strerror(errno));
	uint64_t done = 0;
	while (done < size) {
		ssize_t n = read(fd, dst + done, size - done);
		if (n <= 0) {
			close(fd);
			return cxlcr_error("%s: short read", path);
		}
		done += (uint64_t)n;
	}
	close(fd);
	return 0;
}

/* The region name of a service's image set at an epoch: "SERVICE.EPOCH". */
static void image_set_name(const struct cxlcr_image_set *meta, char *name, size_t len)
{
	snprintf(name, len, "%.*s.%llu", CXLCR_NAME_MAX, meta->service, (unsigned long long)meta->arena_epoch);
}

int image_store_reserve(struct cxlcr_pool *pool, const struct cxlcr_image_set *meta, uint64_t size,
			struct cxlcr_region *out)
{
	char name[CXLCR_NAME_MAX + 24];
	image_set_name(meta, name, sizeof(name));
	if (cxlcr_region_alloc(pool, CXLCR_KIND_IMAGES, name, size, out) < 0)
		return -1;
	char *m = cxlcr_pool_map(pool, out->offset, out->size, 0, 0);
	if (!m) {
		cxlcr_region_free(pool, out->generation);
		return -1;
	}
	/* Faulted in now, not in the freeze; never complete, and named
	 * after its service, so that `cxlcr gc` leaves it to the verb that
	 * made it while that verb lives (cmd_gc.c). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
	if (madvise(m, out->size, MADV_POPULATE_WRITE) < 0)
		memset(m, 0, out->size);
	struct cxlcr_image_set *h = (void *)m;
	memset(h, 0, sizeof(*h));
	cxlcr_copy_field(h->service, sizeof(h->service), meta->service);
	cxlcr_publish(h, sizeof(*h));
	munmap(m, out->size);
	return 0;
}

int image_store_publish(struct cxlcr_pool *pool, const char *dir, struct cxlcr_image_set *meta,
			uint64_t *bytes)
{
	return image_store_publish_in(pool, dir, meta, NULL, bytes, NULL);
}

int image_store_publish_in(struct cxlcr_pool *pool, const char *dir, struct cxlcr_image_set *meta,
			   const struct cxlcr_region *reserved, uint64_t *bytes, uint64_t *complete_ns)
{
	static struct cxlcr_image_file files[MAX_FILES];
	DIR *d = opendir(dir);
	if (!d)
		return cxlcr_error("%s: %s", dir, strerror(errno));
	uint32_t n = 0;
	uint64_t payload = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		/* CRIU's images; its logs stay behind on the source. */
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || strstr(e->d_name, ".log"))
			continue;
		if (n == MAX_FILES || strlen(e->d_name) >= CXLCR_IMAGE_NAME_MAX) {
			closedir(d);
			return cxlcr_error("%s: too many or too long image file names", dir);
		}
		memset(&files[n], 0, sizeof(files[n]));
		cxlcr_copy_field(files[n].name, sizeof(files[n].name), e->d_name);
		files[n].size = (uint64_t)st.st_size;
		payload += (files[n].size + 63) & ~63ull;
		n++;
	}
	closedir(d);

	uint64_t table = n * sizeof(struct cxlcr_image_file);
	uint64_t size = sizeof(struct cxlcr_image_set) + table + payload;
	char name[CXLCR_NAME_MAX + 24];
	image_set_name(meta, name, sizeof(name));
	struct cxlcr_region r;
	if (reserved && reserved->size >= size) {
		r = *reserved;
	} else {
		/* Larger than its reservation: made now, under the same name. */
		if (reserved)
			cxlcr_region_free(pool, reserved->generation);
		if (cxlcr_region_alloc(pool, CXLCR_KIND_IMAGES, name, size, &r) < 0)
			return -1;
	}
	char *m = cxlcr_pool_map(pool, r.offset, r.size, 0, 0);
	if (!m) {
		cxlcr_region_free(pool, r.generation);
		return -1;
	}
	uint64_t at = sizeof(struct cxlcr_image_set) + table;
	for (uint32_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%.63s", dir, files[i].name);
		files[i].offset = at;
		if (read_file(path, m + at, files[i].size) < 0) {
			munmap(m, r.size);
			cxlcr_region_free(pool, r.generation);
			return -1;
		}
		files[i].crc = cxlcr_crc32c(0, m + at, files[i].size);
		at += (files[i].size + 63) & ~63ull;
	}
	struct cxlcr_image_set *h = (void *)m;
	*h = *meta;
	h->magic = CXLCR_IMAGES_MAGIC;
	h->version = CXLCR_IMAGES_VERSION;
	h->file_count = n;
	memcpy(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid));
	h->created_ns = cxlcr_now_ns();
	h->payload_bytes = payload;
	h->complete = 0;
	memcpy(m + sizeof(*h), files, table);
	h->checksum = header_checksum(h, files);
	/* Everything is on the device before the marker that says so. */
	cxlcr_publish(m, r.size);
	if (complete_ns)
		*complete_ns = cxlcr_mono_ns();
	__atomic_store_n(&h->complete, CXLCR_IMAGES_COMPLETE, __ATOMIC_RELEASE);
	cxlcr_publish(&h->complete, sizeof(h->complete));
	*meta = *h;
	munmap(m, r.size);
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += files[i].size;
	*bytes = total;
	return 0;
}

/* Maps an image-store region and checks its header and table. */
static struct cxlcr_image_set *open_set(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	if (r->size < sizeof(struct cxlcr_image_set)) {
		cxlcr_error("image set %s is truncated", r->name);
		return NULL;
	}
	struct cxlcr_image_set *h = cxlcr_pool_map(pool, r->offset, r->size, 0, 0);
	if (!h)
		return NULL;
	cxlcr_refresh(h, sizeof(*h));
	const char *why = NULL;
	if (h->magic != CXLCR_IMAGES_MAGIC)
		why = "not an image set";
	else if (h->version != CXLCR_IMAGES_VERSION)
		why = "unknown image set version";
	else if (h->complete != CXLCR_IMAGES_COMPLETE)
		why = "incomplete (its checkpoint did not finish)";
	else if (memcmp(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid)))
		why = "written for another pool";
	else if (h->file_count > MAX_FILES ||
		 sizeof(*h) + h->file_count * sizeof(struct cxlcr_image_file) > r->size)
		why = "corrupt (file table out of range)";
	if (!why) {
		struct cxlcr_image_file *files = (void *)(h + 1);
		cxlcr_refresh(files, h->file_count * sizeof(*files));
		if (h->checksum != header_checksum(h, files))
			why = "corrupt (header checksum mismatch)";
		for (uint32_t i = 0; !why && i < h->file_count; i++)
			if (files[i].offset > r->size || files[i].size > r->size - files[i].offset ||
			    !memchr(files[i].name, 0, sizeof(files[i].name)) || strchr(files[i].name, '/'))
				why = "corrupt (file entry out of range)";
	}
	if (why) {
		cxlcr_error("checkpoint %s is %s", r->name, why);
		munmap(h, r->size);
		return NULL;
	}
	return h;
}

int image_store_find(struct cxlcr_pool *pool, const char *service, struct cxlcr_region *region,
		     struct cxlcr_image_set *meta)
{
	bool found = false, any = false;
	char why[CXLCR_ERROR_MAX] = "";
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_IMAGES ||
		    !cxlcr_image_set_of(r.name, service))
			continue;
		any = true;
		struct cxlcr_image_set *h = open_set(pool, &r);
		if (!h) {
			snprintf(why, sizeof(why), "%s", cxlcr_last_error());
			continue;
		}
		if (!strncmp(h->service, service, CXLCR_NAME_MAX) &&
		    (!found || h->arena_epoch > meta->arena_epoch)) {
			*region = r;
			*meta = *h;
			found = true;
		}
		munmap(h, r.size);
	}
	if (found)
		return 0;
	if (any && why[0])
		return cxlcr_error("%s", why);
	return cxlcr_error("no checkpoint of '%s' in pool %s", service, pool->path);
}

int image_store_fetch(struct cxlcr_pool *pool, const struct cxlcr_region *region, const char *dir)
{
	struct cxlcr_image_set *h = open_set(pool, region);
	if (!h)
		return -1;
	struct cxlcr_image_file *files = (void *)(h + 1);
	int rc = 0;
	for (uint32_t i = 0; i < h->file_count && rc == 0; i++) {
		const char *data = (const char *)h + files[i].offset;
		cxlcr_refresh(data, files[i].size);
		if (cxlcr_crc32c(0, data, files[i].size) != files[i].crc) {
			rc = cxlcr_error("checkpoint %s is corrupt (%s: checksum mismatch)", region->name,
					 files[i].name);
			break;
		}
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%.63s", dir, files[i].name);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = cxlcr_error("%s: %s", path, strerror(errno));
			break;
		}
		uint64_t done = 0;
		while (done < files[i].size) {
			ssize_t n = write(fd, data + done, files[i].size - done);
			if (n <= 0) {
				rc = cxlcr_error("%s: %s", path, strerror(errno));
				break;
			}
			done += (uint64_t)n;
		}
		close(fd);
	}
	munmap(h, region->size);
	return rc;
}

/*
 * The claim is the image-store region's owner (pid, its start time, host),
 * set with the pool's compare-and-set on its owner epoch, so that of racing
 * claimers exactly one wins. A claim whose holder died on this host (a
 * daemon worker killed mid-restore) is taken over, even once its pid is
 * another process's (the start time tells them apart: kill(pid, 0) took
 * that process for the holder, and the checkpoint could not be restored
 * while it ran); one held on another host is not, as its holder cannot be
 * seen from here.
 */
int image_store_claim(struct cxlcr_pool *pool, const struct cxlcr_region *region, const char *host,
		      uint64_t *claim)
{
	struct cxlcr_region now;
	if (cxlcr_region_get(pool, region->generation, &now) < 0)
		return cxlcr_error("checkpoint %s was restored already", region->name);
	for (int tries = 0; tries < 8; tries++) {
		bool held = now.owner_pid != 0;
		if (held && now.owner_pid != getpid() && cxlcr_region_owner_gone(&now, host))
			held = false; /* its holder died here */
		if (held)
			return cxlcr_error("checkpoint %s is being restored on %.*s already", region->name,
					   (int)CXLCR_HOST_MAX, now.owner_host);
		if (cxlcr_region_claim_epoch(pool, region->generation, now.owner_epoch, getpid(), host,
					     &now) == 0) {
			*claim = now.owner_epoch;
			return 0;
		}
		if (!now.generation)
			return cxlcr_error("checkpoint %s was restored already (%s)", region->name, cxlcr_last_error());
		/* Someone else moved first: look again at who holds it now. */
	}
	return cxlcr_error("checkpoint %s: cannot claim it (too much contention)", region->name);
}

void image_store_release(struct cxlcr_pool *pool, const struct cxlcr_region *region, uint64_t claim)
{
	struct cxlcr_region now;
	cxlcr_region_claim_epoch(pool, region->generation, claim, 0, "", &now);
}

void image_store_reclaim(struct cxlcr_pool *pool, const char *service, uint64_t keep_generation)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && r.kind == CXLCR_KIND_IMAGES &&
		    r.generation != keep_generation && cxlcr_image_set_of(r.name, service))
			cxlcr_region_free(pool, r.generation);
	}
}


/* A fresh local work directory for one image set. */
int image_work_dir(const char *what, const char *name, char *out, size_t len)
{
	char base[PATH_MAX / 2];
	snprintf(base, sizeof(base), "%s/%s", IMAGE_WORK_DIR, this_host());
	mkdir(IMAGE_WORK_DIR, 0700);
	mkdir(base, 0700);
	/* Its maker's pid and start time in the name: `cxlcr gc` removes the
	 * directories whose maker is gone (a crashed verb), and only those. */
	uint64_t start = 0;
	cxlcr_process_start(getpid(), &start);
	snprintf(out, len, "%s/%s.%s.p%d-%llu.XXXXXX", base, what, name, (int)getpid(), (unsigned long long)start);
	if (!mkdtemp(out))
		return cxlcr_error("cannot create a work directory under %s: %s", base, strerror(errno));
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *at)
{
	remove(path);
	return 0;
}

/* rm -rf --one-file-system, in this process: running rm cost ~1.5 ms a
 * directory, on the critical path of every restore and fork. */
static void remove_tree(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* A failed verb's work directory: CRIU's logs are what anyone will look
 * at, the images (a full copy of the rest of the process, each time) go. */
static int drop_all_but_logs(const char *path, const struct stat *st, int type, struct FTW *at)
{
	size_t n = strlen(path);
	if (type == FTW_F && !(n > 4 && !strcmp(path + n - 4, ".log")))
		remove(path);
	return 0;
}

void image_work_dir_failed(const char *dir)
{
	const char *keep = getenv("CXLCR_KEEP_WORK");
	if (!keep || !*keep || !strcmp(keep, "0"))
		nftw(dir, drop_all_but_logs, 16, FTW_PHYS | FTW_MOUNT);
}

void image_work_dir_purge(const char *dir)
{
	remove_tree(dir);
}

/* Work directories go once done, unless $CXLCR_KEEP_WORK asks to keep
 * them (CRIU's logs, for a closer look). */
void image_work_dir_remove(const char *dir)
{
	const char *keep = getenv("CXLCR_KEEP_WORK");
	if (!keep || !*keep || !strcmp(keep, "0"))
		remove_tree(dir);
}

const char *image_store_renamed_pool(const struct cxlcr_pool *pool, struct cxlcr_image_set *meta)
{
	char here[PATH_MAX];
	if (!realpath(pool->path, here))
		cxlcr_copy_field(here, sizeof(here), pool->path);
	meta->source_pool[sizeof(meta->source_pool) - 1] = 0;
	return meta->source_pool[0] && strcmp(meta->source_pool, here) ? meta->source_pool : NULL;
}

void image_set_describe(const struct cxlcr_pool *pool, const struct cxlcr_region *arena, const char *name,
			struct cxlcr_image_set *meta)
{
	memset(meta, 0, sizeof(*meta));
	cxlcr_copy_field(meta->service, sizeof(meta->service), name);
	meta->arena_generation = arena->generation;
	meta->arena_epoch = arena->owner_epoch;
	cxlcr_copy_field(meta->source_host, sizeof(meta->source_host), this_host());
	cxlcr_copy_field(meta->veth_inner, sizeof(meta->veth_inner), SERVICE_IFNAME);
	meta->service_ip = arena->service_ip;
	if (!realpath(pool->path, meta->source_pool))
		cxlcr_copy_field(meta->source_pool, sizeof(meta->source_pool), pool->path);
}

struct reseal {
	size_t n;
	const uint64_t *generations, *epochs;
};

static int reseal_file(int dirfd, const char *file, struct cxlcr_arena_record *recs, size_t n, void *arg)
{
	const struct reseal *r = arg;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < r->n; k++)
			if (recs[i].region_generation == r->generations[k]) {
				recs[i].owner_epoch = r->epochs[k];
				cxlcr_arena_record_seal(&recs[i]);
			}
	return cxlcr_arena_records_write(dirfd, file, recs, n);
}

int image_store_reseal_regions(const char *dir, size_t n, const uint64_t *generations, const uint64_t *epochs)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cxlcr_error("%s: %s", dir, strerror(errno));
	struct reseal r = { n, generations, epochs };
	int rc = cxlcr_arena_records_each(dirfd, reseal_file, &r);
	close(dirfd);
	return rc;
}

/* The plugin's records of the arena in dir now say epoch. */
int image_store_reseal(const char *dir, uint64_t arena_generation, uint64_t epoch)
{
	return image_store_reseal_regions(dir, 1, &arena_generation, &epoch);
}

int image_store_renew(struct cxlcr_pool *pool, const struct cxlcr_region *images,
		      const struct cxlcr_image_set *meta, uint64_t epoch)
{
	char dir[PATH_MAX];
	if (image_work_dir("renew", meta->service, dir, sizeof(dir)) < 0)
		return -1;
	struct cxlcr_image_set fresh = *meta;
	fresh.arena_epoch = epoch;
	uint64_t bytes;
	int rc = image_store_fetch(pool, images, dir) == 0 && image_store_reseal(dir, meta->arena_generation, epoch) == 0 &&
			 image_store_publish(pool, dir, &fresh, &bytes) == 0
		 ? 0
		 : -1;
	if (rc == 0) {
		/* Only the renewed set is a checkpoint of the arena now. */
		struct cxlcr_region now;
		struct cxlcr_image_set now_meta;
		if (image_store_find(pool, meta->service, &now, &now_meta) == 0)
			image_store_reclaim(pool, meta->service, now.generation);
	}
	remove_tree(dir);
	return rc;
}
