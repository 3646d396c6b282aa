/*
 * The emulated pod host's own pid namespace (issue 15: a real pod).
 *
 * A machine of a real pod never sees another's processes: a pid its
 * daemon records in the pool means something on that machine alone. So
 * each emulated host has a pid namespace of its own, in which its daemon,
 * its workers, CRIU, its services (each still pid 1 of a namespace of its
 * own, nested in the host's), their trackers and pagers live. Its pid 1 is
 * the host's init (HOSTPID_INIT_NAME): a process that only reaps, as a
 * machine's init does, so that the host outlives its daemon (a daemon
 * stopped while its services run, and started again). The init mounts a
 * proc of the namespace on /proc of the host's mount namespace
 * (emulation/hostfs.h): there, /proc shows the host's processes only.
 *
 * The namespace comes with a time namespace: the host's own monotonic
 * and boot-time clocks (HOSTPID_BOOT_SECONDS, HOSTPID_CLOCK_SPREAD), which
 * agree with no other host's, as on a real pod.
 *
 * This machine keeps the init's pid (and its start time: pod_pid_write())
 * in POD_DIR/HOST.init: `pod up` starts a daemon in the namespace while the
 * init lives, or makes a new one (a crashed host boots again), `pod exec`
 * enters it, `pod down` ends it. Killing the init ends every process of
 * the host at once (the kernel's doing, cgroup or not).
 */
#ifndef CXLCR_HOSTPID_H
#define CXLCR_HOSTPID_H

#include <stddef.h>
#include <sys/types.h>

struct pod;

#define HOSTPID_INIT_NAME "cxlcr-init" /* its comm */
/* A host's clocks read as if it had booted this long ago, plus up to the
 * spread at random (hostpid.c: set_host_clock). */
#define HOSTPID_BOOT_SECONDS 600
#define HOSTPID_CLOCK_SPREAD (30u * 86400u)

/* Where this machine keeps the host's init's pid: POD_DIR/HOST.init. */
const char *hostpid_file(const struct pod *pod, const char *host, char *buf, size_t len);
/* A pidfd of the host's init while it lives (the pid file's pid, whose
 * start time is checked once the pidfd holds it), else -1 with errno
 * ESRCH. */
int hostpid_open(const struct pod *pod, const char *host);
/* Makes a new pid namespace and time namespace (the host's own clocks)
 * for the calling process's children, and its init, which mounts the namespace's proc on /proc (the caller is in the
 * host's mount namespace already) before this returns. Returns the init's
 * pid (in the caller's namespace), or -1 with cxlcr_last_error().
 * clock_fd: from hostpid_clock_file(), closed here. */
pid_t hostpid_make(const char *host, int clock_fd);
/* /proc/self/timens_offsets opened for writing (-1 if it cannot be), for
 * hostpid_make(): opened while /proc is this machine's, since the host's
 * mount namespace may hold a proc of a dead pid namespace (its earlier
 * init's) until the new init mounts its own. hostpid_make() closes it. */
int hostpid_clock_file(void);
/* Ends the host: SIGKILL to its init (the kernel then ends every process
 * of the namespace), waits for it (bounded), and forgets its pid file. */
void hostpid_end(const struct pod *pod, const char *host);

#endif
