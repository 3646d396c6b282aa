/*
 * The fork API's wire protocol (described in include/cxlcr/cxlcr.h), shared
 * by the client library (lib/) and the daemon (daemon/api.c): framing, and
 * encoding and decoding of requests and replies. Nothing here knows about
 * sockets' ends or the pool; errors are one line in a caller's buffer.
 */
#ifndef CXLCR_API_PROTOCOL_H
#define CXLCR_API_PROTOCOL_H
#include <stdbool.h>
#include <stddef.h>

#include "../include/cxlcr/cxlcr.h"

#define API_REQUEST_MAX 4096
#define API_REPLY_MAX   65536
#define API_ERROR_MAX   512
#define API_TOKEN_MAX   128 /* longer than any token: a longer one is refused */

struct api_request {
	char op[16];
	char service[CXLCR_API_NAME_MAX];
	char host[CXLCR_API_NAME_MAX];
	unsigned count;
	char token[API_TOKEN_MAX + 1]; /* "" when the request has none */
	bool readable;  /* decoded as a JSON object of strings and numbers, so
			 * token holds whatever the request carried, even when
			 * it was refused for its op, fields or values */
};

/* Each encoder returns a malloc'd, NUL-terminated line ending in '\n' (its
 * length in *len), or NULL when out of memory. */
char *api_request_encode(const struct api_request *req, size_t *len);
char *api_reply_encode(const struct cxlcr_fork_result *res, size_t *len);
char *api_error_encode(const char *error, size_t *len);

/* Decodes and checks a request line: 0, or -1 with why in err (see
 * req->readable: the token can be checked before that error is told). */
int api_request_decode(const char *line, size_t len, struct api_request *req, char *err,
		       size_t errlen);
/* Decodes a reply line: 0 with *res filled, or -1 with err holding the
 * daemon's error line, or why the reply could not be read. */
int api_reply_decode(const char *line, size_t len, struct cxlcr_fork_result *res, char *err,
		     size_t errlen);

/* Reads one line of at most max bytes (its '\n' not counted, nor kept) into
 * buf (max + 1 bytes). 0, or -1 with why in err. */
int api_read_line(int fd, char *buf, size_t max, size_t *len, char *err, size_t errlen);
/* Writes all of buf to a socket; 0, or -1 with errno (never SIGPIPE). */
int api_write_all(int fd, const char *buf, size_t len);

#endif
