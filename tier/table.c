/*
 * The tier table in the pool (format.h): memory servers and the extents of
 * their memory that snapshots own. All writes happen under the pool lock;
 * every entry carries its own CRC-32C.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/checksum.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "internal.h"
#include "tier.h"

static uint32_t header_crc(const struct cxlcr_tier_header *h)
{
	return cxlcr_crc32c(0, h, offsetof(struct cxlcr_tier_header, checksum));
}

uint32_t table_server_crc(const struct cxlcr_tier_server *s)
{
	return cxlcr_crc32c(0, s, offsetof(struct cxlcr_tier_server, crc));
}

uint32_t table_extent_crc(const struct cxlcr_tier_extent *e)
{
	return cxlcr_crc32c(0, e, offsetof(struct cxlcr_tier_extent, crc));
}

/* The header is written once, under the pool lock, by whoever maps the new
 * (zeroed) region first; the magic goes in last. */
static int init_header(struct tier_table *t)
{
	if (cxlcr_pool_lock(t->pool) < 0)
		return -1;
	struct cxlcr_tier_header *h = t->header;
	cxlcr_refresh(h, sizeof(*h));
	if (h->magic != CXLCR_TIER_MAGIC) {
		memset(h, 0, sizeof(*h));
		h->version = CXLCR_TIER_VERSION;
		h->header_size = sizeof(*h);
		memcpy(h->pool_uuid, t->pool->sb->uuid, sizeof(h->pool_uuid));
		h->servers = CXLCR_TIER_SERVERS;
		h->extents = CXLCR_TIER_EXTENTS;
		h->server_size = sizeof(struct cxlcr_tier_server);
		h->extent_size = sizeof(struct cxlcr_tier_extent);
		h->checksum = header_crc(h);
		cxlcr_publish(h, sizeof(*h));
		h->magic = CXLCR_TIER_MAGIC;
		h->checksum = header_crc(h);
		cxlcr_publish(h, sizeof(*h));
	}
	return cxlcr_pool_unlock(t->pool);
}

int table_open(struct cxlcr_pool *pool, bool create, struct tier_table *t)
{
	memset(t, 0, sizeof(*t));
	t->pool = pool;
	bool found = cxlcr_region_find(pool, CXLCR_KIND_TIER, CXLCR_TIER_REGION, &t->region);
	if (!found && !create)
		return 1;
	if (!found && cxlcr_region_alloc(pool, CXLCR_KIND_TIER, CXLCR_TIER_REGION, CXLCR_TIER_SIZE, &t->region) < 0 &&
	    !cxlcr_region_find(pool, CXLCR_KIND_TIER, CXLCR_TIER_REGION, &t->region))
		return -1;
	if (t->region.size < CXLCR_TIER_SIZE)
		return cxlcr_error("the tier table of pool %s is corrupt (region of %llu bytes)", pool->path,
				   (unsigned long long)t->region.size);
	t->base = cxlcr_pool_map(pool, t->region.offset, t->region.size, 0, 0);
	if (!t->base)
		return -1;
	t->header = (void *)t->base;
	t->servers = (void *)(t->base + CXLCR_TIER_HEADER_SIZE);
	t->extents = (void *)(t->base + CXLCR_TIER_HEADER_SIZE + CXLCR_TIER_SERVERS * sizeof(*t->servers));
	cxlcr_refresh(t->header, sizeof(*t->header));
	if (t->header->magic == 0 && init_header(t) < 0) {
		table_close(t);
		return -1;
	}
	const struct cxlcr_tier_header *h = t->header;
	if (h->magic != CXLCR_TIER_MAGIC || h->checksum != header_crc(h) ||
	    memcmp(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid)) || h->servers != CXLCR_TIER_SERVERS ||
	    h->extents != CXLCR_TIER_EXTENTS) {
		table_close(t);
		return cxlcr_error("the tier table of pool %s is corrupt (header)", pool->path);
	}
	return 0;
}

void table_close(struct tier_table *t)
{
	if (t->base)
		munmap(t->base, t->region.size);
	t->base = NULL;
}

int table_server(const struct tier_table *t, uint32_t i, struct cxlcr_tier_server *copy)
{
	cxlcr_refresh(&t->servers[i], sizeof(*copy));
	*copy = t->servers[i];
	if (copy->incarnation == 0)
		return -1;
	if (copy->crc != table_server_crc(copy))
		return cxlcr_error("memory server entry %u of the tier table is corrupt (checksum)", i);
	return 0;
}

bool table_extent_live(const struct tier_table *t, const struct cxlcr_tier_extent *e)
{
	if (e->owner == 0 || e->crc != table_extent_crc(e) || e->server >= CXLCR_TIER_SERVERS)
		return false;
	struct cxlcr_region r;
	if (cxlcr_region_get(t->pool, e->owner, &r) < 0)
		return false;
	struct cxlcr_tier_server s;
	return table_server(t, e->server, &s) == 0 && s.state == CXLCR_TIER_SERVER_UP &&
	       s.incarnation == e->server_incarnation;
}

