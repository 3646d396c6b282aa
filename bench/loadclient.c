/*
 * loadclient: a paced, one-request-at-a-time load client for Redis (RESP)
 * and Memcached (text protocol) that measures how a service behaves while
 * it is migrated: the longest interval between two consecutive successful
 * responses (the "response gap"), the request rate before and after, the
 * errors and reconnects, and (for SETs) every acknowledged write.
 *
 *   loadclient --host ADDR --port PORT [--proto redis|memcached]
 *              [--mode get|set|mix] [--rate 10000] [--keys 100000]
 *              [--key-prefix kv:str:] [--value-size 100]
 *              [--duration S] [--stop-file F] [--mark-file F]
 *              [--csv F] [--ack-log F] [--json F] [--rate-window S]
 *              [--timeout-ms 5000] [--rto-min-us N] [--seed N]
 *              [--version-start N] [--quiet]
 *
 * One TCP connection, one outstanding request. Requests are paced to
 * --rate per second on CLOCK_MONOTONIC: request i is due at start + i/rate;
 * when the client falls behind by more than 2 ms (the service stalled) it
 * does not burst to catch up, the schedule restarts from now. On any error
 * (connection reset or closed, no response within --timeout-ms, a protocol
 * error) the connection is reset (nothing more of it is sent) and opened
 * again, retried every 10 ms;
 * that time is part of the gap. --rto-min-us sets the socket's minimum
 * retransmission timeout (TCP_RTO_MIN_US, Linux 6.15 and later; the
 * kernel's default is 200 ms): how soon a request the network dropped is
 * sent again.
 *
 * Keys are PREFIX + N for N uniform in [0, --keys). The default prefix
 * matches what tests/lib/kvclient.py fill writes (kv:str:N). --mode get
 * sends GETs, set SETs, mix a 50/50 mix. A SET writes the value
 * "KEY|VERSION|" padded with '.' to --value-size bytes, VERSION from a
 * counter that goes up by one with every SET (it starts at --version-start,
 * default the wall clock in microseconds, so later runs write higher
 * versions). A GET of a key this run has written must return the last
 * acknowledged version (one client, one request at a time): otherwise it
 * counts as a stale read. A GET answer that does not start with the key
 * counts as a bad value.
 *
 * Marks: the migration window(s). Another process either sends SIGUSR1
 * when a migration starts and SIGUSR2 when it has ended, or writes lines
 * "start NS" / "end NS" (CLOCK_MONOTONIC nanoseconds, e.g. Python's
 * time.monotonic_ns()) into --mark-file, read when the run ends. For every
 * window [start, end] the report gives the longest interval between two
 * consecutive successful responses that overlaps it, and the rates in the
 * --rate-window seconds (default: all the time up to the neighbouring
 * window) before start and after end (after: from the first response that
 * ends the window's gap, so that the gap is not counted twice), with the
 * median and 99th percentile latency in the same spans. A gap still open when
 * the run ended is reported up to the end, with "gap_open": true.
 *
 * The run ends after --duration seconds (0: never), when --stop-file
 * exists (checked every 10 ms), or on SIGINT/SIGTERM. It then prints one
 * JSON object (to --json F, else stdout), writes the timeline to --csv
 * (t_s,latency_ms,op,status: t is the response's time in seconds since
 * the client started; status ok, miss, error, timeout, closed, reconnect)
 * and flushes --ack-log: one line "KEY VERSION" per acknowledged SET, in
 * the order of the acknowledgements, and "? KEY VERSION" for a SET that was
 * sent but not answered when its connection failed (it may or may not have
 * been applied).
 *
 * Exit status: 0 when the run completed (errors are reported, not fatal),
 * 1 when it could not start (bad options, no first connection within
 * --timeout-ms), 2 on a bad command line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_MARKS 4096
#define RETRY_NS (10 * 1000000LL)      /* between reconnect attempts */
#define STOP_CHECK_NS (10 * 1000000LL) /* how often the stop file is looked for */
#define KEY_MAX 256
/* Linux 6.15's per-socket minimum retransmission timeout (linux/tcp.h). */
#ifdef TCP_RTO_MIN_US
#define LC_TCP_RTO_MIN_US TCP_RTO_MIN_US
#else
#define LC_TCP_RTO_MIN_US 45
#endif
#define CATCH_UP_NS (2 * 1000000LL)    /* later than this: no catching up */

enum proto { P_REDIS, P_MEMCACHED };
enum mode { M_GET, M_SET, M_MIX };
enum op { OP_GET, OP_SET, OP_NONE };
enum status { S_OK, S_MISS, S_ERROR, S_TIMEOUT, S_CLOSED, S_RECONNECT };
static const char *const STATUS_NAME[] = { "ok", "miss", "error", "timeout", "closed", "reconnect" };
static const char *const OP_NAME[] = { "get", "set", "-" };

