/*
 * The snapshot catalog. The protocol and the layout are described in
 * pool_format.h (struct cxlcr_catalog_entry); this file follows it.
 *
 * Each call maps the catalog region for its own duration: borrows outlive
 * the process's mapping, they are recorded in the pool. Every shared word
 * is read after a refresh and written back after a write (persist.h), so
 * the same code is right on a non-coherent CXL device.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "checksum.h"
#include "error.h"
#include "hosts.h"
#include "persist.h"
#include "snapshot.h"
#include "util.h"

#define ENTRY_HEAD_SIZE  offsetof(struct cxlcr_catalog_entry, borrows)
#define NO_SLOT          UINT32_MAX
#define MS               1000000ull
/* How often borrow() looks a name up again when the entry was replaced
 * between its two steps: each retry means a publish and a free happened
 * meanwhile, so more than a few means something is wrong. */
#define BORROW_TRIES     8
/* The pid of a borrow held by a snapshot region, not a process: an
 * incremental snapshot's hold on a base (its pid_start is the holder
 * region's generation). */
#define HELD_BY_SNAPSHOT (-1)

struct catalog {
	struct cxlcr_pool *pool;
	struct cxlcr_region region;
	uint8_t *base;
	struct cxlcr_catalog_header *header;
	struct cxlcr_catalog_entry *entries;
};

/* ---- shared words: refreshed before, written back after ---- */

static uint64_t load_shared(uint64_t *word)
{
	cxlcr_refresh(word, sizeof(*word));
	return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}

static void store_shared(uint64_t *word, uint64_t value)
{
	__atomic_store_n(word, value, __ATOMIC_SEQ_CST);
	cxlcr_publish(word, sizeof(*word));
}

static bool cas_shared(uint64_t *word, uint64_t expected, uint64_t desired)
{
	cxlcr_refresh(word, sizeof(*word));
	bool done = __atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST);
	cxlcr_publish(word, sizeof(*word));
	return done;
}

static uint64_t fetch_or_shared(uint64_t *word, uint64_t bits)
{
	cxlcr_refresh(word, sizeof(*word));
	uint64_t before = __atomic_fetch_or(word, bits, __ATOMIC_SEQ_CST);
	cxlcr_publish(word, sizeof(*word));
	return before;
}

static uint64_t fetch_and_shared(uint64_t *word, uint64_t bits)
{
	cxlcr_refresh(word, sizeof(*word));
	uint64_t before = __atomic_fetch_and(word, bits, __ATOMIC_SEQ_CST);
	cxlcr_publish(word, sizeof(*word));
	return before;
}

/* Every state change of an entry: one compare-and-swap of its status word,
 * which checks the generation along with the state. */
static bool set_status(struct cxlcr_catalog_entry *e, uint64_t expected, uint64_t desired)
{
	if (!cas_shared(&e->status, expected, desired))
		return false;
	store_shared(&e->state_ns, cxlcr_now_ns());
	return true;
}

/* ---- opening the catalog ---- */

static uint32_t header_checksum(const struct cxlcr_catalog_header *h)
{
	return cxlcr_crc32c(0, h, offsetof(struct cxlcr_catalog_header, checksum));
}

/* The catalog region: found, or (with create) made. 1 if there is none. */
static int find_or_make_region(struct cxlcr_pool *pool, bool create, struct cxlcr_region *r)
{
	bool found = cxlcr_region_find(pool, CXLCR_KIND_CATALOG, CXLCR_CATALOG_REGION, r);
	if (!found && !create)
		return 1;
	if (!found && cxlcr_region_alloc(pool, CXLCR_KIND_CATALOG, CXLCR_CATALOG_REGION,
					 CXLCR_CATALOG_SIZE, r) == 0)
		return 0;
	if (!found) /* another process may have made it meanwhile */
		found = cxlcr_region_find(pool, CXLCR_KIND_CATALOG, CXLCR_CATALOG_REGION, r);
	return found ? 0 : -1;
}

/* A new catalog region reads as zero. Its header is written once, under
 * the pool lock, by whichever process gets there first; the magic goes in
 * last, so a writer that dies half-way leaves a header still to write. */
static int init_header(struct catalog *c)
{
	struct cxlcr_catalog_header *h = c->header;
	if (cxlcr_pool_lock(c->pool) < 0)
		return -1;
	cxlcr_refresh(h, sizeof(*h));
	if (h->magic != CXLCR_CATALOG_MAGIC) {
		memset(h, 0, sizeof(*h));
		h->version = CXLCR_CATALOG_VERSION;
		h->header_size = sizeof(*h);
		memcpy(h->pool_uuid, c->pool->sb->uuid, sizeof(h->pool_uuid));
		h->region_generation = c->region.generation;
		h->created_ns = cxlcr_now_ns();
		h->entry_count = CXLCR_CATALOG_ENTRIES;
		h->entry_size = sizeof(struct cxlcr_catalog_entry);
		h->borrow_slots = CXLCR_CATALOG_BORROWERS;
		h->magic = CXLCR_CATALOG_MAGIC;
		h->checksum = header_checksum(h);
		h->magic = 0;
		cxlcr_publish(h, sizeof(*h));
		h->magic = CXLCR_CATALOG_MAGIC;
		cxlcr_publish(h, sizeof(*h));
	}
	cxlcr_pool_unlock(c->pool);
	return 0;
}

static int check_header(const struct catalog *c)
{
	const struct cxlcr_catalog_header *h = c->header;
	const char *why = NULL;
	if (h->magic != CXLCR_CATALOG_MAGIC)
		why = "no catalog magic";
	else if (h->version != CXLCR_CATALOG_VERSION)
		return cxlcr_error("snapshot catalog: format version %u, this cxlcr reads version %u",
				   h->version, CXLCR_CATALOG_VERSION);
	else if (h->checksum != header_checksum(h))
		why = "header checksum mismatch";
	else if (memcmp(h->pool_uuid, c->pool->sb->uuid, sizeof(h->pool_uuid)) != 0)
		return cxlcr_error("snapshot catalog belongs to another pool (uuid mismatch)");
	else if (h->region_generation != c->region.generation || h->header_size != sizeof(*h) ||
		 h->entry_count != CXLCR_CATALOG_ENTRIES || h->entry_size != sizeof(struct cxlcr_catalog_entry) ||
		 h->borrow_slots != CXLCR_CATALOG_BORROWERS)
		why = "inconsistent layout";
	return why ? cxlcr_error("snapshot catalog of pool %s is corrupt (%s)", c->pool->path, why) : 0;
}

