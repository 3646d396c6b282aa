/*
 * Snapshots: an arena's non-zero pages copied into a region of their own,
 * with a leaf table that says where every page of the heap lives (the
 * layout is in pool_format.h).
 *
 * Taking one is two passes over the frozen heap. The first finds the
 * non-zero pages: on a pool file, SEEK_DATA/SEEK_HOLE skip the holes (pages
 * never written) without reading them, and the rest is compared with zero,
 * which stops at the first non-zero word of a data page. It only sets bits,
 * so the snapshot region can then be allocated at its exact size. The
 * second pass copies the pages run by run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "../tracking/track.h"
#include "arena.h"
#include "catalog.h"
#include "checksum.h"
#include "error.h"
#include "persist.h"
#include "snapshot.h"
#include "snapshot_internal.h"
#include "util.h"


static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* ---- the arena being copied ---- */


/* The arena's header is written by the preload when a process attaches;
 * it alone knows where the heap is mapped, which a fork child needs, and
 * which extents it grew by. */
static int check_arena_header(struct cxlcr_pool *pool, struct source *src)
{
	const struct cxlcr_arena_header *h = (const void *)src->base;
	const char *name = src->region.name;
	cxlcr_refresh(h, sizeof(*h));
	if (h->magic != CXLCR_ARENA_MAGIC)
		return cxlcr_error("arena '%s' has no arena header (never attached by a process)", name);
	if (h->version != CXLCR_ARENA_VERSION)
		return cxlcr_error("arena '%s': header version %u, this cxlcr reads version %u", name,
				   h->version, CXLCR_ARENA_VERSION);
	if (h->region_generation != src->region.generation)
		return cxlcr_error("arena '%s': its header belongs to region %llu, not %llu", name,
				   (unsigned long long)h->region_generation,
				   (unsigned long long)src->region.generation);
	if (memcmp(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid)) != 0)
		return cxlcr_error("arena '%s': its header belongs to another pool", name);
	return cxlcr_heap_read(pool, &src->region, h, &src->extents);
}

void snap_close_source(struct source *src)
{
	if (src->heap)
		cxlcr_heap_unmap(&src->extents, (void *)(uintptr_t)src->heap);
	if (src->base)
		munmap(src->base, CXLCR_ARENA_HEAP_OFFSET);
	src->heap = NULL;
	src->base = NULL;
}

int snap_open_source(struct cxlcr_pool *pool, uint64_t arena_generation, struct source *src)
{
	memset(src, 0, sizeof(*src));
	if (cxlcr_region_get(pool, arena_generation, &src->region) < 0)
		return -1;
	if (src->region.kind != CXLCR_KIND_ARENA)
		return cxlcr_error("region '%s' (generation %llu) is not an arena", src->region.name,
				   (unsigned long long)arena_generation);
	if (src->region.size < CXLCR_ARENA_HEAP_OFFSET + PAGE)
		return cxlcr_error("arena '%s' is too small to hold a heap (%llu bytes)",
				   src->region.name, (unsigned long long)src->region.size);
	src->base = cxlcr_pool_map(pool, src->region.offset, CXLCR_ARENA_HEAP_OFFSET, 0, 0);
	if (!src->base)
		return -1;
	if (check_arena_header(pool, src) < 0 ||
	    !(src->heap = cxlcr_heap_map(pool, &src->extents, NULL))) {
		snap_close_source(src);
		return -1;
	}
	src->heap_size = src->extents.size;
	src->heap_address = src->extents.address;
	src->pages = src->heap_size / PAGE;
	return 0;
}

/* ---- pass 1: which pages hold data ---- */


/* The first page at or after i whose bit is `set`, or m->pages. Skips
 * whole words, so a large zero stretch costs a few instructions. */
uint64_t snap_next_page_with(const struct page_map *m, uint64_t i, bool set)
{
	while (i < m->pages) {
		uint64_t word = m->bits[i / 64];
		if (!set)
			word = ~word;
		word &= ~0ull << (i % 64);
		if (word) {
			uint64_t found = i / 64 * 64 + (uint64_t)__builtin_ctzll(word);
			return found < m->pages ? found : m->pages;
		}
		i = (i / 64 + 1) * 64;
	}
	return m->pages;
}

/* A 4 KiB page of zeros? The first word settles nearly every data page;
 * the rest is ORed a cache line at a time, which the compiler vectorises. */
bool snap_page_is_zero(const uint8_t *page)
{
	const uint64_t *w = (const uint64_t *)page;
	if (w[0])
		return false;
	for (size_t i = 0; i < PAGE / 8; i += 8) {
		uint64_t any = w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7];
		if (any)
			return false;
	}
	return true;
}

/* cxlcr_pool_next_data() over the heap, in heap offsets: the next stretch at
 * or after from that may hold data, within one extent. */
bool snap_heap_next_data(const struct cxlcr_pool *pool, const struct source *src, uint64_t from,
			   uint64_t *lo, uint64_t *hi)
{
	while (from < src->heap_size) {
		uint64_t room, plo, phi;
		uint64_t at = cxlcr_heap_pool_offset(&src->extents, from, &room);
		if (cxlcr_pool_next_data(pool, at, at + room, &plo, &phi)) {
			*lo = from + (plo - at);
			*hi = from + (phi - at);
			return true;
		}
		from += room;
	}
	return false;
}

/* Maps [p, p+len) of a pool mapping in one system call rather than one
 * page fault at a time. On a pool file, most of a snapshot's time goes to
 * page faults otherwise (a fresh tmpfs page is allocated and cleared on
 * the first write); on devdax it only fills page tables. Failure (an older
 * kernel) is harmless: the pages fault in as they are touched. */
void snap_prefault(void *p, uint64_t len, int how)
{
	if (len)
		madvise(p, len, how);
}

/* Pass 1. Each stretch is refreshed before it is read: on a non-coherent
 * device this host may hold stale lines of an arena that another host
 * wrote since. */
