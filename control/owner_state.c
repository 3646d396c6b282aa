/* Whether an arena's owner runs, judged on its own machine: owner_state.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../daemon/cli.h"
#include "../daemon/exec.h"
#include "../daemon/rpc.h"
#include "owner_state.h"

/* The far side's judgement is bounded by its wait; the call by that and
 * this much more for the network and the verb's start. */
#define CALL_MARGIN_MS 10000

static const char *const STATE_WORD[] = { [OWNER_RUNS] = "runs", [OWNER_GONE] = "gone", [OWNER_MOVED] = "moved" };

/* From /proc/PID/status in one read: its state letter, whether it is
 * traced, its parent. False if it cannot be read (gone). */
static bool status_of(int32_t pid, char *state, bool *traced, int32_t *parent)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	int have = 0, ppid = 0;
	*state = 0;
	*traced = false;
	while (have < 3 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "State: %c", state) == 1 || sscanf(line, "PPid: %d", &ppid) == 1)
			have++;
		else if (!strncmp(line, "TracerPid:", 10)) {
			*traced = atoi(line + 10) != 0;
			have++;
		}
	}
	fclose(f);
	*parent = ppid;
	return have == 3;
}

static bool is_keeper(int32_t pid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (f && fgets(comm, sizeof(comm), f))
		comm[strcspn(comm, "\n")] = 0;
	if (f)
		fclose(f);
	return !strcmp(comm, EXEC_KEEPER_NAME);
}

/* Is pid a restored task that has not been let run: held by a tracer
 * (CRIU, at work), or stopped below its held keeper (daemon/exec.c: CRIU
 * has let it go and is ending, its parent, or CRIU is done and the keeper
 * holds it until the restore says go, or ends it)? A task stopped after
 * the go (an operator had stopped it before its checkpoint, and it came
 * back stopped) is not held: its keeper has ended. State and tracer come
 * from one read: CRIU's detach turns a traced 't' into an untraced 'T'. */
static bool held(int32_t pid)
{
	char state;
	bool traced;
	int32_t parent;
	if (!status_of(pid, &state, &traced, &parent))
		return false;
	if (traced || state == 't')
		return true;
	if (state != 'T')
		return false;
	/* Its keeper, or CRIU's parent (the restored tree's root is CRIU's
	 * child until CRIU exits; a task below the root, the root's). An
	 * ancestor that ends during the walk (CRIU, exiting) re-parents what
	 * was below it: the walk starts again, a few times at most. */
	for (int walks = 0; walks < 4; walks++) {
		int32_t up = parent;
		bool broken = false;
		for (int level = 0; level < 3 && up > 1 && !broken; level++) {
			char s;
			bool t;
			int32_t next;
			if (is_keeper(up))
				return true;
			broken = !status_of(up, &s, &t, &next);
			up = next;
		}
		if (!broken || !status_of(pid, &state, &traced, &parent))
			return false;
		if (traced || state == 't')
			return true;
		if (state != 'T')
			return false;
	}
	return false;
}

/* pid, a task of this machine, after the wait owner_state() describes. */
static enum owner_state judge_here(int32_t pid, bool until_exit, int wait_ms)
{
	uint64_t until = cxlcr_mono_ns() + (uint64_t)(wait_ms > 0 ? wait_ms : 0) * 1000000ull;
	while (pid_alive(pid) && (until_exit || held(pid)) && cxlcr_mono_ns() < until)
		usleep(5000);
	return pid_alive(pid) ? OWNER_RUNS : OWNER_GONE;
}

/* Asks the owner's host's daemon; anything but its answer counts as
 * running (see owner_state.h). */
static enum owner_state judge_there(const struct cxlcr_region *r, bool until_exit, int wait_ms)
{
	char gen[24], epoch[24], pid[16], wait[16], out[64], why[CXLCR_ERROR_MAX];
	char host[CXLCR_HOST_MAX + 1];
	snprintf(gen, sizeof(gen), "%" PRIu64, r->generation);
	snprintf(epoch, sizeof(epoch), "%" PRIu64, r->owner_epoch);
	snprintf(pid, sizeof(pid), "%d", (int)r->owner_pid);
	snprintf(wait, sizeof(wait), "%d", wait_ms);
	cxlcr_copy_field(host, sizeof(host), r->owner_host);
	char *argv[] = { "owner-state", gen, epoch, pid, until_exit ? "exit" : "held", wait, NULL };
	int rc = rpc_call_capture_within(host, 6, argv, out, sizeof(out), why, sizeof(why),
					 wait_ms + CALL_MARGIN_MS);
	out[strcspn(out, "\n")] = 0;
	for (int s = OWNER_RUNS; rc == 0 && s <= OWNER_MOVED; s++)
		if (!strcmp(out, STATE_WORD[s]))
			return (enum owner_state)s;
	cxlcr_error("the owner of the arena, pid %d on host %s, cannot be judged (%s): taken as running",
		    (int)r->owner_pid, host, rc == 0 ? "an answer of another kind" : why);
	return OWNER_RUNS;
}

enum owner_state owner_state(const struct cxlcr_region *r, bool until_exit, int wait_ms)
{
	char host[CXLCR_HOST_MAX + 1];
	cxlcr_copy_field(host, sizeof(host), r->owner_host);
	if (r->owner_pid <= 0)
		return OWNER_GONE;
	/* Its pid is its host's own: only that host may look at it. */
	if (!strncmp(host, this_host(), CXLCR_HOST_MAX))
		return judge_here(r->owner_pid, until_exit, wait_ms);
	return judge_there(r, until_exit, wait_ms);
}

int cmd_owner_state(int argc, char **argv)
{
	if (argc != 6 || (strcmp(argv[4], "held") && strcmp(argv[4], "exit")))
		return fail(EXIT_USAGE, "usage: cxlcr owner-state GENERATION EPOCH PID held|exit WAIT_MS (internal)");
	uint64_t generation = strtoull(argv[1], NULL, 10), epoch = strtoull(argv[2], NULL, 10);
	int32_t pid = (int32_t)atoi(argv[3]);
	int wait_ms = atoi(argv[5]);
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	struct cxlcr_region r;
	bool same = cxlcr_region_get(&pool, generation, &r) == 0 && r.owner_epoch == epoch && r.owner_pid == pid &&
		    !strncmp(r.owner_host, this_host(), CXLCR_HOST_MAX);
	cxlcr_pool_close(&pool);
	/* The pid is looked at only while the pool still names it this
	 * host's owner at that epoch: a pid of another task is never judged. */
	enum owner_state s = same ? judge_here(pid, !strcmp(argv[4], "exit"), wait_ms) : OWNER_MOVED;
	printf("%s\n", STATE_WORD[s]);
	return EXIT_OK;
}
