/*
 * mcload: a pipelined load generator for memcached's text protocol, in the
 * manner of redis-benchmark -P: C connections, each sending P requests at a
 * time and waiting for their P replies before it sends the next P.
 *
 *   mcload -p PORT [-h 127.0.0.1] [-t set|get] [-n REQUESTS] [-c CONNS]
 *          [-P PIPELINE] [-d VALUE_BYTES] [-r KEYSPACE] [--csv]
 *
 * Keys are "key:NNNNNNNNNNNN", drawn at random from [0, KEYSPACE). A get of
 * a key never set counts as a miss (reported, not an error). Prints the
 * requests per second, as CSV ("SET","123456.78") with --csv.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEY_FMT "key:%012llu"

struct conn {
	int fd;
	char *out;          /* the burst being sent */
	size_t out_len, out_off;
	char *in;           /* replies received, not yet parsed */
	size_t in_len, in_cap;
	size_t skip;        /* value bytes (and CRLF) still to skip */
	long pending;       /* replies still expected for this burst */
	uint64_t rng;
};

static struct {
	const char *host;
	int port, conns, pipeline, value_size;
	long requests;
	unsigned long long keyspace;
	int get;
	int csv;
} opt = { "127.0.0.1", 0, 50, 16, 100, 100000, 100000, 0, 0 };

static long sent, done, misses;
static char *value;