static int find_nonzero_pages(const struct cxlcr_pool *pool, const struct source *src,
			      struct page_map *m)
{
	memset(m, 0, sizeof(*m));
	m->pages = src->pages;
	m->bits = calloc((m->pages + 63) / 64, sizeof(uint64_t));
	if (!m->bits)
		return cxlcr_error("out of memory for a map of %llu pages", (unsigned long long)m->pages);
	uint64_t end = src->heap_size, at = 0, lo, hi;
	for (; snap_heap_next_data(pool, src, at, &lo, &hi); at = hi) {
		m->holes_skipped += (lo - at) / PAGE;
		const uint8_t *p = src->heap + lo;
		/* No cxlcr_refresh() of the heap: snapshots are taken on the host
		 * of the arena's owner, whose caches hold its latest writes (on
		 * a non-coherent device the other hosts' copies are what is
		 * stale, not this one's); flushing 1 GiB of lines cost ~0.2 s. */
		snap_prefault((void *)(uintptr_t)p, hi - lo, MADV_POPULATE_READ);
		uint64_t first = lo / PAGE, last = hi / PAGE;
		for (uint64_t i = first; i < last; i++, p += PAGE) {
			if (!snap_page_is_zero(p)) {
				m->bits[i / 64] |= 1ull << (i % 64);
				m->nonzero++;
			}
		}
	}
	m->holes_skipped += (end - at) / PAGE;
	return 0;
}

/* ---- runs ---- */

/* How a run's leaves go on from one page to the next: zero after zero,
 * the next copy after a copy. */
static uint64_t leaf_step(uint64_t leaf)
{
	return CXLCR_LEAF_TIER(leaf) == CXLCR_TIER_ZERO ? 0 : PAGE;
}

uint64_t snap_next_in_run(uint64_t leaf)
{
	return leaf + leaf_step(leaf);
}

/* The leaf the page right after the run would have in the same run. */
static uint64_t run_end_leaf(const struct cxlcr_snapshot_run *run)
{
	return run->leaf + run->pages * leaf_step(run->leaf);
}

uint64_t cxlcr_snapshot_table_runs(const uint64_t *leaves, uint64_t pages, struct cxlcr_snapshot_run *runs,
				   uint64_t cap)
{
	uint64_t n = 0, want = 0;
	for (uint64_t i = 0; i < pages; i++) {
		if (!n || leaves[i] != want) {
			if (n < cap)
				runs[n] = (struct cxlcr_snapshot_run){ .first_page = i, .pages = 0, .leaf = leaves[i] };
			n++;
		}
		if (n <= cap)
			runs[n - 1].pages++;
		want = snap_next_in_run(leaves[i]);
	}
	return n;
}

/* The runs of a page map (pass 1): a stretch of non-zero pages is one run,
 * as their copies are packed in heap order. */
static uint64_t page_map_runs(const struct page_map *m)
{
	uint64_t n = 0;
	for (uint64_t i = 0; i < m->pages; n++)
		i = snap_next_page_with(m, i, !(m->bits[i / 64] >> (i % 64) & 1));
	return n;
}

/* ---- pass 2: the copy ---- */


void snap_plan_layout(uint64_t pages, uint64_t nonzero, uint64_t runs, struct layout *l)
{
	l->table_offset = CXLCR_SNAPSHOT_TABLE_OFFSET;
	l->table_size = pages * LEAF_SIZE;
	l->run_offset = l->table_offset + l->table_size;
	l->run_count = runs;
	l->data_offset = round_up(l->run_offset + runs * RUN_SIZE, CXLCR_POOL_ALIGN);
	l->data_size = nonzero * PAGE;
	l->arena_header_offset = l->data_offset + l->data_size;
	l->region_size = round_up(l->arena_header_offset + CXLCR_SNAPSHOT_ARENA_HEADER_SIZE, CXLCR_POOL_ALIGN);
}

/*
 * Copies whole pages into the pool. On x86 with non-temporal stores: they
 * go to the device rather than into this host's cache, so nothing needs
 * writing back afterwards (a fence orders them, see copy_pages()), and
 * the copy does not evict the cache of a host whose service is about to
 * resume. Elsewhere: memcpy, then write the lines back.
 */
void snap_copy_to_pool(uint8_t *dst, const uint8_t *src, size_t len)
{
#if defined(__x86_64__)
	__m128i *d = (__m128i *)(void *)dst;
	const __m128i *s = (const __m128i *)(const void *)src;
	for (size_t i = 0; i < len / sizeof(__m128i); i += 4) {
		__m128i a = _mm_load_si128(s + i), b = _mm_load_si128(s + i + 1);
		__m128i c = _mm_load_si128(s + i + 2), e = _mm_load_si128(s + i + 3);
		_mm_stream_si128(d + i, a);
		_mm_stream_si128(d + i + 1, b);
		_mm_stream_si128(d + i + 2, c);
		_mm_stream_si128(d + i + 3, e);
	}
#else
	memcpy(dst, src, len);
	cxlcr_flush_lines(dst, len);
#endif
}

/* Pass 2: the non-zero pages, run by run and in heap order, into the data
 * area; their leaves into table (private memory, all ZERO leaves to start
 * with). */
static void copy_pages(const struct source *src, const struct page_map *m, uint8_t *snap,
		       uint64_t snap_offset, const struct layout *l, uint64_t *table)
{
	uint8_t *data = snap + l->data_offset;
	uint64_t copied = 0;
	for (uint64_t i = snap_next_page_with(m, 0, true); i < m->pages; i = snap_next_page_with(m, i, true)) {
		uint64_t run_end = snap_next_page_with(m, i, false);
		snap_copy_to_pool(data + copied * PAGE, src->heap + i * PAGE, (run_end - i) * PAGE);
		for (; i < run_end; i++, copied++)
			table[i] = CXLCR_LEAF(CXLCR_TIER_CXL, snap_offset + l->data_offset + copied * PAGE);
	}
	cxlcr_fence();   /* orders the non-temporal stores before the table and header */
}

static uint32_t header_checksum(const struct cxlcr_snapshot_header *h)
{
	return cxlcr_crc32c(0, h, offsetof(struct cxlcr_snapshot_header, checksum));
}

/* What a snapshot's header says beyond its layout: its own copies, the
 * bases whose copies it uses (with the borrows it holds on them), and
 * whether its finish trusted write tracking (then the arena's counters
 * after it, which let the next snapshot be incremental on this one). */

