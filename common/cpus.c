/* CPU lists (cpus.h). */
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpus.h"
#include "error.h"

static bool listed(const struct cpu_list *l, unsigned cpu)
{
	return cpu < CXLCR_CPUS_MAX && (l->bits[cpu / 64] >> (cpu % 64) & 1u);
}

int cxlcr_parse_cpus(const char *text, struct cpu_list *out)
{
	memset(out, 0, sizeof(*out));
	const char *p = text;
	for (;;) {
		char *end;
		if (!isdigit((unsigned char)*p))
			return -1;
		errno = 0;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;
		p = end;
		if (*p == '-') {
			if (!isdigit((unsigned char)p[1]))
				return -1;
			hi = strtoul(p + 1, &end, 10);
			p = end;
		}
		if (errno || lo > hi || hi >= CXLCR_CPUS_MAX)
			return -1;
		for (unsigned long c = lo; c <= hi; c++)
			out->bits[c / 64] |= 1ull << (c % 64);
		if (!*p)
			return 0;
		if (*p++ != ',')
			return -1;
	}
}

/* The CPUs that are online; all of them if the kernel does not say. */
static void online_cpus(struct cpu_list *l)
{
	char buf[4096] = "";
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	if (!buf[0] || cxlcr_parse_cpus(buf, l) < 0)
		memset(l->bits, 0xff, sizeof(l->bits));
}

int cxlcr_pin_cpus(const char *text, bool check)
{
	struct cpu_list l, online;
	if (cxlcr_parse_cpus(text, &l) < 0)
		return cxlcr_error("'%.100s' is not a CPU list (as 0-3,8)", text);
	online_cpus(&online);
	cpu_set_t set;
	CPU_ZERO(&set);
	for (unsigned c = 0; c < CXLCR_CPUS_MAX && c < CPU_SETSIZE; c++)
		if (listed(&l, c) && listed(&online, c))
			CPU_SET(c, &set);
	if (!CPU_COUNT(&set))
		return cxlcr_error("CPU list '%.100s' names no CPU that is online", text);
	if (!check && sched_setaffinity(0, sizeof(set), &set) < 0)
		return cxlcr_error("sched_setaffinity(%.100s): %s", text, strerror(errno));
	return 0;
}