static void die(const char *what)
{
	fprintf(stderr, "mcload: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *msg)
{
	fprintf(stderr, "mcload: %s\n", msg);
	exit(1);
}

static uint64_t next_rand(struct conn *c)
{
	/* xorshift64* */
	c->rng ^= c->rng >> 12;
	c->rng ^= c->rng << 25;
	c->rng ^= c->rng >> 27;
	return c->rng * 2685821657736338717ull;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Builds the next burst of requests for c; false when all are sent. */
static int build_burst(struct conn *c)
{
	long n = opt.requests - sent;
	if (n <= 0)
		return 0;
	if (n > opt.pipeline)
		n = opt.pipeline;
	size_t len = 0;
	for (long i = 0; i < n; i++) {
		unsigned long long k = next_rand(c) % opt.keyspace;
		if (opt.get) {
			len += (size_t)sprintf(c->out + len, "get " KEY_FMT "\r\n", k);
		} else {
			len += (size_t)sprintf(c->out + len, "set " KEY_FMT " 0 0 %d\r\n", k, opt.value_size);
			memcpy(c->out + len, value, (size_t)opt.value_size);
			len += (size_t)opt.value_size;
			memcpy(c->out + len, "\r\n", 2);
			len += 2;
		}
	}
	sent += n;
	c->out_len = len;
	c->out_off = 0;
	c->pending = n;
	return 1;
}

/* Consumes the complete replies in c->in; returns how many. */
static long parse_replies(struct conn *c)
{
	long got = 0;
	size_t pos = 0;
	while (pos < c->in_len) {
		if (c->skip) {
			size_t take = c->in_len - pos < c->skip ? c->in_len - pos : c->skip;
			pos += take;
			c->skip -= take;
			continue;
		}
		char *nl = memchr(c->in + pos, '\n', c->in_len - pos);
		if (!nl)
			break;
		char *line = c->in + pos;
		size_t line_len = (size_t)(nl - line) + 1;
		if (!strncmp(line, "STORED\r\n", 8) && line_len == 8) {
			got++;
		} else if (!strncmp(line, "END\r\n", 5) && line_len == 5) {
			got++;
		} else if (!strncmp(line, "VALUE ", 6)) {
			/* VALUE key flags bytes: the data and its CRLF follow; a hit
			 * is counted when its END arrives. */
			char *last = memrchr(line, ' ', line_len);
			c->skip = strtoul(last + 1, NULL, 10) + 2;
			misses--;
		} else {
			fprintf(stderr, "mcload: unexpected reply: %.*s", (int)line_len, line);
			exit(1);
		}
		pos += line_len;
	}
	if (opt.get)
		misses += got;
	memmove(c->in, c->in + pos, c->in_len - pos);
	c->in_len -= pos;
	return got;
}

static int connect_one(struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 && errno != EINPROGRESS)
		die("connect");
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mcload -p PORT [-h HOST] [-t set|get] [-n REQUESTS] [-c CONNS] "
		   "[-P PIPELINE] [-d VALUE_BYTES] [-r KEYSPACE] [--csv]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = { { "csv", no_argument, 0, 'C' },
						  { "help", no_argument, 0, 'H' },
						  { 0, 0, 0, 0 } };
	int ch;
	while ((ch = getopt_long(argc, argv, "h:p:t:n:c:P:d:r:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h': opt.host = optarg; break;
		case 'p': opt.port = atoi(optarg); break;
		case 't':
			if (strcmp(optarg, "set") && strcmp(optarg, "get"))
				fail("-t: set or get");
			opt.get = !strcmp(optarg, "get");
			break;
		case 'n': opt.requests = atol(optarg); break;
		case 'c': opt.conns = atoi(optarg); break;
		case 'P': opt.pipeline = atoi(optarg); break;
		case 'd': opt.value_size = atoi(optarg); break;
		case 'r': opt.keyspace = strtoull(optarg, NULL, 10); break;
		case 'C': opt.csv = 1; break;
		case 'H': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (opt.port <= 0 || opt.requests <= 0 || opt.conns <= 0 || opt.pipeline <= 0 ||
	    opt.value_size <= 0 || opt.value_size > (1 << 20) || opt.keyspace == 0) {
		usage(stderr);
		return 2;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port) };
	if (inet_pton(AF_INET, opt.host, &sa.sin_addr) != 1)
		fail("-h: not an IPv4 address");

	value = malloc((size_t)opt.value_size);
	if (!value)
		die("malloc");
	for (int i = 0; i < opt.value_size; i++)
		value[i] = (char)('a' + i % 26);
	size_t burst_max = (size_t)opt.pipeline * ((size_t)opt.value_size + 64);
	size_t in_max = (size_t)opt.pipeline * ((size_t)opt.value_size + 64) + 65536;

	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	struct conn *conns = calloc((size_t)opt.conns, sizeof(*conns));
	if (!conns)
		die("calloc");
	double t0 = now();
	long active = 0;
	for (int i = 0; i < opt.conns; i++) {
		struct conn *c = &conns[i];
		c->fd = connect_one(&sa);
		c->out = malloc(burst_max);
		c->in_cap = in_max;
		c->in = malloc(c->in_cap);
		c->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		if (!c->out || !c->in)
			die("malloc");
		if (!build_burst(c)) {
			close(c->fd);
			c->fd = -1;
			continue;
		}
		struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
			die("epoll_ctl");
		active++;
	}
	struct epoll_event evs[256];
	while (active > 0) {
		int n = epoll_wait(ep, evs, 256, 60000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		if (n == 0)
			fail("no reply from the server within 60 s");
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN))
				fail("connection to the server failed");
			if (c->out_off < c->out_len && (evs[i].events & EPOLLOUT)) {
				ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
				if (w < 0 && errno != EAGAIN)
					die("send");
				if (w > 0)
					c->out_off += (size_t)w;
				if (c->out_off == c->out_len) {
					struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
					epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
				}
				continue;
			}
			if (!(evs[i].events & EPOLLIN))
				continue;
			ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
			if (r == 0)
				fail("the server closed a connection");
			if (r < 0) {
				if (errno == EAGAIN)
					continue;
				die("recv");
			}
			c->in_len += (size_t)r;
			long got = parse_replies(c);
			c->pending -= got;
			done += got;
			if (c->pending < 0)
				fail("more replies than requests");
			if (c->in_len == c->in_cap)
				fail("a reply does not fit the input buffer");
			if (c->pending > 0)
				continue;
			if (build_burst(c)) {
				struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
			} else {
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				c->fd = -1;
				active--;
			}
		}
	}
	double secs = now() - t0;
	double rps = (double)done / secs;
	const char *name = opt.get ? "GET" : "SET";
	if (opt.csv)
		printf("\"%s\",\"%.2f\",\"%ld\"\n", name, rps, opt.get ? misses : 0);
	else
		printf("%s: %ld requests in %.2f s, %.2f requests per second%s", name, done, secs, rps,
		       opt.get ? "" : "\n");
	if (!opt.csv && opt.get)
		printf(", %ld misses\n", misses);
	return 0;
}
