/*
 * cxlcr-memd: a memory server of the cold tier. It registers one large
 * buffer with libfabric for one-sided RMA reads and writes by others
 * (it never touches the data itself), publishes how to reach it in the
 * pool's tier table, and keeps the provider progressing (providers like
 * ofi_rxm carry RMA over messages the target must poll).
 *
 * Which parts of the buffer are in use is the tier table's business
 * (table.c): extents are handed out under the pool lock by whoever needs
 * one, and freed when their snapshot's region goes. The server only gives
 * the memory of freed extents back to its kernel.
 *
 *   cxlcr-memd --name m0 --address IP [--port P] [--size SIZE]
 *              [--provider 'tcp;ofi_rxm'] [--spin-us US] [--fault-spin-us US]
 *              [--bulk-port P] [--ready-fd FD]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "internal.h"
#include "tier.h"

#define DEFAULT_SIZE (1ull << 30)
#define DEFAULT_PORT "7470"
/* The longest the server sleeps between two turns of the provider (see
 * fab_progress): an RMA request waits at most this long for one. */
#define TICK_MS 1
/* How long the server keeps driving the provider without sleeping after
 * it last had something to do (--spin-us, $CXLCR_MEMD_SPIN_US): its bulk
 * endpoint, or its only one (--bulk-port 0). */
#define DEFAULT_SPIN_US 200

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* Gives the kernel back the memory between the extents in use (after
 * snapshots that used it were freed): the server's footprint is what its
 * live snapshots hold. Under the pool lock: an extent handed out while the
 * list is read could otherwise be written and then thrown away. */
static void give_back(struct cxlcr_pool *pool, struct fab *f, uint32_t index, uint64_t incarnation)
{
	struct cxlcr_tier_extent *used;
	uint32_t n;
	if (cxlcr_pool_lock(pool) < 0)
		return;
	if (tier_extents_of(pool, index, incarnation, &used, &n) < 0) {
		cxlcr_pool_unlock(pool);
		return;
	}
	uint64_t at = 0;
	for (uint32_t k = 0; k <= n; k++) {
		uint64_t end = k < n ? used[k].offset : f->buf_size;
		if (end > at)
			madvise((char *)f->buf + at, end - at, MADV_DONTNEED);
		if (k < n && used[k].offset + used[k].size > at)
			at = used[k].offset + used[k].size;
	}
	cxlcr_pool_unlock(pool);
	free(used);
}

/* Is the table's entry still ours (nobody registered under our name since)? */
static bool still_ours(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation)
{
	struct tier_server_info s;
	return tier_server_get(pool, index, &s) == 0 && s.up && s.incarnation == incarnation;
}

static int usage(void)
{
	fprintf(stderr, "usage: cxlcr-memd --name NAME --address IP [--port P] [--size SIZE] [--provider P] "
			"[--spin-us US] [--fault-spin-us US] [--bulk-port P] [--ready-fd FD]\n");
	return 2;
}

/* A number of microseconds, at most a second. */
static int parse_spin(const char *s, uint64_t *us)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > 1000000)
		return -1;
	*us = v;
	return 0;
}

/*
 * Drives the provider until nothing has come for spin_ns, then returns
 * (the caller sleeps in poll() again). A server that only slept in poll()
 * between two turns of the provider took a wakeup for every step of every
 * RMA request: a 256 KiB read (a background fetch's) 376 us, one cold
 * page's fault 77 us at the median, where a PING round trip across the
 * same bridge is 54 us. Spinning while requests keep coming and for a
 * moment after the last one gives 58 ms instead of 147 for a tiered
 * child's 25,000 cold pages and a 44 us fault (docs/cold-tier.md). It
 * never spins when idle: a server that always spins is, on a machine
 * whose CPUs are all busy, the one descheduled when a request comes.
 */
static void spin_while_busy(struct fab *f, uint64_t spin_ns)
{
	/* Back to the caller's loop at least every tick, however busy: it
	 * beats the server's heartbeat there, and a server whose counter
	 * stands still through a long fetch is taken for dead. */
	uint64_t now = cxlcr_mono_ns(), until = now + spin_ns, cap = now + TICK_MS * 1000000ull;
	while (!stopping && (now = cxlcr_mono_ns()) < until && now < cap)
		if (fab_progress(f, 0))
			until = cxlcr_mono_ns() + spin_ns;
}

/* One turn of an endpoint's loop: asleep in poll() while idle (at most a
 * tick), spinning only while busy and for spin_us after (spin_while_busy). */
static void serve_turn(struct fab *f, uint64_t spin_us)
{
	if (fab_progress(f, TICK_MS) && spin_us)
		spin_while_busy(f, spin_us * 1000);
}

