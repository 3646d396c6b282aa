/*
 * The cold tier's table in the pool: which memory servers (cxlcr-memd) the
 * pod has, how to reach them, and which extents of their memory belong to
 * which snapshot. One region of kind CXLCR_KIND_TIER named
 * CXLCR_TIER_REGION, made by the first server that registers:
 *
 *   0                       struct cxlcr_tier_header
 *   CXLCR_TIER_HEADER_SIZE  CXLCR_TIER_SERVERS struct cxlcr_tier_server
 *   then                    CXLCR_TIER_EXTENTS struct cxlcr_tier_extent
 *
 * Everything is written under the pool lock, and each entry carries a
 * CRC-32C of itself: an entry that fails it is corrupt and never used.
 *
 * A server that is alive bumps its heartbeat counter in the header every
 * beat_period_ms; one whose counter stood still for the watching host's
 * lease, and at least four of its periods, is marked DEAD by that host
 * (tier/watch.c), and stops when it finds its entry no longer UP.
 *
 * A server entry is its identity: fabric address, the key and base of its
 * one registered memory region, its size, and an incarnation that grows on
 * every start (a restarted server has lost its memory: extents made under
 * an older incarnation are gone, and a reader says so).
 *
 * Extents are the allocator's state, kept here rather than in the server
 * so that a server never needs to be asked and a crash of anyone loses
 * nothing: an extent belongs to the snapshot region whose generation is
 * its owner, and is free as soon as no live region has that generation
 * (generations are never reused). Freeing a tiered snapshot's region thus
 * returns its cold extents with no further step; the next allocation
 * clears the stale entries, and the server gives their memory back.
 */
#ifndef CXLCR_TIER_FORMAT_H
#define CXLCR_TIER_FORMAT_H

#include <stdint.h>

#define CXLCR_TIER_REGION       "tier"
#define CXLCR_TIER_MAGIC        0x5245495443434c58ULL /* "XLCCTIER" */
#define CXLCR_TIER_VERSION      1u
#define CXLCR_TIER_HEADER_SIZE  4096u
#define CXLCR_TIER_SERVERS      8u
#define CXLCR_TIER_EXTENTS      1024u
#define CXLCR_TIER_ADDR_MAX     64u

enum cxlcr_tier_server_state {
	CXLCR_TIER_SERVER_NONE = 0,
	CXLCR_TIER_SERVER_UP = 1,
	CXLCR_TIER_SERVER_DOWN = 2,   /* stopped in order: its memory is gone */
	CXLCR_TIER_SERVER_DEAD = 3,   /* its heartbeat stood still for a lease: taken
				       * for dead by a host (tier/watch.c), its memory gone */
};

struct cxlcr_tier_header {
	uint64_t magic;              /* CXLCR_TIER_MAGIC */
	uint32_t version;
	uint32_t header_size;
	uint8_t  pool_uuid[16];
	uint32_t servers;            /* CXLCR_TIER_SERVERS */
	uint32_t extents;            /* CXLCR_TIER_EXTENTS */
	uint32_t server_size;
	uint32_t extent_size;
	uint32_t reserved;
	uint32_t checksum;           /* CRC-32C of everything above */
	/* mutable, under the pool lock */
	uint64_t releases;           /* bumped whenever stale extents are cleared */
	/* mutable, without the lock: server i bumps heartbeat[i] every
	 * heartbeat period of the pod (a counter, judged by the hosts on
	 * their own clocks, never compared with a clock) */
	uint64_t heartbeat[CXLCR_TIER_SERVERS];
};

struct cxlcr_tier_server {
	uint64_t incarnation;        /* 0: never used; grows on every start */
	uint32_t state;              /* enum cxlcr_tier_server_state */
	uint32_t addr_len;
	char     name[32];           /* the memory host, e.g. "m0" */
	char     provider[32];       /* libfabric provider, e.g. "tcp;ofi_rxm" */
	uint8_t  addr[CXLCR_TIER_ADDR_MAX]; /* its endpoint's address (fi_getname) */
	uint64_t mr_key;             /* the key of its registered memory */
	uint64_t mr_base;            /* added to a server offset: providers with FI_MR_VIRT_ADDR */
	uint64_t size;               /* bytes it serves */
	int32_t  pid;
	uint32_t mr_virt;            /* 1: remote addresses are mr_base + offset */
	uint32_t beat_period_ms;     /* how often it bumps its heartbeat; 0: it does not */
	/* Its second endpoint, for bulk RMA (a background fetch's reads, a
	 * split's writes), served by a thread of its own at the lowest
	 * priority, so that a fault's read never queues behind them: addr
	 * with this port, in a domain of its own (so the same memory under
	 * its own key). 0: none, every RMA goes to addr. */
	uint32_t bulk_port;
	uint64_t bulk_mr_key;
	uint32_t pad;
	uint32_t crc;                /* CRC-32C of everything above */
};

struct cxlcr_tier_extent {
	uint64_t owner;              /* the snapshot region it belongs to; 0: free */
	uint64_t server_incarnation; /* of its server when it was handed out */
	uint64_t offset;             /* on the server, 4 KiB aligned */
	uint64_t size;
	uint32_t server;             /* entry of the server table */
	uint32_t crc;                /* CRC-32C of everything above */
};

#define CXLCR_TIER_SIZE (CXLCR_TIER_HEADER_SIZE + CXLCR_TIER_SERVERS * sizeof(struct cxlcr_tier_server) + \
			 CXLCR_TIER_EXTENTS * sizeof(struct cxlcr_tier_extent))

_Static_assert(sizeof(struct cxlcr_tier_server) == 200, "tier server layout");
_Static_assert(sizeof(struct cxlcr_tier_extent) == 40, "tier extent layout");
_Static_assert(sizeof(struct cxlcr_tier_header) <= CXLCR_TIER_HEADER_SIZE, "tier header layout");

#endif
