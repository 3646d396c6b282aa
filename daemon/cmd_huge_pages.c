/*
 * cxlcr huge-pages NAME: a tracked service that a snapshot mapped with
 * 4 KiB pages gets its 2 MiB mappings back (tracking/huge_again.c); its
 * next snapshot compares its heap with the newest one instead of taking
 * tracking's word, and maps it small again. A host's daemon runs it for a
 * service that has had no snapshot for a while (tracking/idle.c).
 */
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../control/fence.h"
#include "../tracking/huge_again.h"
#include "cli.h"
#include "json.h"

/* Each helper's remap takes ~10 ms a GiB where the pool's pages are 2 MiB
 * ones; one that has to copy them takes longer. */
#define HUGE_ANSWER_MS 30000

/* kB of the service's heap mapped with 2 MiB pages (smaps_rollup), or -1. */
static long long pmd_mapped_kb(int pid)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	FILE *f = fopen(path, "re");
	long long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "ShmemPmdMapped: %lld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

int cmd_huge_pages(int argc, char **argv)
{
	struct verb_args a;
	struct cxlcr_pool pool;
	struct service s;
	int code;
	if (!service_verb_here(argc, argv, "cxlcr huge-pages NAME [--json]", NULL, &a, &pool, &s, &code))
		return code;
	struct verb_lease l;
	if ((code = verb_begin_here(&pool, &s, "huge-pages", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return code;
	}
	uint64_t t0 = cxlcr_mono_ns();
	const char *why = NULL;
	struct cxlcr_huge_again g;
	int rc = s.region.kind != CXLCR_KIND_ARENA ? (why = "it is a fork child (its heap is its own memory)", 1)
						  : verb_lease_check(&l, "unregistering its heap");
	if (rc == 0)
		rc = cxlcr_track_huge_begin(&pool, &s.region, &g, &why);
	if (rc == 0) {
		bool answered = service_shed_page_tables(&pool, &s, HUGE_ANSWER_MS);
		rc = cxlcr_track_huge_end(&g);
		if (rc == 0 && !answered)
			rc = cxlcr_error("the service did not answer within %d ms", HUGE_ANSWER_MS);
	}
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (rc < 0)
		return fail(EXIT_FAIL, "huge-pages of %s failed: %s; it goes on running, tracked", a.name,
			    cxlcr_last_error());
	long long kb = rc == 0 ? pmd_mapped_kb(s.region.owner_pid) : -1;
	if (a.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", a.name);
		json_bool(&j, "remapped", rc == 0);
		if (why)
			json_str(&j, "why_not", why);
		json_double(&j, "total_ms", ms);
		if (kb >= 0)
			json_u64(&j, "huge_mapped_bytes", (uint64_t)kb * 1024);
		json_end(&j);
	} else if (rc == 1) {
		printf("%s keeps its mappings: %s\n", a.name, why);
	} else if (!a.quiet) {
		printf("%s has 2 MiB mappings again (%lld MiB of its heap) in %.0f ms; its next snapshot compares "
		       "its heap\n", a.name, kb >= 0 ? kb / 1024 : 0, ms);
	}
	return EXIT_OK;
}