/*
 * The bulk endpoint (format.h): a second endpoint over the same memory, on
 * the next port, driven by a thread of its own at SCHED_IDLE. The pagers'
 * background fetches and the splits read and write there, 256 KiB at a
 * time; a fault's 4 KiB read goes to the main endpoint. With one thread
 * for both, a fault's read waited behind the fetch's reads in flight:
 * 79-274 us at the median during a tiered child's fetch, against ~55 us
 * with no fetch (docs/cold-tier.md). With two, the fault's endpoint is
 * driven as soon as its request comes, and the bulk one only when nothing
 * else on the CPU wants it. (On RDMA NICs, verbs;ofi_rxm, the reads are
 * served by the NIC and neither thread has any to do.)
 *
 * Only the bulk thread spins after a request by default (--spin-us): at
 * SCHED_IDLE its spinning costs nobody anything. The main one sleeps in
 * poll() between faults (--fault-spin-us, default 0): 200 us of a CPU
 * after each ~50 us fault bought ~25 us a fault on an idle machine, and
 * on a host whose CPU the pagers and clients share (this project's pod),
 * it kept the waiting pager off that CPU: a tiered child's cold faults
 * during its fetch took ~70 or ~265 us at the median, round by round, with
 * one endpoint spinning, and 55-106 us with these two; its p99 went from
 * 1.88-2.41x an all-CXL child's to 1.51-1.72x (docs/cold-tier.md).
 */
struct bulk {
	struct fab f;
	uint64_t spin_us;
	pthread_t thread;
	bool running;
	volatile sig_atomic_t stop;
};

static void *bulk_main(void *arg)
{
	struct bulk *b = arg;
	struct sched_param idle = { .sched_priority = 0 };
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
	while (!stopping && !b->stop)
		serve_turn(&b->f, b->spin_us);
	return NULL;
}

