/*
 * lock_tool: holds the pool's allocation lock, as a daemon's worker in the
 * middle of a change to the region table does, for the tests of a host
 * that dies holding it (tests/t_crash_lock.sh).
 *
 *   lock_tool HOST   takes the lock of the pool $CXLCR_POOL as a worker
 *                    of HOST does (guarded by HOST's fence word, and
 *                    so named in the lock word), prints "locked PID",
 *                    and holds it, never renewing it, until it is killed
 */
#include <stdio.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool.h"
#include "../common/util.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: lock_tool HOST\n");
		return 2;
	}
	struct cxlcr_pool pool;
	uint64_t incarnation, fence = 0;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		fprintf(stderr, "lock_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	int index = cxlcr_host_lookup(&pool, argv[1], &incarnation);
	if (index < 0) {
		fprintf(stderr, "lock_tool: no host %s in the host table\n", argv[1]);
		return 1;
	}
	cxlcr_host_fenced(&pool, (uint32_t)index, &fence, NULL);
	if (cxlcr_pool_host_guard(&pool, (uint32_t)index, fence) < 0 || cxlcr_pool_lock(&pool) < 0) {
		fprintf(stderr, "lock_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	printf("locked %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