/* Writes the arena header's copy, the leaf table, its runs and the
 * header, each written back before the next step, and the completion
 * marker last: from then on it is a snapshot. It runs in the freeze (the
 * header copy is what a fork child's header starts as, so it must be of
 * the same instant as the heap). The runs and the tier counts come from
 * the table; the layout must leave room for the runs. */
/*
 * A snapshot's publication, in two steps. snap_fill_header(), in the
 * freeze, takes what is of that instant: the arena header's copy and its
 * tracking counts, and writes the header's fields. snap_seal() does the
 * rest, which reads only the snapshot's own region and so may run once
 * the service goes on: the run table built from the leaf table, the
 * checksums, the write-back and `complete`. The seal walks the whole leaf
 * table (8 bytes a heap page): ~2 ms at a 1.6 GiB arena, in every freeze
 * while both were one step. Until it is sealed, nobody opens the region
 * as a snapshot (`complete` is not set), and freeing it works as for a
 * draft (its bases are in the header already).
 */
void snap_fill_header(struct cxlcr_pool *pool, const struct source *src, const struct cxlcr_region *snap_region,
		      uint8_t *snap, const struct layout *l, const struct publish_extra *x, const uint64_t *table)
{
	/* The data area ends with the own copies, and the arena header's copy
	 * follows them: the room a draft kept and its finish did not use is
	 * then the region's tail, which cxlcr_snapshot_trim() gives back to
	 * the pool. (Laid out after the room, it kept the whole room
	 * reserved: a recovery point's region was twice its copies.) */
	uint64_t data_size = x->own * PAGE < l->data_size ? x->own * PAGE : l->data_size;
	uint64_t header_at = l->data_offset + data_size;
	cxlcr_refresh(src->base, CXLCR_SNAPSHOT_ARENA_HEADER_SIZE);
	snap_copy_to_pool(snap + header_at, src->base, CXLCR_SNAPSHOT_ARENA_HEADER_SIZE);
	/* The fence on growth is the dumping verb's, on the live arena (it is
	 * up now): a fork child, whose header starts as this copy, has none. */
	struct cxlcr_arena_header *copy = (void *)(snap + header_at);
	copy->grow_fence = 0;
	cxlcr_publish(&copy->grow_fence, sizeof(copy->grow_fence));
	cxlcr_fence();
	if (table != (const void *)(snap + l->table_offset))
		memcpy(snap + l->table_offset, table, l->table_size);
	/* Anything still in the header (a draft's bases) was copied by the caller. */
	struct cxlcr_snapshot_header *h = (void *)snap;
	memset(h, 0, sizeof(*h));
	h->magic = CXLCR_SNAPSHOT_MAGIC;
	h->version = CXLCR_SNAPSHOT_VERSION;
	h->header_size = sizeof(*h);
	memcpy(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid));
	h->region_generation = snap_region->generation;
	cxlcr_copy_field(h->name, sizeof(h->name), snap_region->name);
	h->arena_generation = src->region.generation;
	h->arena_epoch = src->region.owner_epoch;
	cxlcr_copy_field(h->arena_name, sizeof(h->arena_name), src->region.name);
	h->heap_address = src->heap_address;
	h->heap_size = src->heap_size;
	h->page_size = CXLCR_SNAPSHOT_PAGE_SIZE;
	h->page_count = l->table_size / LEAF_SIZE;
	h->table_offset = l->table_offset;
	h->table_size = l->table_size;
	h->run_offset = l->run_offset;
	h->arena_header_offset = header_at;
	h->arena_header_size = CXLCR_SNAPSHOT_ARENA_HEADER_SIZE;
	h->data_offset = l->data_offset;
	h->data_size = data_size;
	h->pages_own = x->own;
	h->base_count = x->base_count;
	if (x->base_count)
		memcpy(h->bases, x->bases, x->base_count * sizeof(h->bases[0]));
	if (x->tracked) {
		/* In the freeze: nothing scans or punches until it ends. */
		const struct cxlcr_arena_header *a = (const void *)src->base;
		h->track_scans = __atomic_load_n(&a->scan_count, __ATOMIC_ACQUIRE);
		h->track_fork_count = __atomic_load_n(&a->fork_count, __ATOMIC_ACQUIRE);
		/* A thread stopped between its punch's two counts punches
		 * after the freeze: the next draft must not trust the log or
		 * the count from here. */
		uint64_t done = __atomic_load_n(&a->punches_done, __ATOMIC_ACQUIRE);
		h->track_punches = __atomic_load_n(&a->punches_begun, __ATOMIC_ACQUIRE);
		if (h->track_punches != done)
			h->track_punches |= CXLCR_PUNCHES_UNSETTLED;
	}
	h->created_ns = cxlcr_now_ns();
	cxlcr_copy_field(h->source_host, sizeof(h->source_host), cxlcr_host_name());
	if (x->cold)
		h->cold = *x->cold;
}

int snap_seal(uint8_t *snap, uint64_t region_size)
{
	struct cxlcr_snapshot_header *h = (void *)snap;
	if (h->magic != CXLCR_SNAPSHOT_MAGIC || h->complete == CXLCR_SNAPSHOT_COMPLETE ||
	    h->table_offset != CXLCR_SNAPSHOT_TABLE_OFFSET || h->table_size != h->page_count * LEAF_SIZE ||
	    h->run_offset != h->table_offset + h->table_size || h->data_offset < h->run_offset ||
	    h->data_offset > region_size)
		return cxlcr_error("snapshot '%.*s' is not one filled in for its seal", CXLCR_NAME_MAX, h->name);
	const uint64_t *table = (const void *)(snap + h->table_offset);
	struct cxlcr_snapshot_run *runs = (void *)(snap + h->run_offset);
	uint64_t room = (h->data_offset - h->run_offset) / RUN_SIZE;
	uint64_t run_count = cxlcr_snapshot_table_runs(table, h->page_count, runs, room);
	if (run_count > room)
		return cxlcr_error("snapshot '%.*s': its leaf table has %llu runs, room for %llu", CXLCR_NAME_MAX,
				   h->name, (unsigned long long)run_count, (unsigned long long)room);
	uint64_t counts[3] = { 0, 0, 0 };
	for (uint64_t r = 0; r < run_count; r++)
		counts[CXLCR_LEAF_TIER(runs[r].leaf) % 3] += runs[r].pages;
	cxlcr_publish(snap + h->table_offset, h->table_size + run_count * RUN_SIZE);
	h->pages_zero = counts[CXLCR_TIER_ZERO];
	h->pages_cxl = counts[CXLCR_TIER_CXL];
	h->pages_cold = counts[CXLCR_TIER_COLD];
	h->run_count = run_count;
	h->table_crc = cxlcr_crc32c(0, table, h->table_size);
	h->run_crc = cxlcr_crc32c(0, runs, run_count * RUN_SIZE);
	h->checksum = header_checksum(h);
	cxlcr_publish(h, sizeof(*h));
	h->complete = CXLCR_SNAPSHOT_COMPLETE;
	cxlcr_publish(&h->complete, sizeof(h->complete));
	return 0;
}