static void catalog_close(struct catalog *c)
{
	if (c->base)
		munmap(c->base, c->region.size);
	c->base = NULL;
}

/* Maps the catalog. 1 (and nothing mapped) if there is none yet and
 * create is false. */
static int catalog_open(struct cxlcr_pool *pool, bool create, struct catalog *c)
{
	memset(c, 0, sizeof(*c));
	c->pool = pool;
	int found = find_or_make_region(pool, create, &c->region);
	if (found != 0)
		return found;
	if (c->region.size < CXLCR_CATALOG_SIZE)
		return cxlcr_error("snapshot catalog of pool %s is corrupt (region of %llu bytes)", pool->path,
				   (unsigned long long)c->region.size);
	c->base = cxlcr_pool_map(pool, c->region.offset, c->region.size, 0, 0);
	if (!c->base)
		return -1;
	c->header = (struct cxlcr_catalog_header *)(void *)c->base;
	c->entries = (struct cxlcr_catalog_entry *)(void *)(c->base + CXLCR_CATALOG_HEADER_SIZE);
	cxlcr_refresh(c->header, sizeof(*c->header));
	if (c->header->magic == 0) {
		if (!create) {
			catalog_close(c);
			return 1;
		}
		if (init_header(c) < 0) {
			catalog_close(c);
			return -1;
		}
	}
	if (check_header(c) < 0) {
		catalog_close(c);
		return -1;
	}
	return 0;
}

/* catalog_open() for operations on a name: no catalog means no such name. */
static int catalog_open_for(struct cxlcr_pool *pool, const char *name, struct catalog *c)
{
	int rc = catalog_open(pool, false, c);
	if (rc > 0)
		return cxlcr_error("no snapshot named '%s' in the catalog (it is empty)", name);
	return rc;
}

/* ---- reading entries ---- */

/*
 * A consistent copy of an entry's head, read without a lock, seqlock
 * style: its identity is written only while it is WRITING, under a
 * generation that is never used again, so if the status word reads the
 * same before and after, what was read in between belongs to it.
 */
static void read_entry(const struct catalog *c, uint32_t index, struct cxlcr_catalog_info *info)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	uint64_t before, after;
	memset(info, 0, sizeof(*info));
	for (int tries = 0; tries < 1000; tries++) {
		cxlcr_refresh(e, ENTRY_HEAD_SIZE);
		before = __atomic_load_n(&e->status, __ATOMIC_SEQ_CST);
		memcpy(info->name, e->name, sizeof(info->name));
		info->snapshot_generation = e->snapshot_generation;
		info->published_ns = e->published_ns;
		info->holders = __atomic_load_n(&e->holders, __ATOMIC_SEQ_CST);
		cxlcr_fence();
		after = load_shared(&e->status);
		if (before == after)
			break;
	}
	info->name[sizeof(info->name) - 1] = 0;
	info->index = index;
	info->state = CXLCR_CATALOG_STATUS_STATE(after);
	info->generation = CXLCR_CATALOG_STATUS_GENERATION(after);
	info->refcount = (uint32_t)__builtin_popcountll(info->holders);
}

#define FIND_SCANS 3

/*
 * The published entry called name. A replace (cxlcr_catalog_replace)
 * publishes the new entry before it tombstones the old one, so a name may
 * be published twice for a moment, or for good if the replacer died in
 * between: the newest (highest entry generation, which only grows) is the
 * one that counts. Its index, or -1.
 */
static int find_published(const struct catalog *c, const char *name, struct cxlcr_catalog_info *info)
{
	/* A scan reads one entry after another, not all at one instant: a
	 * replace can publish its new entry where the scan has been and then
	 * tombstone the old one before the scan gets there. So a scan that
	 * found nothing but a tombstone of the name looks again (a few times:
	 * a name stopped for good has such tombstones too). */
	for (int scans = 0; scans < FIND_SCANS; scans++) {
		int found = -1;
		bool tombstone = false;
		struct cxlcr_catalog_info e;
		for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
			read_entry(c, i, &e);
			if (strncmp(e.name, name, CXLCR_NAME_MAX))
				continue;
			tombstone |= e.state == CXLCR_CATALOG_TOMBSTONE;
			if (e.state != CXLCR_CATALOG_PUBLISHED)
				continue;
			if (found < 0 || e.generation > info->generation) {
				*info = e;
				found = (int)i;
			}
		}
		if (found >= 0 || !tombstone)
			return found;
	}
	return -1;
}

/* ---- freeing ---- */

/*
 * The snapshot an entry in state `status` names, read seqlock style: the
 * identity is rewritten only after the entry went FREE and was given a new
 * generation, so if status is unchanged after the read, the identity read
 * belongs to it. False if status moved on.
 */
static bool snapshot_of(struct cxlcr_catalog_entry *e, uint64_t status, uint64_t *snapshot)
{
	cxlcr_refresh(e, ENTRY_HEAD_SIZE);
	*snapshot = e->snapshot_generation;
	cxlcr_fence();
	return load_shared(&e->status) == status;
}

/* Frees the snapshot of an entry in FREEING (generation, naming snapshot)
 * and makes the entry FREE. It may run twice for one entry (a reaper
 * finishing what a process that looks dead began): freeing a region by
 * its generation, which is never reused, is harmless the second time, and
 * the final step is a compare-and-swap. */
static int free_snapshot_region(struct catalog *c, uint64_t snapshot);

static int finish_free(struct catalog *c, uint32_t index, uint64_t generation, uint64_t snapshot)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	if (free_snapshot_region(c, snapshot) < 0)
		return -1;   /* still there: a reaper tries again */
	set_status(e, CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_FREEING),
		   CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_FREE));
	return 0;
}

