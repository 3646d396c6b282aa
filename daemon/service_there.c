/* A service of another host, as that host sees it: service_there.h. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/util.h"
#include "rpc.h"
#include "service_there.h"

#define ASK_ROUNDS    3   /* a service whose owner moved meanwhile is asked again, this often */
#define ASK_PER_CALL  200 /* services in one question (a request holds 256 arguments) */
#define ANSWER_MAX    (64 * 1024)

static bool is_remote(const struct service *s)
{
	return !strcmp(s->state, "remote");
}

static void unknown(struct service *s, const char *why)
{
	s->state = "unknown";
	cxlcr_copy_field(s->state_reason, sizeof(s->state_reason), why);
}

/* The answer line of one service: runs (with its memory) or gone are
 * judgements; moved means the owner changed since the pool was read, so
 * the service is read again (and asked in the next round if it is still
 * another host's). */
static void take_answer(struct cxlcr_pool *pool, struct service *s, const char *line)
{
	char word[16] = "";
	long long anon = -1, shmem = -1, file = -1;
	sscanf(line, "%*s %15s %lld %lld %lld", word, &anon, &shmem, &file);
	if (!strcmp(word, "runs")) {
		service_judged(pool, s, true);
		s->rss_anon_kb = anon;
		s->rss_shmem_kb = shmem;
		s->rss_file_kb = file;
	} else if (!strcmp(word, "gone")) {
		service_judged(pool, s, false);
	} else if (!strcmp(word, "moved")) {
		struct cxlcr_region now;
		if (cxlcr_region_get(pool, s->region.generation, &now) == 0)
			service_load(pool, &now, s);
		else
			unknown(s, "its arena went while its host was asked");
	} else {
		unknown(s, "its host answered something else");
	}
}

/* One question to host for the services of list (indexes into s) that it
 * runs; each gets its answer, or the reason there is none. */
static void ask_host(struct cxlcr_pool *pool, const char *host, struct service *s, const size_t *list, size_t n)
{
	char *argv[ASK_PER_CALL + 2], items[ASK_PER_CALL][64];
	argv[0] = "service-state";
	for (size_t k = 0; k < n; k++) {
		const struct cxlcr_region *r = &s[list[k]].region;
		snprintf(items[k], sizeof(items[k]), "%" PRIu64 ":%" PRIu64 ":%d", r->generation, r->owner_epoch,
			 (int)r->owner_pid);
		argv[k + 1] = items[k];
	}
	argv[n + 1] = NULL;
	char *out = malloc(ANSWER_MAX), why[CXLCR_ERROR_MAX];
	if (!out) {
		for (size_t k = 0; k < n; k++)
			unknown(&s[list[k]], "out of memory");
		return;
	}
	int ms = rpc_timeout_ms() < SERVICE_ASK_MS ? rpc_timeout_ms() : SERVICE_ASK_MS;
	int rc = rpc_call_capture_within(host, (int)n + 1, argv, out, ANSWER_MAX, why, sizeof(why), ms);
	for (size_t k = 0; k < n; k++) {
		struct service *one = &s[list[k]];
		if (rc != 0) {
			char reason[CXLCR_ERROR_MAX + 64];
			if (rc < 0)
				snprintf(reason, sizeof(reason), "%s", why);
			else
				snprintf(reason, sizeof(reason), "host %s refused the question: %s", host,
					 why[0] ? why : "no reason given");
			unknown(one, reason);
			continue;
		}
		bool answered = false;
		for (char *line = out; *line && !answered;) {
			char *end = strchr(line, '\n');
			uint64_t gen;
			if (sscanf(line, "%" SCNu64, &gen) == 1 && gen == one->region.generation) {
				if (end)
					*end = 0;
				take_answer(pool, one, line);
				if (end)
					*end = '\n';
				answered = true;
			}
			line = end ? end + 1 : line + strlen(line);
		}
		if (!answered)
			unknown(one, "its host's answer did not name it");
	}
	free(out);
}

void service_ask_hosts(struct cxlcr_pool *pool, struct service *s, size_t n)
{
	size_t *list = malloc((n ? n : 1) * sizeof(*list));
	bool *asked = calloc(n ? n : 1, sizeof(*asked));
	for (int round = 0; list && asked && round < ASK_ROUNDS; round++) {
		memset(asked, 0, n * sizeof(*asked));
		bool any = false;
		/* One host at a time: the first one left, with every service of
		 * it (in calls of at most ASK_PER_CALL). */
		for (size_t i = 0; i < n; i++) {
			if (!is_remote(&s[i]) || asked[i])
				continue;
			char host[CXLCR_HOST_MAX + 1];
			cxlcr_copy_field(host, sizeof(host), s[i].region.owner_host);
			size_t m = 0;
			for (size_t j = i; j < n; j++)
				if (is_remote(&s[j]) && !asked[j] && !strncmp(s[j].region.owner_host, host, CXLCR_HOST_MAX)) {
					asked[j] = true;
					list[m++] = j;
				}
			for (size_t at = 0; at < m; at += ASK_PER_CALL)
				ask_host(pool, host, s, list + at, m - at < ASK_PER_CALL ? m - at : ASK_PER_CALL);
			any = true;
		}
		if (!any)
			break;
	}
	for (size_t i = 0; i < n; i++)
		if (is_remote(&s[i]))
			unknown(&s[i], list && asked ? "its owner kept changing while its host was asked" : "out of memory");
	free(list);
	free(asked);
}

void service_load_asking(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct service *s)
{
	service_load(pool, r, s);
	service_ask_hosts(pool, s, 1);
}

int cmd_service_state(int argc, char **argv)
{
	if (argc < 2)
		return fail(EXIT_USAGE, "usage: cxlcr service-state GENERATION:EPOCH:PID... (internal)");
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	for (int i = 1; i < argc; i++) {
		uint64_t generation, epoch;
		int pid;
		if (sscanf(argv[i], "%" SCNu64 ":%" SCNu64 ":%d", &generation, &epoch, &pid) != 3) {
			cxlcr_pool_close(&pool);
			return fail(EXIT_USAGE, "service-state: '%s' is not GENERATION:EPOCH:PID", argv[i]);
		}
		/* The pid is looked at only while the pool still names it this
		 * host's owner at that epoch: a pid of another task is never
		 * judged. */
		struct cxlcr_region r;
		struct service s;
		if (cxlcr_region_get(&pool, generation, &r) < 0 || r.owner_epoch != epoch || r.owner_pid != pid ||
		    strncmp(r.owner_host, this_host(), CXLCR_HOST_MAX)) {
			printf("%" PRIu64 " moved\n", generation);
			continue;
		}
		service_load(&pool, &r, &s);
		if (s.running)
			printf("%" PRIu64 " runs %lld %lld %lld\n", generation, (long long)s.rss_anon_kb,
			       (long long)s.rss_shmem_kb, (long long)s.rss_file_kb);
		else
			printf("%" PRIu64 " gone\n", generation);
	}
	cxlcr_pool_close(&pool);
	return EXIT_OK;
}
