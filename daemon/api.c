#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sodium.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../api/protocol.h"
#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../control/outcome.h"
#include "api.h"
#include "cli.h"
#include "fork.h"
#include "rpc.h"

#define REQUEST_TIMEOUT_S 10 /* for the request to arrive, and the reply to leave */
#define REQUEST_TIMEOUT_ENV "CXLCR_API_TIMEOUT_S" /* the daemon's environment may shorten it */

static unsigned request_timeout_s(void)
{
	const char *s = getenv(REQUEST_TIMEOUT_ENV);
	long v = s && *s ? strtol(s, NULL, 10) : 0;
	return v > 0 && v <= REQUEST_TIMEOUT_S ? (unsigned)v : REQUEST_TIMEOUT_S;
}

_Static_assert(CXLCR_API_MAX_CHILDREN == FORK_MAX_CHILDREN, "one limit on children");
_Static_assert(CXLCR_API_NAME_MAX == CXLCR_NAME_MAX && CXLCR_API_NAME_MAX == CXLCR_HOST_MAX,
	       "one limit on names");

const char *api_socket_path(const char *host, char *buf, size_t len)
{
	const struct pod *pod = pod_current(false);
	snprintf(buf, len, "%s/%s.api", pod ? pod->dir : POD_RUN_DIR "/no-pod", host);
	return buf;
}

int api_port_from_env(void)
{
	const char *s = getenv(API_PORT_ENV);
	if (!s || !*s)
		return CXLCR_API_PORT;
	char *end;
	long port = strtol(s, &end, 10);
	return *end || port < 0 || port > 65535 ? -1 : (int)port;
}

int api_listen_tcp(const char *host, const char *address, int port)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				    .sin_addr.s_addr = htonl(INADDR_ANY) };
	const struct pod *pod = pod_current(false);
	int index, end = 0;
	if (address && *address) {
		if (inet_pton(AF_INET, address, &addr.sin_addr) != 1)
			return cxlcr_error("address '%s' is not an IPv4 address", address);
	} else if (pod && sscanf(host, "h%d%n", &index, &end) == 1 && !host[end] && index >= 0 && index < 240) {
		addr.sin_addr.s_addr = htonl(pod_host_ip(pod, index));
	}
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (s < 0)
		return cxlcr_error("socket: %s", strerror(errno));
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(s, 64) < 0) {
		int e = errno;
		close(s);
		return cxlcr_error("cannot listen on tcp:%s:%d: %s", ip, port, strerror(e));
	}
	return s;
}

/* "tcp 10.78.0.1" or "unix", for the log. */
static void describe_peer(int conn, bool over_tcp, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";
	if (!over_tcp) {
		snprintf(buf, len, "unix");
		return;
	}
	if (getpeername(conn, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "tcp %s", ip);
}

/* The API key, derived from the pod's token (api/protocol.h); -1 with
 * why in err when there is no pod key to derive it from. */
static int api_key(uint8_t key[CXLCR_SEAL_KEY_BYTES], char *err, size_t len)
{
	char token[CXLCR_API_TOKEN_LEN + 1];
	int rc = api_token_derive(false, token, sizeof(token)) == 0 && api_mac_key(token, key) == 0 ? 0 : -1;
	explicit_bzero(token, sizeof(token));
	if (rc < 0)
		snprintf(err, len, "%s", cxlcr_last_error());
	return rc;
}

/* The request's parent must be a service of the pool; the rest is
 * fork_service()'s to check. */
static int service_exists(const char *name, char *err, size_t len)
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		snprintf(err, len, "%s", cxlcr_last_error());
		return -1;
	}
	bool found = cxlcr_region_find(&pool, CXLCR_KIND_ARENA, name, NULL);
	if (!found)
		snprintf(err, len, "no service named '%s' in pool %.300s", name, pool.path);
	cxlcr_pool_close(&pool);
	return found ? 0 : -1;
}