int snap_publish_snapshot(struct cxlcr_pool *pool, const struct source *src,
			    const struct cxlcr_region *snap_region, uint8_t *snap,
			    const struct layout *l, const struct publish_extra *x, const uint64_t *table)
{
	snap_fill_header(pool, src, snap_region, snap, l, x, table);
	return snap_seal(snap, snap_region->size);
}

/* Pages of room a draft of `copies` copies leaves for its finish. */
uint64_t snap_draft_spare(uint64_t copies)
{
	return 256 + copies / 16;
}

/* The arena's punch counters (pool_format.h) as a draft starts: done is
 * read first, so a punch under way then shows as begun != done. */

int snap_punch_ranges(const struct source *src, uint64_t from, uint64_t to,
		      struct punch_range out[CXLCR_PUNCH_LOG])
{
	const struct cxlcr_arena_header *h = (const void *)src->base;
	if (to < from || to - from > CXLCR_PUNCH_LOG || (from & CXLCR_PUNCHES_UNSETTLED))
		return -1;
	int count = 0;
	for (uint64_t n = from; n < to; n++) {
		const struct cxlcr_punch_entry *e = &h->punch_log[n % CXLCR_PUNCH_LOG];
		uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		uint64_t lo = __atomic_load_n(&e->lo, __ATOMIC_RELAXED);
		uint64_t hi = __atomic_load_n(&e->hi, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq != n + 1 || __atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq || lo >= hi ||
		    hi > src->heap_size)
			return -1;
		out[count++] = (struct punch_range){ lo, hi };
	}
	return count;
}

void snap_note_punches(const struct source *src, struct punch_note *n)
{
	const struct cxlcr_arena_header *h = (const void *)src->base;
	uint64_t done = __atomic_load_n(&h->punches_done, __ATOMIC_SEQ_CST);
	n->begun = __atomic_load_n(&h->punches_begun, __ATOMIC_SEQ_CST);
	n->clean = n->begun == done;
}

/* Allocates the snapshot region, copies into it and publishes it. */
/* Allocates the snapshot region, copies the pages of m into it and writes
 * its leaf table; the header, which makes it a snapshot, is left zero.
 * With publish, the header follows (a whole snapshot); without, the region
 * is a draft for cxlcr_snapshot_finish(). */
static int write_snapshot(struct cxlcr_pool *pool, const struct source *src, const struct page_map *m,
			  const char *name, bool publish, bool tracked, const struct punch_note *punches,
			  struct cxlcr_region *snap_region)
{
	/* A draft leaves room for pages its finish may have to copy: written
	 * while it was made, where it has a zero page (or, for an incremental
	 * one, a page it shares). Without room the finish copies everything. */
	uint64_t spare = publish ? 0 : snap_draft_spare(m->nonzero);
	uint64_t run_room = page_map_runs(m) + (spare ? 2 * spare + 2 : 0);
	struct layout l;
	snap_plan_layout(m->pages, m->nonzero + spare, run_room, &l);
	uint64_t *table = calloc(m->pages, LEAF_SIZE);
	if (!table)
		return cxlcr_error("out of memory for a leaf table of %llu pages", (unsigned long long)m->pages);
	if (cxlcr_region_alloc(pool, CXLCR_KIND_SNAPSHOT, name, l.region_size, snap_region) < 0) {
		free(table);
		return -1;
	}
	uint8_t *snap = cxlcr_pool_map(pool, snap_region->offset, snap_region->size, 0, 0);
	if (!snap) {
		free(table);
		cxlcr_region_free(pool, snap_region->generation);
		return -1;
	}
	/* The whole region, its tables, room and header copy included: what
	 * the finish writes in the freeze must not fault pages in there (a
	 * fresh 2 MiB page of a tmpfs can take milliseconds to find). */
	snap_prefault(snap, l.region_size, MADV_POPULATE_WRITE);
	copy_pages(src, m, snap, snap_region->offset, &l, table);
	int rc = 0;
	if (publish) {
		struct publish_extra x = { .own = m->nonzero, .tracked = tracked };
		rc = snap_publish_snapshot(pool, src, snap_region, snap, &l, &x, table);
	} else {
		memcpy(snap + l.table_offset, table, l.table_size);
		cxlcr_publish(snap + l.table_offset, l.table_size);
		/* The heap may grow before the finish: the draft says for how
		 * many pages its table is (the header stays a draft's: magic 0). */
		struct cxlcr_snapshot_header *h = (void *)snap;
		h->page_count = m->pages;
		h->draft_runs = (uint32_t)l.run_count;
		h->draft_nonzero = m->nonzero;
		h->draft_own = m->nonzero;
		h->draft_spare = (uint32_t)spare;
		h->draft_run_room = l.run_count;
		h->draft_punches = punches->begun;
		h->draft_punch_clean = punches->clean;
		cxlcr_publish(h, sizeof(*h));
	}
	munmap(snap, snap_region->size);
	free(table);
	if (rc < 0)
		cxlcr_region_free(pool, snap_region->generation);
	return rc;
}

/* What a snapshot holds, for cxlcr_snapshot_info (timings aside). */
void snap_describe(struct cxlcr_snapshot_info *out, const struct cxlcr_region *snap_region,
		     const struct source *src, const struct page_map *m)
{
	memset(out, 0, sizeof(*out));
	out->region_generation = snap_region->generation;
	out->region_offset = snap_region->offset;
	out->region_size = snap_region->size;
	out->heap_address = src->heap_address;
	out->heap_size = src->heap_size;
	out->pages_total = m->pages;
	out->pages_cxl = m->nonzero;
	out->pages_own = m->nonzero;
	out->pages_zero = m->pages - m->nonzero;
}