/*
 * If the entry is a tombstone that nobody holds, frees it: one caller
 * wins the move to FREEING. A borrower that sets its bit after holders
 * was read here sees the tombstone when it re-checks, and never uses the
 * snapshot. The snapshot is read before that move: once the entry is
 * FREEING, another process may finish the free and the entry be reused.
 * Returns 1 if this call freed it.
 */
static int free_if_unheld_tombstone(struct catalog *c, uint32_t index)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	uint64_t status = load_shared(&e->status), snapshot;
	if (CXLCR_CATALOG_STATUS_STATE(status) != CXLCR_CATALOG_TOMBSTONE)
		return 0;
	if (load_shared(&e->holders) != 0 || !snapshot_of(e, status, &snapshot))
		return 0;
	uint64_t generation = CXLCR_CATALOG_STATUS_GENERATION(status);
	if (!set_status(e, status, CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_FREEING)))
		return 0;
	return finish_free(c, index, generation, snapshot) == 0 ? 1 : 0;
}

/* ---- borrow slots ---- */

/* A slot token: random bits, never 0, and the closing flag (see
 * CXLCR_BORROW_TOKEN_* in pool_format.h). */
static uint64_t new_token(bool closing)
{
	uint64_t random = 0;
	if (getrandom(&random, sizeof(random), 0) != sizeof(random))
		random = cxlcr_mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	random &= ~CXLCR_BORROW_TOKEN_REAPING;
	if (random == 0)
		random = 2;
	return random | (closing ? CXLCR_BORROW_TOKEN_REAPING : 0);
}

/* Who holds a borrow, as recorded in its slot. */
struct holder {
	int32_t pid;
	uint64_t pid_start;
	uint64_t pid_ns;
	char host[CXLCR_HOST_MAX];
};

static int resolve_holder(const struct cxlcr_borrower *who, struct holder *h)
{
	memset(h, 0, sizeof(*h));
	h->pid = who && who->pid ? who->pid : getpid();
	cxlcr_copy_field(h->host, sizeof(h->host), who && who->host ? who->host : cxlcr_host_name());
	if (strcmp(h->host, cxlcr_host_name()) != 0)
		return 0;    /* another host's process: only its host's heartbeat speaks for it */
	h->pid_ns = cxlcr_pid_namespace();
	if (!cxlcr_process_start(h->pid, &h->pid_start))
		return cxlcr_error("cannot borrow for pid %d: no such process", (int)h->pid);
	return 0;
}

/*
 * Claims a free borrow slot of the entry and records the holder in it,
 * with the host table entry of its host if a daemon runs there.
 * `filled` goes in last: a slot still without it belongs to a claimer that
 * may have died before recording itself, which a watching reaper takes
 * back once it has seen it so for a whole lease. Returns the slot, or -1.
 */
static int claim_slot(const struct catalog *c, struct cxlcr_catalog_entry *e, const struct holder *h,
		      uint64_t *token)
{
	uint64_t incarnation = 0;
	int beat = cxlcr_host_lookup(c->pool, h->host, &incarnation);
	for (uint32_t i = 0; i < CXLCR_CATALOG_BORROWERS; i++) {
		struct cxlcr_catalog_borrow *s = &e->borrows[i];
		if (load_shared(&s->token) != 0)
			continue;
		uint64_t mine = new_token(false);
		if (!cas_shared(&s->token, 0, mine))
			continue;
		s->pid = h->pid;
		s->pid_start = h->pid_start;
		s->pid_ns = h->pid_ns;
		memcpy(s->host, h->host, sizeof(s->host));
		s->host_entry = beat >= 0 ? (uint32_t)beat + 1 : 0;
		s->host_incarnation = incarnation;
		s->borrowed_ns = cxlcr_now_ns();
		cxlcr_publish(s, sizeof(*s));
		store_shared(&s->filled, 1);
		*token = mine;
		return (int)i;
	}
	return -1;
}

/*
 * Empties slot of entry index, if its token still is `owned`: first the
 * token is swapped to a closing one of ours (so nobody else empties it,
 * and a newcomer cannot take it meanwhile), then the reference is dropped
 * and the fields cleared, and only then is the slot free. Whoever clears
 * the last bit of a tombstone frees the snapshot. Returns -1 if the slot
 * was not ours (any more), else 1 if this call freed the snapshot, else 0;
 * *held says whether the slot held a reference.
 */
static bool let_go_of_bases(struct catalog *c, uint32_t index);

static int take_back(struct catalog *c, uint32_t index, uint32_t slot, uint64_t owned, bool *held)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	struct cxlcr_catalog_borrow *s = &e->borrows[slot];
	uint64_t closing = new_token(true);
	if (held)
		*held = false;
	if (!cas_shared(&s->token, owned, closing))
		return -1;
	uint64_t bit = 1ull << slot;
	uint64_t before = fetch_and_shared(&e->holders, ~bit);
	store_shared(&s->filled, 0);
	s->borrowed_ns = 0;
	s->pid = 0;
	s->host_entry = 0;
	s->pid_start = 0;
	s->pid_ns = 0;
	s->host_incarnation = 0;
	memset(s->host, 0, sizeof(s->host));
	cxlcr_publish(s, sizeof(*s));
	cas_shared(&s->token, closing, 0);
	if (held)
		*held = (before & bit) != 0;
	if ((before & bit) && (before & ~bit) == 0)
		return free_if_unheld_tombstone(c, index);
	if (before & bit)
		let_go_of_bases(c, index);
	return 0;
}

/* ---- holds: borrows made by a snapshot on its bases ---- */

/*
 * An incremental snapshot keeps its bases alive by borrowing each of them
 * in the name of its own region (not of a process): such a borrow is taken
 * back when the snapshot region is freed (free_snapshot_region), or by any
 * reaper that finds the region gone (holder_is_gone). A base may be a
 * tombstone already; the caller holds it alive meanwhile (it borrowed the
 * newest base, which holds the older ones), and the re-check after the
 * reference is taken refuses one that is being freed all the same.
 */
