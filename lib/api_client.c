/*
 * libcxlcr: the client side of the fork API (include/cxlcr/cxlcr.h). Only
 * cxlcr_api_* is exported (lib/exports.map, and the static library's
 * other symbols are made local when it is built).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "../api/protocol.h"
#include "../include/cxlcr/cxlcr.h"

#define CONNECT_TIMEOUT_S 10
#define REPLY_TIMEOUT_S   300 /* a fork of many children takes a while */

struct cxlcr_api {
	char endpoint[256];
	char token[API_TOKEN_MAX + 1];
	int fd;                    /* the connection for the next request, or -1 */
	uint8_t challenge[CXLCR_SEAL_NONCE_BYTES]; /* its greeting's, over TCP */
	char error[API_ERROR_MAX];
};

static __thread char connect_error[API_ERROR_MAX];

__attribute__((format(printf, 3, 4)))
static int set_error(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return -1;
}

static void set_timeouts(int fd)
{
	struct timeval snd = { .tv_sec = CONNECT_TIMEOUT_S }, rcv = { .tv_sec = REPLY_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd)); /* connect() too */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
}

static int connect_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(addr.sun_path))
		return set_error(err, errlen, "socket path too long: %s", path);
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return set_error(err, errlen, "socket: %s", strerror(errno));
	set_timeouts(fd);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;
		close(fd);
		return set_error(err, errlen, "cannot connect to %s: %s", path, strerror(e));
	}
	return fd;
}

/* "tcp:HOST:PORT", HOST a name, an IPv4 address or a bracketed IPv6 one. */
static int connect_tcp(const char *spec, char *err, size_t errlen)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof(host))
		return set_error(err, errlen, "endpoint tcp:%s: expected tcp:HOST:PORT", spec);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = 0;
	char *h = host;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		h[strlen(h) - 1] = 0;
		h++;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *list, *a;
	int rc = getaddrinfo(h, colon + 1, &hints, &list);
	if (rc)
		return set_error(err, errlen, "endpoint tcp:%s: %s", spec, gai_strerror(rc));
	int fd = -1, e = 0;
	for (a = list; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		set_timeouts(fd);
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
			e = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(list);
	if (fd < 0)
		return set_error(err, errlen, "cannot connect to %s: %s", spec,
				 e == EINPROGRESS || e == EAGAIN ? "timed out" : strerror(e));
	return fd;
}

/* A connection to endpoint; over TCP its greeting read, and its challenge
 * kept for the request to be sealed for (api/protocol.h). */