/* A snapshot (publish; tracked: see cxlcr_snapshot_create_tracked()), or
 * a draft of one (see snapshot.h). */
static int snapshot_copy(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name, bool publish,
			 bool tracked, struct cxlcr_snapshot_info *out)
{
	uint64_t start = cxlcr_mono_ns();
	struct source src;
	struct page_map m = { 0 };
	struct cxlcr_region snap_region;
	int rc = -1;
	if (!cxlcr_valid_name(name))
		return cxlcr_error("invalid snapshot name '%s' (letters, digits, '.', '_', '-'; at most %u)",
				   name, CXLCR_NAME_MAX - 1);
	if (snap_open_source(pool, arena_generation, &src) < 0)
		return -1;
	struct punch_note punches;
	snap_note_punches(&src, &punches); /* before the copy: see refresh_holes() */
	if (find_nonzero_pages(pool, &src, &m) < 0)
		goto out;
	uint64_t scanned = cxlcr_mono_ns();
	if (write_snapshot(pool, &src, &m, name, publish, tracked, &punches, &snap_region) < 0)
		goto out;
	uint64_t done = cxlcr_mono_ns();
	if (out) {
		snap_describe(out, &snap_region, &src, &m);
		out->holes_skipped = m.holes_skipped;
		out->scan_ns = scanned - start;
		out->copy_ns = done - scanned;
		out->total_ns = done - start;
	}
	rc = 0;
out:
	free(m.bits);
	snap_close_source(&src);
	return rc;
}

/* ---- reading a snapshot ---- */

/* The header's own consistency, and that it is this region's and this
 * pool's; the layout must fit the region (else it was truncated). */
static int check_header(const struct cxlcr_pool *pool, const struct cxlcr_snapshot *s)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	const char *name = s->region.name;
	uint64_t size = s->region.size;
	if (h->magic != CXLCR_SNAPSHOT_MAGIC)
		return cxlcr_error("snapshot '%s' is corrupt (no snapshot magic)", name);
	if (h->version != CXLCR_SNAPSHOT_VERSION)
		return cxlcr_error("snapshot '%s': format version %u, this cxlcr reads version %u", name,
				   h->version, CXLCR_SNAPSHOT_VERSION);
	if (h->header_size != sizeof(*h))
		return cxlcr_error("snapshot '%s' is corrupt (header size %u)", name, h->header_size);
	if (h->complete != CXLCR_SNAPSHOT_COMPLETE)
		return cxlcr_error("snapshot '%s' is incomplete (its copy never finished)", name);
	if (h->checksum != header_checksum(h))
		return cxlcr_error("snapshot '%s' is corrupt (header checksum mismatch)", name);
	if (memcmp(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid)) != 0)
		return cxlcr_error("snapshot '%s' belongs to another pool (uuid mismatch)", name);
	if (h->region_generation != s->region.generation)
		return cxlcr_error("snapshot '%s' is foreign: its header names region %llu, it lies in region %llu",
				   name, (unsigned long long)h->region_generation,
				   (unsigned long long)s->region.generation);
	if (h->page_size != PAGE || h->heap_size == 0 || h->heap_size % PAGE ||
	    h->page_count != h->heap_size / PAGE ||
	    h->pages_zero > h->page_count || h->pages_cxl > h->page_count - h->pages_zero ||
	    h->pages_cold != h->page_count - h->pages_zero - h->pages_cxl)
		return cxlcr_error("snapshot '%s' is corrupt (inconsistent page counts)", name);
	if (h->table_offset != CXLCR_SNAPSHOT_TABLE_OFFSET || h->table_size != h->page_count * LEAF_SIZE ||
	    h->run_offset != h->table_offset + h->table_size || h->run_count == 0 ||
	    h->run_count > h->page_count ||
	    h->data_offset % CXLCR_POOL_ALIGN || h->data_offset < h->run_offset + h->run_count * RUN_SIZE ||
	    h->data_size % PAGE || h->pages_own > h->pages_cxl || h->pages_own > h->data_size / PAGE ||
	    h->base_count > CXLCR_SNAPSHOT_BASES_MAX || (h->base_count == 0 && h->pages_own != h->pages_cxl))
		return cxlcr_error("snapshot '%s' is corrupt (inconsistent layout)", name);
	if (h->arena_header_offset != h->data_offset + h->data_size ||
	    h->arena_header_size != CXLCR_SNAPSHOT_ARENA_HEADER_SIZE)
		return cxlcr_error("snapshot '%s' is corrupt (inconsistent layout of its arena header copy)", name);
	if (h->data_offset > size || h->data_size > size - h->data_offset ||
	    h->arena_header_size > size - h->arena_header_offset)
		return cxlcr_error("snapshot '%s' is truncated: it needs %llu bytes, its region holds %llu",
				   name, (unsigned long long)(h->arena_header_offset + h->arena_header_size),
				   (unsigned long long)size);
	return 0;
}

/*
 * The bases of an incremental snapshot, checked and mapped: each must be a
 * live snapshot region of this pool (its generation is never reused, so a
 * base freed since cannot pass for another), and the data range recorded
 * for it must lie inside that region. The snapshot's borrows keep them
 * alive while it lives; a reader holds the snapshot.
 */
static int open_bases(struct cxlcr_snapshot *s)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	for (uint32_t k = 0; k < h->base_count; k++) {
		const struct cxlcr_snapshot_base *b = &h->bases[k];
		struct cxlcr_region r;
		if (b->region_generation == s->region.generation ||
		    cxlcr_region_get(s->pool, b->region_generation, &r) < 0 || r.kind != CXLCR_KIND_SNAPSHOT)
			return cxlcr_error("snapshot '%s': its base %u (region %llu) is gone", s->region.name, k,
					   (unsigned long long)b->region_generation);
		if (b->data_lo % PAGE || b->data_hi % PAGE || b->data_lo >= b->data_hi || b->data_lo < r.offset ||
		    b->data_hi > r.offset + r.size)
			return cxlcr_error("snapshot '%s' is corrupt (base %u's data lies outside its region)",
					   s->region.name, k);
		void *m = cxlcr_pool_map(s->pool, b->data_lo, b->data_hi - b->data_lo, 0, 0);
		if (!m)
			return -1;
		mprotect(m, b->data_hi - b->data_lo, PROT_READ);
		s->bases[k].lo = b->data_lo;
		s->bases[k].hi = b->data_hi;
		s->bases[k].map = m;
		s->base_count = k + 1;
	}
	return 0;
}

