/*
 * One control owner per service: the verb lease (pool_format.h has the
 * table and its rules). A verb takes its service's lease before it does
 * anything, re-checks it before every step that changes something, and
 * gives it back at the end. A verb that runs steps on other hosts (a
 * migrate's restore on the destination, a fork's snapshot) hands them its
 * lease as "--lease TOKEN:FENCE": they act under it instead of taking one.
 */
#ifndef CXLCR_CONTROL_LEASE_H
#define CXLCR_CONTROL_LEASE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "../common/pool.h"

struct verb_lease {
	struct cxlcr_verb_lease *entry; /* in the lease table's mapping */
	void *table;
	size_t table_len;
	uint64_t token, fence, service_generation;
	bool borrowed;          /* handed down by the verb that holds it */
	bool took_over;         /* its last holder had died in the middle of a verb */
	char dead_verb[CXLCR_LEASE_VERB_MAX];
	int32_t dead_pid;
	/* what the dead holder left: the service frozen (its pid, start time,
	 * epoch at the freeze), on host dead_host; frozen_pid 0: nothing */
	int32_t frozen_pid;
	uint64_t frozen_start, frozen_epoch;
	char dead_host[CXLCR_HOST_MAX];
};

/* Takes the lease of the service whose region is service, for verb; or,
 * with passed ("TOKEN:FENCE" from verb_lease_arg()), checks that the verb
 * that handed it down still holds it. Fails with one line, "service X is
 * busy: VERB by pid N on HOST", when a live holder has it. A holder that
 * died is replaced (took_over says so: what it left half-done is the new
 * holder's to recover). */
/* The verb name of a recovery point (recovery/points.c): a daemon's own
 * snapshot in the background, which any other verb waits for (bounded)
 * rather than being refused as busy. */
#define VERB_RECOVERY_POINT "recovery-point"

int verb_lease_take(struct cxlcr_pool *pool, const struct cxlcr_region *service, const char *verb,
		    const char *passed, struct verb_lease *l);
/* 0 while l still holds; else -1 with "lost its lease" in the error. */
int verb_lease_check(const struct verb_lease *l, const char *step);
/* Gives the lease back (a borrowed one stays with its holder). */
void verb_lease_release(struct verb_lease *l);
/* Records in the lease that the holder froze the service's process pid at
 * owner epoch epoch (pid 0: it runs again, or is gone), so that whoever
 * takes the lease over from a dead holder knows what to resume or fence;
 * and, on this host (control/frozen.h), which of the service's processes
 * were stopped before the freeze (stopped, n: pids in its namespace,
 * container_stopped()), which the taker leaves stopped. Called again for
 * the same freeze with a list read later, it replaces the list. */
void verb_lease_note_frozen(struct verb_lease *l, int32_t pid, uint64_t epoch, const pid_t *stopped, size_t n);
/* What the dead holder that l took over from had stopped before its
 * freeze (verb_lease_note_frozen): into stopped, at most max; how many, or
 * -1 with one line when the record of it is not whole. */
ssize_t verb_lease_frozen_stopped(const struct verb_lease *l, pid_t *stopped, size_t max);
/* Whether the process recorded as frozen is still that process. */
bool verb_lease_frozen_alive(const struct verb_lease *l);
/* The services (their region generations, at most max) whose lease the
 * process pid of this host holds; their number. */
int verb_lease_held_by(struct cxlcr_pool *pool, int32_t pid, uint64_t *generations, int max);
/* "TOKEN:FENCE", what a step on another host takes as --lease. */
const char *verb_lease_arg(const struct verb_lease *l, char *buf, size_t len);

/* The lease table, mapped (CXLCR_LEASES_SIZE bytes; munmap it), made first
 * if create; NULL with one line. */
struct cxlcr_verb_lease *verb_lease_table(struct cxlcr_pool *pool, bool create);
/* The slot of the region table that holds the live region generation (its
 * lease is that entry), or -1. */
int verb_lease_slot(struct cxlcr_pool *pool, uint64_t generation);

/* The holder of a service's lease as one line ("migrate by pid N on h0"),
 * or "" when nobody holds it; for ps and status. */
void verb_lease_describe(struct cxlcr_pool *pool, const struct cxlcr_region *service, char *buf, size_t len);
/* Does a verb that is not known to be dead hold the service's lease? (A
 * holder on another host is never known to be dead here.) */
bool verb_lease_held(struct cxlcr_pool *pool, const struct cxlcr_region *service);

#endif
