/*
 * cxlcr_criu.so: the CRIU plugin of cxlcr.
 *
 * A service run by cxlcr keeps its heap in an arena of the pool, a shared
 * mapping that CRIU saves as a file mapping, without its pages. This
 * plugin adds what a checkpoint must know about that arena, and refuses a
 * restore that would give an arena a second live owner:
 *
 *   CHECKPOINT_DEVICES   (dump, each task) records the task's arenas, and
 *                        begins the arena's snapshot for a fork (fork.c),
 *                        which exit(DUMP) waits for; first takes a pod
 *                        service's network lock (netlock.c)
 *   RESUME_DEVICES_LATE  (restore, before the tasks run) checks the records
 *                        of the whole tree and takes the arenas over, or
 *                        kills the tree so that the restore fails; then
 *                        releases the network lock
 *   init(RESTORE)        checks every record before CRIU creates anything
 *   HANDLE_DEVICE_VMA, DUMP_EXT_FILE, RESTORE_EXT_FILE, UPDATE_VMA_MAP
 *                        a pool on a devdax device (see devdax.c)
 *
 * The pool is $CXLCR_POOL of criu's environment, or /dev/shm/cxlcr/pool.
 * Installed in CRIU's plugin directory the plugin is loaded for every dump
 * and restore: without a pool, or for tasks that do not map it, each hook
 * returns -ENOTSUP and CRIU goes on as without it.
 *
 * The hooks are thin: the helpers (plugin.h) do the work and report with
 * cxlcr_error(); the hooks log that one line and choose what CRIU sees.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criu/criu-plugin.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "log.h"
#include "plugin.h"

/* CRIU's list of the plugins a checkpoint needs (criu/image.c). Not in
 * criu-plugin.h, but exported by CRIU 4.x and used by its own amdgpu and
 * cuda plugins. Weak: the plugin still loads into a CRIU without them. */
extern int add_inventory_plugin(const char *name) __attribute__((weak));
extern bool check_and_remove_inventory_plugin(const char *name, size_t n) __attribute__((weak));

static struct pool_id pool;      /* this host's pool, while dumping */
static bool in_inventory;        /* this dump named us in its inventory */
static bool refused;             /* this restore refused a task */
static const char *snapshot_name; /* a fork dump: snapshot the arena under this name */
static bool snapshot_taken;       /* begun (fork.c): cxlcr_exit() waits for it */
static int snapshot_pid;
static bool leaves_running;       /* this dump lets the tasks run on (live_source.c) */
static bool netlock_done;         /* taken (dump) or released (restore) */

static const char plugin_name[] = "cxlcr";

/* Dump: find the pool, and forget the records of an earlier dump into the
 * same directory. A missing pool is no error: then no task maps it. */
static int dump_init(int stage)
{
	const char *path = cxlcr_pool_path();
	if (pool_id_load(path, &pool) < 0)
		pr_info("no pool to record (%s)\n", cxlcr_last_error());
	else
		pr_info("pool %s\n", path);
	if (stage == CR_PLUGIN_STAGE__DUMP && dump_remove_old_records(criu_get_image_dir()) < 0) {
		pr_err("%s\n", cxlcr_last_error());
		return -1;
	}
	/* A fork dump (daemon/fork.c): the parent's arena is snapshotted while
	 * CRIU holds the tree frozen, in the first task that maps it. */
	const char *name = getenv("CXLCR_SNAPSHOT_NAME");
	snapshot_name = stage == CR_PLUGIN_STAGE__DUMP && name && *name ? name : NULL;
	snapshot_taken = false;
	leaves_running = stage == CR_PLUGIN_STAGE__DUMP && criu_leaves_running();
	if (leaves_running)
		pr_info("the tasks run on after this dump: its arena records wait for them to end\n");
	return 0;
}

/* Restore: say that we are here for a checkpoint that needs us, and refuse
 * a doomed restore (other pool, stale or corrupt records) before CRIU has
 * created a single task. RESUME_DEVICES_LATE checks again, for real. */
