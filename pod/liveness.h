/*
 * A pod host's liveness duty, done by its daemon (cxlcrd): keep this
 * host's heartbeat going in the pool, and watch the other hosts' heartbeats
 * to take back the snapshot borrows of hosts that died (common/heartbeat.h).
 */
#ifndef CXLCR_POD_LIVENESS_H
#define CXLCR_POD_LIVENESS_H

#include <stdint.h>

/* How long the daemon may sleep before the next liveness_tick(), in ms. */
int liveness_period_ms(void);
/* Beats, and reaps with what this daemon has watched so far. Quiet when
 * there is no pool or no catalog yet; says in log what changed. */
void liveness_tick(void (*log)(int priority, const char *fmt, ...));
/* The daemon stops in order: its heartbeat says so. */
void liveness_leave(void);

#endif
