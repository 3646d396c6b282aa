/*
 * The on-device format of a cxlcr pool. This is the only definition of it:
 * every component that reads or writes the pool includes this header.
 *
 * A pool is one shared memory device (devdax, or a file on tmpfs/hugetlbfs
 * when emulated). All offsets are device-relative, so a host can map the
 * pool anywhere and any part of it at any address.
 *
 *   0        superblock          (CXLCR_SUPERBLOCK_SIZE)
 *   4 KiB    region table        (CXLCR_REGION_MAX entries)
 *   2 MiB    regions             (each CXLCR_POOL_ALIGN aligned)
 *
 * Fields are little-endian and fixed-size. The immutable part of the
 * superblock is covered by a CRC-32C so that a corrupt or foreign header is
 * refused instead of followed; the mutable words (the allocation lock, the
 * region generation counter) live on their own cache lines, and are written
 * with atomics followed by an explicit write-back (see persist.h) so that
 * hosts on a non-coherent CXL 2.0 device see them.
 */
#ifndef CXLCR_POOL_FORMAT_H
#define CXLCR_POOL_FORMAT_H

/* The kernel module of kernel/ includes this header too (the panic
 * tombstone has one definition): fixed-size types from the kernel there. */
#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define CXLCR_POOL_MAGIC        0x4c4f4f5052434c58ULL /* "XLCRPOOL" */
/* 2: the lock word carries a renewal count, and regions have the states
 * STAGING, ABANDONED and FREEING (a holder whose lock was taken over cannot
 * commit). A version-1 writer would not honour either. */
#define CXLCR_POOL_VERSION      2u

#define CXLCR_CACHELINE         64u
#define CXLCR_SUPERBLOCK_SIZE   4096u
/* Mapping granularity of devdax devices and 2 MiB hugetlbfs: every region
 * offset and size is a multiple of it. */
#define CXLCR_POOL_ALIGN        (2ull << 20)
#define CXLCR_REGION_MAX        1024u
#define CXLCR_NAME_MAX          64u
#define CXLCR_HOST_MAX          64u
#define CXLCR_COMMAND_MAX       48u
#define CXLCR_TABLE_OFFSET      CXLCR_SUPERBLOCK_SIZE
#define CXLCR_DATA_OFFSET       CXLCR_POOL_ALIGN
#define CXLCR_POOL_MIN_SIZE     (CXLCR_DATA_OFFSET + 64 * CXLCR_POOL_ALIGN)

/* The allocation lock. Its word holds the holder's random token above a
 * renewal count that the holder bumps while it works. A waiter judges the
 * holder on its own CLOCK_MONOTONIC, never on a time another host wrote:
 * it takes the lock over only when it has seen the word unchanged for a
 * whole lease (the holder may be on another host, so its pid cannot be
 * checked). A holder re-reads the word right before each commit, and its
 * commits that matter most are compare-and-swaps a take-over invalidates
 * (see STAGING below), so a holder that was stalled past its lease writes
 * nothing once the lock is someone else's. */
#define CXLCR_LOCK_RENEWAL_BITS 20
#define CXLCR_LOCK_RENEWAL_MASK ((1ull << CXLCR_LOCK_RENEWAL_BITS) - 1)
#define CXLCR_LOCK_TOKEN(word)  ((uint64_t)(word) >> CXLCR_LOCK_RENEWAL_BITS)
/* The token's top byte (the word's) names the holder's host: its host
 * table entry + 1, 0 for a process that works for no host. A fence of a
 * host judged dead takes the lock over at once from a worker of that
 * host: a worker that died with its host would hold up the host's
 * recovery for the lock's whole lease otherwise. */
#define CXLCR_LOCK_HOST_SHIFT   56
#define CXLCR_LOCK_HOST(word)   ((uint32_t)((uint64_t)(word) >> CXLCR_LOCK_HOST_SHIFT))

struct cxlcr_pool_lock {
	uint64_t owner;         /* 0 = free, else token << CXLCR_LOCK_RENEWAL_BITS | renewals */
	uint64_t takeovers;     /* how often a holder's lock was taken from it */
	uint8_t  pad[CXLCR_CACHELINE - 16];
};

struct cxlcr_superblock {
	/* immutable after format, covered by checksum */
	uint64_t magic;
	uint32_t version;
	uint32_t superblock_size;
	uint8_t  uuid[16];
	uint64_t size;           /* bytes of the device that the pool uses */
	uint64_t table_offset;
	uint32_t region_max;
	uint32_t region_entry_size;
	uint64_t data_offset;
	uint64_t formatted_ns;
	uint32_t flags;          /* CXLCR_POOL_F_* */
	uint32_t checksum;       /* CRC-32C of everything above it */
	uint8_t  pad0[2 * CXLCR_CACHELINE - 80];

	/* mutable */
	struct cxlcr_pool_lock lock;
	uint64_t generation;     /* bumped (atomically) for every region allocated */
	uint8_t  pad1[CXLCR_CACHELINE - 8];
};

#define CXLCR_POOL_F_DEVDAX     0x1u   /* formatted on a devdax device */
/* A pool file that keeps a devdax device's rules (no private mapping of it,
 * no userfaultfd on its mappings, so fork children are copies): the
 * stand-in that runs the devdax code paths where there is no device. */
#define CXLCR_POOL_F_AS_DEVDAX  0x2u
/* A pool file that keeps its memory as a device does: a freed or cleared
 * range is written with zeros, never punched out, so the file's pages stay
 * allocated and the next region there finds them present. Punched memory
 * goes back to the system (in a VM with free page reporting, to the host),
 * and the first touch of a new page then costs a fault there: ~28 us a
 * 4 KiB page in this project's VM, measured (docs/recovery.md). */
#define CXLCR_POOL_F_KEEP_MEMORY 0x4u

/* An entry's state changes with compare-and-swaps. An allocator reserves a
 * FREE entry as STAGING, fills it in, checks it still holds the lock, clears
 * the space, and publishes it (STAGING -> LIVE). Whoever takes the lock over
 * first turns every STAGING entry into ABANDONED, so a stalled allocator's
 * publish fails; only that allocator makes its entry FREE again. A free
 * marks the entry FREEING under the lock, gives the memory back without it,
 * and makes it FREE (nobody else writes a FREEING entry). Every state but
 * FREE keeps its space taken; only LIVE entries are regions. */
enum cxlcr_region_state {
	CXLCR_REGION_FREE = 0,
	CXLCR_REGION_LIVE = 1,   /* allocated; see kind */
	CXLCR_REGION_STAGING = 2,   /* being allocated by the lock's holder */
	CXLCR_REGION_ABANDONED = 3, /* its allocator lost the lock: never published */
	CXLCR_REGION_FREEING = 4,   /* being freed: its memory is being given back */
};

enum cxlcr_region_kind {
	CXLCR_KIND_NONE = 0,
	CXLCR_KIND_ARENA = 1,    /* one service's heap */
	CXLCR_KIND_IMAGES = 2,   /* a published checkpoint (struct cxlcr_image_set) */
	CXLCR_KIND_SNAPSHOT = 3, /* an arena's pages at one freeze point (struct cxlcr_snapshot_header) */
	CXLCR_KIND_CATALOG = 4,  /* the snapshot catalog (struct cxlcr_catalog_header), one per pool */
	CXLCR_KIND_CHILD = 5,    /* a fork child: its name, owner and address (its heap is a snapshot's) */
	CXLCR_KIND_EXTENT = 6,   /* more heap for an arena that grew: "<arena>.ext<n>" (see the arena header) */
	CXLCR_KIND_LEASES = 7,   /* the verb leases: one control owner per service (struct cxlcr_verb_lease) */
	CXLCR_KIND_HOSTS = 8,    /* the host table: the pod's membership (struct cxlcr_hosts_header) */
	CXLCR_KIND_TIER = 9,     /* the cold tier's memory servers and extents (tier/format.h) */
	/* An arena or extent of a host declared dead whose service was
	 * recovered elsewhere into a fresh arena (recovery/takeover.c): it
	 * keeps its name, owner and memory, is never handed to anyone, and is
	 * freed only once its host has acknowledged its fence. Several may
	 * share a name. */
	CXLCR_KIND_QUARANTINE = 10,
	/* A region of a fresh arena that a recovery is still making
	 * (recovery/fresh_arena.c), until it commits it (an arena or extent
	 * again, its owner nobody yet). Its owner fields name the process
	 * making it (pid and start time, on its host): a later recovery on
	 * that host frees one whose maker has ended and that nothing there
	 * maps; if that host dies first, it is freed with its quarantine
	 * once it acknowledges its fence. Never handed to anyone; several
	 * may share a name. */
	CXLCR_KIND_MAKING = 11,
};

