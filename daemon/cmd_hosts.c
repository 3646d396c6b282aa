/*
 * cxlcr hosts [--json]: the pod's hosts, from the host table in the pool,
 * each judged alive, suspect, dead or left by this reader alone (on its own
 * monotonic clock, pod/membership.c), with how long ago it last renewed.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../pod/membership.h"
#include "cli.h"
#include "json.h"

static void address_of(const struct cxlcr_host_entry *e, char *buf, size_t len)
{
	if (e->id.address[0] && e->id.port)
		snprintf(buf, len, "%.*s:%u", (int)CXLCR_HOST_ADDR_MAX, e->id.address, e->id.port);
	else if (e->id.port)
		snprintf(buf, len, "*:%u", e->id.port);
	else
		snprintf(buf, len, "-");
}

/* The host's last fence, if it was ever declared dead: who fenced it,
 * whether that host has finished recovering its services, and whether it
 * has acknowledged (killed what it ran, freed what was quarantined). */
static void fence_json(struct json *j, const struct cxlcr_host_entry *e)
{
	cxlcr_refresh(&e->fence, 24); /* fence, fence_ack, fence_done */
	uint64_t f = __atomic_load_n(&e->fence, __ATOMIC_SEQ_CST);
	if (!f) {
		json_null_value(j, "fence");
		return;
	}
	json_object_begin(j, "fence");
	json_u64(j, "word", f);
	json_u64(j, "by_entry", (f & 0xff) - 1);
	uint64_t done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST);
	json_bool(j, "recovered", done == f);
	json_bool(j, "acknowledged", __atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST) == f);
	/* An operator's restore of one of its services works on it now: on
	 * which host entry (null: none). */
	if (done != f && (done & CXLCR_FENCE_BY_HAND))
		json_u64(j, "reopened_by_hand_on_entry", cxlcr_fence_worker(f, done));
	else
		json_null_value(j, "reopened_by_hand_on_entry");
	json_object_end(j);
}

static void print_json(const struct cxlcr_hosts_map *m, const struct cxlcr_hosts_watch *w, uint64_t now)
{
	struct json j;
	json_begin(&j, stdout);
	json_array_begin(&j, "hosts");
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		uint64_t silent;
		enum cxlcr_host_verdict v = cxlcr_hosts_judge(w, i, now, &silent);
		const struct cxlcr_host_entry *e = &m->entries[i];
		if (v == CXLCR_VERDICT_UNUSED)
			continue;
		json_object_begin(&j, NULL);
		json_u64(&j, "entry", i);
		json_str(&j, "state", cxlcr_host_verdict_name(v));
		if (v == CXLCR_VERDICT_CORRUPT) {
			json_str(&j, "why", w->entry[i].why);
			json_object_end(&j);
			continue;
		}
		json_str(&j, "host", w->entry[i].name);
		json_str(&j, "address", e->id.address);
		json_u64(&j, "port", e->id.port);
		json_u64(&j, "incarnation", w->entry[i].incarnation);
		json_u64(&j, "counter", w->entry[i].counter);
		json_double(&j, "period_ms", (double)w->entry[i].period_ns / 1e6);
		if (v == CXLCR_VERDICT_LEFT)
			json_null_value(&j, "renewed_ms_ago");
		else
			json_double(&j, "renewed_ms_ago", (double)silent / 1e6);
		if (w->entry[i].tombstone)
			json_str(&j, "tombstone", cxlcr_tombstone_reason_name(w->entry[i].tombstone));
		else
			json_null_value(&j, "tombstone");
		if (w->entry[i].tombstone_why[0])
			json_str(&j, "tombstone_refused", w->entry[i].tombstone_why);
		fence_json(&j, e);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_end(&j);
}

static void print_table(const struct cxlcr_hosts_map *m, const struct cxlcr_hosts_watch *w, uint64_t now)
{
	printf("%-16s %-8s %-18s %-11s %s\n", "HOST", "STATE", "RENEWED", "INCARNATION", "ADDRESS");
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		uint64_t silent;
		enum cxlcr_host_verdict v = cxlcr_hosts_judge(w, i, now, &silent);
		const struct cxlcr_host_entry *e = &m->entries[i];
		char renewed[32], addr[80];
		if (v == CXLCR_VERDICT_UNUSED || v == CXLCR_VERDICT_CORRUPT)
			continue;
		if (v == CXLCR_VERDICT_LEFT)
			snprintf(renewed, sizeof(renewed), "-");
		else
			snprintf(renewed, sizeof(renewed), "%s%.2f s ago",
				 v == CXLCR_VERDICT_ALIVE ? "" : "over ", (double)silent / 1e9);
		address_of(e, addr, sizeof(addr));
		char note[96] = "";
		if (w->entry[i].tombstone)
			snprintf(note, sizeof(note), "  (tombstone: %s)",
				 cxlcr_tombstone_reason_name(w->entry[i].tombstone));
		else if (w->entry[i].tombstone_why[0])
			snprintf(note, sizeof(note), "  (tombstone refused: %s)", w->entry[i].tombstone_why);
		printf("%-16s %-8s %-18s %-11llu %s%s\n", w->entry[i].name, cxlcr_host_verdict_name(v), renewed,
		       (unsigned long long)w->entry[i].incarnation, addr, note);
	}
}

int cmd_hosts(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, 0, 'j' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	static const char usage[] = "cxlcr hosts [--json]";
	bool json = false;
	int c;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h':
			printf("usage: %s\n\n"
			       "The pod's hosts, from the host table in the pool: alive (its heartbeat\n"
			       "advanced while this command watched), suspect (it stood still for two of\n"
			       "its periods), dead (for a whole lease, as this host has seen it), left\n"
			       "(its daemon stopped in order). A host whose kernel left a tombstone as it\n"
			       "died (a panic) is dead at once. Judged on this host's clock only; watches\n"
			       "for at most two heartbeat periods.\n", usage);
			return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind != argc)
		return fail(EXIT_USAGE, "usage: %s", usage);
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	struct cxlcr_hosts_map m;
	static struct cxlcr_hosts_watch w;
	cxlcr_hosts_watch_init(&w, cxlcr_lease_ns());
	rc = cxlcr_hosts_open(&pool, false, &m);
	if (rc < 0) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	}
	uint64_t now = 0;
	if (rc == 0)
		membership_sample(&m, &w, &now);
	/* No table: no daemon ever registered; an empty pod. */
	if (json)
		print_json(&m, &w, now);
	else
		print_table(&m, &w, now);
	int corrupt = 0;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		if (cxlcr_hosts_judge(&w, i, now, NULL) != CXLCR_VERDICT_CORRUPT)
			continue;
		fail(0, "host table entry %u of pool %s is corrupt (%s): refused", i, pool.path, w.entry[i].why);
		corrupt++;
	}
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		if (!w.entry[i].tombstone_why[0])
			continue;
		fail(0, "the tombstone of host %s in pool %s is corrupt (%s): refused, the host is judged by its heartbeat",
		     w.entry[i].name, pool.path, w.entry[i].tombstone_why);
		corrupt++;
	}
	if (rc == 0)
		cxlcr_hosts_close(&m);
	cxlcr_pool_close(&pool);
	return corrupt ? EXIT_FAIL : EXIT_OK;
}
