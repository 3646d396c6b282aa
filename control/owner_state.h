/*
 * Whether the task that owns a service's arena runs, judged where it runs.
 *
 * A frozen source that ends its freeze must know whether a restored copy
 * owns its arena and runs (control/fence.c): resuming the source beside it
 * would make two writers of one heap. A task can be looked at (/proc, its
 * tracer) only from its own host: a pid in the pool is its host's own (an
 * emulated host has a pid namespace of its own, emulation/hostpid.h). So
 * an owner on this host is judged here, and one on any other is judged by
 * its host's daemon, asked over the network (the internal verb
 * `owner-state`): pod hosts share nothing but the pool and the network. An
 * owner whose host does not answer counts as running: the source is then
 * fenced, and the service is that host's (and, if the host has died, its
 * recovery's).
 */
#ifndef CXLCR_CONTROL_OWNER_STATE_H
#define CXLCR_CONTROL_OWNER_STATE_H
#include <stdbool.h>
#include <stdint.h>

#include "../common/pool.h"

enum owner_state {
	OWNER_RUNS,  /* alive (or its host did not answer) */
	OWNER_GONE,  /* its task has ended */
	OWNER_MOVED, /* the arena has another owner (or is gone) by now: judge again */
};

/* The owner of arena region r (its owner_host, owner_pid, owner_epoch),
 * after waiting at most wait_ms while CRIU still holds it (a restored task
 * that has not run: its restore lets it run or ends it), or, with
 * until_exit, while it lives at all. */
enum owner_state owner_state(const struct cxlcr_region *r, bool until_exit, int wait_ms);

/* cxlcr owner-state GENERATION EPOCH PID held|exit WAIT_MS: the same
 * judgement, on the owner's own host; prints "runs", "gone" or "moved". */
int cmd_owner_state(int argc, char **argv);

#endif
