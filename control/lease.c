/* The verb leases of pool_format.h: take, check, release. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "frozen.h"
#include "lease.h"

struct cxlcr_verb_lease *verb_lease_table(struct cxlcr_pool *pool, bool create)
{
	struct cxlcr_region r;
	/* Made by whoever needs it first (a racing maker's allocation fails
	 * on the name, and it takes the other's). */
	if (!cxlcr_region_find(pool, CXLCR_KIND_LEASES, CXLCR_LEASES_REGION, &r) &&
	    (!create || (cxlcr_region_alloc(pool, CXLCR_KIND_LEASES, CXLCR_LEASES_REGION, CXLCR_LEASES_SIZE, &r) < 0 &&
			 !cxlcr_region_find(pool, CXLCR_KIND_LEASES, CXLCR_LEASES_REGION, &r)))) {
		if (create)
			cxlcr_error("cannot make the lease table in pool %s: %s", pool->path, cxlcr_last_error());
		else
			cxlcr_error("pool %s has no lease table yet", pool->path);
		return NULL;
	}
	/* A table of entries of another size would be read wrong. */
	if (r.size < CXLCR_LEASES_SIZE) {
		cxlcr_error("the lease table of pool %s is of an older layout (%llu bytes, not %zu): "
			    "stop its services and format it again",
			    pool->path, (unsigned long long)r.size, (size_t)CXLCR_LEASES_SIZE);
		return NULL;
	}
	return cxlcr_pool_map(pool, r.offset, CXLCR_LEASES_SIZE, 0, 0);
}

static int map_table(struct cxlcr_pool *pool, struct verb_lease *l)
{
	l->table_len = CXLCR_LEASES_SIZE;
	l->table = verb_lease_table(pool, true);
	return l->table ? 0 : -1;
}

/* Slot i of the region table holds the service: its lease is entry i. */
int verb_lease_slot(struct cxlcr_pool *pool, uint64_t generation)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *r = &pool->table[i];
		if (__atomic_load_n(&r->generation, __ATOMIC_ACQUIRE) == generation &&
		    __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == CXLCR_REGION_LIVE)
			return (int)i;
	}
	return -1;
}

static uint64_t new_token(void)
{
	uint64_t t = 0;
	if (getrandom(&t, sizeof(t), 0) != sizeof(t))
		t = cxlcr_mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	return t ? t : 1;
}

static void unmap(struct verb_lease *l)
{
	if (l->table)
		munmap(l->table, l->table_len);
	l->table = NULL;
	l->entry = NULL;
}

/* Whether host (a lease entry's, not NUL-terminated) is fenced: declared
 * dead by the pod, and not back to acknowledge it. */
static bool host_fenced(struct cxlcr_pool *pool, const char *host)
{
	char name[CXLCR_HOST_MAX + 1];
	uint64_t incarnation;
	memcpy(name, host, CXLCR_HOST_MAX);
	name[CXLCR_HOST_MAX] = 0;
	int index = cxlcr_host_lookup(pool, name, &incarnation);
	return index >= 0 && cxlcr_host_fenced(pool, (uint32_t)index, NULL, NULL) == 1;
}

/* Whether a lease entry's holder is a process of this host, whose pid this
 * process can look at. Its pid namespace alone does not say so: on real
 * machines every host's processes live in an initial pid namespace, and
 * those have the same inode number everywhere; the host's name (unique in
 * the pod) does. A command line run on this machine (`cxlcr stop`) names
 * it as uname does, which a daemon's configured name may not be. */
static bool of_this_host(const struct cxlcr_verb_lease *e)
{
	if (e->pid_ns != cxlcr_pid_namespace())
		return false;
	if (!strncmp(e->host, cxlcr_host_name(), sizeof(e->host)))
		return true;
	struct utsname u;
	return uname(&u) == 0 && !strncmp(e->host, u.nodename, sizeof(e->host));
}

/*
 * A holder of the lease that cannot act any more: dead (or its pid reused)
 * on our pid namespace, or of a host the pod has fenced. Of another host's
 * processes nothing can be seen from here (its pids are its kernel's), but
 * a fenced host's can change nothing in the pool (their guard word is
 * refused: cxlcr_pool_host_guard), and the host ends its services before
 * it does anything else: a recovery point that host had under way when it
 * died must not keep the service's lease for good (an operator's restore
 * elsewhere had waited for it, then failed as busy). Any other host's
 * holder is judged alive: only a lease that ran out could say otherwise.
 */
static bool holder_gone(struct cxlcr_pool *pool, const struct cxlcr_verb_lease *e)
{
	if (!of_this_host(e))
		return strncmp(e->host, cxlcr_host_name(), CXLCR_HOST_MAX) && host_fenced(pool, e->host);
	uint64_t start;
	return !cxlcr_process_start(e->pid, &start) || start != e->pid_start;
}