static int open_connection(const char *endpoint, uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], char *err,
			   size_t errlen)
{
	if (strncmp(endpoint, "tcp:", 4))
		return connect_unix(endpoint, err, errlen);
	int fd = connect_tcp(endpoint + 4, err, errlen);
	if (fd < 0)
		return -1;
	char line[API_ERROR_MAX + 64];
	size_t len;
	if (api_write_all(fd, API_HELLO "\n", strlen(API_HELLO) + 1) < 0) {
		set_error(err, errlen, "cannot send to %s: %s", endpoint, strerror(errno));
		close(fd);
		return -1;
	}
	if (api_read_line(fd, line, sizeof(line) - 1, &len, err, errlen) < 0 ||
	    api_greeting_decode(line, len, challenge, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct cxlcr_api *cxlcr_api_connect(const char *endpoint, const char *token)
{
	if (!token)
		token = getenv("CXLCR_API_TOKEN");
	if (!endpoint || !*endpoint) {
		set_error(connect_error, sizeof(connect_error), "no endpoint given");
		return NULL;
	}
	if (strlen(endpoint) >= sizeof(((struct cxlcr_api *)0)->endpoint) ||
	    (token && strlen(token) > API_TOKEN_MAX)) {
		set_error(connect_error, sizeof(connect_error), "endpoint or token too long");
		return NULL;
	}
	struct cxlcr_api *api = calloc(1, sizeof(*api));
	if (!api) {
		set_error(connect_error, sizeof(connect_error), "out of memory");
		return NULL;
	}
	strcpy(api->endpoint, endpoint);
	if (token)
		strcpy(api->token, token);
	/* Connecting now tells the caller at once whether the daemon is there;
	 * that connection serves the first request. */
	api->fd = open_connection(endpoint, api->challenge, connect_error, sizeof(connect_error));
	if (api->fd < 0) {
		free(api);
		return NULL;
	}
	return api;
}

/* Over TCP, the request sealed for the connection's challenge, and a
 * fresh nonce in it for the reply to be sealed for (api/protocol.h); key
 * NULL (no token of the right form): sent unsealed, for the daemon to
 * refuse. Elsewhere, the request as it is. */
static char *request_line(bool tcp, const uint8_t *key, const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES],
			  struct api_request *req, uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], size_t *len)
{
	if (tcp) {
		randombytes_buf(nonce, CXLCR_SEAL_NONCE_BYTES);
		sodium_bin2hex(req->nonce, sizeof(req->nonce), nonce, CXLCR_SEAL_NONCE_BYTES);
	}
	char *line = api_request_encode(req, len);
	if (!line || !tcp || !key)
		return line;
	char *sealed = api_request_seal(line, *len, key, challenge, len);
	free(line);
	return sealed;
}

/* Sends one request and reads the reply line, on the connection opened
 * beforehand or a new one (one request per connection). */
static int exchange(struct cxlcr_api *api, struct api_request *req, struct cxlcr_fork_result *res)
{
	/* The daemon gives up on a connection that stays silent for long:
	 * one that has something to say already, or is closed, is stale. */
	struct pollfd p = { .fd = api->fd, .events = POLLIN };
	if (api->fd >= 0 && poll(&p, 1, 0) != 0) {
		close(api->fd);
		api->fd = -1;
	}
	int fd = api->fd >= 0 ? api->fd : open_connection(api->endpoint, api->challenge, api->error, sizeof(api->error));
	api->fd = -1;
	if (fd < 0)
		return -1;
	bool tcp = !strncmp(api->endpoint, "tcp:", 4);
	uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], key[CXLCR_SEAL_KEY_BYTES];
	if (tcp && sodium_init() < 0) {
		close(fd);
		return set_error(api->error, sizeof(api->error), "libsodium cannot start");
	}
	bool have_key = tcp && api_mac_key(api->token, key) == 0;
	size_t len;
	char *line = request_line(tcp, have_key ? key : NULL, api->challenge, req, nonce, &len);
	char *reply = malloc(API_REPLY_MAX + 1);
	int rc = -1;
	if (!line || !reply) {
		set_error(api->error, sizeof(api->error), "out of memory");
	} else {
		/* A daemon that refuses a request may answer and close before it
		 * has all of it: its answer is still worth reading. */
		int sent = api_write_all(fd, line, len), e = errno;
		if (api_read_line(fd, reply, API_REPLY_MAX, &len, api->error, sizeof(api->error)) == 0)
			rc = tcp ? api_reply_open(reply, len, have_key ? key : NULL, nonce, res, api->error,
						  sizeof(api->error))
				 : api_reply_decode(reply, len, res, api->error, sizeof(api->error));
		else if (sent < 0)
			set_error(api->error, sizeof(api->error), "cannot send the request to %s: %s",
				  api->endpoint, strerror(e));
	}
	free(line);
	free(reply);
	sodium_memzero(key, sizeof(key));
	close(fd);
	return rc;
}

int cxlcr_api_fork(struct cxlcr_api *api, const char *service, const char *host, unsigned count,
		   struct cxlcr_fork_result *result)
{
	return cxlcr_api_fork_mode(api, service, host, count, NULL, NULL, result);
}

int cxlcr_api_fork_mode(struct cxlcr_api *api, const char *service, const char *host, unsigned count,
			const char *mode, const char *fetch, struct cxlcr_fork_result *result)
{
	if (!api)
		return -1;
	if (!service || !host || !result)
		return set_error(api->error, sizeof(api->error), "fork: service, host and result are required");
	struct api_request req = { .op = "fork", .count = count };
	if (mode && strcmp(mode, "share") && strcmp(mode, "copy"))
		return set_error(api->error, sizeof(api->error), "fork: mode %s: share or copy", mode);
	if (mode)
		strcpy(req.mode, mode);
	if (fetch && strcmp(fetch, "background") && strcmp(fetch, "eager") && strcmp(fetch, "lazy"))
		return set_error(api->error, sizeof(api->error), "fork: fetch %s: background, eager or lazy", fetch);
	if (fetch)
		strcpy(req.fetch, fetch);
	if (strlen(service) >= sizeof(req.service) || strlen(host) >= sizeof(req.host))
		return set_error(api->error, sizeof(api->error), "fork: service or host name too long");
	strcpy(req.service, service);
	strcpy(req.host, host);
	memset(result, 0, sizeof(*result));
	return exchange(api, &req, result);
}

int cxlcr_api_release(struct cxlcr_api *api, const char *child)
{
	if (!api)
		return -1;
	if (!child)
		return set_error(api->error, sizeof(api->error), "release: the child's name is required");
	struct api_request req = { .op = "release" };
	if (strlen(child) >= sizeof(req.service))
		return set_error(api->error, sizeof(api->error), "release: name too long");
	strcpy(req.service, child);
	struct cxlcr_fork_result ignored;
	return exchange(api, &req, &ignored);
}

const char *cxlcr_api_error(const struct cxlcr_api *api)
{
	const char *e = api ? api->error : connect_error;
	return e[0] ? e : "no error";
}

void cxlcr_api_close(struct cxlcr_api *api)
{
	if (!api)
		return;
	if (api->fd >= 0)
		close(api->fd);
	free(api);
}