/* The pod's quota of live children (CXLCR_API_CHILDREN_MAX may lower it):
 * the API can make children, and everything a child holds (a region slot
 * of 1,024, an address, processes) comes from the pod's shared supply. */
#define CHILDREN_MAX 256
static unsigned children_quota(void)
{
	const char *s = getenv("CXLCR_API_CHILDREN_MAX");
	long v = s && *s ? strtol(s, NULL, 10) : 0;
	return v > 0 && v < CHILDREN_MAX ? (unsigned)v : CHILDREN_MAX;
}

/* Would count more children pass the quota? If so, why in err. */
static bool over_quota(unsigned count, char *err, size_t len)
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		snprintf(err, len, "%s", cxlcr_last_error());
		return true;
	}
	unsigned live = 0, quota = children_quota();
	/* One stable copy of each entry: looking each one up again by its
	 * generation (a scan of the whole table each) took ~1 s of CPU per
	 * request here, on the path of every fork. */
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(&pool, i, &r);
		live += r.state == CXLCR_REGION_LIVE && r.kind == CXLCR_KIND_CHILD;
	}
	cxlcr_pool_close(&pool);
	if (live + count <= quota)
		return false;
	snprintf(err, len, "quota: %u children live, %u more would pass the pod's %u (release some)", live,
		 count, quota);
	return true;
}

/* The release op: stops a child (on its host, through its daemon). */
static int release_child(const char *name, char *err, size_t len)
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		snprintf(err, len, "%s", cxlcr_last_error());
		return -1;
	}
	bool child = cxlcr_region_find(&pool, CXLCR_KIND_CHILD, name, NULL);
	bool service = cxlcr_region_find(&pool, CXLCR_KIND_ARENA, name, NULL);
	cxlcr_pool_close(&pool);
	if (!child) {
		snprintf(err, len, service ? "'%s' is a service, not a child: only children can be released"
					   : "no child named '%s'", name);
		return -1;
	}
	char *argv[] = { "stop", (char *)name, NULL };
	optind = 0;
	if (service_forward_to_owner(name, 2, argv) != EXIT_OK) {
		snprintf(err, len, "release of '%s' failed: %s", name, cxlcr_last_error());
		return -1;
	}
	return 0;
}

static void result_from_reply(const struct fork_reply *rep, struct cxlcr_fork_result *res)
{
	memset(res, 0, sizeof(*res));
	res->count = rep->count < FORK_MAX_CHILDREN ? rep->count : FORK_MAX_CHILDREN;
	for (unsigned i = 0; i < res->count; i++) {
		const struct fork_child *c = &rep->child[i];
		struct in_addr ip = { .s_addr = c->ip };
		cxlcr_copy_field(res->child[i].name, sizeof(res->child[i].name), c->name);
		cxlcr_copy_field(res->child[i].host, sizeof(res->child[i].host), c->host);
		inet_ntop(AF_INET, &ip, res->child[i].address, sizeof(res->child[i].address));
		res->child[i].pid = c->pid;
		res->child[i].restore_ms = c->restore_ms;
		res->child[i].prefetched_pages = c->prefetched_pages;
	}
	res->freeze_ms = rep->freeze_ms;
	res->snapshot_ms = rep->snapshot_ms;
	res->restore_ms = rep->restore_ms;
	res->total_ms = rep->total_ms;
	res->image_bytes = rep->image_bytes;
	res->snapshot_bytes = rep->snapshot_bytes;
	cxlcr_copy_field(res->mode, sizeof(res->mode), rep->mode);
}

/* Reads the request line into line (API_REQUEST_MAX + 1 bytes). Over TCP
 * a client that says hello first is greeted with a fresh challenge, and
 * its request must come sealed for it (api/protocol.h); the first line of
 * one that does not is its request, which cannot be sealed for anything. */