static int restore_init(void)
{
	int records;
	if (check_and_remove_inventory_plugin)
		check_and_remove_inventory_plugin(plugin_name, sizeof(plugin_name));
	restore_forget_claims();
	if (restore_precheck(criu_get_image_dir(), cxlcr_pool_path(), &records) < 0) {
		pr_err("refusing to restore: %s\n", cxlcr_last_error());
		return -1;
	}
	if (records)
		pr_info("%d arena record(s) hold for pool %s\n", records, cxlcr_pool_path());
	return 0;
}

static int cxlcr_init(int stage)
{
	in_inventory = false;
	refused = false;
	netlock_done = false;
	memset(&pool, 0, sizeof(pool));
	switch (stage) {
	case CR_PLUGIN_STAGE__DUMP:
	case CR_PLUGIN_STAGE__PRE_DUMP:
		return dump_init(stage);
	case CR_PLUGIN_STAGE__RESTORE:
		return restore_init();
	}
	return 0;
}

/* CRIU calls this before it lets the tasks run again, whether the dump
 * worked or not: the snapshot taken beside it must be whole by then. */
static void cxlcr_exit(int stage, int ret)
{
	(void)ret;
	if (stage != CR_PLUGIN_STAGE__DUMP || !snapshot_taken)
		return;
	uint64_t took, waited;
	if (fork_snapshot_end(&took, &waited) < 0)
		pr_err("pid %d: no arena snapshot %s: %s\n", snapshot_pid, snapshot_name, cxlcr_last_error());
	else
		pr_info("pid %d: arena snapshot %s taken in %.3f ms (%.3f ms of it waited for at the end)\n",
			snapshot_pid, snapshot_name, (double)took / 1e6, (double)waited / 1e6);
}

/* A checkpoint with arenas cannot be restored safely without us: CRIU
 * then refuses it with "Missing required plugin: cxlcr". */
static void note_in_inventory(void)
{
	if (in_inventory || !add_inventory_plugin)
		return;
	if (add_inventory_plugin(plugin_name) == 0)
		in_inventory = true;
	else
		pr_warn("cannot name the plugin in the inventory\n");
}

/*
 * Called for every task of the tree, once it is frozen, whether or not it
 * has device mappings: the place to record its arenas. Returns -ENOTSUP
 * on success too, so that the other device plugins (CRIU stops at the
 * first hook that returns anything else) still see the task.
 */
static int cxlcr_checkpoint_devices(int pid)
{
	char other[PATH_MAX];
	if (!netlock_done) {
		if (netlock_take() < 0) {
			pr_err("cannot take the network lock: %s\n", cxlcr_last_error());
			return -EIO;
		}
		netlock_done = true;
	}
	int rc = proc_other_pool(pid, &pool, other, sizeof(other));
	if (rc > 0) {
		pr_err("pid %d maps the cxlcr pool %s, but this CRIU's pool is %s (set CXLCR_POOL)\n",
		       pid, other, pool.known ? pool.path : "missing");
		return -EINVAL;
	}
	rc = rc < 0 ? rc : dump_task_arenas(criu_get_image_dir(), pid, &pool, leaves_running);
	if (rc < 0) {
		pr_err("cannot record the arenas of pid %d: %s\n", pid, cxlcr_last_error());
		return -EIO;
	}
	if (rc > 0) {
		pr_info("pid %d: %d arena record(s)\n", pid, rc);
		note_in_inventory();
		if (snapshot_name && !snapshot_taken) {
			/* Taken beside the rest of the dump; cxlcr_exit() waits. */
			if (fork_snapshot_begin(criu_get_image_dir(), pid, &pool, snapshot_name) < 0) {
				pr_err("cannot snapshot the arena of pid %d: %s\n", pid, cxlcr_last_error());
				return -EIO;
			}
			snapshot_taken = true;
			snapshot_pid = pid;
			pr_info("pid %d: arena snapshot %s begun\n", pid, snapshot_name);
		}
	}
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, cxlcr_checkpoint_devices)

