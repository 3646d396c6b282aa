/*
 * A client of the fork API built on libcxlcr alone (<cxlcr/cxlcr.h>), as a
 * FaaS platform would use it; tests/t_fork_api.sh drives it.
 *
 *   api_test fork ENDPOINT SERVICE HOST COUNT [TOKEN]
 *       one fork request; prints "ok COUNT" and a line per child, or
 *       "error: MESSAGE" (exit 1). TOKEN "-": none (not even
 *       $CXLCR_API_TOKEN).
 *   api_test twice ENDPOINT SERVICE HOST [TOKEN]
 *       two requests on one handle: both must get an answer from the
 *       daemon (the same one), the second on a connection of its own.
 *   api_test connect ENDPOINT
 *       exit 0 if the daemon can be reached, else "error: ..." (exit 1).
 *   api_test release ENDPOINT CHILD [TOKEN]
 *       stops a child the API made: "ok", or "error: MESSAGE" (exit 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cxlcr/cxlcr.h>

static struct cxlcr_fork_result result;

static int usage(void)
{
	fprintf(stderr, "usage: api_test fork ENDPOINT SERVICE HOST COUNT [TOKEN] | "
			"twice ENDPOINT SERVICE HOST [TOKEN] | connect ENDPOINT | release ENDPOINT CHILD [TOKEN]\n");
	return 2;
}

static const char *token_arg(int argc, char **argv, int i)
{
	if (argc <= i)
		return NULL;
	return strcmp(argv[i], "-") ? argv[i] : "";
}

static int report(struct cxlcr_api *api, int rc)
{
	if (rc < 0) {
		printf("error: %s\n", cxlcr_api_error(api));
		return 1;
	}
	printf("ok %u\n", result.count);
	for (unsigned i = 0; i < result.count; i++)
		printf("%s %s %s %d\n", result.child[i].name, result.child[i].host, result.child[i].address,
		       result.child[i].pid);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	const char *verb = argv[1], *endpoint = argv[2];
	if (!strcmp(verb, "connect") && argc == 3) {
		struct cxlcr_api *api = cxlcr_api_connect(endpoint, NULL);
		if (!api) {
			printf("error: %s\n", cxlcr_api_error(NULL));
			return 1;
		}
		cxlcr_api_close(api);
		return 0;
	}
	if (!strcmp(verb, "fork") && (argc == 6 || argc == 7)) {
		struct cxlcr_api *api = cxlcr_api_connect(endpoint, token_arg(argc, argv, 6));
		if (!api) {
			printf("error: %s\n", cxlcr_api_error(NULL));
			return 1;
		}
		int rc = report(api, cxlcr_api_fork(api, argv[3], argv[4],
						    (unsigned)strtoul(argv[5], NULL, 10), &result));
		cxlcr_api_close(api);
		return rc;
	}
	if (!strcmp(verb, "release") && (argc == 4 || argc == 5)) {
		struct cxlcr_api *api = cxlcr_api_connect(endpoint, token_arg(argc, argv, 4));
		if (!api) {
			printf("error: %s\n", cxlcr_api_error(NULL));
			return 1;
		}
		int rc = cxlcr_api_release(api, argv[3]);
		if (rc < 0)
			printf("error: %s\n", cxlcr_api_error(api));
		else
			printf("ok\n");
		cxlcr_api_close(api);
		return rc < 0;
	}
	if (!strcmp(verb, "twice") && (argc == 5 || argc == 6)) {
		struct cxlcr_api *api = cxlcr_api_connect(endpoint, token_arg(argc, argv, 5));
		if (!api) {
			printf("error: %s\n", cxlcr_api_error(NULL));
			return 1;
		}
		char first[512];
		int rc1 = cxlcr_api_fork(api, argv[3], argv[4], 1, &result);
		snprintf(first, sizeof(first), "%s", rc1 < 0 ? cxlcr_api_error(api) : "ok");
		int rc2 = cxlcr_api_fork(api, argv[3], argv[4], 1, &result);
		const char *second = rc2 < 0 ? cxlcr_api_error(api) : "ok";
		printf("first: %s\nsecond: %s\n", first, second);
		cxlcr_api_close(api);
		return strcmp(first, second) != 0;
	}
	return usage();
}