static int read_request(int conn, bool over_tcp, uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], char *line, size_t *len,
			char *err, size_t err_len)
{
	if (api_read_line(conn, line, API_REQUEST_MAX, len, err, err_len) < 0)
		return -1;
	if (!over_tcp || strcmp(line, API_HELLO))
		return 0;
	randombytes_buf(challenge, CXLCR_SEAL_NONCE_BYTES);
	size_t n;
	char *hello = api_greeting_encode(challenge, &n);
	int sent = hello ? api_write_all(conn, hello, n) : -1;
	free(hello);
	if (sent < 0)
		return api_say(err, err_len, "the greeting could not be sent");
	return api_read_line(conn, line, API_REQUEST_MAX, len, err, err_len);
}

/* Checks and runs the request of conn; the reply line into *reply. Over
 * TCP the request must be sealed for this connection's challenge
 * (api/protocol.h): nothing about it is told before that checks. */
static int handle(int conn, bool over_tcp, char **reply, size_t *reply_len, char *what, size_t what_len, char *err,
		  size_t err_len, char nonce[2 * CXLCR_SEAL_NONCE_BYTES + 1])
{
	char line[API_REQUEST_MAX + 1], why[API_ERROR_MAX];
	size_t len;
	struct api_request req;
	/* No connection is greeted with an all-zero challenge, nor seals
	 * for one: a request that comes without hello checks for nothing. */
	uint8_t challenge[CXLCR_SEAL_NONCE_BYTES] = { 0 };
	/* The request is read first, so the client gets its answer after
	 * sending it, whatever the answer. */
	int got = read_request(conn, over_tcp, challenge, line, &len, err, err_len);
	alarm(0); /* the request is in (see api_serve()) */
	if (got < 0) {
		snprintf(what, what_len, "refused: %s", err);
		return -1;
	}
	if (!over_tcp && rpc_check_peer(conn) < 0) {
		snprintf(what, what_len, "refused: %s", cxlcr_last_error());
		snprintf(err, err_len, API_NOT_AUTHORISED);
		return -1;
	}
	int bad;
	if (over_tcp) {
		uint8_t key[CXLCR_SEAL_KEY_BYTES];
		bool have_key = api_key(key, why, sizeof(why)) == 0;
		if (!have_key)
			snprintf(what, what_len, "refused: no API key: %s", why);
		bad = api_request_open(line, len, have_key ? key : NULL, challenge, &req, err, err_len, why,
				       sizeof(why));
		explicit_bzero(key, sizeof(key));
		if (bad && !strcmp(err, API_NOT_AUTHORISED)) {
			if (have_key)
				snprintf(what, what_len, "refused: %s", why);
			return -1;
		}
	} else {
		bad = api_request_decode(line, len, &req, err, err_len);
	}
	/* Trusted from here on (or a line nobody could read): the reply,
	 * whatever it says, is sealed for the request's nonce if it has one. */
	memcpy(nonce, req.nonce, sizeof(req.nonce));
	if (bad) {
		snprintf(what, what_len, "refused: %s", err);
		return -1;
	}
	if (!strcmp(req.op, "release")) {
		snprintf(what, what_len, "release %s: ", req.service);
		size_t at = strlen(what);
		if (release_child(req.service, err, err_len) < 0) {
			snprintf(what + at, what_len - at, "%s", err);
			return -1;
		}
		snprintf(what + at, what_len - at, "ok");
		struct cxlcr_fork_result none = { 0 };
		*reply = api_reply_encode(&none, reply_len);
		return 0;
	}
	snprintf(what, what_len, "fork %s -> %s x%u: ", req.service, req.host, req.count);
	size_t at = strlen(what);
	if (over_quota(req.count, err, err_len)) {
		snprintf(what + at, what_len - at, "refused: %s", err);
		return -1;
	}
	if (service_exists(req.service, err, err_len) < 0) {
		snprintf(what + at, what_len - at, "%s", err);
		return -1;
	}
	struct fork_request freq = { .count = req.count, .mode = fork_mode_parse(req.mode[0] ? req.mode : NULL) };
	cxlcr_copy_field(freq.fetch, sizeof(freq.fetch), req.fetch);
	static struct fork_reply frep; /* large; a worker serves one request */
	cxlcr_copy_field(freq.service, sizeof(freq.service), req.service);
	cxlcr_copy_field(freq.host, sizeof(freq.host), req.host);
	/* Its outcome is kept for `cxlcr status` (control/outcome.h): the
	 * client may be gone by now. */
	if (fork_service(&freq, &frep) < 0) {
		snprintf(err, err_len, "%s", frep.error[0] ? frep.error : "fork failed");
		snprintf(what + at, what_len - at, "failed: %s", err);
		verb_outcome_record_named(freq.service, "fork", CXLCR_OUTCOME_FAILED, this_host(), err);
		return -1;
	}
	verb_outcome_record_named(freq.service, "fork", CXLCR_OUTCOME_OK, this_host(), "");
	struct cxlcr_fork_result res;
	result_from_reply(&frep, &res);
	snprintf(what + at, what_len - at, "ok, %u children in %.1f ms", res.count, res.total_ms);
	*reply = api_reply_encode(&res, reply_len);
	return 0;
}