/* Kinds that are no live service's nor anyone's to take: never handed to
 * anyone, and several regions of one may share a name. */
static inline int cxlcr_kind_held_back(uint32_t kind)
{
	return kind == CXLCR_KIND_QUARANTINE || kind == CXLCR_KIND_MAKING;
}

/* Kinds whose entries are services: a process with a name, an owner and,
 * in a pod, an address. */
static inline int cxlcr_kind_is_service(uint32_t kind)
{
	return kind == CXLCR_KIND_ARENA || kind == CXLCR_KIND_CHILD;
}

/* One entry of the region table. Entries are written only under the pool
 * lock (but for state's compare-and-swaps), each rewrite of its fields
 * between two bumps of seq: to odd before, to even after. A reader without
 * the lock copies the entry between two reads of seq that are the same
 * even value (cxlcr_region_find() and _get() do; see stable_copy() in
 * pool.c), so it never gets half of one region and half of the next that
 * reuses the slot, nor half of an owner change. */
struct cxlcr_region {
	uint32_t state;          /* enum cxlcr_region_state */
	uint32_t kind;           /* enum cxlcr_region_kind */
	uint64_t generation;     /* unique per allocation, never reused */
	uint64_t offset;         /* device-relative, CXLCR_POOL_ALIGN aligned */
	uint64_t size;
	char     name[CXLCR_NAME_MAX];
	uint64_t created_ns;
	uint64_t owner_epoch;    /* bumped on every change of owner */
	int32_t  owner_pid;      /* 0 = nobody attached */
	uint32_t owner_start;    /* owner_pid's start time (/proc/PID/stat, low 32 bits) on owner_host,
	                          * against pid reuse; 0 = not known (cxlcr_region_owner_gone()) */
	char     owner_host[CXLCR_HOST_MAX];
	char     command[CXLCR_COMMAND_MAX]; /* what runs in it, for `cxlcr ps` */
	char     veth[16];       /* arenas in a pod: the service's link on the pod bridge */
	uint32_t service_ip;     /* arenas in a pod: its IPv4 address (network order) */
	uint32_t seq;            /* odd while the entry is being rewritten (see below) */
};

/*
 * Verb leases: a service has one control owner at a time. A verb that acts
 * on a service (migrate, checkpoint, restore, snapshot, fork, stop, rm)
 * holds its lease from its first step to its last, and re-checks it before
 * each step that changes anything; a second verb on the same service is
 * refused at once, naming the holder. The table is one region of kind
 * CXLCR_KIND_LEASES named CXLCR_LEASES_REGION, made on first use; entry i
 * belongs to whatever region occupies slot i of the region table, and says
 * which one in service_generation (a slot outlives its regions).
 *
 * Taking a lease happens under the pool lock (which survives dead holders
 * on its own), and ends with a compare-and-swap of `word` from what the
 * taker judged to that taker's token; every take bumps `fence`. A holder
 * re-checks word == its token and fence == its fence (no lock): a lease
 * taken over from it fails the check, so it stops before its next step.
 * Release is a compare-and-swap of word from the token to 0.
 *
 * A holder that died is told from one that works by its pid and that pid's
 * start time, on its own host's pid namespace (pid_ns); a holder seen from
 * another pid namespace speaks only through renewals, judged on the
 * observer's own CLOCK_MONOTONIC (never on a time another host wrote).
 */
#define CXLCR_LEASES_REGION      "leases"
#define CXLCR_LEASE_VERB_MAX     16u
#define CXLCR_OUTCOME_REASON_MAX 248u

/* The outcome of the last verb on a service (cxlcr status: last_verb),
 * kept in its lease entry, where every host of the pod reads it: written
 * by the verb's worker when it ends (ok or failed, whether or not its
 * command line still listens), or by whoever takes the lease over from a
 * worker that died in the middle (abandoned). seq is odd while it is being
 * written (a writer makes it odd by compare-and-swap from even). */
enum { CXLCR_OUTCOME_OK = 1, CXLCR_OUTCOME_FAILED = 2, CXLCR_OUTCOME_ABANDONED = 3 };
struct cxlcr_verb_outcome {
	uint64_t service_generation; /* the service it is about (0: none yet) */
	uint64_t ended_ns;           /* CLOCK_REALTIME of the writer, for people only */
	char     verb[CXLCR_LEASE_VERB_MAX];
	char     host[CXLCR_HOST_MAX]; /* where the verb ran */
	uint32_t result;             /* CXLCR_OUTCOME_* */
	uint32_t seq;
	char     reason[CXLCR_OUTCOME_REASON_MAX]; /* one line; "" when ok */
};
_Static_assert(sizeof(struct cxlcr_verb_outcome) == 352, "verb outcome layout");

struct cxlcr_verb_lease {
	uint64_t word;               /* 0: free; else the holder's token (never 0) */
	uint64_t fence;              /* bumped by every take: the holder's generation */
	uint64_t service_generation; /* the region it is the lease of */
	uint64_t renewals;           /* bumped by a holder while it works */
	int32_t  pid;                /* the holder (in pid namespace pid_ns) */
	int32_t  frozen_pid;         /* the service's process while the holder keeps it frozen, else 0 */
	uint64_t pid_start;          /* its start time (/proc/PID/stat), against pid reuse */
	uint64_t pid_ns;             /* inode of its pid namespace */
	uint64_t taken_ns;           /* CLOCK_REALTIME, for people only */
	char     host[CXLCR_HOST_MAX];
	char     verb[CXLCR_LEASE_VERB_MAX];
	uint64_t frozen_start;       /* frozen_pid's start time */
	uint64_t frozen_epoch;       /* the service's owner_epoch when it was frozen */
	struct cxlcr_verb_outcome last; /* the last verb's outcome */
};
_Static_assert(sizeof(struct cxlcr_verb_lease) == 512, "verb lease layout");
#define CXLCR_LEASES_SIZE (CXLCR_REGION_MAX * sizeof(struct cxlcr_verb_lease))

/*
 * The host table: the pod's membership. One region of kind CXLCR_KIND_HOSTS
 * named CXLCR_HOSTS_REGION, made by the first daemon that starts:
 *
 *   0                         struct cxlcr_hosts_header
 *   CXLCR_HOSTS_HEADER_SIZE   CXLCR_HOSTS_MAX struct cxlcr_host_entry
 *
 * A host's daemon (cxlcrd) registers when it starts, under the pool lock:
 * it takes the entry of its name (else a free one, kept for good under
 * that name), writes its identity (name, control address and port,
 * incarnation = the entry's previous one + 1, so it grows on every start;
 * its heartbeat period) with a CRC-32C over it, and sets state RUNNING.
 * While it runs it bumps `counter` every period_ns (the heartbeat; one
 * 8-byte word written back, no lock). When it stops in order it sets state
 * LEFT (compare-and-swap, only if the incarnation is still its own).
 *
 * Nobody reads a time another host wrote (a pod shares no clock):
 * joined_ns is for people. A reader judges a RUNNING host by watching
 * `counter` (and `incarnation`) change on its own CLOCK_MONOTONIC
 * (common/hosts.h; docs/pod-membership.md says the rule): alive while it
 * sees it advance, suspect once it has seen it stand still for two of the
 * host's periods, dead once for a whole lease (max(CXLCR_CATALOG_LEASE_NS, four
 * periods)). The snapshot catalog's borrows name their host's entry, and
 * its reaper judges them by the same rule.
 *
 * An entry whose identity fails its checksum, or whose state is none of
 * these, is corrupt: never used, rewritten or judged, and reported.
 *
 * `tombstone` is a dying host's last word (struct cxlcr_tombstone, below):
 * written by the kernel module of kernel/ from the host's panic notifier
 * (or by `cxlcr pod crash H --panic`, which writes exactly the same bytes),
 * or by a drain of the host that ran out of time (the hard-crash path takes
 * the rest over), it makes every reader judge the host dead at once,
 * without waiting for its lease.
 */
