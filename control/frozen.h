/*
 * What a verb froze, as its own host knows it: which processes of the
 * service an operator had stopped before the freeze. The lease
 * (pool_format.h) says that a holder froze the service's process; the
 * pids of its stopped processes are its host's own, so they are kept on
 * that host (a file under /run/cxlcr/frozen, the host's own tmpfs), not
 * in the pool. Whoever takes over from a holder that died with the
 * service frozen (control/fence.c) reads them, and continues every
 * process but those: a service an operator stopped stays stopped.
 */
#ifndef CXLCR_CONTROL_FROZEN_H
#define CXLCR_CONTROL_FROZEN_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "../daemon/exec.h"

#define FROZEN_DIR "/run/cxlcr/frozen"
#define FROZEN_STOPPED_MAX EXEC_HELD_STOPPED_MAX /* as many as a restore's go names */

/* Records that the process pid (start time start) is being frozen, with
 * stopped (n of them: pids in its namespace, container_stopped()) stopped
 * before the freeze; replaces an older record of it. Written whole or not
 * at all (a new file renamed over the old one); none for n 0. 0, or -1
 * with one line (and no record: every process will be continued). */
int frozen_record_write(int32_t pid, uint64_t start, const pid_t *stopped, size_t n);
/* The record of pid (start time start) into stopped (at most max): how
 * many (0 when there is none), or -1 with one line when it is not whole. */
ssize_t frozen_record_read(int32_t pid, uint64_t start, pid_t *stopped, size_t max);
/* Its record goes (nothing happens if there is none). */
void frozen_record_remove(int32_t pid, uint64_t start);

#endif