/*
 * Called for every restored task after its memory and files are back and
 * before it runs again, the root first; by then CRIU has restored the
 * whole tree and traces every task of it. So the first call does the work
 * for the tree: checks every task's records, takes the arenas over only
 * if all of them hold (restore.c), and only then releases the network
 * lock; the later calls have nothing left to do. (Task by task, a refusal
 * of a later task left the earlier ones' arenas owned by tasks about to be
 * killed, and the link on the bridge.) CRIU 4.2.1 ignores what this hook
 * returns (it logs it at debug level and resumes the tasks anyway), so a
 * refusal also kills the restored tree: its tasks are stopped under ptrace
 * and never run again; CRIU then fails to detach from them and fails the
 * restore. (They are reaped here too: see restore_kill_traced().)
 */
static int cxlcr_resume_devices_late(int pid)
{
	static pid_t tree[4096];
	if (refused)
		return -EACCES;
	if (netlock_done)
		return -ENOTSUP;
	uint64_t t0 = cxlcr_mono_ns();
	size_t n = restore_traced_tasks(pid, tree, sizeof(tree) / sizeof(tree[0]));
	/* First: once the tree owns the arena it must never run without
	 * CRIU's say (restore_die_with_criu()). */
	int rc = restore_die_with_criu(tree, n);
	if (rc == 0)
		rc = restore_take_over(criu_get_image_dir(), tree, n, cxlcr_pool_path());
	uint64_t t1 = cxlcr_mono_ns();
	if (rc > 0)
		pr_info("pid %d and %zu other restored task(s) now own their %d arena mapping(s)\n", pid,
			n ? n - 1 : 0, rc);
	if (rc >= 0) {
		/* The service is reachable once it owns its arenas, before any
		 * task runs. */
		int flushed;
		bool late;
		rc = netlock_release(&flushed, &late);
		if (late)
			pr_warn("the service's link was not running yet when the network lock was released\n");
		if (rc > 0)
			pr_info("network lock released (%d unresolved neighbour entries flushed)\n", flushed);
		netlock_done = true;
		restore_note_parts(criu_get_image_dir(), t1 - t0, cxlcr_mono_ns() - t1);
	}
	if (rc >= 0)
		return -ENOTSUP;
	pr_err("refusing to restore pid %d: %s\n", pid, cxlcr_last_error());
	refused = true;
	restore_kill_traced();
	return -EACCES;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, cxlcr_resume_devices_late)

/* A mapping of a character device: ours if it is the pool's devdax device. */
static int cxlcr_handle_device_vma(int fd, const struct stat *st)
{
	(void)fd;
	return devdax_admit_vma(&pool, st);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, cxlcr_handle_device_vma)

static int cxlcr_dump_ext_file(int fd, int id)
{
	int rc = devdax_dump_fd(criu_get_image_dir(), fd, (uint32_t)id, &pool);
	if (rc == -1) {
		pr_err("cannot record pool device fd %#x: %s\n", id, cxlcr_last_error());
		return -EIO;
	}
	return rc;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, cxlcr_dump_ext_file)

/* Runs in the restored task: the fd it returns becomes the task's. */
static int cxlcr_restore_ext_file(int id)
{
	int fd = devdax_restore_fd(criu_get_image_dir(), (uint32_t)id, cxlcr_pool_path());
	if (fd == -1) {
		pr_err("cannot reopen pool device fd %#x: %s\n", id, cxlcr_last_error());
		return -EIO;
	}
	return fd;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, cxlcr_restore_ext_file)

/* Runs in the restored task, for each mapping admitted by
 * HANDLE_DEVICE_VMA. CRIU ignores failures here and maps the recorded
 * path, so an error is only logged. */
static int cxlcr_update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
				uint64_t *new_pgoff, int *plugin_fd)
{
	int rc = devdax_update_vma(criu_get_image_dir(), path, cxlcr_pool_path(), old_pgoff,
				   new_pgoff, plugin_fd);
	if (rc == 1)
		pr_info("mapping at %#llx: pool device %s is %s here\n", (unsigned long long)addr, path,
			cxlcr_pool_path());
	else if (rc == -1)
		pr_err("mapping at %#llx of %s: %s\n", (unsigned long long)addr, path,
		       cxlcr_last_error());
	return rc == -1 ? -EIO : rc;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, cxlcr_update_vma_map)

CR_PLUGIN_REGISTER(plugin_name, cxlcr_init, cxlcr_exit)