/* The reply line sealed for the request's nonce (api/protocol.h) under the
 * reply key of the pod's token; the line itself (freed) is replaced. When
 * it cannot be sealed, an unsealed refusal goes instead, which the client
 * takes as a failure (a success it would refuse as forged). */
static char *sealed(char *reply, size_t *len, const char *nonce_hex, char *what, size_t what_len)
{
	uint8_t key[CXLCR_SEAL_KEY_BYTES], nonce[CXLCR_SEAL_NONCE_BYTES];
	char *out = NULL, why[API_ERROR_MAX] = "";
	if (api_key(key, why, sizeof(why)) == 0 && api_nonce_parse(nonce_hex, nonce) == 0)
		out = api_reply_seal(reply, *len, key, nonce, len);
	explicit_bzero(key, sizeof(key));
	free(reply);
	if (out)
		return out;
	size_t at = strlen(what);
	snprintf(what + at, what_len - at, " (reply not sealed: %s)", why[0] ? why : "out of memory");
	return api_error_encode("the reply could not be sealed (see the daemon's log)", len);
}

/* Closing a socket with unread input resets the connection, and the
 * client may lose the reply (to an oversized request, say): what is left
 * of the request is read and dropped first, within bounds. */
static void drain(int conn)
{
	char buf[4096];
	struct timeval tv = { .tv_sec = 1 };
	shutdown(conn, SHUT_WR);
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (int i = 0; i < 256 && read(conn, buf, sizeof(buf)) > 0; i++)
		;
}

/*
 * SO_RCVTIMEO bounds each read, not the request: a client that sends a
 * byte every few seconds kept a worker for ever. The whole request must
 * arrive, and the whole reply leave, within REQUEST_TIMEOUT_S each: past
 * that SIGALRM ends the worker, and the connection with it.
 */
int api_serve(int conn, bool over_tcp, char *summary, size_t len)
{
	unsigned timeout = request_timeout_s();
	signal(SIGALRM, SIG_DFL);
	alarm(timeout);
	struct timeval tv = { .tv_sec = timeout };
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	char peer[64], what[API_ERROR_MAX + 128] = "", err[API_ERROR_MAX] = "";
	char *reply = NULL;
	size_t reply_len = 0;
	describe_peer(conn, over_tcp, peer, sizeof(peer));
	char nonce[2 * CXLCR_SEAL_NONCE_BYTES + 1] = "";
	int rc = handle(conn, over_tcp, &reply, &reply_len, what, sizeof(what), err, sizeof(err), nonce);
	if (rc < 0)
		reply = api_error_encode(err, &reply_len);
	if (reply && nonce[0])
		reply = sealed(reply, &reply_len, nonce, what, sizeof(what));
	alarm(timeout);
	if (!reply || api_write_all(conn, reply, reply_len) < 0)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), " (reply not sent: %s)",
			 reply ? strerror(errno) : "out of memory");
	free(reply);
	drain(conn);
	alarm(0);
	snprintf(summary, len, "api request (%s): %s", peer, what);
	return rc;
}
