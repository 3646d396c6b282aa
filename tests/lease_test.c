/*
 * The verb lease of control/lease.c, with a holder on another host.
 *
 * A holder of another host is in another pid namespace: nothing of it can
 * be seen from here. But once the pod has fenced that host (declared it
 * dead), its processes can change nothing in the pool, and its lease must
 * not keep the service from an operator's or a recovery's verb: a
 * recovery point the dead host had under way had kept its service's lease
 * for good, and a restore elsewhere waited for it, then failed as busy
 * (t_recover_failed, once pid namespaces were per host).
 *
 * The holder here is a process of a pid and UTS namespace of its own (a
 * host named "far"), holding two services' leases: one for a migrate (with
 * the service noted frozen), one for a recovery point (which other verbs
 * wait for rather than fail at once).
 *
 * And a holder on this host that dies with the service frozen: its
 * taker learns which processes an operator had stopped before the freeze
 * (control/frozen.h), the newest list the holder recorded, and nothing
 * once the freeze is ended or the record is not whole.
 *
 * And a holder of another host that shares this process's pid namespace
 * (on real machines every host's processes are in an initial pid
 * namespace, whose inode number is the same everywhere): its pid is its
 * own kernel's, so it must not be judged by this host's /proc (it is
 * dead here, and was taken over as if it were this host's).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../control/frozen.h"
#include "../control/lease.h"
#include "test.h"

#define POOL_SIZE (1ull << 30)
#define FAR "far"

static char dir[64], path[96];

static void remove_dir(void)
{
	unlink(path);
	rmdir(dir);
}

/* The holder, on host FAR: takes both leases, notes svc1 frozen, says so
 * on ready, and waits to be killed. */
_Noreturn static void far_holder(uint64_t gen1, uint64_t gen2, int ready)
{
	struct cxlcr_pool pool;
	struct cxlcr_region r1, r2;
	struct verb_lease l1, l2;
	cxlcr_host_name_set(FAR); /* the name this process had cached is its parent's */
	if (cxlcr_pool_open(&pool, path) < 0 || cxlcr_region_get(&pool, gen1, &r1) < 0 ||
	    cxlcr_region_get(&pool, gen2, &r2) < 0 || verb_lease_take(&pool, &r1, "migrate", NULL, &l1) < 0 ||
	    verb_lease_take(&pool, &r2, VERB_RECOVERY_POINT, NULL, &l2) < 0) {
		dprintf(ready, "error: %s\n", cxlcr_last_error());
		_exit(1);
	}
	verb_lease_note_frozen(&l1, getpid(), 7, NULL, 0);
	dprintf(ready, "ok\n");
	for (;;)
		pause();
}

/* A holder on this host: takes svc1's lease, notes this test frozen
 * with processes 3 and 5 stopped, then again with 9 alone (a list read
 * again right before the freeze), says so, and waits to be killed. */
_Noreturn static void near_holder(uint64_t gen1, int ready)
{
	struct cxlcr_pool pool;
	struct cxlcr_region r1;
	struct verb_lease l1;
	if (cxlcr_pool_open(&pool, path) < 0 || cxlcr_region_get(&pool, gen1, &r1) < 0 ||
	    verb_lease_take(&pool, &r1, "snapshot", NULL, &l1) < 0) {
		dprintf(ready, "error: %s\n", cxlcr_last_error());
		_exit(1);
	}
	pid_t first[] = { 3, 5 }, then[] = { 9 };
	verb_lease_note_frozen(&l1, getppid(), r1.owner_epoch, first, 2);
	verb_lease_note_frozen(&l1, getppid(), r1.owner_epoch, then, 1);
	dprintf(ready, "ok\n");
	for (;;)
		pause();
}

static void near_holder_dies(struct cxlcr_pool *pool, const struct cxlcr_region *s1)
{
	int ready[2];
	CHECK(pipe(ready) == 0, "pipe: %s", strerror(errno));
	pid_t holder = fork();
	CHECK(holder >= 0, "fork: %s", strerror(errno));
	if (holder == 0)
		near_holder(s1->generation, ready[1]);
	close(ready[1]);
	char said[256] = "";
	ssize_t n = read(ready[0], said, sizeof(said) - 1);
	close(ready[0]);
	CHECK(n > 0 && !strncmp(said, "ok", 2), "the holder here: %s", n > 0 ? said : "said nothing");
	kill(holder, SIGKILL);
	CHECK(waitpid(holder, NULL, 0) == holder, "waitpid %d: %s", (int)holder, strerror(errno));

	struct verb_lease l;
	pid_t stopped[FROZEN_STOPPED_MAX];
	CHECK(verb_lease_take(pool, s1, "recover", NULL, &l) == 0, "%s", cxlcr_last_error());
	CHECK(l.took_over && l.frozen_pid == getpid(), "took over %d, frozen pid %d (this test is %d)", l.took_over,
	      (int)l.frozen_pid, (int)getpid());
	ssize_t k = verb_lease_frozen_stopped(&l, stopped, FROZEN_STOPPED_MAX);
	CHECK(k == 1 && stopped[0] == 9, "the taker read %zd stopped processes (first %d), not the newest list (9)", k,
	      k > 0 ? (int)stopped[0] : 0);

	SAY("a record that is not whole is not believed");
	char record[128];
	snprintf(record, sizeof(record), FROZEN_DIR "/%d.%llu", (int)l.frozen_pid, (unsigned long long)l.frozen_start);
	CHECK(truncate(record, 20) == 0, "truncate %s: %s", record, strerror(errno));
	CHECK_ERROR(verb_lease_frozen_stopped(&l, stopped, FROZEN_STOPPED_MAX), "not a whole record");

	SAY("once the taker has ended the freeze, nothing is recorded");
	pid_t again[] = { 4 };
	CHECK(frozen_record_write(l.frozen_pid, l.frozen_start, again, 1) == 0, "%s", cxlcr_last_error());
	verb_lease_note_frozen(&l, 0, 0, NULL, 0);
	CHECK(access(record, F_OK) < 0 && errno == ENOENT, "%s is still there", record);
	verb_lease_release(&l);
}