const uint8_t *cxlcr_snapshot_copy(const struct cxlcr_snapshot *s, uint64_t offset)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	uint64_t own_lo = s->region.offset + h->data_offset;
	if (offset >= own_lo && offset - own_lo < h->data_size)
		return s->base + (offset - s->region.offset);
	for (uint32_t k = 0; k < s->base_count; k++)
		if (offset >= s->bases[k].lo && offset < s->bases[k].hi)
			return s->bases[k].map + (offset - s->bases[k].lo);
	return NULL;
}

/* Does a CXL run of `pages` copies from `offset` lie in the snapshot's
 * own data area or in one base's? */
static bool run_stored(const struct cxlcr_snapshot *s, uint64_t offset, uint64_t pages)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	uint64_t lo = s->region.offset + h->data_offset, hi = lo + h->data_size;
	if (offset >= lo && offset <= hi && pages <= (hi - offset) / PAGE)
		return true;
	for (uint32_t k = 0; k < s->base_count; k++)
		if (offset >= s->bases[k].lo && offset <= s->bases[k].hi &&
		    pages <= (s->bases[k].hi - offset) / PAGE)
			return true;
	return false;
}

/*
 * The run table, copied out of the pool (another host could change the
 * pool's copy after the check) and checked: its checksum; runs in heap
 * order that cover the heap without gap or overlap and are maximal; every
 * leaf of a known tier with its reserved bits clear; zero runs with no
 * offset; the copies of every CXL run inside the snapshot's own data area
 * or inside one of its bases' (a fork maps them); and the tier counts of
 * the header. A fork maps what the runs say, and nothing else.
 */
static int check_runs(struct cxlcr_snapshot *s)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	const char *name = s->region.name;
	const void *table = s->base + h->run_offset;
	size_t len = h->run_count * RUN_SIZE;
	cxlcr_refresh(table, len);
	s->runs = malloc(len);
	if (!s->runs)
		return cxlcr_error("snapshot '%s': out of memory for its %llu runs", name,
				   (unsigned long long)h->run_count);
	memcpy(s->runs, table, len);
	s->run_count = h->run_count;
	if (cxlcr_crc32c(0, s->runs, len) != h->run_crc)
		return cxlcr_error("snapshot '%s' is corrupt (run table checksum mismatch)", name);
	uint64_t next_page = 0, counts[3] = { 0, 0, 0 };
	for (uint64_t r = 0; r < s->run_count; r++) {
		const struct cxlcr_snapshot_run *run = &s->runs[r];
		uint64_t leaf = run->leaf, offset = CXLCR_LEAF_OFFSET(leaf);
		uint32_t tier = CXLCR_LEAF_TIER(leaf);
		bool bad = run->first_page != next_page || run->pages == 0 ||
			   run->pages > h->page_count - next_page || (leaf & CXLCR_LEAF_RESERVED_MASK) ||
			   tier > CXLCR_TIER_COLD || (tier == CXLCR_TIER_ZERO && offset != 0) ||
			   (tier == CXLCR_TIER_CXL && !run_stored(s, offset, run->pages)) ||
			   (tier == CXLCR_TIER_COLD && run->pages > (~0ull - offset) / PAGE) ||
			   (r && leaf == run_end_leaf(&s->runs[r - 1])); /* not maximal */
		if (bad)
			return cxlcr_error("snapshot '%s' is corrupt (run %llu, pages %llu+%llu with leaf %#llx, "
					   "is out of place)",
					   name, (unsigned long long)r, (unsigned long long)run->first_page,
					   (unsigned long long)run->pages, (unsigned long long)leaf);
		counts[tier] += run->pages;
		next_page += run->pages;
	}
	if (next_page != h->page_count || counts[CXLCR_TIER_ZERO] != h->pages_zero ||
	    counts[CXLCR_TIER_CXL] != h->pages_cxl || counts[CXLCR_TIER_COLD] != h->pages_cold)
		return cxlcr_error("snapshot '%s' is corrupt (run table does not match the page counts)", name);
	return 0;
}

/*
 * The leaf table, in full: its checksum, and every leaf the one its run
 * says. Only cxlcr_snapshot_validate() reads it (a snapshot is validated
 * once, when it is published): a fork needs only the runs.
 */
int snap_check_leaves(const struct cxlcr_snapshot *s)
{
	const struct cxlcr_snapshot_header *h = &s->header;
	const char *name = s->region.name;
	cxlcr_refresh(s->leaves, h->table_size);
	if (cxlcr_crc32c(0, s->leaves, h->table_size) != h->table_crc)
		return cxlcr_error("snapshot '%s' is corrupt (leaf table checksum mismatch)", name);
	for (uint64_t r = 0; r < s->run_count; r++) {
		const struct cxlcr_snapshot_run *run = &s->runs[r];
		uint64_t want = run->leaf;
		for (uint64_t i = run->first_page; i < run->first_page + run->pages; i++) {
			if (s->leaves[i] != want)
				return cxlcr_error("snapshot '%s' is corrupt (leaf %llu, %#llx, is not what its run "
						   "says, %#llx)",
						   name, (unsigned long long)i, (unsigned long long)s->leaves[i],
						   (unsigned long long)want);
			want = snap_next_in_run(want);
		}
	}
	return 0;
}

