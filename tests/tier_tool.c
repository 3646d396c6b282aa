/*
 * The cold tier's test tool (tests/t_tier.sh, bench/tier.sh), on the pool
 * of $CXLCR_POOL:
 *
 *   tier_tool rma                  a scratch extent on memory server 0:
 *                                  1 MiB written by RMA and read back equal
 *   tier_tool verify SERVICE PID   every page of SERVICE's newest snapshot,
 *                                  read through tier_read_page(), against
 *                                  the heap of process PID (stopped); prints
 *                                  "hot H cold C zero Z differ DH DC DZ" (the
 *                                  pages of each tier that differ: hot ones
 *                                  may have been written since), exit 1 if
 *                                  a cold or zero page differs
 *   tier_tool first-cold SERVICE   the index of its first cold page
 *   tier_tool read SERVICE PAGE    reads one page (exit 1 with one line)
 *   tier_tool corrupt SERVICE PAGE flips a byte of the page's cold copy on
 *                                  its server (what a faulty server does)
 *   tier_tool time SERVICE N       N reads of cold pages, one at a time:
 *                                  p50 and p99 in microseconds
 *   tier_tool rtt IP PORT N        N Redis PINGs on one connection, one at
 *                                  a time: p50 and p99 (for scale)
 *   tier_tool hold SERVICE         borrows SERVICE's newest snapshot as a
 *                                  child would, says "held", returns it at
 *                                  the end of its standard input
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/util.h"
#include "../tier/internal.h"
#include "../tier/tier.h"

#define PAGE 4096u

static struct cxlcr_pool pool;

static int die(const char *what)
{
	fprintf(stderr, "tier_tool: %s: %s\n", what, cxlcr_last_error());
	return 1;
}

static int rma(void)
{
	struct cxlcr_region r;
	struct cxlcr_tier_extent e;
	struct conn c, b;
	uint32_t server;
	size_t len = 1u << 20;
	if (cxlcr_region_alloc(&pool, CXLCR_KIND_TIER, "tier.rma-test", 1, &r) < 0)
		return die("scratch region");
	int rc = 1;
	if (tier_extent_alloc(&pool, len, r.generation, &server, &e) < 0 || conn_open(&pool, server, 2 * len, false, &c) < 0) {
		rc = die("extent");
		goto out;
	}
	if (conn_open(&pool, server, len, true, &b) < 0) {
		rc = die("bulk endpoint");
		conn_close(&c);
		goto out;
	}
	/* Written through the main endpoint, read back through it and
	 * through the bulk one: the same memory. */
	uint8_t *buf = c.fab.buf;
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + (i >> 12));
	if (conn_rma(&c, true, 0, len, e.offset) < 0 || conn_rma(&c, false, len, len, e.offset) < 0 ||
	    conn_rma(&b, false, 0, len, e.offset) < 0) {
		rc = die("rma");
	} else if (memcmp(buf, buf + len, len) != 0 || memcmp(buf, b.fab.buf, len) != 0) {
		fprintf(stderr, "tier_tool: what was read back differs from what was written\n");
	} else {
		char bulk[64] = "(it has no bulk endpoint)";
		if (b.bulk)
			snprintf(bulk, sizeof(bulk), "and through its bulk endpoint (port %u)", b.server.bulk_port);
		printf("rma ok: %zu bytes written to %s at %llu and read back equal, %s\n", len, c.server.name,
		       (unsigned long long)e.offset, bulk);
		rc = 0;
	}
	conn_close(&b);
	conn_close(&c);
out:
	cxlcr_region_free(&pool, r.generation);
	return rc;
}

/* The newest snapshot of service, borrowed and open. */
static int open_newest(const char *service, struct cxlcr_borrow *b, struct cxlcr_snapshot *s)
{
	if (cxlcr_catalog_borrow(&pool, service, NULL, b) < 0)
		return -1;
	if (cxlcr_snapshot_open(&pool, b->snapshot_generation, s) < 0) {
		cxlcr_catalog_return(&pool, b);
		return -1;
	}
	return 0;
}

static int verify(struct tier_reader *r, const struct cxlcr_snapshot *s, int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "tier_tool: %s: %s\n", path, strerror(errno));
		return 1;
	}
	static uint8_t a[PAGE], h[PAGE];
	uint64_t count[3] = { 0 }, differ[3] = { 0 };
	for (uint64_t i = 0; i < s->header.page_count; i++) {
		uint32_t tier;
		uint64_t off;
		cxlcr_snapshot_page_offset(s, i, &tier, &off);
		if (tier_read_page(r, i, a) < 0) {
			close(fd);
			return die("read");
		}
		if (pread(fd, h, PAGE, (off_t)(s->header.heap_address + i * PAGE)) != PAGE)
			memset(h, 0, PAGE); /* beyond what the heap maps now */
		count[tier % 3]++;
		if (memcmp(a, h, PAGE) && differ[tier % 3]++ < 5)
			fprintf(stderr, "tier_tool: page %llu (tier %u) differs from the heap\n", (unsigned long long)i,
				tier);
	}
	close(fd);
	printf("hot %llu cold %llu zero %llu differ %llu %llu %llu\n", (unsigned long long)count[CXLCR_TIER_CXL],
	       (unsigned long long)count[CXLCR_TIER_COLD], (unsigned long long)count[CXLCR_TIER_ZERO],
	       (unsigned long long)differ[CXLCR_TIER_CXL], (unsigned long long)differ[CXLCR_TIER_COLD],
	       (unsigned long long)differ[CXLCR_TIER_ZERO]);
	return differ[CXLCR_TIER_COLD] || differ[CXLCR_TIER_ZERO] ? 1 : 0;
}