#define CXLCR_HOSTS_MAGIC        0x5354534f48434c58ULL /* "XLCHOSTS" */
#define CXLCR_HOSTS_VERSION      1u
#define CXLCR_HOSTS_REGION       "hosts"
#define CXLCR_HOSTS_HEADER_SIZE  256u
#define CXLCR_HOSTS_MAX          64u
#define CXLCR_HOST_ADDR_MAX      48u   /* an address as text: IPv4 or IPv6 */

enum cxlcr_host_state {
	CXLCR_HOST_FREE = 0,         /* never used */
	CXLCR_HOST_RUNNING = 1,      /* its daemon registered and has not left */
	CXLCR_HOST_LEFT = 2,         /* its daemon stopped in order */
};

struct cxlcr_hosts_header {
	uint64_t magic;              /* CXLCR_HOSTS_MAGIC */
	uint32_t version;            /* CXLCR_HOSTS_VERSION */
	uint32_t header_size;        /* sizeof(struct cxlcr_hosts_header) */
	uint8_t  pool_uuid[16];
	uint64_t region_generation;  /* the table's own region */
	uint32_t entry_count;        /* CXLCR_HOSTS_MAX */
	uint32_t entry_size;         /* sizeof(struct cxlcr_host_entry) */
	uint32_t checksum;           /* CRC-32C of everything above */
	uint8_t  pad[64 - 52];
};

/* What a daemon writes when it registers (under the pool lock). */
struct cxlcr_host_identity {
	char     name[CXLCR_HOST_MAX];
	char     address[CXLCR_HOST_ADDR_MAX]; /* its control address; "": none given */
	uint32_t port;               /* its control port; 0: none */
	uint32_t reserved;
	uint64_t incarnation;        /* 1 at the first start, +1 at every start */
	uint64_t period_ns;          /* how often it means to bump counter (a duration) */
	uint64_t joined_ns;          /* CLOCK_REALTIME of the start, for people only */
};

/*
 * A tombstone: {host, incarnation, reason, time}, written once by a host
 * that is dying, into its own entry, by code that runs with the other CPUs
 * stopped and interrupts off (a panic notifier): no allocation, no lock,
 * nothing but stores, then clflush and sfence of the entry's last line.
 *
 * It stands only for the incarnation it names (the entry's at the time of
 * death); a daemon that registers again starts a new incarnation, and a
 * tombstone of an older one means nothing (registration also clears it).
 * `checksum` is the CRC-32C (Castagnoli, the standard one: initial value
 * and final xor ~0, as common/checksum.c computes it and as the kernel's
 * ~__crc32c_le(~0, ...) does) of the bytes before it. A tombstone whose
 * magic is set but whose checksum, index or reason is wrong is refused,
 * never followed: the host is then judged by its heartbeat alone.
 */
#define CXLCR_TOMBSTONE_MAGIC    0x42544d4f544c4358ULL /* "XCLTOMTB" */

enum cxlcr_tombstone_reason {
	CXLCR_TOMBSTONE_PANIC = 1,   /* the kernel's panic notifier */
	CXLCR_TOMBSTONE_OOPS = 2,    /* its die notifier, on an oops that will end the machine */
	CXLCR_TOMBSTONE_HANDOFF = 3, /* its drain ran out of time (recovery/drain.c): the rest is recovered */
};

struct cxlcr_tombstone {
	uint64_t magic;              /* CXLCR_TOMBSTONE_MAGIC; 0: none */
	uint64_t incarnation;        /* of the host that died: its entry's id.incarnation */
	uint64_t time_ns;            /* its CLOCK_REALTIME then, for people only */
	uint32_t reason;             /* enum cxlcr_tombstone_reason */
	uint32_t host_index;         /* of its entry: a tombstone is valid only there */
	uint32_t checksum;           /* CRC-32C of the fields above */
	uint32_t reserved;
};
#define CXLCR_TOMBSTONE_CHECKED  32u   /* the bytes the checksum covers */

/* fence_done of a recovery reopened by an operator's restore (below):
 * this bit, the restore's host entry (6 bits), the low 34 bits of its
 * process's start time (clock ticks since its host booted) and its pid
 * (22 bits: pid_max is at most 2^22), so that a reused pid is not it. */
#define CXLCR_FENCE_BY_HAND        (1ull << 63)
#define CXLCR_FENCE_BY_HAND_HOST   56
#define CXLCR_FENCE_BY_HAND_START  22
#define CXLCR_FENCE_BY_HAND_PID    ((1ull << CXLCR_FENCE_BY_HAND_START) - 1)
#define CXLCR_FENCE_BY_HAND_STARTS ((1ull << (CXLCR_FENCE_BY_HAND_HOST - CXLCR_FENCE_BY_HAND_START)) - 1)
_Static_assert(CXLCR_HOSTS_MAX <= 64, "a host entry fits the by-hand word's 6 bits");

struct cxlcr_host_entry {
	/* changed without the lock, with atomics */
	uint64_t counter;            /* the heartbeat: bumped every period_ns, never goes back */
	uint64_t state;              /* enum cxlcr_host_state */
	/* Fencing (recovery/takeover.c). A host that judged this one dead
	 * bumps `fence` from a value equal to `fence_ack` (compare-and-set,
	 * the winner's entry index + 1 in the low 8 bits): exactly one host
	 * wins each death and recovers its services. While fence !=
	 * fence_ack the host is fenced: its daemon, when it finds that, kills
	 * its old services first; once the winner has stored fence into
	 * fence_done (its recovery is over: nothing of the host's is taken
	 * any more), it frees its quarantined regions and stores fence into
	 * fence_ack. A winner that dies before that is replaced: another
	 * host (or the fenced one itself, once back) moves `fence` one
	 * generation on with itself as the winner (compare-and-set under the
	 * pool lock), and the old winner's recovery, which changes the region
	 * table only while `fence` is still its own (cxlcr_pool_guard), stops
	 * at its next step. A done recovery may be reopened: fence_done is
	 * then 0 (the winner's retry), or, while an operator's restore of one
	 * of the host's services works on another host, a word naming that
	 * restore (CXLCR_FENCE_BY_HAND, its host entry, its process), so
	 * that its host's daemon can mark the recovery done again once that
	 * process has ended, and the others take the recovery over if its
	 * host dies. A new fence word clears fence_done. */
	uint64_t fence;
	uint64_t fence_ack;
	uint64_t fence_done;
	uint8_t  pad0[CXLCR_CACHELINE - 40];
	/* written under the pool lock at registration */
	struct cxlcr_host_identity id;
	uint32_t id_checksum;        /* CRC-32C of id */
	uint32_t reserved;
	/* written by the host's kernel as it dies (in the entry's last line) */
	struct cxlcr_tombstone tombstone;
};
_Static_assert(sizeof(struct cxlcr_hosts_header) == CXLCR_CACHELINE, "host table header layout");
_Static_assert(sizeof(struct cxlcr_host_identity) == 144, "host identity layout");
_Static_assert(sizeof(struct cxlcr_tombstone) == 40, "tombstone layout");
_Static_assert(__builtin_offsetof(struct cxlcr_tombstone, checksum) == CXLCR_TOMBSTONE_CHECKED,
	       "the tombstone's checksum covers what precedes it");
_Static_assert(sizeof(struct cxlcr_host_entry) == 256, "host entry layout");
_Static_assert(__builtin_offsetof(struct cxlcr_host_entry, tombstone) / CXLCR_CACHELINE ==
	       (sizeof(struct cxlcr_host_entry) - 1) / CXLCR_CACHELINE,
	       "a tombstone lies in one cache line, the entry's last");
#define CXLCR_HOSTS_SIZE (CXLCR_HOSTS_HEADER_SIZE + CXLCR_HOSTS_MAX * sizeof(struct cxlcr_host_entry))

/*
 * The pod's key. Requests to a host's daemon over the network (the control
 * protocol, daemon/rpc_tcp.c) carry a MAC under it (libsodium's
 * crypto_auth, HMAC-SHA-512-256). Whoever can map the pool is inside the
 * pod's trust boundary, so the key lives in the pool: in the host table's
 * region, between its header and its entries, at CXLCR_HOSTS_KEY_OFFSET.
 * The first daemon that starts makes it (random, under the pool lock, with
 * the table or in a table made before keys existed); it never changes
 * while the table lives. All zero: not made yet. A key whose magic,
 * version or checksum is wrong is corrupt: refused with one line, never
 * replaced (nobody could tell a damaged key from a forged one).
 */