int cxlcr_catalog_hold(struct cxlcr_pool *pool, uint32_t entry, uint64_t entry_generation,
		       uint64_t holder_region, uint32_t *slot, uint64_t *token)
{
	struct catalog c;
	if (entry >= CXLCR_CATALOG_ENTRIES)
		return cxlcr_error("catalog entry %u does not exist", entry);
	int rc = catalog_open(pool, false, &c);
	if (rc != 0)
		return rc < 0 ? -1 : cxlcr_error("the snapshot catalog is empty");
	struct holder h = { .pid = HELD_BY_SNAPSHOT, .pid_start = holder_region };
	struct cxlcr_catalog_entry *e = &c.entries[entry];
	int claimed = claim_slot(&c, e, &h, token);
	if (claimed < 0) {
		catalog_close(&c);
		return cxlcr_error("catalog entry %u has %u borrowers already", entry, CXLCR_CATALOG_BORROWERS);
	}
	fetch_or_shared(&e->holders, 1ull << claimed);
	cxlcr_fence();
	uint64_t now = load_shared(&e->status);
	uint32_t state = CXLCR_CATALOG_STATUS_STATE(now);
	if (CXLCR_CATALOG_STATUS_GENERATION(now) != entry_generation ||
	    (state != CXLCR_CATALOG_PUBLISHED && state != CXLCR_CATALOG_TOMBSTONE)) {
		take_back(&c, entry, (uint32_t)claimed, *token, NULL);
		catalog_close(&c);
		return cxlcr_error("catalog entry %u is no longer the snapshot to hold", entry);
	}
	*slot = (uint32_t)claimed;
	catalog_close(&c);
	return 0;
}

/* Takes back the holds listed (each only if its token is still ours). */
static void release_holds(struct catalog *c, const struct cxlcr_snapshot_base *bases, uint32_t n)
{
	for (uint32_t k = 0; k < n && k < CXLCR_SNAPSHOT_BASES_MAX; k++)
		if (bases[k].entry < CXLCR_CATALOG_ENTRIES && bases[k].slot < CXLCR_CATALOG_BORROWERS &&
		    bases[k].token)
			take_back(c, bases[k].entry, bases[k].slot, bases[k].token, NULL);
}

/*
 * Frees a snapshot region (a published snapshot's, or a draft's), and
 * first takes back the holds it has on its bases, which may free them in
 * turn. Its header says which: the same fields in a draft and a snapshot.
 * Freeing a region that is gone already is not an error.
 */
/* Takes back the holds a snapshot region's header lists (a published
 * snapshot's, or a draft's: the same fields). */
static void release_region_holds(struct catalog *c, const struct cxlcr_region *r)
{
	struct cxlcr_snapshot_header *h = cxlcr_pool_map(c->pool, r->offset, sizeof(*h), 0, 0);
	if (!h)
		return;
	cxlcr_refresh(h, sizeof(*h));
	struct cxlcr_snapshot_base bases[CXLCR_SNAPSHOT_BASES_MAX];
	uint32_t n = h->base_count <= CXLCR_SNAPSHOT_BASES_MAX ? h->base_count : 0;
	memcpy(bases, h->bases, n * sizeof(bases[0]));
	munmap(h, sizeof(*h));
	release_holds(c, bases, n);
}

/*
 * A snapshot's dump (its image set, under the snapshot's name) is needed
 * only by the processes that borrow it (a fork restoring its children, a
 * recovery restoring a point), and a retired snapshot can be borrowed no
 * more: its dump goes once no process holds it, with its region or before
 * (let_go_of_bases()), not when a newer snapshot retires it. The winner of
 * a dead host's recovery borrowed the newest point; that host, which lives
 * on until it sees itself fenced, published one more and, retiring the
 * borrowed one, took its dump, and the recovery found none to restore
 * (t_drain_handoff: "no checkpoint of 'rb.s96221164027'").
 */
static void free_snapshot_dump(struct catalog *c, const struct cxlcr_region *snapshot)
{
	char name[CXLCR_NAME_MAX + 1];
	cxlcr_copy_field(name, sizeof(name), snapshot->name);
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		/* A glance first: a reaper comes here for every retired point
		 * at each round, and a stable copy of every slot of the table
		 * each time was most of what a daemon did between points. */
		const struct cxlcr_region *slot = &c->pool->table[i];
		cxlcr_refresh(slot, sizeof(*slot));
		if (slot->state != CXLCR_REGION_LIVE || slot->kind != CXLCR_KIND_IMAGES)
			continue;
		struct cxlcr_region images;
		cxlcr_region_slot(c->pool, i, &images);
		if (images.state == CXLCR_REGION_LIVE && images.kind == CXLCR_KIND_IMAGES &&
		    cxlcr_image_set_of(images.name, name))
			cxlcr_region_free(c->pool, images.generation);
	}
}

/*
 * A retired snapshot that only newer snapshots hold lets go of its own
 * bases, and of its dump (free_snapshot_dump()). Nobody reads its leaf
 * table any more: a process that could has a borrow (and no new borrow of
 * a tombstone is confirmed), and each newer snapshot holds every snapshot
 * whose data its own leaves point into (snapshot_draft.c takes its holds
 * on the base and the base's bases directly), reading only this one's
 * data area. Without this, each
 * retired recovery point kept the older ones it shared pages with alive,
 * and those theirs: a chain of regions the newest point no longer used
 * (docs/recovery.md, where the pool space goes). Called whenever a
 * reference of a tombstone is dropped and after the tombstone is set: a
 * process borrow whose bit is seen keeps the bases until it is returned;
 * one whose bit comes after this look fails its re-check. Letting go twice
 * is harmless: each hold is taken back by its token, once. Returns
 * whether it let go (a reaper need not come back for this tombstone).
 */
