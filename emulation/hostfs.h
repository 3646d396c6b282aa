/*
 * The emulated pod host's own file system (issue 15 point 4).
 *
 * A real host of a pod has its own /run, /var/lib and /var/log: the hosts
 * share only the pool and the network. So each emulated host gets a mount
 * namespace of its own, in which HOSTFS_DIRS are tmpfs of its own
 * (/run/cxlcr, /run/netns, /var/lib/cxlcr, /var/log/cxlcr, /etc/cxlcr; the
 * rest, the programs and libraries, is this machine's, as if every host
 * had the same image installed). The namespace is pinned by a bind mount
 * of its nsfs file at POD_DIR/HOST.mnt, as `ip netns` pins a network
 * namespace: it outlives its daemon (a restarted daemon finds the files
 * its host kept, and `cxlcr pod logs` a crashed host's log) until
 * `pod down`.
 */
#ifndef CXLCR_HOSTFS_H
#define CXLCR_HOSTFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../daemon/host_files.h"

struct pod;

/* The daemon's log (its stderr, the host's journal), among the host's
 * logs in HOST_LOG_DIR. */
#define HOSTFS_DAEMON_LOG HOST_LOG_DIR "/cxlcrd.log"

/* Where the pin of host's mount namespace is on this machine. */
const char *hostfs_pin_path(const struct pod *pod, const char *host, char *buf, size_t len);
/* In a child that will become the host's daemon: enters the host's
 * mount namespace if it is pinned (1), else makes it, with its tmpfs
 * mounted (0: the caller's parent then pins it with hostfs_pin()). */
int hostfs_enter_or_make(const struct pod *pod, const char *host);
/* Pins the mount namespace of pid as host's. */
int hostfs_pin(const struct pod *pod, const char *host, pid_t pid);
/* Enters the host's pinned mount namespace (`pod logs`, `pod exec`). */
int hostfs_enter(const struct pod *pod, const char *host);
/* Unpins it (pod down): it goes when its last process has gone. */
void hostfs_remove(const struct pod *pod, const char *host);

#endif
