/*
 * Failures of an emulated pod host (cxlcr pod crash | freeze | thaw).
 *
 * A real host fails as a whole: its daemon, its services and everything
 * they started stop at one instant, with no clean-up. An emulated host is
 * a set of processes of this machine, so each one gets a cgroup (v2) of
 * its own, which its daemon joins before it starts: workers, services,
 * CRIU's restores and trackers are its descendants and stay in it. Then
 * cgroup.kill ends them all at once, and cgroup.freeze stops and resumes
 * them all (a host that stalls, say longer than its lease, and comes back).
 */
#ifndef CXLCR_HOSTGROUP_H
#define CXLCR_HOSTGROUP_H

#include <stdbool.h>
#include <sys/types.h>

struct pod;

/* Makes the host's cgroup (and the pod's above it). */
int hostgroup_create(const struct pod *pod, const char *host);
/* Moves the calling process into it (before it execs the daemon). */
int hostgroup_join(const struct pod *pod, const char *host);
/* Kills every process in it at once and waits (bounded) until it is empty. */
int hostgroup_kill(const struct pod *pod, const char *host);
/* Freezes or thaws every process in it, and waits until the kernel says so. */
int hostgroup_freeze(const struct pod *pod, const char *host, bool frozen);
/* Is pid one of the host's processes? */
bool hostgroup_has(const struct pod *pod, const char *host, pid_t pid);
/* Removes the host's cgroup once it is empty (pod down), and the pod's. */
void hostgroup_remove(const struct pod *pod, const char *host);
void hostgroup_remove_pod(const struct pod *pod);

#endif