static bool let_go_of_bases(struct catalog *c, uint32_t index)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	uint64_t status = load_shared(&e->status), snapshot;
	if (CXLCR_CATALOG_STATUS_STATE(status) != CXLCR_CATALOG_TOMBSTONE)
		return false;
	uint64_t holders = load_shared(&e->holders);
	if (holders == 0)
		return false;
	for (uint32_t i = 0; i < CXLCR_CATALOG_BORROWERS; i++) {
		if (!(holders >> i & 1))
			continue;
		struct cxlcr_catalog_borrow *s = &e->borrows[i];
		cxlcr_refresh(s, sizeof(*s));
		if (!load_shared(&s->filled) || s->pid != HELD_BY_SNAPSHOT)
			return false; /* a process may still read its leaves */
	}
	struct cxlcr_region r;
	if (!snapshot_of(e, status, &snapshot) || cxlcr_region_get(c->pool, snapshot, &r) < 0 ||
	    r.kind != CXLCR_KIND_SNAPSHOT)
		return false;
	free_snapshot_dump(c, &r);
	struct cxlcr_snapshot_header *m = cxlcr_pool_map(c->pool, r.offset, sizeof(*m), 0, 0);
	if (!m)
		return false;
	struct cxlcr_snapshot_header h;
	cxlcr_refresh(m, sizeof(*m));
	memcpy(&h, m, sizeof(h));
	munmap(m, sizeof(*m));
	/* Only a whole snapshot of this region (a free that won meanwhile may
	 * have handed the memory to another region). */
	if (h.magic != CXLCR_SNAPSHOT_MAGIC || h.region_generation != r.generation || h.base_count == 0 ||
	    h.base_count > CXLCR_SNAPSHOT_BASES_MAX)
		return false;
	release_holds(c, h.bases, h.base_count);
	return true;
}

static int free_snapshot_region(struct catalog *c, uint64_t snapshot)
{
	struct cxlcr_region r;
	if (cxlcr_region_get(c->pool, snapshot, &r) < 0 || r.kind != CXLCR_KIND_SNAPSHOT)
		return 0;
	release_region_holds(c, &r);
	if (cxlcr_region_free(c->pool, snapshot) < 0 && cxlcr_region_get(c->pool, snapshot, &r) == 0)
		return -1;
	free_snapshot_dump(c, &r);
	return 0;
}

int cxlcr_catalog_release_holds(struct cxlcr_pool *pool, const struct cxlcr_snapshot_base *bases, uint32_t n)
{
	struct catalog c;
	int rc = catalog_open(pool, false, &c);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	release_holds(&c, bases, n);
	catalog_close(&c);
	return 0;
}

int cxlcr_catalog_release_region_holds(struct cxlcr_pool *pool, const struct cxlcr_region *snapshot)
{
	struct catalog c;
	int rc = catalog_open(pool, false, &c);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	release_region_holds(&c, snapshot);
	catalog_close(&c);
	return 0;
}

int cxlcr_snapshot_region_free(struct cxlcr_pool *pool, uint64_t generation)
{
	struct catalog c;
	int rc = catalog_open(pool, false, &c);
	if (rc < 0)
		return -1;
	if (rc > 0) /* no catalog: nothing held */
		return cxlcr_region_free(pool, generation);
	rc = free_snapshot_region(&c, generation);
	catalog_close(&c);
	return rc;
}

/* ---- tombstoning ---- */

/* Tombstones entry index if it still is generation, published. Returns 1
 * if it did, with *freed whether the snapshot went at once. */
static int tombstone_entry(struct catalog *c, uint32_t index, uint64_t generation, bool *freed)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	if (!set_status(e, CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_PUBLISHED),
			CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_TOMBSTONE)))
		return 0;
	/* Tombstone, then read the holders: see pool_format.h for why a
	 * borrower that passed its re-check is always seen here. */
	cxlcr_fence();
	int done = free_if_unheld_tombstone(c, index);
	if (done == 0)
		let_go_of_bases(c, index);
	if (freed)
		*freed = done > 0;
	return 1;
}

/* Tombstones every entry published as name with a generation below
 * `below`. Returns how many it tombstoned. */
static int tombstone_named(struct catalog *c, const char *name, uint64_t below, bool *freed)
{
	int n = 0;
	struct cxlcr_catalog_info info;
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		read_entry(c, i, &info);
		if (info.state != CXLCR_CATALOG_PUBLISHED || info.generation >= below ||
		    strncmp(info.name, name, CXLCR_NAME_MAX))
			continue;
		n += tombstone_entry(c, i, info.generation, freed);
	}
	return n;
}

/* ---- publish, find ---- */

/* Under the pool lock: a free entry for name, or -1 with the reason (the
 * name, unless it is being replaced, or the snapshot is already in the
 * catalog, or it is full). */
static int pick_entry_for(const struct catalog *c, const char *name, uint64_t snapshot, bool replace,
			  uint64_t *status)
{
	int free_index = -1;
	struct cxlcr_catalog_info info;
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		read_entry(c, i, &info);
		if (info.state == CXLCR_CATALOG_FREE) {
			if (free_index < 0) {
				free_index = (int)i;
				*status = CXLCR_CATALOG_STATUS(info.generation, CXLCR_CATALOG_FREE);
			}
			continue;
		}
		bool live = info.state == CXLCR_CATALOG_PUBLISHED || info.state == CXLCR_CATALOG_WRITING;
		if (live && !replace && !strncmp(info.name, name, CXLCR_NAME_MAX))
			return cxlcr_error("a snapshot named '%s' is already published", name);
		if (info.snapshot_generation == snapshot)
			return cxlcr_error("snapshot region %llu is already in the catalog as '%s'",
					   (unsigned long long)snapshot, info.name);
	}
	if (free_index < 0)
		return cxlcr_error("snapshot catalog is full (%u snapshots)", CXLCR_CATALOG_ENTRIES);
	return free_index;
}

/* Under the pool lock: fills a free entry in (WRITING, with a new
 * generation) and publishes it. */