/* One event of the timeline: a response (or a failure, or a reconnect). */
struct event {
	int64_t t;        /* ns since the client started: when it happened */
	int32_t lat_us;   /* request to response; for a reconnect its duration */
	uint8_t op;       /* enum op */
	uint8_t status;   /* enum status */
};

static struct {
	const char *host, *port;
	enum proto proto;
	enum mode mode;
	double rate, duration, rate_window;
	uint64_t keys;
	const char *prefix;
	size_t value_size;
	const char *stop_file, *mark_file, *csv, *ack_log, *json;
	int timeout_ms;
	int rto_min_us;
	uint64_t seed;
	uint64_t version_start;
	bool version_given;
	bool quiet;
} opt = {
	.host = "127.0.0.1", .proto = P_REDIS, .mode = M_GET, .rate = 10000, .keys = 100000,
	.prefix = "kv:str:", .value_size = 100, .timeout_ms = 5000, .seed = 1,
};

static volatile sig_atomic_t stop_requested;
/* Marks from signals: the handler stores the time, main reads it. */
static int64_t sig_marks[2][MAX_MARKS];
static volatile sig_atomic_t sig_mark_count[2];

static int64_t t_origin; /* CLOCK_MONOTONIC ns when the client started */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("loadclient: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = stop_requested ? 2 : 1;
}

static void on_mark(int sig)
{
	int which = sig == SIGUSR1 ? 0 : 1;
	int n = sig_mark_count[which];
	if (n < MAX_MARKS) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sig_marks[which][n] = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		sig_mark_count[which] = n + 1;
	}
}

/* ------------------------------------------------------------ random -- */