/* May extent e's entry be cleared? Only when it is known to be free: its
 * owner's region is gone, or its server is known (a valid entry) to be
 * down or another incarnation. An entry that fails its checksum, or whose
 * server's entry does, is left alone: what it holds is not known. */
static bool extent_stale(const struct tier_table *t, const struct cxlcr_tier_extent *e)
{
	if (e->owner == 0 || e->crc != table_extent_crc(e) || e->server >= CXLCR_TIER_SERVERS)
		return false;
	struct cxlcr_region r;
	if (cxlcr_region_get(t->pool, e->owner, &r) < 0)
		return true;
	struct cxlcr_tier_server s;
	if (table_server(t, e->server, &s) < 0)
		return false;
	return s.state != CXLCR_TIER_SERVER_UP || s.incarnation != e->server_incarnation;
}

static void printable_address(const struct cxlcr_tier_server *s, char *buf, size_t len)
{
	const struct sockaddr_in *in = (const void *)s->addr;
	char ip[INET_ADDRSTRLEN];
	if (s->addr_len >= sizeof(*in) && in->sin_family == AF_INET && inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip)))
		snprintf(buf, len, "%s:%u", ip, ntohs(in->sin_port));
	else
		snprintf(buf, len, "(%u bytes)", s->addr_len);
}

int tier_server_get(struct cxlcr_pool *pool, uint32_t index, struct tier_server_info *out)
{
	memset(out, 0, sizeof(*out));
	struct tier_table t;
	int rc = table_open(pool, false, &t);
	if (rc != 0)
		return rc;
	struct cxlcr_tier_server s = { 0 };
	rc = index < CXLCR_TIER_SERVERS ? table_server(&t, index, &s) : -1;
	if (rc < 0) {
		table_close(&t);
		return s.incarnation == 0 ? 1 : -1;
	}
	out->index = index;
	cxlcr_copy_field(out->name, sizeof(out->name), s.name);
	cxlcr_copy_field(out->provider, sizeof(out->provider), s.provider);
	printable_address(&s, out->address, sizeof(out->address));
	out->bulk_port = s.bulk_port;
	out->up = s.state == CXLCR_TIER_SERVER_UP;
	out->dead = s.state == CXLCR_TIER_SERVER_DEAD;
	out->pid = s.pid;
	out->incarnation = s.incarnation;
	out->size = s.size;
	for (uint32_t k = 0; k < CXLCR_TIER_EXTENTS; k++) {
		struct cxlcr_tier_extent e = t.extents[k];
		if (e.server == index && table_extent_live(&t, &e) && e.server_incarnation == s.incarnation) {
			out->used += e.size;
			out->extents++;
		}
	}
	table_close(&t);
	return 0;
}

int tier_servers_up(struct cxlcr_pool *pool)
{
	int n = 0;
	for (uint32_t i = 0; i < CXLCR_TIER_SERVERS; i++) {
		struct tier_server_info s;
		n += tier_server_get(pool, i, &s) == 0 && s.up;
	}
	return n;
}

int tier_server_register(struct cxlcr_pool *pool, const struct cxlcr_tier_server *identity)
{
	struct tier_table t;
	if (table_open(pool, true, &t) < 0)
		return -1;
	if (cxlcr_pool_lock(pool) < 0) {
		table_close(&t);
		return -1;
	}
	int index = -1, free_index = -1;
	for (uint32_t i = 0; i < CXLCR_TIER_SERVERS && index < 0; i++) {
		struct cxlcr_tier_server s;
		int rc = table_server(&t, i, &s);
		if (rc == 0 && !strncmp(s.name, identity->name, sizeof(s.name)))
			index = (int)i;
		else if (s.incarnation == 0 && free_index < 0)
			free_index = (int)i;
	}
	if (index < 0)
		index = free_index;
	if (index < 0) {
		cxlcr_pool_unlock(pool);
		table_close(&t);
		return cxlcr_error("the tier table is full (%u memory servers)", CXLCR_TIER_SERVERS);
	}
	struct cxlcr_tier_server *e = &t.servers[index];
	cxlcr_refresh(e, sizeof(*e));
	struct cxlcr_tier_server s = *identity;
	s.incarnation = e->incarnation + 1;
	s.state = CXLCR_TIER_SERVER_UP;
	s.crc = table_server_crc(&s);
	*e = s;
	cxlcr_publish(e, sizeof(*e));
	int rc = cxlcr_pool_unlock(pool);
	table_close(&t);
	return rc < 0 ? -1 : index;
}

int tier_server_unregister(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation)
{
	struct tier_table t;
	if (table_open(pool, false, &t) != 0)
		return -1;
	if (cxlcr_pool_lock(pool) < 0) {
		table_close(&t);
		return -1;
	}
	struct cxlcr_tier_server s;
	if (table_server(&t, index, &s) == 0 && s.incarnation == incarnation) {
		s.state = CXLCR_TIER_SERVER_DOWN;
		s.crc = table_server_crc(&s);
		t.servers[index] = s;
		cxlcr_publish(&t.servers[index], sizeof(s));
	}
	int rc = cxlcr_pool_unlock(pool);
	table_close(&t);
	return rc;
}

