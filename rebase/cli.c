/*
 * cxlcr-rebase: cxlcr_rebase_fork() from the command line, for debugging
 * and for tests.
 *
 *   cxlcr-rebase SRC DST --snapshot GEN --ip A.B.C.D --mac XX:XX:XX:XX:XX:XX
 *                [--ifname eth0] [--pool PATH]
 *
 * SRC is a checkpoint (CRIU image directory) of the parent, DST an empty
 * directory for the child's image set, GEN the region generation of a
 * snapshot of the parent's arena in the pool ($CXLCR_POOL, or --pool).
 * Prints what it did as one JSON object; exit status 0 on success, 1 on
 * failure (one line on stderr), 2 on a bad command line.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/snapshot.h"
#include "rebase.h"

static int usage(void)
{
	fprintf(stderr, "usage: cxlcr-rebase SRC DST --snapshot GEN --ip A.B.C.D --mac XX:XX:XX:XX:XX:XX "
			"[--ifname NAME] [--pool PATH]\n");
	return 2;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;
	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -1;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *src = NULL, *dst = NULL, *pool_path = cxlcr_pool_path();
	struct cxlcr_rebase_fork spec = { .ifname = "eth0" };
	uint64_t generation = 0;
	bool have_ip = false, have_mac = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return usage(), 0;
		if (a[0] != '-') {
			if (!src)
				src = a;
			else if (!dst)
				dst = a;
			else
				return usage();
			continue;
		}
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--snapshot")) {
			char *end;
			generation = strtoull(v, &end, 10);
			if (*end || !generation)
				return usage();
		} else if (!strcmp(a, "--ip")) {
			struct in_addr in;
			if (inet_pton(AF_INET, v, &in) != 1)
				return usage();
			spec.child_ip = in.s_addr;
			have_ip = true;
		} else if (!strcmp(a, "--mac")) {
			if (parse_mac(v, spec.child_mac) < 0)
				return usage();
			have_mac = true;
		} else if (!strcmp(a, "--ifname")) {
			spec.ifname = v;
		} else if (!strcmp(a, "--pool")) {
			pool_path = v;
		} else {
			return usage();
		}
	}
	if (!src || !dst || !generation || !have_ip || !have_mac)
		return usage();

	struct cxlcr_pool pool;
	struct cxlcr_snapshot snap;
	if (cxlcr_pool_open(&pool, pool_path) < 0) {
		fprintf(stderr, "cxlcr-rebase: %s\n", cxlcr_last_error());
		return 1;
	}
	if (cxlcr_snapshot_open(&pool, generation, &snap) < 0) {
		fprintf(stderr, "cxlcr-rebase: %s\n", cxlcr_last_error());
		cxlcr_pool_close(&pool);
		return 1;
	}
	spec.snapshot = &snap;
	struct cxlcr_rebase_stats st;
	int rc = cxlcr_rebase_fork(src, dst, &spec, &st);
	if (rc < 0)
		fprintf(stderr, "cxlcr-rebase: %s\n", cxlcr_last_error());
	else
		printf("{\"vmas_in\": %" PRIu64 ", \"vmas_out\": %" PRIu64 ", \"runs_cxl\": %" PRIu64
		       ", \"runs_zero\": %" PRIu64 ", \"files_linked\": %" PRIu64
		       ", \"files_rewritten\": %" PRIu64 ", \"rebase_ms\": %.3f}\n",
		       st.vmas_in, st.vmas_out, st.runs_cxl, st.runs_zero, st.files_linked,
		       st.files_rewritten, (double)st.ns / 1e6);
	cxlcr_snapshot_close(&snap);
	cxlcr_pool_close(&pool);
	return rc < 0 ? 1 : 0;
}