#define CXLCR_POD_KEY_MAGIC      0x59454b444f504c58ULL /* "XLPODKEY" */
#define CXLCR_POD_KEY_VERSION    1u
#define CXLCR_POD_KEY_BYTES      32u   /* crypto_auth_KEYBYTES */
#define CXLCR_HOSTS_KEY_OFFSET   64u

struct cxlcr_pod_key {
	uint64_t magic;              /* CXLCR_POD_KEY_MAGIC; 0: no key yet */
	uint32_t version;            /* CXLCR_POD_KEY_VERSION */
	uint32_t checksum;           /* CRC-32C of version and key */
	uint8_t  key[CXLCR_POD_KEY_BYTES];
	uint8_t  pad[16];
};
_Static_assert(sizeof(struct cxlcr_pod_key) == CXLCR_CACHELINE, "pod key layout");
_Static_assert(CXLCR_HOSTS_KEY_OFFSET >= sizeof(struct cxlcr_hosts_header) &&
	       CXLCR_HOSTS_KEY_OFFSET + sizeof(struct cxlcr_pod_key) <= CXLCR_HOSTS_HEADER_SIZE,
	       "the pod key lies between the host table's header and its entries");

/*
 * An arena region starts with this header, then, at CXLCR_ARENA_HEAP_OFFSET,
 * the memory handed to mimalloc. The preload keeps its statistics here so
 * that `cxlcr status` can read them from any host without asking the
 * process. "used" is split into per-thread slots, each written by one thread
 * only, so the allocator's fast path never shares a contended cache line.
 *
 * An arena grows. Its owner reserves heap_reserved bytes of address space
 * at heap_address when it starts (--arena-max), and the heap is the first
 * heap_size bytes of it: extent 0 is the arena region's own heap part, and
 * each further extent is a region of kind CXLCR_KIND_EXTENT named
 * "<arena>.ext<n>", mapped right after the one before it, which mimalloc gets
 * as one more arena. The heap is contiguous in the owner's address space
 * and scattered in the pool; extents[] says where each piece lies. An
 * extent entry is written in full before extent_count and heap_size grow
 * (in that order), so a reader that takes extent_count first and then
 * reads that many entries sees only whole ones.
 */
#define CXLCR_ARENA_MAGIC        0x414e455241434c58ULL /* "XLCARENA" */
#define CXLCR_ARENA_VERSION      2u
#define CXLCR_ARENA_EXTENTS_MAX  64u
#define CXLCR_PUNCH_LOG          256u
#define CXLCR_EXTENT_SEP         ".ext"  /* extent n of arena A: "A.ext<n>" */
#define CXLCR_ARENA_HEAP_OFFSET  CXLCR_POOL_ALIGN
#define CXLCR_ARENA_STAT_SLOTS   128u
#define CXLCR_ARENA_COMMAND_MAX  1024u
/* mimalloc 2.0 hands out arena memory in 32 MiB blocks aligned to their
 * size; the heap part of an arena is mapped at a multiple of this. */
#define CXLCR_HEAP_ALIGN         (64ull << 20)
#define CXLCR_ARENA_MIN_SIZE     (CXLCR_ARENA_HEAP_OFFSET + CXLCR_HEAP_ALIGN)

struct cxlcr_arena_slot {
	int64_t  used;           /* bytes this thread allocated minus freed */
	uint64_t tid;            /* 0 = free slot */
	uint8_t  pad[CXLCR_CACHELINE - 16];
};

#define CXLCR_GROW_FENCE          0x80000000u
#define CXLCR_GROW_FENCE_WAIT_MS  10000u

#define CXLCR_TRACK_HUGE_AGAIN 2 /* track_small_pages: back to 2 MiB mappings (see there) */

struct cxlcr_arena_header {
	uint64_t magic;
	uint32_t version;
	uint32_t slot_count;
	uint8_t  pool_uuid[16];
	uint64_t region_generation; /* the region this header belongs to */
	uint64_t heap_address;   /* where the owning process mapped the heap */
	uint64_t heap_size;
	int32_t  pid;            /* process that attached this arena */
	uint32_t flags;            /* one cache line so far */

	/* counters, updated with atomics */
	int64_t  retired_used;   /* "used" of threads that exited */
	uint64_t fallback_allocs;   /* arena full: served by glibc instead */
	uint64_t fallback_bytes;
	uint64_t early_allocs;   /* before the arena was ready, or in a fork child */
	/* Page-table shedding (preload/shed.c): the daemon bumps shed_request
	 * (then the doorbell below), the service drops its page tables over
	 * the heap and stores the request in shed_done. */
	uint32_t shed_request;
	uint32_t shed_done;
	uint64_t released_bytes; /* freed heap given back to the pool (punched out) */
	uint8_t  pad1[CXLCR_CACHELINE - 48];

	struct cxlcr_arena_slot slots[CXLCR_ARENA_STAT_SLOTS];

	char     command[CXLCR_ARENA_COMMAND_MAX]; /* the whole command line, for ps/status */

	/* growth (see above) */
	uint64_t heap_reserved;  /* address space reserved for the heap (the limit) */
	uint32_t extent_count;   /* entries of extents[] in use, >= 1 (a futex word) */

	/* Requests to the service's helper thread (preload/shed.c), futex
	 * words of the host that runs it: a requester bumps its *_request
	 * word, then the doorbell; the thread answers in *_done. */
	uint32_t doorbell;
	uint32_t track_request;  /* make a userfaultfd for write tracking, or close it */
	uint32_t track_done;
	int32_t  track_fd;       /* that userfaultfd, in the service; -1: none */
	uint32_t tracked;        /* 1 while a tracker holds it with the heap registered */
	uint64_t fork_count;     /* fork() children the service made: their writes are not tracked */
	struct cxlcr_arena_extent {
		uint64_t generation; /* its region (extent 0: the arena region) */
		uint64_t offset;     /* device offset of its heap bytes */
		uint64_t size;
		uint64_t heap_offset; /* where it starts in the heap */
	} extents[CXLCR_ARENA_EXTENTS_MAX];
	/* The service's tracker process (tracking/tracker.c), written by the
	 * verb that started it while that verb holds the service: whoever
	 * frees the arena ends it first, as it maps this header. 0: none. */
	int32_t  tracker_pid;
	/* Growth against a dump (preload/grow.c, daemon/services.c): growing
	 * opens files (/proc, the pool's metadata) and maps an extent, and a
	 * dump that froze the service midway would carry those in its
	 * checkpoint, which no host could restore (a /proc file of a pid gone).
	 * A verb sets CXLCR_GROW_FENCE before it dumps and waits for the
	 * growths under way (the low bits, the service's) to end; a growth
	 * waits while the fence is up (at most CXLCR_GROW_FENCE_WAIT_MS, should
	 * its verb have died). A futex word of the service's host. */
	uint32_t grow_fence;
	/* Heap ranges punched out (preload/release.c): begun is bumped before
	 * the punch, done after it. A punch changes pages (they read zero
	 * afterwards) without a write the tracking sees, so a snapshot whose
	 * finish trusts tracking must know the pages punched since: from
	 * punch_log (below) when it holds every punch since, else by
	 * comparing every page. */
	uint64_t punches_begun;
	uint64_t punches_done;
	/* Scans of the heap's write tracking (tracking/since.c), each of which
	 * re-arms what it reports: bumped before every scan, so a snapshot
	 * that knows the count after its own scan can tell that no other scan
	 * took writes away from the next one. */
	uint64_t scan_count;
	/* Recovery points (recovery/points.c): its host's daemon snapshots
	 * the service every this many milliseconds; 0: none. Set by `cxlcr
	 * run --recovery-interval`, it travels with the arena. */
	uint32_t recovery_interval_ms;
	/* The tracker's own number of its userfaultfd, plus one (0: none
	 * yet): `cxlcr huge-pages` takes a copy of it (pidfd_getfd) to lift
	 * the registration for a moment (tracking/huge_again.c). */
	int32_t  tracker_uffd;
	/* The recovery point (its snapshot region) the heap was last reset
	 * from to restore it (recovery/restore_point.c): the restore of that
	 * point's dump, taken with its tasks left running, is allowed for
	 * this heap only. 0: none. */
	uint64_t restored_from;
	char     restored_from_name[CXLCR_NAME_MAX]; /* ... its name, for people */
	/* Write tracking at 4 KiB: the service maps its heap without 2 MiB
	 * pages from its first snapshot on (preload/track.c), so that a scan
	 * reports the small pages written, not whole 2 MiB ones. Set by that
	 * snapshot (tracking/tracker.c); cleared by a daemon that does not
	 * want it. track_small_mapped: the service's helper has remapped the
	 * heap so (preload/shed.c, track.c); until it has, each snapshot asks
	 * again (a service that did not answer, a snapshot killed between).
	 * CXLCR_TRACK_HUGE_AGAIN in track_small_pages: `cxlcr huge-pages`
	 * asks the helper for 2 MiB mappings again (tracking/huge_again.c);
	 * the helper sets it to 0, and track_small_mapped too, once done. */
	uint32_t track_small_pages;
	uint32_t track_small_mapped;
	/* The last CXLCR_PUNCH_LOG punches (preload/release.c), so that a
	 * snapshot finds the pages they zeroed without comparing the whole
	 * heap. Punch number n (punches_begun before its bump) is entry
	 * n % CXLCR_PUNCH_LOG: seq 0, its heap range [lo, hi) (offsets in the
	 * heap), then seq n + 1 (a seqlock), all before the punch and before
	 * punches_done moves. A reader that saw begun == done at n0 and again
	 * at n1 knows that punches n0..n1-1 were all logged, if each entry
	 * still has its seq (else more than CXLCR_PUNCH_LOG happened between,
	 * or a preload that logs nothing punched: it compares every page). */
	struct cxlcr_punch_entry {
		uint64_t seq;
		uint64_t lo, hi;
	} punch_log[CXLCR_PUNCH_LOG];
	/* Hard-crash recovery (recovery/takeover.c): 1 if the service's host
	 * was declared dead and it had no recovery point to come back from. */
	uint32_t lost;
	/* A fresh arena made from a recovery point of a dead host's service:
	 * that host, and the one that restored it. "": not recovered so. */
	char     recovered_from_host[CXLCR_HOST_MAX];
	char     recovered_on_host[CXLCR_HOST_MAX];
	/* Recovery given up on (recovery/marks.c): 1 once the service is
	 * left down for an operator (status says failed), and why; the reason
	 * of the last recovery that failed is kept here before that too. A
	 * restore from a recovery point clears both. */
	uint32_t failed;
	uint32_t reserved3;
	char     failed_reason[192];
	/* Set in a quarantined arena once a recovery committed the fresh
	 * arena made from its point (that one's region generation), so that
	 * it is never recovered again: 0 until then. A fresh arena a recovery
	 * is still making has CXLCR_RECOVERY_MAKING here until its commit:
	 * half made, it is no service's old arena either. */
	uint64_t recovered_into;
};