/* Under the pool lock: clears stale extent entries. */
static int reap_locked(struct tier_table *t)
{
	int n = 0;
	for (uint32_t k = 0; k < CXLCR_TIER_EXTENTS; k++) {
		struct cxlcr_tier_extent *e = &t->extents[k];
		cxlcr_refresh(e, sizeof(*e));
		if (extent_stale(t, e)) {
			memset(e, 0, sizeof(*e));
			cxlcr_publish(e, sizeof(*e));
			n++;
		}
	}
	if (n) {
		t->header->releases++;
		cxlcr_publish(&t->header->releases, sizeof(uint64_t));
	}
	return n;
}

int tier_extents_reap(struct cxlcr_pool *pool)
{
	struct tier_table t;
	int rc = table_open(pool, false, &t);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (cxlcr_pool_lock(pool) < 0) {
		table_close(&t);
		return -1;
	}
	int n = reap_locked(&t);
	rc = cxlcr_pool_unlock(pool);
	table_close(&t);
	return rc < 0 ? -1 : n;
}

static int by_offset(const void *a, const void *b)
{
	const struct cxlcr_tier_extent *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The live extents of server index under incarnation, sorted. */
static uint32_t collect(const struct tier_table *t, uint32_t index, uint64_t incarnation,
			struct cxlcr_tier_extent *out)
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < CXLCR_TIER_EXTENTS; k++) {
		struct cxlcr_tier_extent e = t->extents[k];
		if (e.server == index && e.server_incarnation == incarnation && table_extent_live(t, &e))
			out[n++] = e;
	}
	qsort(out, n, sizeof(*out), by_offset);
	return n;
}

int tier_extents_of(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation, struct cxlcr_tier_extent **out,
		    uint32_t *count)
{
	struct tier_table t;
	*out = NULL;
	*count = 0;
	int rc = table_open(pool, false, &t);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	*out = calloc(CXLCR_TIER_EXTENTS, sizeof(**out));
	if (!*out) {
		table_close(&t);
		return cxlcr_error("out of memory");
	}
	*count = collect(&t, index, incarnation, *out);
	table_close(&t);
	return 0;
}

/* First fit on server index: the offset of a gap of size bytes, or -1
 * (-2: out of memory). */
static int64_t first_fit(const struct tier_table *t, uint32_t index, const struct cxlcr_tier_server *s,
			 uint64_t size)
{
	struct cxlcr_tier_extent *used = calloc(CXLCR_TIER_EXTENTS, sizeof(*used));
	if (!used)
		return -2;
	uint32_t n = collect(t, index, s->incarnation, used);
	uint64_t at = 0;
	int64_t found = -1;
	for (uint32_t k = 0; k <= n && found < 0; k++) {
		uint64_t end = k < n ? used[k].offset : s->size;
		if (end >= at && end - at >= size)
			found = (int64_t)at;
		else if (k < n && used[k].offset + used[k].size > at)
			at = used[k].offset + used[k].size;
	}
	free(used);
	return found;
}

int tier_extent_alloc(struct cxlcr_pool *pool, uint64_t size, uint64_t owner, uint32_t *server,
		      struct cxlcr_tier_extent *out)
{
	struct tier_table t;
	int rc = table_open(pool, false, &t);
	if (rc != 0)
		return rc < 0 ? -1 : cxlcr_error("the pod has no memory server (cxlcr tier up)");
	if (cxlcr_pool_lock(pool) < 0) {
		table_close(&t);
		return -1;
	}
	reap_locked(&t);
	int slot = -1;
	for (uint32_t k = 0; k < CXLCR_TIER_EXTENTS && slot < 0; k++)
		if (t.extents[k].owner == 0)
			slot = (int)k;
	bool any_up = false, oom = false;
	rc = -1;
	for (uint32_t i = 0; i < CXLCR_TIER_SERVERS && rc < 0 && slot >= 0; i++) {
		struct cxlcr_tier_server s;
		if (table_server(&t, i, &s) < 0 || s.state != CXLCR_TIER_SERVER_UP)
			continue;
		any_up = true;
		int64_t at = first_fit(&t, i, &s, size);
		if (at == -2) {
			oom = true;
			break;
		}
		if (at < 0)
			continue;
		struct cxlcr_tier_extent e = { .owner = owner, .server_incarnation = s.incarnation,
					       .offset = (uint64_t)at, .size = size, .server = i };
		e.crc = table_extent_crc(&e);
		t.extents[slot] = e;
		cxlcr_publish(&t.extents[slot], sizeof(e));
		*out = e;
		*server = i;
		rc = 0;
	}
	if (rc < 0) {
		char b[32];
		if (oom)
			cxlcr_error("out of memory");
		else if (slot < 0)
			cxlcr_error("the tier table is full (%u extents)", CXLCR_TIER_EXTENTS);
		else if (!any_up)
			cxlcr_error("the pod has no memory server up (cxlcr tier up)");
		else
			cxlcr_error("no memory server has %s free", cxlcr_format_size(size, b, sizeof(b)));
	}
	if (cxlcr_pool_unlock(pool) < 0)
		rc = -1;
	table_close(&t);
	return rc;
}