static int fill_entry(struct catalog *c, uint32_t index, uint64_t free_status, const char *name,
		      uint64_t snapshot)
{
	struct cxlcr_catalog_entry *e = &c->entries[index];
	cxlcr_refresh(&c->header->last_generation, sizeof(uint64_t));
	uint64_t generation = __atomic_add_fetch(&c->header->last_generation, 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&c->header->last_generation, sizeof(uint64_t));
	uint64_t writing = CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_WRITING);
	if (!set_status(e, free_status, writing))
		return cxlcr_error("snapshot catalog: entry %u changed under the pool lock", index);
	cxlcr_copy_field(e->name, sizeof(e->name), name);
	e->snapshot_generation = snapshot;
	e->published_ns = cxlcr_now_ns();
	cxlcr_copy_field(e->publisher_host, sizeof(e->publisher_host), cxlcr_host_name());
	cxlcr_publish(e, ENTRY_HEAD_SIZE);
	if (!set_status(e, writing, CXLCR_CATALOG_STATUS(generation, CXLCR_CATALOG_PUBLISHED)))
		return cxlcr_error("snapshot catalog: entry %u was taken back while being published", index);
	return 0;
}

static int publish(struct cxlcr_pool *pool, const char *name, uint64_t snapshot_generation, bool replace,
		   struct cxlcr_catalog_info *out)
{
	if (!cxlcr_valid_name(name))
		return cxlcr_error("invalid snapshot name '%s' (letters, digits, '.', '_', '-'; at most %u)",
				   name, CXLCR_NAME_MAX - 1);
	if (cxlcr_snapshot_validate(pool, snapshot_generation) < 0)
		return -1;
	struct catalog c;
	if (catalog_open(pool, true, &c) < 0)
		return -1;
	if (cxlcr_pool_lock(pool) < 0) {
		catalog_close(&c);
		return -1;
	}
	int rc = -1;
	uint64_t free_status = 0;
	struct cxlcr_region r;
	int index = -1;
	if (cxlcr_region_get(pool, snapshot_generation, &r) < 0 || r.kind != CXLCR_KIND_SNAPSHOT)
		cxlcr_error("snapshot region %llu is gone", (unsigned long long)snapshot_generation);
	else if (cxlcr_pool_held(pool) < 0) /* a fenced host's point is never published */
		;
	else if ((index = pick_entry_for(&c, name, snapshot_generation, replace, &free_status)) >= 0)
		rc = fill_entry(&c, (uint32_t)index, free_status, name, snapshot_generation);
	cxlcr_pool_unlock(pool);
	struct cxlcr_catalog_info mine;
	if (rc == 0)
		read_entry(&c, (uint32_t)index, &mine);
	/* A replace's own entry is published: the older ones of the name
	 * leave the catalog (freed when their last borrower returns). */
	if (rc == 0 && replace)
		tombstone_named(&c, name, mine.generation, NULL);
	if (rc == 0 && out)
		*out = mine;
	catalog_close(&c);
	return rc;
}

int cxlcr_catalog_publish(struct cxlcr_pool *pool, const char *name, uint64_t snapshot_generation,
			  struct cxlcr_catalog_info *out)
{
	return publish(pool, name, snapshot_generation, false, out);
}

int cxlcr_catalog_replace(struct cxlcr_pool *pool, const char *name, uint64_t snapshot_generation,
			  struct cxlcr_catalog_info *out)
{
	return publish(pool, name, snapshot_generation, true, out);
}

int cxlcr_catalog_find(struct cxlcr_pool *pool, const char *name, struct cxlcr_catalog_info *out)
{
	struct catalog c;
	if (catalog_open_for(pool, name, &c) < 0)
		return -1;
	int index = find_published(&c, name, out);
	catalog_close(&c);
	return index >= 0 ? 0 : cxlcr_error("no snapshot named '%s' in the catalog", name);
}

int cxlcr_catalog_snapshots(struct cxlcr_pool *pool, uint64_t *snapshots, uint32_t max)
{
	struct catalog c;
	int rc = catalog_open(pool, false, &c);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	uint32_t n = 0;
	struct cxlcr_catalog_info info;
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES && n < max; i++) {
		read_entry(&c, i, &info);
		if (info.state != CXLCR_CATALOG_FREE)
			snapshots[n++] = info.snapshot_generation;
	}
	catalog_close(&c);
	return (int)n;
}

int cxlcr_catalog_entry(struct cxlcr_pool *pool, uint32_t index, struct cxlcr_catalog_info *out)
{
	if (index >= CXLCR_CATALOG_ENTRIES)
		return cxlcr_error("snapshot catalog has no entry %u (it has %u)", index, CXLCR_CATALOG_ENTRIES);
	struct catalog c;
	int rc = catalog_open(pool, false, &c);
	if (rc < 0)
		return -1;
	if (rc > 0) {   /* no catalog yet: every entry is free */
		memset(out, 0, sizeof(*out));
		out->index = index;
		return 0;
	}
	read_entry(&c, index, out);
	struct cxlcr_catalog_entry *e = &c.entries[index];
	for (uint32_t i = 0; i < CXLCR_CATALOG_BORROWERS; i++) {
		struct cxlcr_catalog_borrow *s = &e->borrows[i];
		if (load_shared(&s->token) == 0)
			continue;
		out->slots_claimed++;
		cxlcr_refresh(s, sizeof(*s));
		if (load_shared(&s->filled) && s->pid == HELD_BY_SNAPSHOT && (out->holders >> i & 1)) {
			struct cxlcr_region holder;
			out->holds++;
			if (cxlcr_region_get(pool, s->pid_start, &holder) < 0 || holder.kind != CXLCR_KIND_SNAPSHOT)
				out->holds_orphaned++;
		}
	}
	catalog_close(&c);
	return 0;
}

/* ---- borrowing ---- */

static int lookup(const struct catalog *c, const char *name, struct cxlcr_borrow *b)
{
	struct cxlcr_catalog_info info;
	memset(b, 0, sizeof(*b));
	b->slot = NO_SLOT;
	int index = find_published(c, name, &info);
	if (index < 0)
		return cxlcr_error("no snapshot named '%s' in the catalog", name);
	b->entry = (uint32_t)index;
	b->generation = info.generation;
	b->snapshot_generation = info.snapshot_generation;
	memcpy(b->name, info.name, sizeof(b->name));
	return 0;
}

/*
 * The second step of a borrow: claim a slot, take the reference, then
 * re-check the entry. 0: borrowed. 1: the entry is no longer the one
 * looked up (tombstoned, or freed and reused); the reference has been
 * dropped again. -1: an error.
 */
