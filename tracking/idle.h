/*
 * A host's daemon gives 2 MiB mappings back to its services that have not
 * been snapshotted for CXLCR_HUGE_AFTER_S seconds (idle.c).
 */
#ifndef CXLCR_TRACK_IDLE_H
#define CXLCR_TRACK_IDLE_H

#define HUGE_AFTER_ENV "CXLCR_HUGE_AFTER_S"
#define HUGE_AFTER_DEFAULT_S 30
/* Seconds from text: 0..86400, else -1 with one line. */
long tracking_huge_after_parse(const char *text);
/* $CXLCR_HUGE_AFTER_S, else the default; -1 with one line if it is not
 * such a number. */
long tracking_huge_after_s(void);

/* Called from the daemon's loop about once a second, with the pool it
 * opened for the pass (recovery_points_tick's too): looks at the
 * services of host, and runs `cxlcr huge-pages` in the background for
 * those whose time has come. */
struct cxlcr_pool;
void tracking_idle_tick(struct cxlcr_pool *pool, const char *host, void (*log)(int priority, const char *fmt, ...));

#endif