static uint64_t rng_state;
static uint64_t rng_next(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* --------------------------------------------------------- timeline -- */

static struct event *events;
static size_t n_events, cap_events;

static void record(int64_t t_abs, int64_t lat_ns, enum op op, enum status st)
{
	if (n_events == cap_events) {
		cap_events = cap_events ? cap_events * 2 : 1 << 16;
		events = realloc(events, cap_events * sizeof(*events));
		if (!events)
			fatal("out of memory for the timeline");
	}
	int64_t lat_us = lat_ns / 1000;
	if (lat_us > INT32_MAX)
		lat_us = INT32_MAX;
	events[n_events++] = (struct event){ t_abs - t_origin, (int32_t)lat_us, (uint8_t)op, (uint8_t)st };
}

/* ------------------------------------------------------- connection -- */

static struct addrinfo *target;
static int rto_min_effective; /* TCP_RTO_MIN_US of the connection (0: unknown) */

static void resolve(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int rc = getaddrinfo(opt.host, opt.port, &hints, &target);
	if (rc)
		fatal("%s:%s: %s", opt.host, opt.port, gai_strerror(rc));
}

/* A connected non-blocking socket, or -1 (errno set) within timeout_ms. */
static int connect_once(int timeout_ms)
{
	int fd = socket(target->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (opt.rto_min_us > 0 &&
	    setsockopt(fd, IPPROTO_TCP, LC_TCP_RTO_MIN_US, &opt.rto_min_us, sizeof(opt.rto_min_us)) < 0)
		fatal("--rto-min-us: this kernel has no TCP_RTO_MIN_US (6.15 or later): %s", strerror(errno));
	if (connect(fd, target->ai_addr, target->ai_addrlen) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000LL;
	for (;;) {
		int64_t left = (deadline - mono_ns()) / 1000000LL;
		if (left < 0)
			left = 0;
		int rc = poll(&p, 1, (int)left);
		if (rc > 0)
			break;
		if (rc == 0) {
			close(fd);
			errno = ETIMEDOUT;
			return -1;
		}
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (stop_requested) {
			close(fd);
			errno = EINTR;
			return -1;
		}
	}
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		close(fd);
		errno = err ? err : EIO;
		return -1;
	}
	len = sizeof(rto_min_effective);
	if (getsockopt(fd, IPPROTO_TCP, LC_TCP_RTO_MIN_US, &rto_min_effective, &len) < 0)
		rto_min_effective = 0;
	return fd;
}

/* --------------------------------------------------------- requests -- */

static char *req;       /* the request being sent */
static size_t req_len, req_cap;
static char *in;        /* bytes received, not yet consumed */
static size_t in_len, in_cap;
static char *value_buf; /* a SET's value */

static void req_put(const void *p, size_t n)
{
	if (req_len + n > req_cap) {
		while (req_len + n > req_cap)
			req_cap = req_cap ? req_cap * 2 : 4096;
		req = realloc(req, req_cap);
		if (!req)
			fatal("out of memory");
	}
	memcpy(req + req_len, p, n);
	req_len += n;
}

static void req_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void req_printf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		fatal("request line too long");
	req_put(buf, (size_t)n);
}

/* The value of a SET: "KEY|VERSION|" padded with '.'. */
static size_t make_value(const char *key, uint64_t version)
{
	int n = snprintf(value_buf, opt.value_size + 1, "%s|%" PRIu64 "|", key, version);
	size_t len = (size_t)n < opt.value_size ? opt.value_size : (size_t)n;
	if ((size_t)n < len)
		memset(value_buf + n, '.', len - (size_t)n);
	return len;
}

static void build_request(enum op op, const char *key, uint64_t version)
{
	size_t klen = strlen(key);
	req_len = 0;
	if (opt.proto == P_REDIS) {
		if (op == OP_GET) {
			req_printf("*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", klen, key);
		} else {
			size_t vlen = make_value(key, version);
			req_printf("*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n", klen, key, vlen);
			req_put(value_buf, vlen);
			req_put("\r\n", 2);
		}
	} else {
		if (op == OP_GET) {
			req_printf("get %s\r\n", key);
		} else {
			size_t vlen = make_value(key, version);
			req_printf("set %s 0 0 %zu\r\n", key, vlen);
			req_put(value_buf, vlen);
			req_put("\r\n", 2);
		}
	}
}

/* ---------------------------------------------------------- replies -- */

enum parse { NEED_MORE, REPLY_OK, REPLY_MISS, REPLY_ERROR, REPLY_BAD };

/* Where the line starting at `from` ends (its "\r\n"), or NULL. */
static const char *line_end(size_t from)
{
	if (from >= in_len)
		return NULL;
	const char *p = memmem(in + from, in_len - from, "\r\n", 2);
	return p;
}

/* Parses one reply at the start of `in`. For a GET hit, *val and *vlen are
 * the value. *used: bytes the reply took. */
static enum parse parse_reply(enum op op, const char **val, size_t *vlen, size_t *used)
{
	const char *e = line_end(0);
	if (!e)
		return in_len > 65536 ? REPLY_BAD : NEED_MORE;
	size_t line = (size_t)(e - in) + 2;
	*val = NULL;
	*vlen = 0;
	if (opt.proto == P_REDIS) {
		switch (in[0]) {
		case '+':
			*used = line;
			return op == OP_SET ? REPLY_OK : REPLY_BAD;
		case '-':
			*used = line;
			return REPLY_ERROR;
		case '$': {
			char *end;
			long long n = strtoll(in + 1, &end, 10);
			if (end != e)
				return REPLY_BAD;
			if (n < 0) {
				*used = line;
				return REPLY_MISS;
			}
			if (in_len < line + (size_t)n + 2)
				return NEED_MORE;
			if (memcmp(in + line + n, "\r\n", 2))
				return REPLY_BAD;
			*val = in + line;
			*vlen = (size_t)n;
			*used = line + (size_t)n + 2;
			return op == OP_GET ? REPLY_OK : REPLY_BAD;
		}
		default:
			return REPLY_BAD;
		}
	}
	/* memcached */
	size_t ll = line - 2;
	if (op == OP_SET) {
		*used = line;
		if (ll == 6 && !memcmp(in, "STORED", 6))
			return REPLY_OK;
		if ((ll >= 5 && !memcmp(in, "ERROR", 5)) || (ll >= 12 && !memcmp(in, "CLIENT_ERROR", 12)) ||
		    (ll >= 12 && !memcmp(in, "SERVER_ERROR", 12)) || (ll == 10 && !memcmp(in, "NOT_STORED", 10)))
			return REPLY_ERROR;
		return REPLY_BAD;
	}
	if (ll == 3 && !memcmp(in, "END", 3)) {
		*used = line;
		return REPLY_MISS;
	}
	if (ll >= 6 && !memcmp(in, "VALUE ", 6)) {
		/* VALUE key flags bytes */
		const char *p = e;
		while (p > in && p[-1] != ' ')
			p--;
		char *end;
		unsigned long long n = strtoull(p, &end, 10);
		if (end != e)
			return REPLY_BAD;
		if (in_len < line + n + 2 + 5)
			return NEED_MORE;
		if (memcmp(in + line + n, "\r\nEND\r\n", 7))
			return REPLY_BAD;
		*val = in + line;
		*vlen = (size_t)n;
		*used = line + n + 7;
		return REPLY_OK;
	}
	*used = line;
	if ((ll >= 5 && !memcmp(in, "ERROR", 5)) || (ll >= 12 && !memcmp(in, "CLIENT_ERROR", 12)) ||
	    (ll >= 12 && !memcmp(in, "SERVER_ERROR", 12)))
		return REPLY_ERROR;
	return REPLY_BAD;
}

/* ---------------------------------------------------------- the run -- */

static struct {
	uint64_t requests, responses, hits, misses, sets_acked;
	uint64_t errors, error_replies, bad_replies, timeouts, closed, reconnects, connect_failures;
	uint64_t stale_reads, bad_values;
} st;

static uint64_t *acked;     /* per key: last acknowledged version, 0 none */
static FILE *ack_file;

static void check_value(uint64_t k, const char *key, const char *val, size_t vlen)
{
	size_t klen = strlen(key);
	if (vlen < klen + 1 || memcmp(val, key, klen)) {
		st.bad_values++;
		return;
	}
	char sep = val[klen];
	if (sep == '=') /* written by kvclient.py fill */
		return;
	if (sep != '|') {
		st.bad_values++;
		return;
	}
	uint64_t v = 0;
	size_t i = klen + 1;
	for (; i < vlen && val[i] >= '0' && val[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(val[i] - '0');
	if (i == vlen || val[i] != '|') {
		st.bad_values++;
		return;
	}
	if (acked[k] && v != acked[k])
		st.stale_reads++;
}

static int sock = -1;

/* A connection given up on is reset, not closed: after close() the kernel
 * would go on sending what the service has not acknowledged yet, and a
 * SET written off as unanswered could reach the service seconds later,
 * after a newer SET of the same key made on the next connection (the
 * service restored meanwhile), and overwrite it. Reset, nothing more of it
 * is sent. */
static void drop_connection(void)
{
	if (sock >= 0) {
		struct linger abort_on_close = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(sock, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
		close(sock);
	}
	sock = -1;
	in_len = 0;
}

/* Connects again, retrying every RETRY_NS until it works or the run
 * ends. Returns false if the run ended first. */
static bool reconnect(bool first)
{
	int64_t t0 = mono_ns();
	for (;;) {
		if (stop_requested)
			return false;
		int fd = connect_once(first ? opt.timeout_ms : 1000);
		if (fd >= 0) {
			sock = fd;
			if (!first) {
				st.reconnects++;
				int64_t t1 = mono_ns();
				record(t1, t1 - t0, OP_NONE, S_RECONNECT);
			}
			return true;
		}
		if (first)
			fatal("cannot connect to %s:%s: %s", opt.host, opt.port, strerror(errno));
		st.connect_failures++;
		struct timespec ts = { 0, RETRY_NS };
		nanosleep(&ts, NULL);
	}
}

/* Sends the request and waits for its reply. Returns its status. */
static enum status exchange(enum op op, uint64_t k, const char *key, int64_t *t_done)
{
	size_t off = 0;
	int64_t deadline = mono_ns() + (int64_t)opt.timeout_ms * 1000000LL;
	in_len = 0;
	for (;;) {
		struct pollfd p = { .fd = sock, .events = off < req_len ? POLLOUT | POLLIN : POLLIN };
		if (off < req_len) {
			ssize_t n = send(sock, req + off, req_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				off += (size_t)n;
				continue;
			}
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				*t_done = mono_ns();
				return S_CLOSED;
			}
		}
		int64_t now = mono_ns();
		if (now >= deadline) {
			*t_done = now;
			return S_TIMEOUT;
		}
		int wait = (int)((deadline - now + 999999) / 1000000);
		if (wait > 10)
			wait = 10; /* look at the stop flag now and then */
		int rc = poll(&p, 1, wait);
		if (rc < 0 && errno != EINTR) {
			*t_done = mono_ns();
			return S_CLOSED;
		}
		if (stop_requested == 2) { /* a second signal: leave now */
			*t_done = mono_ns();
			return S_CLOSED;
		}
		if (rc <= 0 || !(p.revents & (POLLIN | POLLERR | POLLHUP)))
			continue;
		if (in_cap - in_len < 65536) {
			in_cap = in_cap ? in_cap * 2 : 1 << 17;
			in = realloc(in, in_cap);
			if (!in)
				fatal("out of memory");
		}
		ssize_t n = recv(sock, in + in_len, in_cap - in_len, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			*t_done = mono_ns();
			return S_CLOSED;
		}
		if (n < 0)
			continue;
		in_len += (size_t)n;
		const char *val;
		size_t vlen, used;
		enum parse r = parse_reply(op, &val, &vlen, &used);
		if (r == NEED_MORE)
			continue;
		*t_done = mono_ns();
		if (r == REPLY_BAD || used != in_len) {
			st.bad_replies++;
			return S_CLOSED; /* out of step with the server: start again */
		}
		if (r == REPLY_ERROR) {
			st.error_replies++;
			return S_ERROR;
		}
		if (r == REPLY_MISS)
			return S_MISS;
		if (op == OP_GET)
			check_value(k, key, val, vlen);
		return S_OK;
	}
}

/* ------------------------------------------------------------ report -- */

struct mark {
	int64_t start, end; /* relative to t_origin */
};
static struct mark marks[MAX_MARKS];
static size_t n_marks;

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Pairs starts and ends in time order: each start with the first end
 * after it. */
static void add_marks(int64_t *starts, size_t ns, int64_t *ends, size_t ne)
{
	qsort(starts, ns, sizeof(*starts), cmp_i64);
	qsort(ends, ne, sizeof(*ends), cmp_i64);
	size_t j = 0;
	for (size_t i = 0; i < ns && n_marks < MAX_MARKS; i++) {
		while (j < ne && ends[j] < starts[i])
			j++;
		if (j == ne)
			break;
		if (i + 1 < ns && starts[i + 1] <= ends[j])
			continue; /* a start without its own end: the later one counts */
		marks[n_marks++] = (struct mark){ starts[i] - t_origin, ends[j] - t_origin };
		j++;
	}
}

static void read_marks(void)
{
	static int64_t starts[MAX_MARKS], ends[MAX_MARKS];
	size_t ns = 0, ne = 0;
	for (int i = 0; i < sig_mark_count[0]; i++)
		starts[ns++] = sig_marks[0][i];
	for (int i = 0; i < sig_mark_count[1]; i++)
		ends[ne++] = sig_marks[1][i];
	if (opt.mark_file) {
		FILE *f = fopen(opt.mark_file, "r");
		if (f) {
			char word[32];
			long long ns_val;
			while (fscanf(f, "%31s %lld", word, &ns_val) == 2) {
				if (!strcmp(word, "start") && ns < MAX_MARKS)
					starts[ns++] = ns_val;
				else if (!strcmp(word, "end") && ne < MAX_MARKS)
					ends[ne++] = ns_val;
			}
			fclose(f);
		} else if (errno != ENOENT) {
			fprintf(stderr, "loadclient: %s: %s\n", opt.mark_file, strerror(errno));
		}
	}
	add_marks(starts, ns, ends, ne);
}

static bool success(const struct event *e)
{
	return e->status == S_OK || e->status == S_MISS;
}

/* Successful responses in [a, b). */
static uint64_t count_ok(int64_t a, int64_t b)
{
	uint64_t n = 0;
	for (size_t i = 0; i < n_events; i++)
		if (events[i].t >= a && events[i].t < b && success(&events[i]))
			n++;
	return n;
}

static uint64_t count_status(int64_t a, int64_t b, enum status s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < n_events; i++)
		if (events[i].t >= a && events[i].t < b && events[i].status == s)
			n++;
	return n;
}

static double rate_in(int64_t a, int64_t b)
{
	return b > a ? (double)count_ok(a, b) / ((double)(b - a) / 1e9) : 0.0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return x < y ? -1 : x > y;
}

/* Latency percentile p (0..1, in ms) of the successful responses in
 * [a, b); 0 if there is none. */
static double latency_in(int64_t a, int64_t b, double p)
{
	static int32_t *buf;
	static size_t cap;
	size_t n = 0;
	for (size_t i = 0; i < n_events; i++) {
		if (events[i].t < a || events[i].t >= b || !success(&events[i]))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			int32_t *nb = realloc(buf, cap * sizeof(*buf));
			if (!nb)
				return 0;
			buf = nb;
		}
		buf[n++] = events[i].lat_us;
	}
	if (!n)
		return 0;
	qsort(buf, n, sizeof(*buf), cmp_i32);
	return buf[(size_t)((double)(n - 1) * p)] / 1000.0;
}

/* The longest interval between consecutive successful responses that
 * overlaps [a, b]; *from and *to its ends. The run's start and end count as
 * responses, so a window with no response at all gives the whole span;
 * *open says the interval ends with the run, not with a response (the gap
 * went on for at least that long). */
static int64_t gap_over(int64_t a, int64_t b, int64_t t_end, int64_t *from, int64_t *to, bool *open)
{
	int64_t prev = 0, best = -1;
	*from = *to = 0;
	*open = false;
	for (size_t i = 0; i <= n_events; i++) {
		int64_t t;
		if (i < n_events) {
			if (!success(&events[i]))
				continue;
			t = events[i].t;
		} else {
			t = t_end;
		}
		if (t >= a && prev <= b && t - prev > best) {
			best = t - prev;
			*from = prev;
			*to = t;
			*open = i == n_events;
		}
		prev = t;
	}
	return best;
}

static void write_csv(void)
{
	FILE *f = fopen(opt.csv, "w");
	if (!f) {
		fprintf(stderr, "loadclient: %s: %s\n", opt.csv, strerror(errno));
		return;
	}
	static char buf[1 << 20];
	setvbuf(f, buf, _IOFBF, sizeof(buf));
	fputs("t_s,latency_ms,op,status\n", f);
	for (size_t i = 0; i < n_events; i++)
		fprintf(f, "%.6f,%.3f,%s,%s\n", (double)events[i].t / 1e9, events[i].lat_us / 1000.0,
			OP_NAME[events[i].op], STATUS_NAME[events[i].status]);
	if (fclose(f))
		fprintf(stderr, "loadclient: %s: %s\n", opt.csv, strerror(errno));
}

static void report(int64_t t_end, double wall_s)
{
	FILE *out = stdout;
	if (opt.json && !(out = fopen(opt.json, "w")))
		fatal("%s: %s", opt.json, strerror(errno));
	/* Latency percentiles of the successful responses. */
	int32_t *lat = malloc((n_events + 1) * sizeof(*lat));
	size_t n_lat = 0;
	int64_t max_gap_from = 0, max_gap_to = 0;
	bool max_gap_open;
	int64_t max_gap = gap_over(0, t_end, t_end, &max_gap_from, &max_gap_to, &max_gap_open);
	for (size_t i = 0; lat && i < n_events; i++)
		if (success(&events[i]))
			lat[n_lat++] = events[i].lat_us;
	if (lat)
		qsort(lat, n_lat, sizeof(*lat), cmp_i32);
#define PCT(p) (n_lat ? lat[(size_t)((double)(n_lat - 1) * (p))] / 1000.0 : 0.0)
	fprintf(out, "{\"proto\": \"%s\", \"mode\": \"%s\", \"host\": \"%s\", \"port\": %s,\n",
		opt.proto == P_REDIS ? "redis" : "memcached",
		opt.mode == M_GET ? "get" : opt.mode == M_SET ? "set" : "mix", opt.host, opt.port);
	fprintf(out, " \"rate_target\": %.0f, \"keys\": %" PRIu64 ", \"value_size\": %zu, \"duration_s\": %.3f,"
		     " \"rto_min_us\": %d,\n",
		opt.rate, opt.keys, opt.value_size, wall_s, rto_min_effective);
	fprintf(out, " \"requests\": %" PRIu64 ", \"responses\": %" PRIu64 ", \"hits\": %" PRIu64
		     ", \"misses\": %" PRIu64 ", \"sets_acked\": %" PRIu64 ",\n",
		st.requests, st.responses, st.hits, st.misses, st.sets_acked);
	fprintf(out, " \"errors\": %" PRIu64 ", \"error_replies\": %" PRIu64 ", \"bad_replies\": %" PRIu64
		     ", \"timeouts\": %" PRIu64 ", \"closed\": %" PRIu64 ", \"reconnects\": %" PRIu64
		     ", \"connect_failures\": %" PRIu64 ",\n",
		st.errors, st.error_replies, st.bad_replies, st.timeouts, st.closed, st.reconnects,
		st.connect_failures);
	fprintf(out, " \"stale_reads\": %" PRIu64 ", \"bad_values\": %" PRIu64 ",\n", st.stale_reads,
		st.bad_values);
	fprintf(out, " \"rate\": %.1f, \"latency_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f},\n",
		wall_s > 0 ? (double)st.responses / wall_s : 0.0, PCT(0.5), PCT(0.99), PCT(0.999), PCT(1.0));
	fprintf(out, " \"max_gap_ms\": %.3f, \"max_gap_at_s\": %.3f, \"max_gap_open\": %s,\n",
		(double)max_gap / 1e6, (double)max_gap_from / 1e9, max_gap_open ? "true" : "false");
	free(lat);

	/* The windows. */
	int64_t w = opt.rate_window > 0 ? (int64_t)(opt.rate_window * 1e9) : INT64_MAX / 4;
	double worst_gap = -1, first_before = 0, last_after = 0;
	fprintf(out, " \"windows\": [");
	for (size_t i = 0; i < n_marks; i++) {
		int64_t a = marks[i].start, b = marks[i].end;
		int64_t lo = i ? marks[i - 1].end : 0, hi = i + 1 < n_marks ? marks[i + 1].start : t_end;
		int64_t bl = a - w > lo ? a - w : lo, ah = b + w < hi ? b + w : hi;
		int64_t gf, gt;
		bool open;
		int64_t gap = gap_over(a, b, t_end, &gf, &gt, &open);
		/* After: from the first response once the window (and its gap)
		 * is over; the gap itself is reported on its own. */
		int64_t as = gt > b ? gt : b;
		double before = rate_in(bl, a), after = rate_in(as, ah > as ? ah : as);
		/* (and the latency percentiles in the same spans) */
		if ((double)gap / 1e6 > worst_gap)
			worst_gap = (double)gap / 1e6;
		if (i == 0)
			first_before = before;
		last_after = after;
		/* Errors, timeouts and reconnects from the last success before the
		 * window to the first after it. */
		int64_t ea = gf < a ? gf : a, eb = gt > b ? gt : b;
		uint64_t errs = count_status(ea, eb + 1, S_ERROR) + count_status(ea, eb + 1, S_TIMEOUT) +
				count_status(ea, eb + 1, S_CLOSED);
		int64_t ae = ah > as ? ah : as;
		fprintf(out,
			"%s\n  {\"start_s\": %.6f, \"end_s\": %.6f, \"window_ms\": %.3f, \"gap_ms\": %.3f, "
			"\"gap_open\": %s, \"gap_from_s\": %.6f, \"gap_to_s\": %.6f, \"rate_before\": %.1f, "
			"\"rate_after\": %.1f, "
			"\"p50_before_ms\": %.3f, \"p50_after_ms\": %.3f, \"p99_before_ms\": %.3f, "
			"\"p99_after_ms\": %.3f, \"errors\": %" PRIu64 ", \"reconnects\": %" PRIu64 "}",
			i ? "," : "", (double)a / 1e9, (double)b / 1e9, (double)(b - a) / 1e6, (double)gap / 1e6,
			open ? "true" : "false", (double)gf / 1e9, (double)gt / 1e9, before, after,
			latency_in(bl, a, 0.5),
			latency_in(as, ae, 0.5), latency_in(bl, a, 0.99), latency_in(as, ae, 0.99), errs,
			count_status(ea, eb + 1, S_RECONNECT));
	}
	fprintf(out, "%s],\n", n_marks ? "\n " : "");
	if (n_marks)
		fprintf(out, " \"migration_gap_ms\": %.3f, \"rate_before\": %.1f, \"rate_after\": %.1f, "
			     "\"rate_ratio\": %.4f}\n",
			worst_gap, first_before, last_after, first_before > 0 ? last_after / first_before : 0.0);
	else
		fprintf(out, " \"migration_gap_ms\": null, \"rate_before\": null, \"rate_after\": null, "
			     "\"rate_ratio\": null}\n");
	if (out != stdout && fclose(out))
		fatal("%s: %s", opt.json, strerror(errno));
	else if (out == stdout)
		fflush(stdout);
}

/* ----------------------------------------------------------- options -- */

static void usage(FILE *f)
{
	fputs("usage: loadclient --host ADDR --port PORT [--proto redis|memcached] [--mode get|set|mix]\n"
	      "                  [--rate N] [--keys N] [--key-prefix P] [--value-size N] [--duration S]\n"
	      "                  [--stop-file F] [--mark-file F] [--csv F] [--ack-log F] [--json F]\n"
	      "                  [--rate-window S] [--timeout-ms N] [--rto-min-us N] [--seed N]\n"
	      "                  [--version-start N] [--quiet]\n"
	      "  signals: SIGUSR1 = a migration starts, SIGUSR2 = it ended; SIGINT/SIGTERM end the run\n",
	      f);
}

static double num(const char *name, const char *s, double lo, double hi)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi)) {
		fprintf(stderr, "loadclient: --%s: bad value '%s'\n", name, s);
		exit(2);
	}
	return v;
}