static int confirm(struct catalog *c, const struct holder *h, struct cxlcr_borrow *b)
{
	if (b->entry >= CXLCR_CATALOG_ENTRIES || b->generation == 0)
		return cxlcr_error("borrow of '%s' was never looked up", b->name);
	struct cxlcr_catalog_entry *e = &c->entries[b->entry];
	uint64_t token;
	int slot = claim_slot(c, e, h, &token);
	if (slot < 0)
		return cxlcr_error("snapshot '%s' has %u borrowers already", b->name, CXLCR_CATALOG_BORROWERS);
	fetch_or_shared(&e->holders, 1ull << slot);
	cxlcr_fence();
	uint64_t now = load_shared(&e->status);
	if (now != CXLCR_CATALOG_STATUS(b->generation, CXLCR_CATALOG_PUBLISHED)) {
		take_back(c, b->entry, (uint32_t)slot, token, NULL);
		if (CXLCR_CATALOG_STATUS_GENERATION(now) == b->generation)
			cxlcr_error("snapshot '%s' was tombstoned while it was being borrowed", b->name);
		else
			cxlcr_error("snapshot '%s' was replaced while it was being borrowed (entry %u: generation %llu, now %llu)",
				    b->name, b->entry, (unsigned long long)b->generation,
				    (unsigned long long)CXLCR_CATALOG_STATUS_GENERATION(now));
		return 1;
	}
	b->slot = (uint32_t)slot;
	b->token = token;
	return 0;
}

int cxlcr_catalog_borrow_begin(struct cxlcr_pool *pool, const char *name, struct cxlcr_borrow *b)
{
	struct catalog c;
	memset(b, 0, sizeof(*b));
	b->slot = NO_SLOT;
	if (catalog_open_for(pool, name, &c) < 0)
		return -1;
	int rc = lookup(&c, name, b);
	catalog_close(&c);
	return rc;
}

int cxlcr_catalog_borrow_confirm(struct cxlcr_pool *pool, const struct cxlcr_borrower *who,
				 struct cxlcr_borrow *b)
{
	struct holder h;
	struct catalog c;
	if (resolve_holder(who, &h) < 0 || catalog_open_for(pool, b->name, &c) < 0)
		return -1;
	int rc = confirm(&c, &h, b);
	catalog_close(&c);
	return rc == 0 ? 0 : -1;
}

int cxlcr_catalog_borrow(struct cxlcr_pool *pool, const char *name, const struct cxlcr_borrower *who,
			 struct cxlcr_borrow *b)
{
	struct holder h;
	struct catalog c;
	if (resolve_holder(who, &h) < 0 || catalog_open_for(pool, name, &c) < 0)
		return -1;
	int rc = 1;
	for (int tries = 0; rc > 0 && tries < BORROW_TRIES; tries++)
		rc = lookup(&c, name, b) < 0 ? -1 : confirm(&c, &h, b);
	catalog_close(&c);
	return rc == 0 ? 0 : -1;
}

int cxlcr_catalog_return(struct cxlcr_pool *pool, struct cxlcr_borrow *b)
{
	struct catalog c;
	if (b->token == 0 || b->entry >= CXLCR_CATALOG_ENTRIES || b->slot >= CXLCR_CATALOG_BORROWERS)
		return cxlcr_error("snapshot '%s' is not borrowed", b->name);
	if (catalog_open_for(pool, b->name, &c) < 0)
		return -1;
	int rc = take_back(&c, b->entry, b->slot, b->token, NULL) < 0
			 ? cxlcr_error("the borrow of snapshot '%s' was taken back (its holder was taken for dead)",
				       b->name)
			 : 0;
	b->token = 0;
	b->slot = NO_SLOT;
	catalog_close(&c);
	return rc;
}

int cxlcr_catalog_tombstone(struct cxlcr_pool *pool, const char *name, bool *freed)
{
	struct catalog c;
	if (freed)
		*freed = false;
	if (catalog_open_for(pool, name, &c) < 0)
		return -1;
	/* Every published entry of the name: a replacer that died between
	 * its publish and its retiring of the older ones left two. */
	int found = tombstone_named(&c, name, UINT64_MAX, freed);
	catalog_close(&c);
	return found > 0 ? 0 : cxlcr_error("no snapshot named '%s' in the catalog", name);
}

/* ---- the reaper ---- */

struct reaper {
	struct catalog *c;
	struct cxlcr_hosts_watch *watch;       /* NULL: judge only this host's processes */
	uint64_t now;                          /* CLOCK_MONOTONIC, with a watch */
	uint64_t pid_ns;
	const char *host;
	struct cxlcr_reap_report report;
};

/* Whether the holder of a claimed slot is gone, by what its slot says;
 * see pool_format.h for the three cases. */
static bool holder_is_gone(struct reaper *r, uint32_t index, uint32_t slot, uint64_t token)
{
	struct cxlcr_catalog_borrow *s = &r->c->entries[index].borrows[slot];
	if ((token & CXLCR_BORROW_TOKEN_REAPING) || load_shared(&s->filled) == 0)
		return r->watch && cxlcr_hosts_claim_stale(r->watch, index, slot, token, r->now);
	cxlcr_fence();
	cxlcr_refresh(s, sizeof(*s));
	if (s->pid == HELD_BY_SNAPSHOT) {
		/* Held by a snapshot region: gone with it (generations are
		 * never reused). No clock, no host: any reaper can tell. */
		struct cxlcr_region holder;
		return cxlcr_region_get(r->c->pool, s->pid_start, &holder) < 0 || holder.kind != CXLCR_KIND_SNAPSHOT;
	}
	if (!strncmp(s->host, r->host, sizeof(s->host)) && s->pid_ns == r->pid_ns) {
		uint64_t start = 0;
		return !cxlcr_process_start(s->pid, &start) || (s->pid_start && start != s->pid_start);
	}
	if (!r->watch || s->host_entry == 0 || s->host_entry > CXLCR_HOSTS_MAX)
		return false;
	const struct cxlcr_host_seen *seen = &r->watch->entry[s->host_entry - 1];
	if (!seen->intact || strncmp(seen->name, s->host, sizeof(s->host)) != 0)
		return false;   /* not the entry of its host: no way to judge it */
	return cxlcr_hosts_judge(r->watch, s->host_entry - 1, r->now, NULL) == CXLCR_VERDICT_DEAD;
}