#define CXLCR_RECOVERY_MAKING (~0ull)

_Static_assert(sizeof(struct cxlcr_superblock) == 4 * CXLCR_CACHELINE, "superblock layout");
_Static_assert(sizeof(struct cxlcr_region) == 256, "region entry layout");
_Static_assert(CXLCR_TABLE_OFFSET + CXLCR_REGION_MAX * sizeof(struct cxlcr_region) <= CXLCR_DATA_OFFSET,
	       "region table fits before the data area");
_Static_assert(sizeof(struct cxlcr_arena_header) <= CXLCR_ARENA_HEAP_OFFSET, "arena header fits");
_Static_assert(sizeof(struct cxlcr_arena_extent) == 32, "arena extent layout");

/*
 * A checkpoint published in the pool: an image-store region holding one
 * CRIU image set. The header is followed by a table of files, then their
 * contents. `complete` is written last, after everything else has been
 * written back, so a reader on another host either sees a whole image set
 * or none: an image set without it is ignored (and reclaimed).
 */
#define CXLCR_IMAGES_MAGIC     0x5345474d49434c58ULL /* "XLCIMGES" */
#define CXLCR_IMAGES_VERSION   1u
#define CXLCR_IMAGES_COMPLETE  0x454c504d4f43ULL     /* "COMPLE" */
#define CXLCR_IMAGE_NAME_MAX   64u
#define CXLCR_IFNAME_MAX       16u
#define CXLCR_IMAGE_PATH_MAX   256u

struct cxlcr_image_set {
	uint64_t magic;
	uint32_t version;
	uint32_t file_count;
	uint8_t  pool_uuid[16];
	char     service[CXLCR_NAME_MAX];
	uint64_t arena_generation;   /* the arena this checkpoint belongs to */
	uint64_t arena_epoch;        /* its owner epoch when it was taken */
	uint64_t created_ns;
	uint64_t payload_bytes;      /* file contents after the table */
	char     source_host[CXLCR_HOST_MAX];
	char     veth_inner[CXLCR_IFNAME_MAX]; /* the service's interface */
	uint32_t service_ip;
	uint32_t checksum;           /* CRC-32C of the header up to here and the table */
	uint64_t complete;           /* CXLCR_IMAGES_COMPLETE once published */
	char     source_pool[CXLCR_IMAGE_PATH_MAX]; /* the pool's path on the source host */
	uint8_t  pad[512 - 224 - CXLCR_IMAGE_PATH_MAX];
};

struct cxlcr_image_file {
	char     name[CXLCR_IMAGE_NAME_MAX];
	uint64_t offset;             /* from the start of the region */
	uint64_t size;
	uint32_t crc;                /* CRC-32C of the contents */
	uint32_t reserved;
	uint8_t  pad[128 - 88];
};

_Static_assert(sizeof(struct cxlcr_image_set) == 512, "image set header layout");
_Static_assert(sizeof(struct cxlcr_image_file) == 128, "image file entry layout");

/*
 * What the CRIU plugin (criu-plugin/) adds to a checkpoint: one file per
 * task that maps the pool, cxlcr-arena-<pid>.img (pid: the task's pid in
 * its own pid namespace), holding one cxlcr_arena_record per mapping of a
 * region; and one cxlcr-file-<id>.img per open fd of a devdax pool
 * (<id>: CRIU's file id, hex). Checkpoints are published in the pool, so
 * these records follow the rules of this header: fixed-size little-endian
 * fields, versioned, and covered by a CRC-32C so that a corrupt, truncated
 * or foreign record is refused instead of followed.
 *
 * Restoring a record takes the region over: under the pool lock, and only
 * if the region's owner_epoch still is the recorded one, the restored task
 * becomes its owner and the epoch is bumped. So each checkpoint is
 * restored at most once, and never after the arena has moved on.
 */
#define CXLCR_ARENA_RECORD_MAGIC   0x4345524152434c58ULL /* "XLCRAREC" */
#define CXLCR_FILE_RECORD_MAGIC    0x454c494652434c58ULL /* "XLCRFILE" */
#define CXLCR_RECORD_VERSION       1u
#define CXLCR_RECORD_PATH_MAX      256u
#define CXLCR_ARENA_RECORD_FILE    "cxlcr-arena-%d.img"
#define CXLCR_FILE_RECORD_FILE     "cxlcr-file-%x.img"
#define CXLCR_RECORD_FILE_PREFIX   "cxlcr-"
#define CXLCR_SNAPSHOT_INFO_FILE   "cxlcr-snapshot.txt" /* a fork dump: the snapshot taken, in text */
#define CXLCR_SNAPSHOT_ERROR_FILE  "cxlcr-snapshot-error.txt" /* a fork dump: why it took no snapshot, one line */
#define CXLCR_CHANGED_PAGES_FILE   "cxlcr-changed-pages.img" /* a fork dump: struct cxlcr_changed_pages */
#define CXLCR_WRITTEN_PENDING_FILE "cxlcr-written-pending.img" /* a snapshot's dump: writes a pre-copy found and left to the finish */
#define CXLCR_RESTORE_INFO_FILE    "cxlcr-restore.txt" /* a child's restore: how long it took */
#define CXLCR_RESTORE_PARTS_FILE   "cxlcr-restore-parts.txt" /* a restore: the plugin's part of the freeze, in text */

/*
 * The heap pages a parent wrote between its previous snapshot and this one
 * (their contents differ), saved with the fork dump: CXLfork observed that a
 * child writes most of them again, so they are copied into each child up
 * front (prefetched) instead of one copy-on-write fault at a time. The
 * header is followed by count page indexes (u64, ascending) of the heap at
 * heap_address. Covered by the image store's per-file CRC.
 */