static uint64_t first_cold(const struct cxlcr_snapshot *s)
{
	for (uint64_t i = 0; i < s->header.page_count; i++) {
		uint32_t tier;
		uint64_t off;
		cxlcr_snapshot_page_offset(s, i, &tier, &off);
		if (tier == CXLCR_TIER_COLD)
			return i;
	}
	return ~0ull;
}

static int corrupt(const struct cxlcr_snapshot *s, uint64_t page)
{
	uint32_t tier;
	uint64_t off;
	if (cxlcr_snapshot_page_offset(s, page, &tier, &off) < 0 || tier != CXLCR_TIER_COLD) {
		fprintf(stderr, "tier_tool: page %llu is not cold\n", (unsigned long long)page);
		return 1;
	}
	const struct cxlcr_snapshot_header *h = (const void *)s->base;
	struct conn c;
	if (conn_open(&pool, h->cold.server, PAGE, false, &c) < 0 || conn_rma(&c, false, 0, PAGE, off) < 0)
		return die("corrupt");
	((uint8_t *)c.fab.buf)[123] ^= 0x5a;
	int rc = conn_rma(&c, true, 0, PAGE, off) < 0 ? die("corrupt") : 0;
	conn_close(&c);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Prints the p50 and p99 of n samples (sorted in place). */
static void percentiles(const char *what, uint64_t *ns, uint64_t n)
{
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("%s %llu p50_us %.1f p99_us %.1f\n", what, (unsigned long long)n, (double)ns[n / 2] / 1e3,
	       (double)ns[n * 99 / 100] / 1e3);
}

static int timing(struct tier_reader *r, const struct cxlcr_snapshot *s, uint64_t n)
{
	uint64_t *cold = malloc(s->header.page_count * sizeof(uint64_t)), k = 0;
	uint64_t *ns = malloc(n * sizeof(uint64_t));
	static uint8_t buf[PAGE];
	for (uint64_t i = 0; i < s->header.page_count; i++) {
		uint32_t tier;
		uint64_t off;
		cxlcr_snapshot_page_offset(s, i, &tier, &off);
		if (tier == CXLCR_TIER_COLD)
			cold[k++] = i;
	}
	if (!k) {
		fprintf(stderr, "tier_tool: the snapshot has no cold page\n");
		return 1;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = cxlcr_mono_ns();
		if (tier_read_page(r, cold[(i * 7919) % k], buf) < 0)
			return die("read");
		ns[i] = cxlcr_mono_ns() - t0;
	}
	percentiles("cold page reads", ns, n);
	free(cold);
	free(ns);
	return 0;
}

static int rtt(const char *ip, int port, uint64_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "tier_tool: cannot connect to %s:%d: %s\n", ip, port, strerror(errno));
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	uint64_t *ns = malloc(n * sizeof(uint64_t));
	char buf[64];
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = cxlcr_mono_ns();
		if (write(fd, "PING\r\n", 6) != 6 || read(fd, buf, sizeof(buf)) < 7) {
			fprintf(stderr, "tier_tool: redis at %s:%d: no PONG\n", ip, port);
			return 1;
		}
		ns[i] = cxlcr_mono_ns() - t0;
	}
	close(fd);
	percentiles("redis round trips", ns, n);
	free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: tier_tool rma | verify SERVICE PID | first-cold SERVICE | read SERVICE PAGE | "
				"corrupt SERVICE PAGE | time SERVICE N\n");
		return 2;
	}
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return die("pool");
	if (!strcmp(argv[1], "rma"))
		return rma();
	if (!strcmp(argv[1], "rtt") && argc == 5)
		return rtt(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 0));
	if (argc < 3)
		return 2;
	struct cxlcr_borrow b;
	struct cxlcr_snapshot s;
	if (open_newest(argv[2], &b, &s) < 0)
		return die(argv[2]);
	uint64_t arg = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
	int rc = 0;
	if (!strcmp(argv[1], "hold")) {
		printf("held %llu\n", (unsigned long long)b.snapshot_generation);
		fflush(stdout);
		char c;
		while (read(0, &c, 1) > 0)
			;
	} else if (!strcmp(argv[1], "first-cold")) {
		uint64_t i = first_cold(&s);
		if (i == ~0ull)
			rc = 1;
		else
			printf("%llu\n", (unsigned long long)i);
	} else if (!strcmp(argv[1], "corrupt")) {
		rc = corrupt(&s, arg);
	} else {
		struct tier_reader *r;
		if (tier_reader_open(&s, &r) < 0) {
			rc = die("open");
		} else {
			static uint8_t buf[PAGE];
			if (!strcmp(argv[1], "verify"))
				rc = verify(r, &s, (int)arg);
			else if (!strcmp(argv[1], "read"))
				rc = tier_read_page(r, arg, buf) < 0 ? die("read") : 0;
			else if (!strcmp(argv[1], "time"))
				rc = timing(r, &s, arg ? arg : 10000);
			else
				rc = 2;
			tier_reader_close(r);
		}
	}
	cxlcr_snapshot_close(&s);
	cxlcr_catalog_return(&pool, &b);
	return rc;
}
