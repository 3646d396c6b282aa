/*
 * The daemon's workers, counted: a cap on the workers of each endpoint and
 * of each peer, so that nobody who reaches an endpoint can make the daemon
 * fork without bound (200 idle connections made 200 workers).
 */
#ifndef CXLCR_WORKERS_H
#define CXLCR_WORKERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define WORKERS_MAX           256  /* in all */
#define WORKERS_PER_ENDPOINT  32   /* at once on one listening socket */
#define WORKERS_PER_PEER      8    /* at once for one peer (IPv4 address, or uid) */

/* Who is on the other end of conn: its IPv4 address, or its uid on a Unix
 * socket (tagged so the two never collide). */
uint64_t workers_peer_of(int conn);

/* May one more worker start for endpoint and peer? If not, why in buf. */
bool workers_admit(int endpoint, uint64_t peer, char *why, size_t len);
void workers_add(pid_t pid, int endpoint, uint64_t peer);
/* Reaps the workers that ended (non-blocking); died(pid) for each that
 * was killed by a signal (NULL: none). */
void workers_reap(void (*died)(pid_t pid));

#endif