/* The bulk port: --bulk-port, else the main port + 1; 0 for none. */
static int parse_port(const char *s, uint32_t *port)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > 65535)
		return -1;
	*port = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "name", required_argument, 0, 'n' },
					      { "address", required_argument, 0, 'a' },
					      { "port", required_argument, 0, 'p' },
					      { "size", required_argument, 0, 's' },
					      { "provider", required_argument, 0, 'P' },
					      { "ready-fd", required_argument, 0, 'r' },
					      { "spin-us", required_argument, 0, 'S' },
					      { "fault-spin-us", required_argument, 0, 'F' },
					      { "bulk-port", required_argument, 0, 'B' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *name = NULL, *address = NULL, *port = DEFAULT_PORT, *provider = NULL, *bulk_port = NULL;
	uint64_t size = DEFAULT_SIZE, spin_us = DEFAULT_SPIN_US;
	int ready = -1, c;
	/* The option wins over the environment; either is checked once. */
	const char *spin = getenv("CXLCR_MEMD_SPIN_US"), *spin_from = "CXLCR_MEMD_SPIN_US=";
	if (spin && !*spin)
		spin = NULL;
	uint64_t fault_spin_us = 0;
	const char *fspin = getenv("CXLCR_MEMD_FAULT_SPIN_US"), *fspin_from = "CXLCR_MEMD_FAULT_SPIN_US=";
	if (fspin && !*fspin)
		fspin = NULL;
	while ((c = getopt_long(argc, argv, "n:a:p:s:P:r:S:F:B:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'a': address = optarg; break;
		case 'p': port = optarg; break;
		case 's':
			if (cxlcr_parse_size(optarg, &size) < 0 || size < 4096 || size % 4096) {
				fprintf(stderr, "cxlcr-memd: --size %s: a size of whole 4 KiB pages\n", optarg);
				return 2;
			}
			break;
		case 'P': provider = optarg; break;
		case 'r': ready = atoi(optarg); break;
		case 'S': spin = optarg, spin_from = "--spin-us "; break;
		case 'F': fspin = optarg, fspin_from = "--fault-spin-us "; break;
		case 'B': bulk_port = optarg; break;
		case 'h': usage(); return 0;
		default: return usage();
		}
	}
	if (spin && parse_spin(spin, &spin_us) < 0) {
		fprintf(stderr, "cxlcr-memd: %s%s: microseconds, 0 to 1000000\n", spin_from, spin);
		return 2;
	}
	if (fspin && parse_spin(fspin, &fault_spin_us) < 0) {
		fprintf(stderr, "cxlcr-memd: %s%s: microseconds, 0 to 1000000\n", fspin_from, fspin);
		return 2;
	}
	if (!name || !address || strlen(name) >= 32)
		return usage();
	uint32_t main_port = 0, bulk_at = 0;
	if (bulk_port && parse_port(bulk_port, &bulk_at) < 0) {
		fprintf(stderr, "cxlcr-memd: --bulk-port %s: a port number, 0 for none\n", bulk_port);
		return 2;
	}
	if (!bulk_port && (parse_port(port, &main_port) < 0 || (bulk_at = main_port ? main_port + 1 : 0) > 65535)) {
		fprintf(stderr, "cxlcr-memd: --port %s: its bulk endpoint takes the next port, which it has not "
				"(give --bulk-port, 0 for none)\n", port);
		return 2;
	}
	FILE *say = ready >= 0 ? fdopen(ready, "w") : stderr;
	struct cxlcr_pool pool;
	struct fab f;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0 || fab_open(&f, provider, address, port, size, true) < 0) {
		fprintf(say, "error: %s\n", cxlcr_last_error());
		return 1;
	}
	struct bulk bulk = { .spin_us = spin_us };
	if (bulk_at) {
		char at[16];
		snprintf(at, sizeof(at), "%u", bulk_at);
		if (fab_open_on(&bulk.f, provider, address, at, f.buf, size, true) < 0 ||
		    bulk.f.mr_virt != f.mr_virt) {
			fprintf(say, "error: the bulk endpoint (port %u): %s\n", bulk_at,
				bulk.f.buf ? "its memory is addressed otherwise" : cxlcr_last_error());
			return 1;
		}
	}
	struct cxlcr_tier_server id = { 0 };
	cxlcr_copy_field(id.name, sizeof(id.name), name);
	cxlcr_copy_field(id.provider, sizeof(id.provider), f.provider);
	id.mr_key = fi_mr_key(f.mr);
	id.mr_virt = f.mr_virt;
	id.mr_base = f.mr_virt ? (uint64_t)(uintptr_t)f.buf : 0;
	id.size = size;
	id.bulk_port = bulk_at;
	id.bulk_mr_key = bulk_at ? fi_mr_key(bulk.f.mr) : 0;
	id.pid = getpid();
	id.beat_period_ms = (uint32_t)(cxlcr_heartbeat_period_ns() / 1000000ull);
	if (!id.beat_period_ms)
		id.beat_period_ms = 1;
	int index = -1;
	if (fab_name(&f, id.addr, &id.addr_len) < 0 || (index = tier_server_register(&pool, &id)) < 0) {
		fprintf(say, "error: %s\n", cxlcr_last_error());
		return 1;
	}
	struct tier_server_info me;
	tier_server_get(&pool, (uint32_t)index, &me);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	fprintf(say, "ok %d %s %s\n", getpid(), me.address, f.provider);
	fflush(say);
	if (say != stderr)
		fclose(say);
	if (bulk_at && pthread_create(&bulk.thread, NULL, bulk_main, &bulk) == 0)
		bulk.running = true;
	/* Without a bulk endpoint, the main one serves the fetches too, and
	 * spins as the bulk one would. */
	uint64_t main_spin_us = bulk.running ? fault_spin_us : spin_us;
	char sz[32], spins[128];
	if (bulk.running)
		snprintf(spins, sizeof(spins), "spinning %llu us after a bulk request and %llu us after a fault's, bulk "
			 "endpoint on port %u", (unsigned long long)spin_us, (unsigned long long)fault_spin_us, bulk_at);
	else
		snprintf(spins, sizeof(spins), "spinning %llu us after a request, %s", (unsigned long long)spin_us,
			 bulk_at ? "its bulk endpoint not served (no thread)" : "no bulk endpoint");
	fprintf(stderr, "cxlcr-memd %s: serving %s at %s (%s), pid %d, incarnation %llu, %s\n", name,
		cxlcr_format_size(size, sz, sizeof(sz)), me.address, f.provider, (int)getpid(),
		(unsigned long long)me.incarnation, spins);
	uint64_t releases = ~0ull, next_check = 0, next_beat = 0;
	while (!stopping) {
		serve_turn(&f, main_spin_us);
		uint64_t now = cxlcr_mono_ns();
		/* Alive: the hosts watch the counter (watch.c). */
		if (now >= next_beat) {
			tier_beat(&pool, (uint32_t)index);
			next_beat = now + (uint64_t)id.beat_period_ms * 1000000ull;
		}
		if (now < next_check)
			continue;
		next_check = now + 1000000000ull;
		if (!still_ours(&pool, (uint32_t)index, me.incarnation)) {
			fprintf(stderr, "cxlcr-memd %s: its entry in the tier table is no longer its own; it stops\n",
				name);
			break;
		}
		/* Stale extents are cleared by the next allocation, or here. */
		tier_extents_reap(&pool);
		uint64_t r = 0;
		struct tier_table t;
		if (table_open(&pool, false, &t) == 0) {
			cxlcr_refresh(&t.header->releases, sizeof(uint64_t));
			r = t.header->releases;
			table_close(&t);
		}
		if (r != releases) {
			give_back(&pool, &f, (uint32_t)index, me.incarnation);
			releases = r;
		}
	}
	tier_server_unregister(&pool, (uint32_t)index, me.incarnation);
	fprintf(stderr, "cxlcr-memd %s: stopped%s\n", name, stopping ? " (signal)" : "");
	bulk.stop = 1;
	if (bulk.running)
		pthread_join(bulk.thread, NULL);
	if (bulk_at)
		fab_close(&bulk.f); /* before the memory it registered goes */
	fab_close(&f);
	cxlcr_pool_close(&pool);
	return 0;
}
