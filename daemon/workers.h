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
void workers_add(pid_t pid, int endpoint, uint64_t peer, uint64_t now_ns);
/* Kills every worker (SIGKILL): the daemon's host was fenced, and what
 * they were doing for it must stop (recovery/takeover.c). */
void workers_kill_all(void);
/* Reaps the workers that ended (non-blocking); died(pid, signal, overdue)
 * for each that was killed by a signal (overdue: by workers_kill_overdue();
 * NULL: none). */
void workers_reap(void (*died)(pid_t pid, int sig, bool overdue));

/* How long a worker may serve one request: $CXLCR_WORKER_DEADLINE_MS, else
 * twice the rpc deadline and a minute (the command line gives up after
 * twice it and 30 s: past that nobody waits for the worker). */
#define WORKER_DEADLINE_ENV "CXLCR_WORKER_DEADLINE_MS"
int workers_deadline_ms(int rpc_timeout_ms);
/* SIGKILLs every worker that has served for deadline_ns or longer (a
 * stalled one above all: its death makes the daemon take its leases over),
 * calling overdue(pid, ran_ns) for each; returns when the next one is due
 * (UINT64_MAX: none). */
uint64_t workers_kill_overdue(uint64_t now_ns, uint64_t deadline_ns, void (*overdue)(pid_t pid, uint64_t ran_ns));

#endif
