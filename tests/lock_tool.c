/*
 * lock_tool: holds the pool's allocation lock, as a daemon's worker in the
 * middle of a change to the region table does, for the tests of a host
 * that dies holding it (tests/t_crash_lock.sh).
 *
 *   lock_tool    takes the lock of the pool $CXLCR_POOL, prints
 *                "locked PID", and holds it, never renewing it, until it
 *                is killed
 */
#include <stdio.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"

int main(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: lock_tool\n");
		return 2;
	}
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0 || cxlcr_pool_lock(&pool) < 0) {
		fprintf(stderr, "lock_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	printf("locked %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
