/*
 * The cold tier (docs/cold-tier.md): memory servers (cxlcr-memd) reached
 * with one-sided RMA through libfabric, holding the cold pages of tiered
 * snapshots.
 *
 * What other components call: the memory servers' table (who serves, how
 * much is used), making a tiered snapshot out of a full one, and reading
 * any page of a snapshot, cold ones by RMA with their checksum checked
 * (the copy-mode pager's entry point).
 */
#ifndef CXLCR_TIER_H
#define CXLCR_TIER_H

#include <stdbool.h>
#include <stdint.h>
#include "../common/pool.h"
#include "../common/snapshot.h"
#include "format.h"

/* How long one RMA may take before the server is taken for gone, unless
 * $CXLCR_TIER_TIMEOUT_MS says otherwise. */
#define TIER_TIMEOUT_MS 2000
/* TIER_TIMEOUT_MS, or $CXLCR_TIER_TIMEOUT_MS if set. */
int tier_timeout_ms(void);

/* A memory server as the table has it, and what of it is handed out. */
struct tier_server_info {
	uint32_t index;
	char name[32];
	char provider[32];
	char address[64];            /* printable */
	uint32_t bulk_port;          /* its bulk endpoint's port on that address; 0: none */
	bool up;
	bool dead;                   /* down because its heartbeat stood still (not stopped in order) */
	int32_t pid;
	uint64_t incarnation;
	uint64_t size;
	uint64_t used;               /* bytes in extents of live snapshots */
	uint32_t extents;
};

/* Server i of the table: 0, 1 if the slot is unused, -1 with one line. */
int tier_server_get(struct cxlcr_pool *pool, uint32_t index, struct tier_server_info *out);

/* How many servers the table has up (0 if there is no table). */
int tier_servers_up(struct cxlcr_pool *pool);

/* Registers a server (under name, which takes the entry of that name or a
 * free one) as up, with a new incarnation: its index, or -1. */
struct cxlcr_tier_server;
int tier_server_register(struct cxlcr_pool *pool, const struct cxlcr_tier_server *identity);
/* Marks it down (only if incarnation is still its own). */
int tier_server_unregister(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation);

/* Hands out an extent of size bytes (4 KiB multiple) on an up server, owned
 * by the region with generation owner (it is returned when that region is
 * freed). Stale extents are cleared first. */
struct cxlcr_tier_extent;
int tier_extent_alloc(struct cxlcr_pool *pool, uint64_t size, uint64_t owner, uint32_t *server,
		      struct cxlcr_tier_extent *out);
/* Clears the entries of extents whose owner is gone (their memory is then
 * free): how many. */
int tier_extents_reap(struct cxlcr_pool *pool);
/* The extents in use on server index, sorted by offset, into a malloc'd
 * array (the server gives the memory between them back). */
int tier_extents_of(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation, struct cxlcr_tier_extent **out,
		    uint32_t *count);

/* What tier_snapshot_make() did. */
struct tier_result {
	uint64_t generation;         /* the tiered snapshot's region */
	uint64_t pages_hot, pages_cold, pages_zero;
	uint64_t cxl_bytes;          /* its region */
	uint64_t cold_bytes;         /* on the memory server */
	double write_ms;             /* the RMA writes */
	char server[32];
};

/*
 * A tiered snapshot called name, made from the complete snapshot with
 * generation source: the pages whose bit is set in hot (one bit for each
 * of the first hot_pages pages of the heap) keep a copy in
 * CXL, every other non-zero page goes to a memory server by RMA write,
 * each with its CRC-32C; zero pages are stored nowhere. The source is left
 * as it is (the caller frees it). On failure nothing is left behind.
 */
int tier_snapshot_make(struct cxlcr_pool *pool, uint64_t source, const uint64_t *hot, uint64_t hot_pages,
		       const char *name, struct tier_result *out);