/* How long a verb waits for a recovery point that holds the lease. */
#define RECOVERY_POINT_WAIT_NS (10ull * 1000000000ull)

static int busy(const struct cxlcr_region *service, const struct cxlcr_verb_lease *e)
{
	return cxlcr_error("service %.*s is busy: %.*s by pid %d on %.*s", (int)CXLCR_NAME_MAX, service->name,
			   (int)CXLCR_LEASE_VERB_MAX, e->verb, (int)e->pid, (int)CXLCR_HOST_MAX, e->host);
}

/* Checks a lease handed down by the verb holding it. */
static int adopt(const char *passed, struct verb_lease *l)
{
	char *end;
	l->token = strtoull(passed, &end, 16);
	if (*end != ':' || !l->token)
		return cxlcr_error("malformed lease '%s'", passed);
	l->fence = strtoull(end + 1, &end, 16);
	if (*end)
		return cxlcr_error("malformed lease '%s'", passed);
	l->borrowed = true;
	return verb_lease_check(l, "start");
}

int verb_lease_take(struct cxlcr_pool *pool, const struct cxlcr_region *service, const char *verb,
		    const char *passed, struct verb_lease *l)
{
	memset(l, 0, sizeof(*l));
	l->service_generation = service->generation;
	int slot = verb_lease_slot(pool, service->generation);
	if (slot < 0)
		return cxlcr_error("service %.*s is gone", (int)CXLCR_NAME_MAX, service->name);
	if (map_table(pool, l) < 0)
		return -1;
	l->entry = (struct cxlcr_verb_lease *)l->table + slot;
	if (passed) {
		if (adopt(passed, l) < 0) {
			unmap(l);
			return -1;
		}
		return 0;
	}
	struct cxlcr_verb_lease *e = l->entry;
	uint64_t seen, wait_until = cxlcr_mono_ns() + RECOVERY_POINT_WAIT_NS;
	int rc;
	for (;;) {
		if (cxlcr_pool_lock(pool) < 0) {
			unmap(l);
			return -1;
		}
		cxlcr_refresh(e, sizeof(*e));
		seen = __atomic_load_n(&e->word, __ATOMIC_ACQUIRE);
		/* A recovery point in the background is waited for: an
		 * operator's verb must not fail because of one. */
		if (!seen || e->service_generation != service->generation || holder_gone(pool, e) ||
		    strncmp(e->verb, VERB_RECOVERY_POINT, sizeof(e->verb)) || !strcmp(verb, VERB_RECOVERY_POINT) ||
		    cxlcr_mono_ns() >= wait_until)
			break;
		cxlcr_pool_unlock(pool);
		struct timespec t = { 0, 2000000 };
		nanosleep(&t, NULL);
	}
	rc = 0;
	if (seen && e->service_generation == service->generation) {
		if (!holder_gone(pool, e))
			rc = busy(service, e);
		else {
			l->took_over = true;
			l->dead_pid = e->pid;
			cxlcr_copy_field(l->dead_verb, sizeof(l->dead_verb), e->verb);
			cxlcr_copy_field(l->dead_host, sizeof(l->dead_host), e->host);
			/* What it left frozen is for this host to end only if
			 * it is of this host (a fenced one ends its own). */
			bool here = of_this_host(e);
			l->frozen_pid = here ? e->frozen_pid : 0;
			l->frozen_start = here ? e->frozen_start : 0;
			l->frozen_epoch = here ? e->frozen_epoch : 0;
		}
	}
	if (rc == 0) {
		/* The holder's description first, the word last: a reader that
		 * sees the word sees who holds it. */
		l->token = new_token();
		e->service_generation = service->generation;
		e->pid = getpid();
		cxlcr_process_start(e->pid, &e->pid_start);
		e->pid_ns = cxlcr_pid_namespace();
		e->taken_ns = cxlcr_now_ns();
		e->renewals = 0;
		/* What a dead holder left frozen stays recorded until the taker
		 * has resumed or fenced it (verb_lease_note_frozen). */
		if (!l->took_over)
			e->frozen_pid = 0;
		cxlcr_copy_field(e->host, sizeof(e->host), cxlcr_host_name());
		cxlcr_copy_field(e->verb, sizeof(e->verb), verb);
		l->fence = __atomic_add_fetch(&e->fence, 1, __ATOMIC_ACQ_REL);
		cxlcr_publish(e, sizeof(*e));
		if (!__atomic_compare_exchange_n(&e->word, &seen, l->token, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			rc = cxlcr_error("service %.*s: its lease changed hands while it was taken",
					 (int)CXLCR_NAME_MAX, service->name);
		cxlcr_publish(&e->word, sizeof(e->word));
	}
	if (cxlcr_pool_unlock(pool) < 0 && rc == 0) {
		verb_lease_release(l);
		return cxlcr_error("lost the pool lock while taking the lease of %.*s", (int)CXLCR_NAME_MAX,
				   service->name);
	}
	if (rc < 0)
		unmap(l);
	return rc;
}

int verb_lease_check(const struct verb_lease *l, const char *step)
{
	if (!l->entry)
		return 0; /* no lease (a plain command line outside a pod) */
	cxlcr_refresh(l->entry, sizeof(*l->entry));
	if (__atomic_load_n(&l->entry->word, __ATOMIC_ACQUIRE) == l->token &&
	    __atomic_load_n(&l->entry->fence, __ATOMIC_ACQUIRE) == l->fence &&
	    l->entry->service_generation == l->service_generation) {
		__atomic_add_fetch(&l->entry->renewals, 1, __ATOMIC_RELAXED);
		return 0;
	}
	return cxlcr_error("the verb lost its lease before %s (another verb took the service over)", step);
}

void verb_lease_release(struct verb_lease *l)
{
	if (l->entry && !l->borrowed) {
		uint64_t mine = l->token;
		__atomic_compare_exchange_n(&l->entry->word, &mine, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		cxlcr_publish(&l->entry->word, sizeof(l->entry->word));
	}
	unmap(l);
}

void verb_lease_note_frozen(struct verb_lease *l, int32_t pid, uint64_t epoch, const pid_t *stopped, size_t n)
{
	if (!l->entry || verb_lease_check(l, "recording a freeze") < 0)
		return;
	struct cxlcr_verb_lease *e = l->entry;
	uint64_t start = 0;
	if (pid)
		cxlcr_process_start(pid, &start);
	/* What was stopped is on this host before the pool says frozen: a
	 * taker that reads the lease finds the record. A record that cannot
	 * be written leaves the taker to continue every process. */
	if (pid && frozen_record_write(pid, start, stopped, n) < 0)
		fprintf(stderr, "cxlcr: warning: %s\n", cxlcr_last_error());
	int32_t was_pid = l->frozen_pid;
	uint64_t was_start = l->frozen_start;
	e->frozen_start = start;
	e->frozen_epoch = epoch;
	__atomic_store_n(&e->frozen_pid, pid, __ATOMIC_RELEASE);
	cxlcr_publish(e, sizeof(*e));
	l->frozen_pid = pid;
	l->frozen_start = start;
	l->frozen_epoch = epoch;
	/* (A dead holder's record too, once its freeze is ended.) */
	if (was_pid && (was_pid != pid || was_start != start))
		frozen_record_remove(was_pid, was_start);
}

ssize_t verb_lease_frozen_stopped(const struct verb_lease *l, pid_t *stopped, size_t max)
{
	return frozen_record_read(l->frozen_pid, l->frozen_start, stopped, max);
}

bool verb_lease_frozen_alive(const struct verb_lease *l)
{
	uint64_t start;
	return l->frozen_pid > 0 && cxlcr_process_start(l->frozen_pid, &start) && start == l->frozen_start;
}

int verb_lease_held_by(struct cxlcr_pool *pool, int32_t pid, uint64_t *generations, int max)
{
	struct cxlcr_verb_lease *t = verb_lease_table(pool, false);
	if (!t)
		return 0;
	cxlcr_refresh(t, CXLCR_LEASES_SIZE);
	int n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX && n < max; i++) {
		const struct cxlcr_verb_lease *e = &t[i];
		if (__atomic_load_n(&e->word, __ATOMIC_ACQUIRE) && e->pid == pid && of_this_host(e))
			generations[n++] = e->service_generation;
	}
	munmap(t, CXLCR_LEASES_SIZE);
	return n;
}

const char *verb_lease_arg(const struct verb_lease *l, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIx64 ":%" PRIx64, l->token, l->fence);
	return buf;
}

/* The lease entry of a service, copied: false if it has none. */
static bool lease_of(struct cxlcr_pool *pool, const struct cxlcr_region *service, struct cxlcr_verb_lease *e)
{
	int slot = verb_lease_slot(pool, service->generation);
	struct cxlcr_verb_lease *t = slot < 0 ? NULL : verb_lease_table(pool, false);
	if (!t)
		return false;
	*e = t[slot];
	munmap(t, CXLCR_LEASES_SIZE);
	return e->word && e->service_generation == service->generation;
}

void verb_lease_describe(struct cxlcr_pool *pool, const struct cxlcr_region *service, char *buf, size_t len)
{
	struct cxlcr_verb_lease e;
	buf[0] = 0;
	if (lease_of(pool, service, &e))
		snprintf(buf, len, "%.*s by pid %d on %.*s%s", (int)CXLCR_LEASE_VERB_MAX, e.verb, (int)e.pid,
			 (int)CXLCR_HOST_MAX, e.host, holder_gone(pool, &e) ? " (dead)" : "");
}

bool verb_lease_held(struct cxlcr_pool *pool, const struct cxlcr_region *service)
{
	struct cxlcr_verb_lease e;
	return lease_of(pool, service, &e) && !holder_gone(pool, &e);
}