/* A holder of host "twin" in this pid namespace takes svc2's lease and
 * ends; that lease is busy to this host. */
static void twin_holder(struct cxlcr_pool *pool, const struct cxlcr_region *s2)
{
	pid_t twin = fork();
	CHECK(twin >= 0, "fork: %s", strerror(errno));
	if (twin == 0) {
		struct cxlcr_pool own;
		struct verb_lease l2;
		cxlcr_host_name_set("twin");
		_exit(cxlcr_pool_open(&own, path) == 0 && verb_lease_take(&own, s2, "migrate", NULL, &l2) == 0 ? 0 : 1);
	}
	int st;
	CHECK(waitpid(twin, &st, 0) == twin && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the twin took no lease");
	struct verb_lease l;
	CHECK_ERROR(verb_lease_take(pool, s2, "restore", NULL, &l), "busy: migrate by pid");
	CHECK(verb_lease_held(pool, s2), "twin's lease reads as not held");
}

/* Starts the holder in namespaces of its own; returns its pid here. */
static pid_t start_far(uint64_t gen1, uint64_t gen2)
{
	int ready[2], report[2];
	CHECK(pipe(ready) == 0 && pipe(report) == 0, "pipe: %s", strerror(errno));
	pid_t middle = fork();
	CHECK(middle >= 0, "fork: %s", strerror(errno));
	if (middle == 0) {
		if (unshare(CLONE_NEWPID | CLONE_NEWUTS) < 0 || sethostname(FAR, strlen(FAR)) < 0) {
			dprintf(ready[1], "error: namespaces: %s\n", strerror(errno));
			_exit(1);
		}
		pid_t holder = fork();
		if (holder == 0)
			far_holder(gen1, gen2, ready[1]);
		dprintf(report[1], "%d\n", (int)holder);
		_exit(0);
	}
	close(ready[1]);
	close(report[1]);
	CHECK(waitpid(middle, NULL, 0) == middle);
	char said[256] = "", pid[32] = "";
	ssize_t n = read(ready[0], said, sizeof(said) - 1);
	CHECK(n > 0 && !strncmp(said, "ok", 2), "the holder on %s: %s", FAR, n > 0 ? said : "said nothing");
	CHECK(read(report[0], pid, sizeof(pid) - 1) > 0);
	close(ready[0]);
	close(report[0]);
	return (pid_t)atoi(pid);
}

int main(void)
{
	printf("lease_test: verb leases held on another host\n");
	/* The holder's parent exits: it is ours to reap. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	snprintf(dir, sizeof(dir), "/dev/shm/cxlcr-lease-test.XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/pool", dir);
	test_on_failure(remove_dir);
	struct cxlcr_pool pool;
	struct cxlcr_region s1, s2;
	struct cxlcr_host_reg far, here;
	struct verb_lease l;
	CHECK(cxlcr_pool_format(path, POOL_SIZE, false, &pool) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "svc1", 2 << 20, &s1) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_region_alloc(&pool, CXLCR_KIND_ARENA, "svc2", 2 << 20, &s2) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, FAR, "", 0, 75000000, &far) == 0, "%s", cxlcr_last_error());
	CHECK(cxlcr_host_join(&pool, cxlcr_host_name(), "", 0, 75000000, &here) == 0, "%s", cxlcr_last_error());
	pid_t holder = start_far(s1.generation, s2.generation);

	SAY("a lease held on a living host is busy, whoever asks");
	CHECK_ERROR(verb_lease_take(&pool, &s1, "restore", NULL, &l), "busy: migrate by pid");
	CHECK(verb_lease_held(&pool, &s1), "a living host's lease reads as not held");

	SAY("once that host is fenced, its leases are taken over at once");
	uint64_t fence;
	CHECK(cxlcr_host_fence(&pool, far.index, far.incarnation, here.index, &fence) == 1, "the fence was not won");
	CHECK(!verb_lease_held(&pool, &s1), "a fenced host's lease reads as held");
	CHECK(verb_lease_take(&pool, &s1, "restore", NULL, &l) == 0, "%s", cxlcr_last_error());
	CHECK(l.took_over && !strcmp(l.dead_host, FAR) && !strcmp(l.dead_verb, "migrate"),
	      "took over %d from '%s' ('%s')", l.took_over, l.dead_host, l.dead_verb);
	/* Its frozen pid is a pid of FAR's: not for this host to resume. */
	CHECK(l.frozen_pid == 0, "the fenced host's frozen pid %d was handed on", l.frozen_pid);
	verb_lease_release(&l);
	/* Without the fence rule this waits for the point (10 s), then fails. */
	CHECK(verb_lease_take(&pool, &s2, "restore", NULL, &l) == 0, "%s", cxlcr_last_error());
	CHECK(l.took_over && !strcmp(l.dead_verb, VERB_RECOVERY_POINT), "the recovery point was not taken over");
	verb_lease_release(&l);

	kill(holder, SIGKILL);
	CHECK(waitpid(holder, NULL, 0) == holder, "waitpid %d: %s", (int)holder, strerror(errno));

	SAY("a holder here that dies with the service frozen: its taker knows what was stopped");
	near_holder_dies(&pool, &s1);

	SAY("a holder of another host in this pid namespace is not judged by this host's processes");
	twin_holder(&pool, &s2);
	cxlcr_pool_close(&pool);
	remove_dir();
	printf("lease_test: all checks passed\n");
	return 0;
}
