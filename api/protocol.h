/*
 * The fork API's wire protocol (described in include/cxlcr/cxlcr.h), shared
 * by the client library (lib/) and the daemon (daemon/api.c): framing and
 * encoding here (api/protocol.c), decoding in api/decode.c. Nothing knows about
 * sockets' ends or the pool; errors are one line in a caller's buffer.
 */
#ifndef CXLCR_API_PROTOCOL_H
#define CXLCR_API_PROTOCOL_H
#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "../common/seal.h"
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
	char mode[8];   /* "" (the default), "share" or "copy" */
	char fetch[16]; /* "" (the default), "background", "eager" or "lazy" */
	char token[API_TOKEN_MAX + 1]; /* "" when the request has none */
	char nonce[2 * CXLCR_SEAL_NONCE_BYTES + 1]; /* hex; "" when the request has none (then
						     * the reply comes unsealed) */
	bool readable;  /* decoded as a JSON object of strings and numbers, so
			 * token holds whatever the request carried, even when
			 * it was refused for its op, fields or values */
};

/* Each encoder returns a malloc'd, NUL-terminated line ending in '\n' (its
 * length in *len), or NULL when out of memory. */
char *api_request_encode(const struct api_request *req, size_t *len);
char *api_reply_encode(const struct cxlcr_fork_result *res, size_t *len);
char *api_error_encode(const char *error, size_t *len);

/*
 * Sealed replies (over TCP). The client puts a fresh random nonce in its
 * request; the daemon seals its reply line under the reply key, which both
 * ends derive from the pod's API token, for that nonce:
 *   {"sealed":"<the reply line, without its newline>","mac":"<64 hex digits>"}
 * (common/seal.h: HMAC-SHA-512-256 over a label, the nonce, 0 and the
 * line). A refusal before the daemon trusts the request (a wrong token, a
 * request it cannot read, busy) comes unsealed.
 */
/* The reply key of a token of CXLCR_API_TOKEN_LEN hex digits: 0, or -1 if
 * the token is not one. */
int api_reply_key(const char *token, uint8_t key[CXLCR_SEAL_KEY_BYTES]);
/* A nonce from its hex digits (a request's "nonce"): 0, or -1. */
int api_nonce_parse(const char *hex, uint8_t nonce[CXLCR_SEAL_NONCE_BYTES]);
/* The sealed line of the reply line (len bytes, its '\n' included), as
 * the encoders return it; NULL when out of memory. */
char *api_reply_seal(const char *reply, size_t len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		     const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], size_t *out_len);
/* A reply line read over TCP for the request of nonce: a sealed one whose
 * MAC checks under key is decoded as api_reply_decode() does; an unsealed
 * one is taken only as a refusal ("ok":false, its error in err); any other
 * (a MAC of another key or another request's nonce: forged or replayed,
 * or an unsealed success) is refused with one line in err. key NULL: the
 * client has no key (no token of the right form); only refusals pass. */
int api_reply_open(const char *line, size_t len, const uint8_t *key, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES],
		   struct cxlcr_fork_result *res, char *err, size_t errlen);
/* Whether mac_hex is the MAC of the reply line inner (n bytes) under key
 * for nonce (api_reply_open()'s check). */
bool api_reply_sealed_by(const char *inner, size_t n, const char *mac_hex, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
			 const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES]);
#define API_REPLY_FORGED "reply not authenticated (no MAC under the pod's token for this request: forged or replayed)"

/* Decodes and checks a request line: 0, or -1 with why in err (see
 * req->readable: the token can be checked before that error is told). */
int api_request_decode(const char *line, size_t len, struct api_request *req, char *err,
		       size_t errlen);
/* Decodes a reply line: 0 with *res filled, or -1 with err holding the
 * daemon's error line, or why the reply could not be read. */
int api_reply_decode(const char *line, size_t len, struct cxlcr_fork_result *res, char *err,
		     size_t errlen);

/* Formats a one-line error into err; returns -1. */
__attribute__((format(printf, 3, 4)))
int api_say(char *err, size_t errlen, const char *fmt, ...);

/* Reads one line of at most max bytes (its '\n' not counted, nor kept) into
 * buf (max + 1 bytes). 0, or -1 with why in err. */
int api_read_line(int fd, char *buf, size_t max, size_t *len, char *err, size_t errlen);
/* Writes all of buf to a socket; 0, or -1 with errno (never SIGPIPE). */
int api_write_all(int fd, const char *buf, size_t len);

#endif
