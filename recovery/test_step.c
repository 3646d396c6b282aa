/*
 * Tests only: a recovery of a dead host stops at a named step
 * ($CXLCR_TEST_RECOVERY_STEPS, see recovery.h), so that a test can kill
 * the host that runs it exactly there and check that another host takes
 * the recovery over (tests/t_recover_takeover.sh).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recovery.h"

/* Takes DIR/stop-at if it names step (a rename: of racing recoveries, one
 * gets it). */
static bool take(const char *dir, const char *step)
{
	char path[4096], mine[4200], want[64] = "";
	snprintf(path, sizeof(path), "%s/stop-at", dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool named = fgets(want, sizeof(want), f) && (want[strcspn(want, "\n")] = 0, !strcmp(want, step));
	fclose(f);
	snprintf(mine, sizeof(mine), "%s.%d", path, (int)getpid());
	return named && rename(path, mine) == 0 && unlink(mine) == 0;
}

void recovery_test_step(const char *step)
{
	const char *dir = getenv("CXLCR_TEST_RECOVERY_STEPS");
	if (!dir || !*dir || !take(dir, step))
		return;
	char path[4096], tmp[4200];
	snprintf(path, sizeof(path), "%s/stopped", dir);
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "%d %s\n", (int)getpid(), step);
		fclose(f);
		rename(tmp, path);
	}
	raise(SIGSTOP);
}
