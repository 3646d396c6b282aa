/*
 * The outcome of the last verb on a service, in its lease entry in the pool
 * (struct cxlcr_verb_outcome in pool_format.h), so that a verb whose
 * command line was killed (or whose worker died) is still reported, on
 * every host: `cxlcr status NAME` (last_verb).
 */
#ifndef CXLCR_CONTROL_OUTCOME_H
#define CXLCR_CONTROL_OUTCOME_H
#include <stdbool.h>
#include <stdint.h>
#include "../common/pool.h"

/* Records it for the service whose live region is generation (reason: one
 * line, cut to fit; "" when ok). Quietly does nothing if the service or
 * the lease table is gone. */
void verb_outcome_record(struct cxlcr_pool *pool, uint64_t generation, const char *verb, uint32_t result,
			 const char *host, const char *reason);
/* verb_outcome_record() for the service named service, in the pool of
 * this process ($CXLCR_POOL). */
void verb_outcome_record_named(const char *service, const char *verb, uint32_t result, const char *host,
			       const char *reason);
/* The last outcome recorded for the live region generation: false if none. */
bool verb_outcome_read(struct cxlcr_pool *pool, uint64_t generation, struct cxlcr_verb_outcome *out);
/* "ok", "failed", "abandoned". */
const char *verb_outcome_word(uint32_t result);
/* After a worker served a request (its verb, the service it was about, its
 * exit status, the verb's last error line): records the outcome if it was
 * a user's verb (migrate, checkpoint, restore, snapshot, fork), as run on
 * host. The caller leaves out steps another verb handed down (--lease). */
void verb_outcome_after_request(const char *verb, const char *service, int status, const char *reason,
				const char *host);

#endif