/*
 * Loads libfabric and starts its providers in this process, if a memory
 * server of the pool is up (or always): ~0.4 s here (libpsm's timer
 * calibration when the library loads, then each provider's start), which
 * every process forked from this one afterwards inherits done. A fork's
 * restore calls it (in a thread, while it fetches and rebases the images)
 * before it starts the pagers of a tiered snapshot's children, so that
 * they do not each pay it before their child runs (8 children: 3.2 s,
 * then 1.2 s); a daemon configured for the tier calls it as it starts, so
 * that its forks do not pay it at all. True if it was done; a failure is
 * left to the users of the tier to report.
 */
bool tier_warm(struct cxlcr_pool *pool, bool always);

/*
 * Liveness (watch.c). A memory server calls tier_beat() every heartbeat
 * period of the pod; a host daemon calls tier_watch_tick() on its liveness
 * tick with a struct tier_watch of its own (zeroed), which marks DEAD a
 * server whose counter did not move for lease_ns on this host's clock.
 * It returns how many it marked, the last one said in why.
 */
struct tier_watch_entry {
	uint64_t incarnation;        /* 0: not watched */
	uint64_t beat;
	uint64_t changed_ns;         /* when beat was last seen to change */
};
struct tier_watch {
	uint64_t looked_ns;
	uint64_t absent_ns;        /* when the pool was last seen with no tier table; 0: it had one */
	struct tier_watch_entry server[CXLCR_TIER_SERVERS];
};
#define TIER_WATCH_EVERY_NS (250ull * 1000000ull) /* how often a host need look */
#define TIER_ABSENT_EVERY_NS (2000ull * 1000000ull) /* ... for a tier table while there is none */
void tier_beat(struct cxlcr_pool *pool, uint32_t index);
int tier_watch_tick(struct cxlcr_pool *pool, struct tier_watch *w, uint64_t now, uint64_t lease_ns, char *why,
		    size_t len);

/*
 * Reading a snapshot's pages, cold ones included: what the copy-mode pager
 * calls. tier_reader_open() checks the snapshot's cold part (its checksum,
 * its extent still handed out under the same server incarnation) and
 * connects to the server; tier_read_page() copies page page_index of the
 * heap into dst (4 KiB): zeros, the CXL copy, or the cold copy read by RMA
 * and checked against its CRC. A mismatch, a missing extent or a server
 * that does not answer within TIER_TIMEOUT_MS is refused with one line
 * (-1): a caller never gets a wrong page. tier_read_run() reads and
 * checks n pages (at most TIER_READ_RUN, or max_run for a reader opened
 * with tier_reader_open_run()) of one cold run in one RMA read, without a
 * copy: *data points at them in the reader's own registered buffer, valid
 * until its next read (the pager's background fetch installs them from
 * there). A reader opened with tier_reader_open_run() is the background
 * fetch's: it reaches the server's bulk endpoint, where one exists, which
 * the server serves at a lower priority than the faults' reads on its
 * main one. tier_reader_times() says how long the reader spent waiting for RMA reads
 * and checking what came back, in ns. One reader per thread.
 */
#define TIER_READ_RUN 16u
struct tier_reader;
int tier_reader_open(const struct cxlcr_snapshot *s, struct tier_reader **out);
int tier_reader_open_run(const struct cxlcr_snapshot *s, uint64_t max_run, struct tier_reader **out);
int tier_read_page(struct tier_reader *r, uint64_t page_index, void *dst);
int tier_read_run(struct tier_reader *r, uint64_t first_page, uint64_t n, const void **data);
void tier_reader_times(const struct tier_reader *r, uint64_t *rma_ns, uint64_t *check_ns);
void tier_reader_close(struct tier_reader *r);

/* Which pages of a process's heap [heap, heap + pages * 4 KiB) have page
 * table entries now (/proc/PID/pagemap): bit i set if page i is present.
 * After its page tables were dropped, those are the pages it touched
 * since (a read may map up to 64 KiB of neighbours with it: the kernel's
 * fault-around). A malloc'd bitmap and the count of set bits. */
int tier_present_pages(int pid, uint64_t heap, uint64_t pages, uint64_t **bits, uint64_t *count);

#endif