#define CXLCR_CHANGED_PAGES_MAGIC  0x4547504843434c58ULL /* "XLCCHPGE" */
struct cxlcr_changed_pages {
	uint64_t magic;
	uint32_t version;            /* 1 */
	uint32_t page_size;          /* CXLCR_SNAPSHOT_PAGE_SIZE */
	uint64_t heap_address;
	uint64_t count;
};
_Static_assert(sizeof(struct cxlcr_changed_pages) == 32, "changed pages header layout");

#define CXLCR_RECORD_F_DEVDAX      0x1u  /* the pool is a devdax device */
#define CXLCR_RECORD_F_SHARED      0x2u  /* a MAP_SHARED mapping (else MAP_PRIVATE) */
#define CXLCR_RECORD_F_FORK        0x4u  /* a fork child's view of a snapshot (region_* name the snapshot) */
/* Dumped with the tasks left running (criu dump --leave-running): the
 * source goes on owning the arena at the recorded epoch, so the record is
 * restored only once the source (real_pid, started at source_start) is
 * gone; see criu-plugin/live_source.c. */
#define CXLCR_RECORD_F_LIVE_SOURCE 0x8u
/* The pool keeps a devdax device's rules without being one (a file
 * formatted --as-devdax, CXLCR_POOL_F_AS_DEVDAX): no private views of it. */
#define CXLCR_RECORD_F_DAX_RULES   0x10u

struct cxlcr_arena_record {
	uint64_t magic;              /* CXLCR_ARENA_RECORD_MAGIC */
	uint32_t version;            /* CXLCR_RECORD_VERSION */
	uint32_t record_size;        /* sizeof(struct cxlcr_arena_record) */
	uint8_t  pool_uuid[16];
	uint64_t region_generation;
	uint64_t region_offset;      /* device-relative */
	uint64_t region_size;
	uint32_t region_kind;        /* enum cxlcr_region_kind */
	uint32_t flags;              /* CXLCR_RECORD_F_* */
	char     region_name[CXLCR_NAME_MAX];
	uint64_t map_address;        /* where the task maps it */
	uint64_t map_length;
	uint64_t map_pgoff;          /* device offset (bytes) mapped at map_address */
	uint32_t map_prot;           /* PROT_* */
	uint32_t source_start;       /* low 32 bits of the task's start time (clock ticks since boot) */
	uint64_t owner_epoch;        /* the region's owner_epoch at dump time */
	int32_t  nspid;              /* the task's pid in its own pid namespace */
	int32_t  real_pid;           /* ... and as the dumping host saw it */
	int32_t  owner_pid;          /* the region's owner_pid at dump time */
	uint32_t reserved1;
	uint64_t dumped_ns;          /* CLOCK_REALTIME */
	char     host[CXLCR_HOST_MAX];            /* where it was dumped */
	char     pool_path[CXLCR_RECORD_PATH_MAX]; /* the pool there */
	uint32_t reserved2;
	uint32_t checksum;           /* CRC-32C of everything above */
};

struct cxlcr_file_record {
	uint64_t magic;              /* CXLCR_FILE_RECORD_MAGIC */
	uint32_t version;            /* CXLCR_RECORD_VERSION */
	uint32_t record_size;        /* sizeof(struct cxlcr_file_record) */
	uint8_t  pool_uuid[16];
	uint32_t open_flags;         /* O_* as F_GETFL gave them */
	uint32_t file_id;            /* CRIU's id of the open file */
	char     path[CXLCR_RECORD_PATH_MAX];     /* the device on the dumping host */
	uint32_t reserved0;
	uint32_t checksum;           /* CRC-32C of everything above */
};

_Static_assert(sizeof(struct cxlcr_arena_record) == 520, "arena record layout");
_Static_assert(sizeof(struct cxlcr_file_record) == 304, "file record layout");

/*
 * Remote fork (the CXLfork path): snapshots.
 *
 * A snapshot is an immutable copy of an arena's heap at one freeze point,
 * in a region of kind CXLCR_KIND_SNAPSHOT:
 *
 *   0             struct cxlcr_snapshot_header
 *   table_offset  the leaf table: one 64-bit leaf per 4 KiB page of the heap
 *                 (CXLCR_SNAPSHOT_TABLE_OFFSET)
 *   run_offset    the run table: the leaf table as maximal runs (struct
 *                 cxlcr_snapshot_run), right after it
 *   data_offset   copies of the heap's non-zero pages, 4 KiB each, in heap
 *                 order (a draft's room for pages its finish copies again
 *                 follows them until it is published); CXLCR_POOL_ALIGN
 *                 aligned, so that a run of pages can be mapped from a
 *                 devdax device too. data_size covers the copies only. An
 *                 incremental draft's region is not cleared when it is
 *                 made: room it never used, after the runs, may hold a
 *                 freed region's bytes, which no leaf and no run names
 *   arena_header_offset
 *                 a copy of the arena header's pages as they were at the
 *                 freeze, right after the copies (data_offset + data_size):
 *                 a fork child's header is a copy-on-write view of it, not
 *                 of its parent's live (and mortal) arena, so the child
 *                 neither sees the parent's later stats, requests and
 *                 wake-ups nor loses its header when the parent's region is
 *                 freed or reused. A published snapshot's region ends
 *                 there (or after a tiered one's cold checksums), rounded
 *                 up to CXLCR_POOL_ALIGN: the room its finish did not use
 *                 is given back (cxlcr_snapshot_trim)
 *
 * Leaf i describes the heap page at heap_address + i * 4 KiB:
 *
 *   bits 0..3    its tier (enum cxlcr_page_tier)
 *   bits 4..11   reserved, 0 (room for a cold-tier server index)
 *   bits 12..63  a 4 KiB aligned, device-relative offset: for CXL the pool
 *                offset of the page's copy (inside this region's data area,
 *                or one of its bases'), for COLD its offset on the memory
 *                server, for ZERO 0.
 *
 * Incremental snapshots. A snapshot taken while the arena's writes were
 * tracked since an earlier snapshot of it (its base) copies only the pages
 * written since; every other leaf is the base's, pointing into the base's
 * data area or into one of the base's own bases. Such a snapshot lists
 * the snapshots whose data its leaves use (bases[], at most
 * CXLCR_SNAPSHOT_BASES_MAX) and holds a catalog borrow on each of them
 * (held by this snapshot's region, not by a process: see the catalog), so
 * none is freed while it lives; when it is freed, it returns them.
 *
 * So a zero page costs 8 bytes of table and nothing else, and an all-zero
 * leaf is a zero page. Offsets are device-relative: any host rebases them
 * onto its own mapping of the pool.
 *
 * A run is a stretch of pages whose leaves follow from its first one: zero
 * after zero, the next copy after a copy (copies are packed in heap order,
 * so a stretch of non-zero pages is one run). The run table says the same
 * as the leaf table in a few hundred entries instead of a million leaves:
 * a fork reads and checks only the runs (a 2 GiB heap has ~270 of them and
 * a 7 MB leaf table, whose check took 2.3 ms of every fork); the leaf
 * table is checked in full, against the runs too, when the snapshot is
 * published (cxlcr_snapshot_validate()).
 *
 * The header, the leaf table and the run table are covered by CRC-32C (the
 * pages are not: like the arena they are copied from, they are the
 * service's data). `complete` is written last, after the pages, the tables
 * and the rest of the header have been written back, so a reader on
 * another host sees a whole snapshot or none.
 */
#define CXLCR_SNAPSHOT_MAGIC        0x5350414e53434c58ULL /* "XLCSNAPS" */
/* 4: incremental snapshots (bases[]), a 1 KiB header */
#define CXLCR_SNAPSHOT_VERSION      4u
#define CXLCR_SNAPSHOT_BASES_MAX    8u
/* A fork child that shares its snapshot's pages maps each run
 * (rebase/mm.c): a fork whose newest snapshot has more runs than this (an
 * incremental one after scattered writes) takes a full one for its
 * children first (daemon/fork.c). Snapshots themselves have no bound. */
