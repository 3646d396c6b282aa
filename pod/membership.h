/*
 * The pod's membership as one reader sees it, for `cxlcr hosts`: the host
 * table watched over a short sample window, on this host's monotonic
 * clock, together with what earlier readers of this host saw (kept in
 * /run/cxlcr, which a reboot empties as it resets the clock), so that
 * repeated looks at a silent host add up to a whole lease.
 */
#ifndef CXLCR_POD_MEMBERSHIP_H
#define CXLCR_POD_MEMBERSHIP_H

#include <stdint.h>
#include "../common/hosts.h"

/*
 * Watches the table m into w until every running host has either been
 * seen to advance in this window or has stood still for two of its
 * periods (at most two periods of the slowest host); *now is the time of
 * the last look. Keeps what it saw for the next reader of this host.
 */
void membership_sample(const struct cxlcr_hosts_map *m, struct cxlcr_hosts_watch *w, uint64_t *now);
/* Forgets what this host's readers saw of the pool with this uuid (its
 * emulated pod comes down). */
void membership_forget(const uint8_t pool_uuid[16]);

#endif