static void parse_options(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "host", required_argument, 0, 'H' },    { "port", required_argument, 0, 'p' },
		{ "proto", required_argument, 0, 'P' },   { "mode", required_argument, 0, 'm' },
		{ "rate", required_argument, 0, 'r' },    { "keys", required_argument, 0, 'k' },
		{ "key-prefix", required_argument, 0, 'x' }, { "value-size", required_argument, 0, 'v' },
		{ "duration", required_argument, 0, 'd' }, { "stop-file", required_argument, 0, 's' },
		{ "mark-file", required_argument, 0, 'M' }, { "csv", required_argument, 0, 'c' },
		{ "ack-log", required_argument, 0, 'a' }, { "json", required_argument, 0, 'j' },
		{ "rate-window", required_argument, 0, 'w' }, { "timeout-ms", required_argument, 0, 't' },
		{ "seed", required_argument, 0, 'S' },    { "version-start", required_argument, 0, 'V' },
		{ "rto-min-us", required_argument, 0, 'R' },
		{ "quiet", no_argument, 0, 'q' },         { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'H': opt.host = optarg; break;
		case 'p': opt.port = optarg; break;
		case 'P':
			if (!strcmp(optarg, "redis"))
				opt.proto = P_REDIS;
			else if (!strcmp(optarg, "memcached"))
				opt.proto = P_MEMCACHED;
			else {
				fprintf(stderr, "loadclient: --proto: redis or memcached\n");
				exit(2);
			}
			break;
		case 'm':
			if (!strcmp(optarg, "get"))
				opt.mode = M_GET;
			else if (!strcmp(optarg, "set"))
				opt.mode = M_SET;
			else if (!strcmp(optarg, "mix"))
				opt.mode = M_MIX;
			else {
				fprintf(stderr, "loadclient: --mode: get, set or mix\n");
				exit(2);
			}
			break;
		case 'r': opt.rate = num("rate", optarg, 1, 1e7); break;
		case 'k': opt.keys = (uint64_t)num("keys", optarg, 1, 1e10); break;
		case 'x': opt.prefix = optarg; break;
		case 'v': opt.value_size = (size_t)num("value-size", optarg, 1, 1 << 20); break;
		case 'd': opt.duration = num("duration", optarg, 0, 1e7); break;
		case 's': opt.stop_file = optarg; break;
		case 'M': opt.mark_file = optarg; break;
		case 'c': opt.csv = optarg; break;
		case 'a': opt.ack_log = optarg; break;
		case 'j': opt.json = optarg; break;
		case 'w': opt.rate_window = num("rate-window", optarg, 0, 1e7); break;
		case 't': opt.timeout_ms = (int)num("timeout-ms", optarg, 1, 3.6e6); break;
		case 'S': opt.seed = (uint64_t)num("seed", optarg, 0, 1e18); break;
		case 'V':
			opt.version_start = (uint64_t)num("version-start", optarg, 1, 1e18);
			opt.version_given = true;
			break;
		case 'R': opt.rto_min_us = (int)num("rto-min-us", optarg, 0, 1e9); break;
		case 'q': opt.quiet = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc || !opt.port) {
		usage(stderr);
		exit(2);
	}
	if (strlen(opt.prefix) > KEY_MAX - 24) {
		fprintf(stderr, "loadclient: --key-prefix is too long\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	parse_options(argc, argv);
	t_origin = mono_ns();
	rng_state = opt.seed;
	if (!opt.version_given) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		opt.version_start = (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
	}
	value_buf = malloc(opt.value_size + KEY_MAX + 32);
	acked = calloc(opt.keys, sizeof(*acked));
	if (!value_buf || !acked)
		fatal("out of memory (--keys %" PRIu64 ")", opt.keys);
	if (opt.ack_log) {
		ack_file = fopen(opt.ack_log, "w");
		if (!ack_file)
			fatal("%s: %s", opt.ack_log, strerror(errno));
		setvbuf(ack_file, NULL, _IOFBF, 1 << 20);
	}

	struct sigaction sa = { 0 };
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_mark;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* wake up on time, not 50 us late */

	resolve();
	reconnect(true);

	const int64_t period = (int64_t)(1e9 / opt.rate);
	int64_t start = mono_ns(), next = start, next_stop_check = start;
	const int64_t end = opt.duration > 0 ? start + (int64_t)(opt.duration * 1e9) : INT64_MAX;
	uint64_t version = opt.version_start;
	char key[KEY_MAX];

	while (!stop_requested) {
		int64_t now = mono_ns();
		if (now >= end)
			break;
		if (opt.stop_file && now >= next_stop_check) {
			struct stat sb;
			if (stat(opt.stop_file, &sb) == 0)
				break;
			next_stop_check = now + STOP_CHECK_NS;
		}
		if (now < next) {
			struct timespec ts = { next / 1000000000LL, next % 1000000000LL };
			int64_t until_check = opt.stop_file ? next_stop_check : INT64_MAX;
			if (next > until_check)
				ts = (struct timespec){ until_check / 1000000000LL, until_check % 1000000000LL };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			continue;
		}
		/* Due: one request. A little late (timer jitter): catch up.
		 * Behind by more than CATCH_UP_NS (the service stalled): the
		 * schedule starts again from now, no burst. */
		next = now - next > CATCH_UP_NS ? now + period : next + period;

		uint64_t k = rng_next() % opt.keys;
		snprintf(key, sizeof(key), "%s%" PRIu64, opt.prefix, k);
		enum op op = opt.mode == M_GET ? OP_GET
			   : opt.mode == M_SET ? OP_SET
			   : (rng_next() & 1) ? OP_SET : OP_GET;
		uint64_t v = op == OP_SET ? version++ : 0;
		build_request(op, key, v);
		st.requests++;
		int64_t t_send = mono_ns(), t_done;
		enum status s = exchange(op, k, key, &t_done);
		record(t_done, t_done - t_send, op, s);
		switch (s) {
		case S_OK:
		case S_MISS:
			st.responses++;
			if (op == OP_SET) {
				st.sets_acked++;
				acked[k] = v;
				if (ack_file)
					fprintf(ack_file, "%s %" PRIu64 "\n", key, v);
			} else if (s == S_OK) {
				st.hits++;
			} else {
				st.misses++;
			}
			break;
		case S_ERROR:
			st.errors++; /* the server answered with an error: the connection is fine */
			break;
		default:
			st.errors++;
			if (s == S_TIMEOUT)
				st.timeouts++;
			else
				st.closed++;
			if (op == OP_SET && ack_file)
				fprintf(ack_file, "? %s %" PRIu64 "\n", key, v);
			drop_connection();
			if (!reconnect(false))
				goto done;
			next = mono_ns();
			break;
		}
	}
done:;
	int64_t t_stop = mono_ns();
	drop_connection();
	if (ack_file && fclose(ack_file))
		fatal("%s: %s", opt.ack_log, strerror(errno));
	read_marks();
	if (opt.csv)
		write_csv();
	report(t_stop - t_origin, (double)(t_stop - start) / 1e9);
	if (!opt.quiet)
		fprintf(stderr,
			"loadclient: %" PRIu64 " requests, %" PRIu64 " responses, %" PRIu64 " errors, %" PRIu64
			" reconnects in %.1f s\n",
			st.requests, st.responses, st.errors, st.reconnects, (double)(t_stop - start) / 1e9);
	return 0;
}