#define CXLCR_SNAPSHOT_INCREMENTAL_RUNS_MAX 16384u
#define CXLCR_SNAPSHOT_COMPLETE     0x454e4f4450414e53ULL /* "SNAPDONE" */
#define CXLCR_PUNCHES_UNSETTLED     (1ull << 63)
#define CXLCR_SNAPSHOT_PAGE_SIZE    4096u
#define CXLCR_SNAPSHOT_TABLE_OFFSET 4096u
#define CXLCR_SNAPSHOT_ARENA_HEADER_SIZE \
	((sizeof(struct cxlcr_arena_header) + CXLCR_SNAPSHOT_PAGE_SIZE - 1) / CXLCR_SNAPSHOT_PAGE_SIZE * \
	 CXLCR_SNAPSHOT_PAGE_SIZE)

enum cxlcr_page_tier {
	CXLCR_TIER_ZERO = 0,     /* never stored: reads as zero */
	CXLCR_TIER_CXL = 1,      /* a copy in the pool, at the leaf's offset */
	CXLCR_TIER_COLD = 2,     /* on a memory server of the cold tier (see `cold` in the header) */
};

#define CXLCR_LEAF_TIER_MASK      0xfull
#define CXLCR_LEAF_RESERVED_MASK  0xff0ull
#define CXLCR_LEAF_OFFSET_MASK    (~0xfffull)
#define CXLCR_LEAF(tier, offset)  ((uint64_t)(offset) | (uint64_t)(tier))
#define CXLCR_LEAF_TIER(leaf)     ((uint32_t)((leaf) & CXLCR_LEAF_TIER_MASK))
#define CXLCR_LEAF_OFFSET(leaf)   ((leaf) & CXLCR_LEAF_OFFSET_MASK)

struct cxlcr_snapshot_header {
	uint64_t magic;              /* CXLCR_SNAPSHOT_MAGIC */
	uint32_t version;            /* CXLCR_SNAPSHOT_VERSION */
	uint32_t header_size;        /* sizeof(struct cxlcr_snapshot_header) */
	uint8_t  pool_uuid[16];
	uint64_t region_generation;  /* the snapshot's own region */
	char     name[CXLCR_NAME_MAX];
	uint64_t arena_generation;   /* the arena region it was taken from */
	uint64_t arena_epoch;        /* that arena's owner_epoch at the time */
	char     arena_name[CXLCR_NAME_MAX];
	uint64_t heap_address;       /* where the arena's owner maps the heap */
	uint64_t heap_size;
	uint32_t page_size;          /* CXLCR_SNAPSHOT_PAGE_SIZE */
	uint32_t reserved0;
	uint64_t page_count;         /* heap_size / page_size: leaves in the table */
	uint64_t pages_zero;         /* pages of each tier; they add up to page_count */
	uint64_t pages_cxl;
	uint64_t pages_cold;
	uint64_t table_offset;       /* from the start of the region */
	uint64_t table_size;         /* page_count * 8 */
	uint64_t data_offset;        /* from the start of the region */
	uint64_t data_size;          /* pages_cxl * page_size */
	uint64_t created_ns;         /* CLOCK_REALTIME */
	char     source_host[CXLCR_HOST_MAX];
	uint64_t run_offset;         /* table_offset + table_size */
	uint64_t run_count;          /* entries of the run table */
	uint64_t arena_header_offset; /* data_offset + data_size: the arena header at the freeze */
	uint64_t arena_header_size;  /* CXLCR_SNAPSHOT_ARENA_HEADER_SIZE */
	uint64_t pages_own;          /* CXL pages whose copy is in this snapshot's data area */
	uint64_t track_scans;        /* the arena's scan_count after the finish's scan; 0: not tracked */
	uint64_t track_fork_count;   /* the arena's fork_count at the finish */
	uint64_t track_punches;      /* the arena's punches_begun at the finish, with
				      * CXLCR_PUNCHES_UNSETTLED if one was under way then
				      * (a thread stopped mid-punch: it ends after the freeze) */
	uint32_t base_count;         /* entries of bases[] */
	uint32_t reserved3;
	struct cxlcr_snapshot_base {
		uint64_t region_generation;  /* the base snapshot's region */
		uint64_t data_lo, data_hi;   /* pool offsets of its data area, where leaves may point */
		uint64_t entry_generation;   /* its catalog entry's generation */
		uint32_t entry;              /* ... and index */
		uint32_t slot;               /* the borrow slot this snapshot holds there */
		uint64_t token;              /* ... with this token */
	} bases[CXLCR_SNAPSHOT_BASES_MAX];
	uint32_t table_crc;          /* CRC-32C of the leaf table */
	uint32_t run_crc;            /* CRC-32C of the run table */
	uint32_t checksum;           /* CRC-32C of everything above */
	uint32_t reserved1;
	uint64_t complete;           /* CXLCR_SNAPSHOT_COMPLETE once published */
	/* A draft's notes (cxlcr_snapshot_draft_note), kept for its finish;
	 * not part of a snapshot (after `complete`, outside the checksum). */
	uint64_t draft_fork_count;   /* the arena header's fork_count then */
	uint32_t draft_tracked;      /* 1: the heap's written pages were re-armed right before the copy */
	uint32_t draft_runs;         /* runs of its leaf table */
	uint64_t draft_nonzero;      /* pages it stored */
	uint64_t draft_punches;      /* the arena's punches_begun before the copy */
	uint32_t draft_punch_clean;  /* 1: no punch was under way then (begun == done) */
	uint32_t draft_spare;        /* pages of room after its copies, for its finish */
	uint64_t draft_own;          /* pages it stored in its own data area */
	uint64_t draft_run_room;     /* runs its layout leaves room for */
	/* A tiered snapshot's cold pages (tier/, docs/cold-tier.md): all on
	 * one memory server, in one extent there, each page's CRC-32C in a
	 * table of this region. Written before `complete`, with a checksum of
	 * its own (it lies outside the header's); all zero when pages_cold is. */
	struct cxlcr_snapshot_cold {
		uint64_t owner;              /* the extent's owner: this region's generation */
		uint64_t server_incarnation; /* of the server when the pages were written */
		uint64_t extent_offset;      /* the extent on the server (cold leaves point into it) */
		uint64_t extent_size;
		uint64_t crc_offset;         /* from the region's start: a uint32_t per cold page */
		uint32_t server;             /* entry of the tier table */
		uint32_t crc_table_crc;      /* CRC-32C of that table */
		uint32_t reserved;
		uint32_t checksum;           /* CRC-32C of the fields above */
	} cold;
	uint8_t  pad[1024 - 936];
};

/* One entry of the run table: pages [first_page, first_page + pages) of
 * the heap, the first with this leaf, each next one with the leaf its
 * predecessor predicts (the same for ZERO, 4 KiB further for CXL and COLD).
 * Runs are in heap order, cover the heap without gaps, and are maximal. */
struct cxlcr_snapshot_run {
	uint64_t first_page;
	uint64_t pages;
	uint64_t leaf;
};

_Static_assert(sizeof(struct cxlcr_snapshot_header) == 1024, "snapshot header layout");
_Static_assert(sizeof(struct cxlcr_snapshot_header) <= CXLCR_SNAPSHOT_TABLE_OFFSET,
	       "snapshot header fits before the table");
_Static_assert(sizeof(struct cxlcr_snapshot_run) == 24, "snapshot run layout");
_Static_assert(sizeof(struct cxlcr_snapshot_cold) == 56, "snapshot cold info layout");