int cxlcr_snapshot_open(struct cxlcr_pool *pool, uint64_t snapshot_generation, struct cxlcr_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->pool = pool;
	if (cxlcr_region_get(pool, snapshot_generation, &s->region) < 0)
		return -1;
	if (s->region.kind != CXLCR_KIND_SNAPSHOT)
		return cxlcr_error("region '%s' (generation %llu) is not a snapshot", s->region.name,
				   (unsigned long long)snapshot_generation);
	uint8_t *m = cxlcr_pool_map(pool, s->region.offset, s->region.size, 0, 0);
	if (!m)
		return -1;
	/* Snapshots are immutable: a reader cannot scribble on one. */
	if (mprotect(m, s->region.size, PROT_READ) < 0) {
		int e = errno;
		munmap(m, s->region.size);
		return cxlcr_error("snapshot '%s': mprotect: %s", s->region.name, strerror(e));
	}
	s->base = m;
	cxlcr_refresh(m, sizeof(s->header));
	memcpy(&s->header, m, sizeof(s->header));
	s->leaves = (const uint64_t *)(const void *)(m + CXLCR_SNAPSHOT_TABLE_OFFSET);
	if (check_header(pool, s) < 0 || open_bases(s) < 0 || check_runs(s) < 0) {
		cxlcr_snapshot_close(s);
		return -1;
	}
	return 0;
}

void cxlcr_snapshot_close(struct cxlcr_snapshot *s)
{
	free(s->runs);
	s->runs = NULL;
	s->run_count = 0;
	if (s->base)
		munmap((void *)s->base, s->region.size);
	s->base = NULL;
	s->leaves = NULL;
	for (uint32_t k = 0; k < s->base_count; k++)
		munmap((void *)(uintptr_t)s->bases[k].map, s->bases[k].hi - s->bases[k].lo);
	s->base_count = 0;
}

