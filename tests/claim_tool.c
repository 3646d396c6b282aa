/*
 * claim_tool: holds a restore's claim on a checkpoint, as a daemon worker
 * in the middle of a restore does (daemon/image_store.c), for the tests of
 * what a claim whose holder died means (tests/t_pid_reuse.sh).
 *
 *   claim_tool SERVICE HOST   claims SERVICE's newest image set as this
 *                             process on HOST (its pid and start time, as
 *                             the pool records an owner), prints
 *                             "claimed PID REGION", and holds the claim
 *                             until it is killed
 *
 * The pool is $CXLCR_POOL.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"

/* The newest live image set called SERVICE.N. */
static bool newest_images(struct cxlcr_pool *pool, const char *service, struct cxlcr_region *out)
{
	bool found = false;
	size_t len = strlen(service);
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && r.kind == CXLCR_KIND_IMAGES && !strncmp(r.name, service, len) &&
		    r.name[len] == '.' && (!found || r.generation > out->generation)) {
			*out = r;
			found = true;
		}
	}
	return found;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: claim_tool SERVICE HOST\n");
		return 2;
	}
	/* The claim is recorded as its host's daemon records one: the start
	 * time is read only of a process of the writer's own host. */
	cxlcr_host_name_set(argv[2]);
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		fprintf(stderr, "claim_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	struct cxlcr_region images, now;
	if (!newest_images(&pool, argv[1], &images)) {
		fprintf(stderr, "claim_tool: no image set of %s\n", argv[1]);
		return 1;
	}
	if (cxlcr_region_claim_epoch(&pool, images.generation, images.owner_epoch, getpid(), argv[2], &now) < 0) {
		fprintf(stderr, "claim_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	printf("claimed %d %s\n", (int)getpid(), images.name);
	fflush(stdout);
	for (;;)
		pause();
}