/* Takes a dead holder's slot back (take_back: claimed first, so no other
 * reaper or late returner drops the same reference), and frees a
 * tombstone that this leaves without holders. */
static void reap_slot(struct reaper *r, uint32_t index, uint32_t slot)
{
	struct cxlcr_catalog_borrow *s = &r->c->entries[index].borrows[slot];
	uint64_t token = load_shared(&s->token);
	if (token == 0 || !holder_is_gone(r, index, slot, token))
		return;
	bool held;
	int freed = take_back(r->c, index, slot, token, &held);
	if (freed < 0)
		return;   /* it changed meanwhile: not ours to take */
	r->report.borrows_dropped++;
	r->report.references_dropped += held;
	r->report.snapshots_freed += freed > 0;
}

/* Entries a dead process left in WRITING: a publisher holds the pool lock
 * for as long as it writes, so with the lock held, any WRITING entry is
 * abandoned. */
static void repair_abandoned_publishes(struct reaper *r)
{
	if (cxlcr_pool_lock(r->c->pool) < 0)
		return;
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		struct cxlcr_catalog_entry *e = &r->c->entries[i];
		uint64_t status = load_shared(&e->status);
		if (CXLCR_CATALOG_STATUS_STATE(status) == CXLCR_CATALOG_WRITING &&
		    set_status(e, status, CXLCR_CATALOG_STATUS(CXLCR_CATALOG_STATUS_GENERATION(status),
								CXLCR_CATALOG_FREE)))
			r->report.entries_repaired++;
	}
	cxlcr_pool_unlock(r->c->pool);
}

/* After the slots of an entry: a tombstone nobody holds any more (its last
 * returner may have died before freeing it) is freed, one only snapshots
 * hold lets go of its bases, and a free left half done is finished. Returns whether the entry is WRITING. */
static bool settle_entry(struct reaper *r, uint32_t index)
{
	struct cxlcr_catalog_entry *e = &r->c->entries[index];
	uint64_t status = load_shared(&e->status);
	switch (CXLCR_CATALOG_STATUS_STATE(status)) {
	case CXLCR_CATALOG_TOMBSTONE:
		if (free_if_unheld_tombstone(r->c, index) > 0)
			r->report.snapshots_freed++;
		else if (!r->watch || r->watch->let_go[index] != status) {
			/* Its last process borrower may have died before
			 * letting go. Once let go, a tombstone has nothing more
			 * to give back until it is freed: a daemon's reaper
			 * remembers it rather than look for its dump and its
			 * bases each round (recovery points leave dozens of
			 * tombstones that newer points still hold). */
			if (let_go_of_bases(r->c, index) && r->watch)
				r->watch->let_go[index] = status;
		}
		break;
	case CXLCR_CATALOG_FREEING: {
		uint64_t snapshot;
		if (snapshot_of(e, status, &snapshot) &&
		    finish_free(r->c, index, CXLCR_CATALOG_STATUS_GENERATION(status), snapshot) == 0)
			r->report.entries_repaired++;
		break;
	}
	case CXLCR_CATALOG_WRITING:
		return true;
	}
	return false;
}

static int reap(struct cxlcr_pool *pool, const char *host, struct cxlcr_hosts_watch *watch, uint64_t now,
		struct cxlcr_reap_report *report);

int cxlcr_catalog_reap(struct cxlcr_pool *pool, struct cxlcr_reap_report *report)
{
	return reap(pool, cxlcr_host_name(), NULL, 0, report);
}

int cxlcr_catalog_reap_watched(struct cxlcr_pool *pool, struct cxlcr_hosts_watch *watch, uint64_t now,
			       struct cxlcr_reap_report *report)
{
	return reap(pool, cxlcr_host_name(), watch, now, report);
}

static int reap(struct cxlcr_pool *pool, const char *host, struct cxlcr_hosts_watch *watch, uint64_t now,
		struct cxlcr_reap_report *report)
{
	struct catalog c;
	struct reaper r = { .c = &c, .watch = watch, .now = now, .pid_ns = cxlcr_pid_namespace(), .host = host };
	if (report)
		memset(report, 0, sizeof(*report));
	int rc = catalog_open(pool, false, &c);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (watch) {
		/* The pod's membership, as this reaper watches it (no host
		 * table: no daemon ever ran, no borrow names an entry). */
		struct cxlcr_hosts_map hosts;
		if (cxlcr_hosts_open(pool, false, &hosts) == 0) {
			cxlcr_hosts_observe(watch, &hosts, now);
			cxlcr_hosts_close(&hosts);
		}
		if (memcmp(watch->pool_uuid, pool->sb->uuid, sizeof(watch->pool_uuid)) != 0) {
			cxlcr_hosts_watch_init(watch, watch->lease_ns);   /* a new pool: start over */
			memcpy(watch->pool_uuid, pool->sb->uuid, sizeof(watch->pool_uuid));
		}
		cxlcr_hosts_claims_begin(watch);
	}
	bool writing = false;
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		/* One refresh of all the slots, rather than a fence per slot:
		 * most are free, and a claimed one is read again in reap_slot(). */
		struct cxlcr_catalog_entry *e = &c.entries[i];
		cxlcr_refresh(e->borrows, sizeof(e->borrows));
		for (uint32_t slot = 0; slot < CXLCR_CATALOG_BORROWERS; slot++)
			if (__atomic_load_n(&e->borrows[slot].token, __ATOMIC_SEQ_CST) != 0)
				reap_slot(&r, i, slot);
		writing |= settle_entry(&r, i);
	}
	if (watch)
		cxlcr_hosts_claims_end(watch);
	if (writing)
		repair_abandoned_publishes(&r);
	catalog_close(&c);
	if (report)
		*report = r.report;
	return (int)r.report.borrows_dropped;
}
