/*
 * cxlcrd's configuration file (/etc/cxlcr/cxlcrd.conf on a machine; the
 * emulated pod passes everything as flags). Lines `key = value`; `#`
 * starts a comment; blank lines are ignored. Keys:
 *
 *   host     this host's name in the pod (default: the machine's name)
 *   pool     the pool device or file (default: $CXLCR_POOL, else the
 *            emulated pool's path)
 *   address  the IPv4 address the daemon listens on over TCP and that the
 *            pod's host table gives the other hosts (default: any)
 *   port     its TCP port: the control protocol and the fork API (default
 *            CXLCR_API_PORT; 0: no TCP, and no verbs from other machines)
 *   lease    milliseconds: a host whose heartbeat this daemon has seen
 *            stand still that long is dead, and its services are
 *            recovered (default $CXLCR_LEASE_MS, else 300)
 *   pager_cpus  the CPUs (a list, "0-1,8") the pagers of copy-mode
 *            children run on, kept off the services' own (default
 *            $CXLCR_PAGER_CPUS, else wherever the daemon may run)
 *   cold_ahead_mb  MiB: the most memory one fetch of a tiered snapshot's
 *            cold pages for several copy-mode children may take
 *            (pager/ahead.h; default $CXLCR_COLD_AHEAD_MB, else 1024; 0:
 *            none, each child's pager fetches them all)
 *   fault_around  pages: how many a copy-mode child's fault on a cold page
 *            reads from the memory server, its own and those around it
 *            (pager/pager.h; default $CXLCR_FAULT_AROUND, else 16; 1: its
 *            page alone)
 *   huge_after_s  seconds: a service that takes no recovery points and
 *            had no snapshot for that long gets 2 MiB mappings again
 *            (tracking/idle.c; default $CXLCR_HUGE_AFTER_S, else 30; 0:
 *            never)
 *
 * Command-line flags override the file.
 */
#ifndef CXLCR_DAEMON_CONFIG_H
#define CXLCR_DAEMON_CONFIG_H

#include <stdbool.h>

#define DAEMON_CONFIG_DEFAULT "/etc/cxlcr/cxlcrd.conf"
#define DAEMON_CONFIG_VALUE_MAX 256

struct daemon_config {
	char host[DAEMON_CONFIG_VALUE_MAX];     /* "": not set */
	char pool[DAEMON_CONFIG_VALUE_MAX];
	char address[DAEMON_CONFIG_VALUE_MAX];
	int  port;                              /* -1: not set */
	long lease_ms;                          /* 0: not set */
	long recovery_interval_ms;              /* -1: not set; 0: no recovery points */
	int  tier_warm;                         /* -1: not set; 1: start libfabric at start-up */
	char pager_cpus[DAEMON_CONFIG_VALUE_MAX]; /* "": not set */
	char cold_ahead_mb[DAEMON_CONFIG_VALUE_MAX]; /* "": not set */
	char fault_around[DAEMON_CONFIG_VALUE_MAX];  /* "": not set */
	char huge_after_s[DAEMON_CONFIG_VALUE_MAX];  /* "": not set */
};

#define DAEMON_LEASE_DEFAULT_MS 300
/* How often the services this daemon starts take a recovery point unless
 * `cxlcr run --recovery-interval` says otherwise (docs/recovery.md). */
#define DAEMON_RECOVERY_INTERVAL_DEFAULT_MS 1000
#define RECOVERY_INTERVAL_ENV "CXLCR_RECOVERY_INTERVAL_MS"
/* A recovery interval from text: 0..86400000 ms, else -1. */
long daemon_config_interval(const char *text);
/* A lease from text: 1..3600000 ms, else -1. */
long daemon_config_lease(const char *text);

void daemon_config_init(struct daemon_config *c);
/* Reads path into c (keys it sets replace c's). On a bad line or an
 * unreadable file: -1 and one line in cxlcr_last_error(), "FILE:LINE: ...". */
int daemon_config_read(const char *path, struct daemon_config *c);
/* A TCP port from text: 0..65535, else -1. */
int daemon_config_port(const char *text);
/* Whether text is a dotted IPv4 address. */
bool daemon_config_address_ok(const char *text);

#endif
