/*
 * A pod host's liveness duty, done by its daemon (cxlcrd): keep this
 * host's entry in the pod's host table registered and its heartbeat going,
 * and watch the other hosts' to take back the snapshot borrows of hosts
 * that died (common/hosts.h).
 */
#ifndef CXLCR_POD_LIVENESS_H
#define CXLCR_POD_LIVENESS_H

#include <stdbool.h>
#include <stdint.h>

/* What this daemon registers besides its host's name: the address and
 * port it can be reached at ("" and 0: none). Before the first tick. */
void liveness_identity(const char *address, uint32_t port);
/* What the daemon stops first when it finds its host fenced (declared
 * dead by the others while it was away): its workers. */
void liveness_on_fence(void (*fn)(void));
/* How long the daemon may sleep before the next liveness_tick(), in ms. */
int liveness_period_ms(void);
/* Beats (registering first if needed), fences the other hosts it finds
 * dead, and every quarter lease reaps with what this daemon has watched
 * so far. Quiet when there is no pool; says in log what changed. True
 * while this host is fenced (recovery/takeover.c): the daemon then starts
 * nothing of its own (no recovery points, no restores). */
bool liveness_tick(void (*log)(int priority, const char *fmt, ...));
/* The daemon stops in order: from now on its ticks fence nobody and take
 * no recovery over (they still beat, and close this host's restores by
 * hand that ended). */
void liveness_stop_taking_recoveries(void);
/* How many recoveries of dead hosts this host works on now: fences it won
 * whose recovery is not done, and recoveries reopened by a restore by hand
 * here (the others would take each over once this host left); *first: the
 * dead host's entry of one of them. */
int liveness_own_recoveries(uint32_t *first);
/* The daemon stops in order: its entry says `left`. */
void liveness_leave(void);

#endif
