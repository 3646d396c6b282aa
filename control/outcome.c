/* The last verb's outcome of each service (outcome.h). */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "lease.h"
#include "outcome.h"

const char *verb_outcome_word(uint32_t result)
{
	switch (result) {
	case CXLCR_OUTCOME_OK: return "ok";
	case CXLCR_OUTCOME_FAILED: return "failed";
	case CXLCR_OUTCOME_ABANDONED: return "abandoned";
	default: return "unknown";
	}
}

/* A one-line copy of s into out (len bytes): line breaks become spaces,
 * and a reason too long ends in "...". */
static void one_line(const char *s, char *out, size_t len)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	size_t keep = n < len ? n : len - 1;
	memcpy(out, s, keep);
	memset(out + keep, 0, len - keep);
	for (size_t i = 0; i < keep; i++)
		if (out[i] == '\n' || out[i] == '\r')
			out[i] = ' ';
	if (keep < n && len > 4)
		memcpy(out + len - 4, "...", 3);
}

/*
 * Two workers may end at once (a migrate's source, and the take-over of
 * a dead one): the writer makes seq odd by compare-and-swap from an even
 * value, so that one writes at a time and a reader can tell a torn copy;
 * a writer that finds it odd gives way (briefly, then writes anyway: a
 * writer that died mid-write must not silence the service for ever).
 */
void verb_outcome_record(struct cxlcr_pool *pool, uint64_t generation, const char *verb, uint32_t result,
			 const char *host, const char *reason)
{
	int slot = verb_lease_slot(pool, generation);
	struct cxlcr_verb_lease *t = slot < 0 ? NULL : verb_lease_table(pool, true);
	if (!t)
		return;
	struct cxlcr_verb_outcome *o = &t[slot].last;
	uint32_t seq = __atomic_load_n(&o->seq, __ATOMIC_ACQUIRE);
	for (int tries = 0; tries < 1000; tries++) {
		if (!(seq & 1) && __atomic_compare_exchange_n(&o->seq, &seq, seq + 1, false, __ATOMIC_ACQ_REL,
							       __ATOMIC_ACQUIRE))
			break;
		usleep(1000);
		seq = __atomic_load_n(&o->seq, __ATOMIC_ACQUIRE);
	}
	seq |= 1;
	__atomic_store_n(&o->seq, seq, __ATOMIC_RELEASE);
	o->service_generation = generation;
	o->ended_ns = cxlcr_now_ns();
	o->result = result;
	one_line(verb, o->verb, sizeof(o->verb));
	one_line(host, o->host, sizeof(o->host));
	one_line(reason ? reason : "", o->reason, sizeof(o->reason));
	__atomic_store_n(&o->seq, seq + 1, __ATOMIC_RELEASE);
	cxlcr_publish(o, sizeof(*o));
	munmap(t, CXLCR_LEASES_SIZE);
}

bool verb_outcome_read(struct cxlcr_pool *pool, uint64_t generation, struct cxlcr_verb_outcome *out)
{
	int slot = verb_lease_slot(pool, generation);
	struct cxlcr_verb_lease *t = slot < 0 ? NULL : verb_lease_table(pool, false);
	if (!t)
		return false;
	const struct cxlcr_verb_outcome *o = &t[slot].last;
	bool got = false;
	for (int tries = 0; tries < 100 && !got; tries++) {
		cxlcr_refresh(o, sizeof(*o));
		uint32_t before = __atomic_load_n(&o->seq, __ATOMIC_ACQUIRE);
		memcpy(out, o, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		got = !(before & 1) && __atomic_load_n(&o->seq, __ATOMIC_ACQUIRE) == before;
		if (!got)
			usleep(1000);
	}
	munmap(t, CXLCR_LEASES_SIZE);
	out->verb[sizeof(out->verb) - 1] = 0;
	out->host[sizeof(out->host) - 1] = 0;
	out->reason[sizeof(out->reason) - 1] = 0;
	return got && out->service_generation == generation && out->result;
}

void verb_outcome_after_request(const char *verb, const char *service, int status, const char *reason,
				const char *host)
{
	static const char *const recorded[] = { "migrate", "checkpoint", "restore", "snapshot", "fork" };
	for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++)
		if (!strcmp(verb, recorded[i])) {
			verb_outcome_record_named(service, verb,
						  status == 0 ? CXLCR_OUTCOME_OK : CXLCR_OUTCOME_FAILED, host,
						  status == 0 ? "" : reason);
			return;
		}
}

void verb_outcome_record_named(const char *service, const char *verb, uint32_t result, const char *host,
			       const char *reason)
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	struct cxlcr_region r;
	if (cxlcr_region_find(&pool, CXLCR_KIND_ARENA, service, &r) ||
	    cxlcr_region_find(&pool, CXLCR_KIND_CHILD, service, &r))
		verb_outcome_record(&pool, r.generation, verb, result, host, reason);
	cxlcr_pool_close(&pool);
}