/*
 * The snapshot catalog: snapshots found by name, borrowed by the processes
 * that use them (fork children, the daemons restoring them), and freed only
 * when the last borrower has returned them. It is one region of kind
 * CXLCR_KIND_CATALOG named CXLCR_CATALOG_REGION, created on first use (a
 * region rather than room in the metadata area: it is zeroed when made, and
 * no existing layout changes):
 *
 *   0                           struct cxlcr_catalog_header
 *   CXLCR_CATALOG_HEADER_SIZE   CXLCR_CATALOG_ENTRIES struct cxlcr_catalog_entry
 *
 * The borrow protocol (after Aquifer). An entry's `status` word holds its
 * generation and its state together, so that every state change is one
 * compare-and-swap that also checks the generation:
 *
 *   FREE --publish (pool lock)--> WRITING --> PUBLISHED --tombstone--> TOMBSTONE
 *     ^                                                                    |
 *     +--------- FREEING <-- whoever drops the last reference -------------+
 *
 * Publishing an entry gives it a new generation (from the header's counter,
 * never reused). A name is published once, except while it is replaced (a
 * service's newer snapshot): the new entry is published before the old
 * one is tombstoned, so the name is never missing, and of two entries
 * published under one name (for a moment, or for good if the replacer
 * died in between) the one of the higher generation is the name's; the
 * next replace or tombstone of the name takes the older ones. A borrower looks the name up (status = G|PUBLISHED), takes
 * a reference, and only then reads status again: if it is no longer
 * G|PUBLISHED the entry was tombstoned, or freed and reused for another
 * snapshot in between, and the borrower drops its reference and fails. A
 * tombstoner sets TOMBSTONE and then reads the references; a borrower sets
 * its reference and then reads the state: with full fences between, one of
 * them always sees the other, so a snapshot is never freed under a borrower
 * that passed its re-check.
 *
 * The reference count is the bitmask `holders`: bit i is set while borrow
 * slot i holds a reference, and the count is its popcount. Taking a
 * reference is an atomic OR of the borrower's own bit and dropping it an
 * atomic AND, so the count and the record of who holds it can never
 * disagree: a borrower that dies at any point leaves either a slot the
 * reaper can see or nothing. Whoever clears the last bit of a TOMBSTONE
 * entry (a returner, a reaper, the tombstoner itself) moves it to FREEING,
 * frees the snapshot's region, and makes the entry FREE.
 *
 * A borrow slot is claimed by swapping its token from 0 to the claimer's
 * (random, see CXLCR_BORROW_TOKEN_*), then filled in (host, pid, the
 * borrower host's entry in the host table), and only then is the
 * reference taken. Whoever empties a slot (its borrower returning it, or a
 * reaper) first swaps the token to a closing token of its own, and only if
 * that succeeds drops the slot's bit and clears it: so a late returner can
 * never wipe the bit or the fields of a newcomer that took the slot after a
 * reaper.
 *
 * The reaper (cxlcr_catalog_reap) drops borrows whose holder is gone, and
 * it never compares times written by another host (a pod shares no clock):
 *   - a borrower on the reaper's own host and pid namespace: by its
 *     process (the pid no longer runs, or its start time differs);
 *   - a borrower on another host: by that host's heartbeat in the host
 *     table (above), which its daemon bumps while the host lives. A reaper
 *     that has watched the counter stand still for a whole lease on its
 *     own CLOCK_MONOTONIC, remembered in its own memory (struct
 *     cxlcr_hosts_watch), takes the host for dead. A borrow made where no
 *     daemon ran (host_entry 0),
 *     or whose daemon left in good order, is never reaped by age: only
 *     by its return or by a reaper on its own host that sees the pid gone;
 *   - a slot claimed but never filled in, or left half reaped: once the
 *     same watching reaper has seen its token unchanged for a whole lease.
 * Reapers that keep no watch (one-shot commands) judge only the first case.
 *
 * Every write to an entry is written back (persist.h) before anything that
 * depends on it, and every read is preceded by a refresh.
 */
#define CXLCR_CATALOG_MAGIC        0x474c544143434c58ULL /* "XLCCATLG" */
/* 2: borrows are judged by their host's heartbeat, not by leases in
 * CLOCK_REALTIME; version 1 writers would reap live borrows.
 * 3: the heartbeats moved from the catalog's header page to the host
 * table; a borrow names its host's entry there. */
#define CXLCR_CATALOG_VERSION      3u
#define CXLCR_CATALOG_REGION       "catalog"
#define CXLCR_CATALOG_HEADER_SIZE  4096u
#define CXLCR_CATALOG_ENTRIES      480u
#define CXLCR_CATALOG_BORROWERS    64u    /* borrow slots per entry: bits of `holders` */
/* How long a reader watches a heartbeat stand still before it takes the
 * host for dead, unless $CXLCR_LEASE_MS says otherwise (cxlcr_lease_ns()). */
#define CXLCR_CATALOG_LEASE_NS     (60ull * 1000000000ull)

enum cxlcr_catalog_state {
	CXLCR_CATALOG_FREE = 0,
	CXLCR_CATALOG_PUBLISHED = 1,
	CXLCR_CATALOG_TOMBSTONE = 2,  /* no new borrows; freed when the last borrower returns */
	CXLCR_CATALOG_WRITING = 3,    /* a publisher (holding the pool lock) fills it in */
	CXLCR_CATALOG_FREEING = 4,    /* the snapshot's region is being freed */
};

#define CXLCR_CATALOG_STATUS(generation, state)  ((uint64_t)(generation) << 8 | (uint64_t)(state))
#define CXLCR_CATALOG_STATUS_STATE(status)       ((uint32_t)((status) & 0xffu))
#define CXLCR_CATALOG_STATUS_GENERATION(status)  ((uint64_t)(status) >> 8)

/* A borrow slot's token: random, never 0, with bit 0 set while the slot
 * is being emptied (by a reaper or its returner). */
#define CXLCR_BORROW_TOKEN_REAPING     1ull

struct cxlcr_catalog_borrow {
	uint64_t token;              /* 0: free slot */
	uint64_t filled;             /* 1 once filled in; 0 while being claimed or emptied */
	uint64_t borrowed_ns;        /* CLOCK_REALTIME, for people only */
	int32_t  pid;                /* the borrower, in the pid namespace pid_ns */
	uint32_t host_entry;         /* 1 + its host's entry in the host table; 0: no daemon ran there */
	uint64_t pid_start;          /* its start time (/proc/PID/stat), against pid reuse */
	uint64_t pid_ns;             /* inode of its host's pid namespace */
	char     host[CXLCR_HOST_MAX];
	uint64_t host_incarnation;   /* of that daemon when the borrow was made (for people) */
	uint8_t  pad[128 - 120];
};

struct cxlcr_catalog_entry {
	/* the words of the borrow protocol, changed with atomics */
	uint64_t status;             /* CXLCR_CATALOG_STATUS(generation, state) */
	uint64_t holders;            /* bit i: borrow slot i holds a reference */
	uint64_t state_ns;           /* CLOCK_REALTIME of the last state change */
	uint8_t  pad0[CXLCR_CACHELINE - 24];

	/* what it names: written only while WRITING */
	char     name[CXLCR_NAME_MAX];
	uint64_t snapshot_generation; /* the snapshot's region */
	uint64_t published_ns;
	char     publisher_host[CXLCR_HOST_MAX];
	uint8_t  pad1[3 * CXLCR_CACHELINE - 144];

	struct cxlcr_catalog_borrow borrows[CXLCR_CATALOG_BORROWERS];
};

struct cxlcr_catalog_header {
	/* immutable after creation, covered by checksum */
	uint64_t magic;              /* CXLCR_CATALOG_MAGIC */
	uint32_t version;            /* CXLCR_CATALOG_VERSION */
	uint32_t header_size;        /* sizeof(struct cxlcr_catalog_header) */
	uint8_t  pool_uuid[16];
	uint64_t region_generation;  /* the catalog's own region */
	uint64_t created_ns;
	uint32_t entry_count;        /* CXLCR_CATALOG_ENTRIES */
	uint32_t entry_size;         /* sizeof(struct cxlcr_catalog_entry) */
	uint32_t borrow_slots;       /* CXLCR_CATALOG_BORROWERS */
	uint32_t checksum;           /* CRC-32C of everything above */

	/* mutable */
	uint64_t last_generation;    /* the last entry generation handed out */
	uint8_t  pad[CXLCR_CACHELINE - 8];
};

#define CXLCR_CATALOG_SIZE \
	(CXLCR_CATALOG_HEADER_SIZE + CXLCR_CATALOG_ENTRIES * sizeof(struct cxlcr_catalog_entry))

_Static_assert(sizeof(struct cxlcr_catalog_borrow) == 128, "catalog borrow slot layout");
_Static_assert(sizeof(struct cxlcr_catalog_entry) == 4 * CXLCR_CACHELINE + CXLCR_CATALOG_BORROWERS * 128,
	       "catalog entry layout");
_Static_assert(sizeof(struct cxlcr_catalog_header) == 2 * CXLCR_CACHELINE, "catalog header layout");
_Static_assert(CXLCR_CATALOG_BORROWERS == 64, "holders is a 64-bit mask");
_Static_assert(CXLCR_CATALOG_SIZE <= 2 * CXLCR_POOL_ALIGN, "catalog fits its region");

#endif