bool cxlcr_snapshot_named_for(const char *name, const char *service)
{
	size_t n = strnlen(service, CXLCR_SNAPSHOT_NAME_PREFIX);
	if (strncmp(name, service, n) || name[n] != '.' || name[n + 1] != 's' || !name[n + 2])
		return false;
	for (const char *p = name + n + 2; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

int cxlcr_snapshot_validate(struct cxlcr_pool *pool, uint64_t snapshot_generation)
{
	struct cxlcr_snapshot s;
	if (cxlcr_snapshot_open(pool, snapshot_generation, &s) < 0)
		return -1;
	int rc = snap_check_leaves(&s);
	cxlcr_snapshot_close(&s);
	return rc;
}

/* Punches [lo, hi) of the pool, rounded inwards to whole pages. */
static int give_back(struct cxlcr_pool *pool, uint64_t lo, uint64_t hi, uint64_t *freed)
{
	lo = round_up(lo, PAGE);
	hi = hi / PAGE * PAGE;
	if (hi <= lo)
		return 0;
	if (cxlcr_pool_zero(pool, lo, hi - lo) < 0)
		return -1;
	*freed += hi - lo;
	return 0;
}

int cxlcr_snapshot_trim(struct cxlcr_pool *pool, uint64_t snapshot_generation, uint64_t *freed)
{
	uint64_t n = 0;
	if (freed)
		*freed = 0;
	struct cxlcr_snapshot s;
	if (cxlcr_snapshot_open(pool, snapshot_generation, &s) < 0)
		return -1;
	const struct cxlcr_snapshot_header *h = &s.header;
	uint64_t at = s.region.offset;
	int rc = -1;
	/* The run table's room lies between its runs and the data area: a
	 * hole in a pool file, reserved still on a pool that keeps its
	 * memory (nothing to do there). */
	if (!pool->keeps_memory &&
	    give_back(pool, at + h->run_offset + h->run_count * RUN_SIZE, at + h->data_offset, &n) < 0)
		goto out;
	/* The end of what it holds: the arena header's copy, or a tiered
	 * snapshot's cold checksums after it. */
	uint64_t end = h->arena_header_offset + h->arena_header_size;
	if (h->pages_cold && h->cold.crc_offset + h->pages_cold * sizeof(uint32_t) > end)
		end = h->cold.crc_offset + h->pages_cold * sizeof(uint32_t);
	uint64_t keep = (end + CXLCR_POOL_ALIGN - 1) / CXLCR_POOL_ALIGN * CXLCR_POOL_ALIGN;
	if (keep < s.region.size) {
		/* Cleared while it is still ours (the pool file's memory; a
		 * pool that keeps it has the next region there clear it),
		 * then handed back: a region made there afterwards is never
		 * written over by this. */
		if (!pool->keeps_memory && give_back(pool, at + keep, at + s.region.size, &n) < 0)
			goto out;
		if (cxlcr_region_shrink(pool, snapshot_generation, keep) < 0)
			goto out;
		if (pool->keeps_memory)
			n += s.region.size - keep;
	}
	rc = 0;
out:
	cxlcr_snapshot_close(&s);
	if (freed)
		*freed = n;
	return rc;
}

/* The run holding page i, by binary search from *cursor on when i is not
 * in it (a caller walking up the heap passes its cursor back in, and most
 * look-ups are then the run it holds already). */
static const struct cxlcr_snapshot_run *run_of(const struct cxlcr_snapshot *s, uint64_t i, uint64_t *cursor)
{
	const struct cxlcr_snapshot_run *r = &s->runs[*cursor];
	if (i >= r->first_page && i - r->first_page < r->pages)
		return r;
	uint64_t lo = 0, hi = s->run_count;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (s->runs[mid].first_page <= i)
			lo = mid;
		else
			hi = mid;
	}
	*cursor = lo;
	return &s->runs[lo];
}

uint64_t cxlcr_snapshot_leaf(const struct cxlcr_snapshot *s, uint64_t page_index, uint64_t *cursor)
{
	const struct cxlcr_snapshot_run *r = run_of(s, page_index, cursor);
	return r->leaf + (page_index - r->first_page) * leaf_step(r->leaf);
}

int cxlcr_snapshot_page_offset(const struct cxlcr_snapshot *s, uint64_t page_index, uint32_t *tier,
			       uint64_t *offset)
{
	if (!s->runs)
		return cxlcr_error("snapshot is not open");
	if (page_index >= s->header.page_count)
		return cxlcr_error("snapshot '%s': page %llu is beyond its heap of %llu pages", s->region.name,
				   (unsigned long long)page_index, (unsigned long long)s->header.page_count);
	uint64_t cursor = 0, leaf = cxlcr_snapshot_leaf(s, page_index, &cursor);
	*tier = CXLCR_LEAF_TIER(leaf);
	*offset = CXLCR_LEAF_OFFSET(leaf);
	return 0;
}

int cxlcr_snapshot_read_page(const struct cxlcr_snapshot *s, uint64_t page_index, void *buf)
{
	uint32_t tier;
	uint64_t offset;
	if (cxlcr_snapshot_page_offset(s, page_index, &tier, &offset) < 0)
		return -1;
	if (tier == CXLCR_TIER_ZERO) {
		memset(buf, 0, PAGE);
		return 0;
	}
	if (tier != CXLCR_TIER_CXL)
		return cxlcr_error("snapshot '%s': page %llu is on the cold tier (read it with tier_read_page())",
				   s->region.name, (unsigned long long)page_index);
	const uint8_t *copy = cxlcr_snapshot_copy(s, offset);
	if (!copy)
		return cxlcr_error("snapshot '%s': page %llu lies outside its data", s->region.name,
				   (unsigned long long)page_index);
	cxlcr_refresh(copy, PAGE);
	memcpy(buf, copy, PAGE);
	return 0;
}

/* Is page i of cur's heap not what it was in prev? A page that was zero,
 * or beyond prev's heap, counts as changed once it holds data. One whose
 * copy in prev is on the cold tier does not: it cannot be compared here,
 * and the list is the pages a child gets before it runs, so counting it
 * would be taking every cold page for a changed one. Forked from a full
 * snapshot taken after a tiered one, a child got its whole heap copied in
 * before it ran (80 ms instead of 20 for a 110 MB Redis, bench/tier_fork.sh
 * and docs/cold-tier.md). */
static bool page_changed(const struct cxlcr_snapshot *prev, const struct cxlcr_snapshot *cur, uint64_t i,
			 uint64_t *cur_run, uint64_t *prev_run)
{
	uint64_t leaf = cxlcr_snapshot_leaf(cur, i, cur_run);
	if (CXLCR_LEAF_TIER(leaf) != CXLCR_TIER_CXL)
		return false;
	if (i >= prev->header.page_count)
		return true;
	uint64_t old = cxlcr_snapshot_leaf(prev, i, prev_run);
	if (CXLCR_LEAF_TIER(old) == CXLCR_TIER_COLD)
		return false;
	if (CXLCR_LEAF_TIER(old) != CXLCR_TIER_CXL)
		return true;
	if (old == leaf)
		return false; /* the same copy: an incremental snapshot shares it */
	/* cur could have shared prev's copy (it lies in one of cur's bases)
	 * and has one of its own: the page was written since prev (tracked,
	 * or found changed by its draft's comparison). Not compared again: a
	 * 4 GiB Redis's re-snapshot spent ~150 ms here refreshing and
	 * comparing the ~100,000 pages it had just copied. */
	if (cxlcr_snapshot_copy(cur, CXLCR_LEAF_OFFSET(old)))
		return true;
	const uint8_t *a = cxlcr_snapshot_copy(prev, CXLCR_LEAF_OFFSET(old));
	const uint8_t *b = cxlcr_snapshot_copy(cur, CXLCR_LEAF_OFFSET(leaf));
	if (!a || !b)
		return true;
	cxlcr_refresh(a, PAGE);
	cxlcr_refresh(b, PAGE);
	return memcmp(a, b, PAGE) != 0;
}

int cxlcr_snapshot_changed_pages(const struct cxlcr_snapshot *prev, const struct cxlcr_snapshot *cur,
				 uint64_t **pages, uint64_t *count)
{
	*pages = NULL;
	*count = 0;
	if (prev->header.heap_address != cur->header.heap_address)
		return cxlcr_error("snapshots '%s' and '%s' are of heaps at different addresses",
				   prev->region.name, cur->region.name);
	uint64_t cap = 0, cur_run = 0, prev_run = 0;
	for (uint64_t i = 0; i < cur->header.page_count; i++) {
		if (!page_changed(prev, cur, i, &cur_run, &prev_run))
			continue;
		if (*count == cap) {
			cap = cap ? cap * 2 : 1024;
			uint64_t *more = realloc(*pages, cap * sizeof(**pages));
			if (!more) {
				free(*pages);
				*pages = NULL;
				return cxlcr_error("out of memory");
			}
			*pages = more;
		}
		(*pages)[(*count)++] = i;
	}
	return 0;
}

int cxlcr_snapshot_create(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			  struct cxlcr_snapshot_info *out)
{
	return snapshot_copy(pool, arena_generation, name, true, false, out);
}

int cxlcr_snapshot_create_tracked(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
				  struct cxlcr_snapshot_info *out)
{
	return snapshot_copy(pool, arena_generation, name, true, true, out);
}

int cxlcr_snapshot_draft(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			 struct cxlcr_snapshot_info *out)
{
	return snapshot_copy(pool, arena_generation, name, false, false, out);
}

/* A draft's header, mapped (NULL if there is no draft of that name). */
static struct cxlcr_snapshot_header *map_draft_header(struct cxlcr_pool *pool, const char *name)
{
	struct cxlcr_region r;
	if (!cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, name, &r)) {
		cxlcr_error("no draft snapshot '%s'", name);
		return NULL;
	}
	struct cxlcr_snapshot_header *h = cxlcr_pool_map(pool, r.offset, sizeof(*h), 0, 0);
	if (h && (h->magic != 0 || h->complete == CXLCR_SNAPSHOT_COMPLETE)) {
		munmap(h, sizeof(*h));
		cxlcr_error("snapshot '%s' is not a draft", name);
		return NULL;
	}
	return h;
}

int cxlcr_snapshot_draft_note(struct cxlcr_pool *pool, const char *name, bool tracked, uint64_t fork_count)
{
	struct cxlcr_snapshot_header *h = map_draft_header(pool, name);
	if (!h)
		return -1;
	h->draft_tracked = tracked;
	h->draft_fork_count = fork_count;
	cxlcr_publish(h, sizeof(*h));
	munmap(h, sizeof(*h));
	return 0;
}

int cxlcr_snapshot_draft_notes(struct cxlcr_pool *pool, const char *name, bool *tracked, uint64_t *fork_count)
{
	struct cxlcr_snapshot_header *h = map_draft_header(pool, name);
	if (!h)
		return -1;
	cxlcr_refresh(h, sizeof(*h));
	*tracked = h->draft_tracked == 1;
	*fork_count = h->draft_fork_count;
	munmap(h, sizeof(*h));
	return 0;
}

