/*
 * CPU lists, as the kernel writes them ("0", "0-3,8", "1,3-5"): where an
 * operator keeps cxlcr's own work (the pagers: pager_cpus) off the CPUs
 * of the services.
 */
#ifndef CXLCR_CPUS_H
#define CXLCR_CPUS_H

#include <stdbool.h>
#include <stdint.h>

#define CXLCR_CPUS_MAX 1024u

struct cpu_list {
	uint64_t bits[CXLCR_CPUS_MAX / 64];
};

/* 0, or -1 on junk, an empty list, or a CPU from CXLCR_CPUS_MAX on. */
int cxlcr_parse_cpus(const char *text, struct cpu_list *out);
/* Confines the calling thread (and the threads and processes it starts
 * from now on) to the CPUs of list text that are online, whatever CPUs it
 * ran on before (a daemon may be confined to CPUs of its own and its
 * pagers to others); check: only says whether it could. -1 with one line
 * if text is not a list or names no CPU that is online (or one a cpuset
 * cgroup forbids, when it is applied). */
int cxlcr_pin_cpus(const char *text, bool check);

#endif
